#!/usr/bin/env bash
# Private PostgreSQL cluster for development, tests and benchmarks (as scripts/zk.sh is
# for ZooKeeper).
#
#   scripts/pg.sh start    initialises (once) and starts a cluster on 127.0.0.1:$PG_PORT
#                          (default 25432); prints its URL as the last line
#   scripts/pg.sh stop | status
#   scripts/pg.sh url      the URL of the role `archivist` (CREATEDB) and database
#                          `postgres`: what ARCHIVIST_TEST_PG takes; tests create a
#                          database each on it
#
# Installs Debian's `postgresql` package if missing and uses the newest
# /usr/lib/postgresql/*/bin. Everything lives under $ARCHIVIST_LOCAL/pg (default
# <repo>/.local/pg): data, log, socket, and the role's password (random, made once, mode
# 600). PostgreSQL refuses to run as root: as root the cluster runs as the `postgres`
# user (the package creates it), which then owns the data; if that user cannot reach the
# directory (a checkout under /root), the cluster lives in /var/tmp/archivist-pg-$PG_PORT
# instead. Only loopback TCP (password, scram-sha-256) and the private socket are served.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
local_dir=${ARCHIVIST_LOCAL:-$repo/.local}
port=${PG_PORT:-25432}
role=archivist

log() { echo "pg.sh: $*" >&2; }

ensure_installed() {
    if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        return
    fi
    log "installing Debian's postgresql package"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
}

bin_dir() {
    local dirs
    dirs=$(compgen -G "/usr/lib/postgresql/*/bin" | sort -V)
    [[ -n $dirs ]] || { log "no /usr/lib/postgresql/*/bin"; exit 1; }
    tail -n 1 <<<"$dirs"
}

# Runs a command as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# The cluster's directory: under .local unless the owner cannot reach it.
pg_dir() {
    local dir=$local_dir/pg
    if [[ $(id -u) -eq 0 ]]; then
        mkdir -p "$dir"
        chown postgres: "$dir"
        if ! runuser -u postgres -- test -w "$dir" 2>/dev/null; then
            dir=/var/tmp/archivist-pg-$port
            mkdir -p "$dir"
            chown postgres: "$dir"
            chmod 700 "$dir"
        fi
    else
        mkdir -p "$dir"
    fi
    echo "$dir"
}

ready() { "$(bin_dir)/pg_isready" -q -h 127.0.0.1 -p "$port" >/dev/null 2>&1; }

url() {
    local dir=$1
    [[ -f $dir/password ]] || { log "no cluster initialised in $dir (scripts/pg.sh start)"; exit 1; }
    echo "postgres://$role:$(cat "$dir/password")@127.0.0.1:$port/postgres"
}

start() {
    ensure_installed
    local bin dir
    bin=$(bin_dir)
    dir=$(pg_dir)
    if [[ ! -f $dir/data/PG_VERSION ]]; then
        log "initialising a cluster in $dir/data"
        rm -rf "$dir/data"
        as_owner mkdir -p "$dir/data"
        # The role's password: random, readable by the owner (and root) only.
        (umask 077; head -c 18 /dev/urandom | base64 | tr '+/' 'xy' >"$dir/password")
        [[ $(id -u) -eq 0 ]] && chown postgres: "$dir/password"
        as_owner "$bin/initdb" -D "$dir/data" --auth-local=trust --auth-host=scram-sha-256 \
            --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
            { log "initdb failed; $dir/initdb.log follows"; cat "$dir/initdb.log" >&2; exit 1; }
        local fresh=1
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        if ready; then
            log "something else serves on 127.0.0.1:$port: stop it or set PG_PORT"
            exit 1
        fi
        # Many tests run at once, each with a pool of connections.
        as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" >/dev/null ||
            { log "the server did not start; $dir/server.log follows"; tail -n 30 "$dir/server.log" >&2; exit 1; }
    fi
    if [[ ${fresh:-0} -eq 1 ]]; then
        local password
        password=$(cat "$dir/password")
        as_owner "$bin/psql" -q -h "$dir" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
            -c "CREATE ROLE $role LOGIN CREATEDB PASSWORD '$password'" >/dev/null
    fi
    url "$dir"
}

stop() {
    local dir
    dir=$(pg_dir)
    [[ -f $dir/data/PG_VERSION ]] || return 0
    as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

status() {
    if ready; then
        echo "serving on 127.0.0.1:$port"
    else
        echo "not serving on 127.0.0.1:$port"
        return 1
    fi
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    url) url "$(pg_dir)" ;;
    *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
