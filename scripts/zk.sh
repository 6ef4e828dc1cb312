#!/usr/bin/env bash
# Local ZooKeeper for development, tests and the quickstart.
#
#   scripts/zk.sh start            standalone server on 127.0.0.1:$ZK_PORT (default 2181)
#   scripts/zk.sh stop | status
#   scripts/zk.sh ensemble start   3-node ensemble on loopback (client ports $ZK_ENSEMBLE_BASE+1..3)
#   scripts/zk.sh ensemble stop | status
#   scripts/zk.sh ensemble kill N  SIGKILL node N (1..3)
#   scripts/zk.sh ensemble restart N
#   scripts/zk.sh ensemble leader  prints the node number that is leader
#   scripts/zk.sh connect-string [ensemble]
#
# Installs Debian's `zookeeper` package (3.8) if it is missing. Everything it writes
# (config, data, logs, pid files) lives under $ARCHIVIST_LOCAL (default: <repo>/.local).
# Every start prints the connect string on stdout as its last line.
# ZK_HEAP (default 2g) is each server's Java heap: the benchmarks keep thousands of
# requests in flight and the test suite builds many trees, and a server near its heap
# limit spends its time in garbage collection (512m ran out in the transitions benchmark).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
local_dir=${ARCHIVIST_LOCAL:-$repo/.local}
port=${ZK_PORT:-2181}
heap=${ZK_HEAP:-2g}
ensemble_base=${ZK_ENSEMBLE_BASE:-22180}
classpath="/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar:/usr/share/java/netty.jar:/usr/share/java/jline.jar:/usr/share/java/commons-cli.jar:/usr/share/java/metrics-core.jar:/usr/share/java/snappy-java.jar"

log() { echo "zk.sh: $*" >&2; }

ensure_installed() {
    if [[ -f /usr/share/java/zookeeper.jar ]] && command -v java >/dev/null; then
        return
    fi
    log "installing Debian's zookeeper package"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >/dev/null
}

# four-letter word against a client port; prints the answer (empty if none)
flw() {
    local p=$1 word=$2
    { exec 3<>"/dev/tcp/127.0.0.1/$p"; } 2>/dev/null || return 0
    printf '%s' "$word" >&3
    timeout 2 cat <&3 || true
    exec 3>&- 3<&- || true
}

serving() { flw "$1" srvr | grep -q '^Mode:'; }

wait_serving() {
    local p=$1 what=$2
    for _ in $(seq 1 150); do
        if serving "$p"; then return 0; fi
        sleep 0.1
    done
    log "$what did not start serving on 127.0.0.1:$p within 15 s; log follows"
    tail -n 30 "$3" >&2 || true
    return 1
}

start_node() { # dir cfg logfile
    local dir=$1 cfg=$2 logfile=$3
    if [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        return 0
    fi
    nohup java "-Xmx$heap" -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.log.dir="$dir" \
        -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg" \
        >"$logfile" 2>&1 </dev/null &
    echo $! >"$dir/pid"
}

stop_node() { # dir signal
    local dir=$1 sig=${2:-TERM}
    [[ -f $dir/pid ]] || return 0
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$sig" "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

common_cfg() {
    cat <<EOF
tickTime=500
initLimit=20
syncLimit=10
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
4lw.commands.whitelist=*
extendedTypesEnabled=true
admin.enableServer=false
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
jute.maxbuffer=4194304
EOF
}

standalone_dir() { echo "$local_dir/zk/standalone-$port"; }

standalone_start() {
    ensure_installed
    local dir
    dir=$(standalone_dir)
    mkdir -p "$dir/data"
    { common_cfg; echo "dataDir=$dir/data"; echo "clientPort=$port"; } >"$dir/zoo.cfg"
    if serving "$port" && ! [[ -f $dir/pid ]]; then
        log "something else already serves ZooKeeper on 127.0.0.1:$port; using it"
    else
        start_node "$dir" "$dir/zoo.cfg" "$dir/zookeeper.log"
        wait_serving "$port" "ZooKeeper" "$dir/zookeeper.log"
    fi
    echo "127.0.0.1:$port"
}

ensemble_dir() { echo "$local_dir/zk/ensemble-$ensemble_base/node$1"; }

ensemble_cfg() { # n
    local n=$1 dir
    dir=$(ensemble_dir "$n")
    mkdir -p "$dir/data"
    echo "$n" >"$dir/data/myid"
    {
        common_cfg
        echo "dataDir=$dir/data"
        echo "clientPort=$((ensemble_base + n))"
        for i in 1 2 3; do
            echo "server.$i=127.0.0.1:$((ensemble_base + 10 + i)):$((ensemble_base + 20 + i))"
        done
    } >"$dir/zoo.cfg"
}

ensemble_connect() { echo "127.0.0.1:$((ensemble_base + 1)),127.0.0.1:$((ensemble_base + 2)),127.0.0.1:$((ensemble_base + 3))"; }

ensemble_start_node() {
    local n=$1 dir
    dir=$(ensemble_dir "$n")
    ensemble_cfg "$n"
    start_node "$dir" "$dir/zoo.cfg" "$dir/zookeeper.log"
}

ensemble_start() {
    ensure_installed
    for n in 1 2 3; do ensemble_start_node "$n"; done
    for n in 1 2 3; do
        wait_serving "$((ensemble_base + n))" "ensemble node $n" "$(ensemble_dir "$n")/zookeeper.log"
    done
    ensemble_connect
}

ensemble_status() {
    for n in 1 2 3; do
        local mode
        mode=$(flw "$((ensemble_base + n))" srvr | sed -n 's/^Mode: //p')
        echo "node$n 127.0.0.1:$((ensemble_base + n)) ${mode:-down}"
    done
}

ensemble_leader() {
    for n in 1 2 3; do
        if flw "$((ensemble_base + n))" srvr | grep -q '^Mode: leader'; then echo "$n"; return 0; fi
    done
    return 1
}

case "${1:-}" in
    start) standalone_start ;;
    stop) stop_node "$(standalone_dir)" ;;
    status)
        if serving "$port"; then
            echo "serving 127.0.0.1:$port ($(flw "$port" srvr | sed -n 's/^Mode: //p'))"
        else
            echo "not serving on 127.0.0.1:$port"
            exit 3
        fi
        ;;
    connect-string)
        if [[ ${2:-} == ensemble ]]; then ensemble_connect; else echo "127.0.0.1:$port"; fi
        ;;
    ensemble)
        case "${2:-}" in
            start) ensemble_start ;;
            stop) for n in 1 2 3; do stop_node "$(ensemble_dir "$n")"; done ;;
            status) ensemble_status ;;
            leader) ensemble_leader ;;
            kill) stop_node "$(ensemble_dir "${3:?node number}")" KILL ;;
            restart)
                n=${3:?node number}
                stop_node "$(ensemble_dir "$n")" KILL
                ensemble_start_node "$n"
                wait_serving "$((ensemble_base + n))" "ensemble node $n" "$(ensemble_dir "$n")/zookeeper.log"
                ;;
            *) echo "usage: $0 ensemble start|stop|status|leader|kill N|restart N" >&2; exit 2 ;;
        esac
        ;;
    *)
        sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
