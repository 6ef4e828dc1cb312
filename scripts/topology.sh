#!/usr/bin/env bash
# The docker/compose.yml topology as plain processes on loopback, for machines without a
# Docker engine: a 3-node ZooKeeper ensemble, a planner, a recorder with the reaper and the batcher, two
# researchers and a curator, each serving /metrics, /healthz and /readyz.
#
#   scripts/topology.sh start     start everything (prints the connect string and ports)
#   scripts/topology.sh status    which processes run and whether they are ready
#   scripts/topology.sh stop      SIGTERM every daemon, then stop the ensemble
#
# Environment: ARCHIVIST_BIN (default target/release/archivist, built if missing),
# TOPOLOGY_METRICS_BASE (default 19460), ARCHIVIST_CHROOT (default /archivist-topology),
# ZK_ENSEMBLE_BASE (see scripts/zk.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/wait.sh
source "$repo/scripts/lib/wait.sh"
local_dir=${ARCHIVIST_LOCAL:-$repo/.local}
dir=$local_dir/topology
bin=${ARCHIVIST_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/archivist}
metrics_base=${TOPOLOGY_METRICS_BASE:-19460}
export ARCHIVIST_CHROOT=${ARCHIVIST_CHROOT:-/archivist-topology}
# Every daemon of the topology shares one database (ARCHIVIST_DATABASE_URL, default a
# SQLite file beside the topology's other files).
export ARCHIVIST_DATABASE_URL=${ARCHIVIST_DATABASE_URL:-sqlite://$dir/archivist.db}

daemons=(feed-server planner recorder researcher-1 researcher-2 curator)
feed_port=$((metrics_base + 9))

command_for() {
    case $1 in
        feed-server) echo "serve-files $dir/feed --addr 127.0.0.1:$feed_port" ;;
        planner) echo "planner" ;;
        recorder) echo "run --recorder --reaper --batcher" ;;
        researcher-*) echo "researcher --work-dir $dir/$1/work" ;;
        curator) echo "curator --feed http://127.0.0.1:$feed_port/podcast.xml --interval-s 60" ;;
    esac
}

start() {
    if [[ ! -x $bin ]]; then
        (cd "$repo" && cargo build --release -p archivist)
    fi
    mkdir -p "$dir/feed"
    # The curator polls this (empty) feed; put <item>s with audio enclosures in it to
    # have them curated.
    cat >"$dir/feed/podcast.xml" <<'XML'
<?xml version="1.0"?>
<rss version="2.0"><channel><title>Topology feed</title><link>http://127.0.0.1/</link>
<description>Add items with audio enclosures here.</description></channel></rss>
XML
    local connect
    connect=$(bash "$repo/scripts/zk.sh" ensemble start | tail -n 1)
    export ARCHIVIST_ZK=$connect
    "$bin" init >/dev/null
    local i=0
    for name in "${daemons[@]}"; do
        mkdir -p "$dir/$name"
        local pidfile=$dir/$name/pid
        if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            i=$((i + 1))
            continue
        fi
        # shellcheck disable=SC2046
        ARCHIVIST_METRICS_ADDR=127.0.0.1:$((metrics_base + i)) \
            nohup "$bin" $(command_for "$name") >"$dir/$name/log" 2>&1 </dev/null &
        echo $! >"$pidfile"
        echo "$name pid $! metrics http://127.0.0.1:$((metrics_base + i))/metrics"
        i=$((i + 1))
    done
    # Started is not ready: wait for each (its /readyz, or the feed file being served).
    i=0
    for name in "${daemons[@]}"; do
        local url="http://127.0.0.1:$((metrics_base + i))/readyz"
        [[ $name == feed-server ]] && url="http://127.0.0.1:$feed_port/podcast.xml"
        wait_for_http "$(cat "$dir/$name/pid")" "$dir/$name/log" "$url" "$name to be ready ($url)"
        i=$((i + 1))
    done
    echo "every daemon is ready" >&2
    echo "$connect$ARCHIVIST_CHROOT"
}

status() {
    local i=0 all=0
    bash "$repo/scripts/zk.sh" ensemble status
    for name in "${daemons[@]}"; do
        local pidfile=$dir/$name/pid state="stopped"
        if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            if [[ $name == feed-server ]] || curl -fsS "http://127.0.0.1:$((metrics_base + i))/readyz" >/dev/null 2>&1; then
                state="ready"
            else
                state="running, not ready"
                all=1
            fi
        else
            all=1
        fi
        echo "$name: $state"
        i=$((i + 1))
    done
    return $all
}

stop() {
    for name in "${daemons[@]}"; do
        local pidfile=$dir/$name/pid
        [[ -f $pidfile ]] || continue
        local pid
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    bash "$repo/scripts/zk.sh" ensemble stop
}

case "${1:-}" in
    start) start ;;
    status) status ;;
    stop) stop ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
