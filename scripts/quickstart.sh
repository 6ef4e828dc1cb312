#!/usr/bin/env bash
# The whole Archivist pipeline on this machine, in one command:
#   installs what is missing (ZooKeeper, sox, lame, espeak-ng from Debian's packages),
#   builds, starts a local ZooKeeper, generates a sample catalog (episodes with known
#   clips spliced in), serves it over HTTP on loopback, curates it, runs every daemon and
#   the web console (its address is printed), waits until every (episode, clip) pair is
#   recorded, prints the results table, and stops what it started.
#
#   scripts/quickstart.sh [--keep] [--episodes N] [--minutes M] [--seed S]
#
# --keep leaves ZooKeeper, the file server, the daemons and the console running and says
# how to stop them. Re-running starts from a clean quickstart tree (/archivist-quickstart).
# ARCHIVIST_QUICKSTART_PROFILE=dev builds and runs a debug binary (quicker to build;
# the default is release). ARCHIVIST_CONSOLE_PORT picks the console's port (default: a
# free one).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=lib/wait.sh
source "$repo/scripts/lib/wait.sh"

keep=0 episodes=3 minutes=4 seed=7
while [[ $# -gt 0 ]]; do
    case $1 in
        --keep) keep=1 ;;
        --episodes) episodes=$2; shift ;;
        --minutes) minutes=$2; shift ;;
        --seed) seed=$2; shift ;;
        *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
    shift
done

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
qs=$repo/.local/quickstart
profile=${ARCHIVIST_QUICKSTART_PROFILE:-release}
case $profile in
    release) bin=${CARGO_TARGET_DIR:-$repo/target}/release/archivist; build=(--release) ;;
    dev) bin=${CARGO_TARGET_DIR:-$repo/target}/debug/archivist; build=() ;;
    *) echo "ARCHIVIST_QUICKSTART_PROFILE is release or dev, not $profile" >&2; exit 2 ;;
esac

say "Installing missing packages (Debian) and building archivist ($profile)"
bash scripts/deps.sh
cargo build "${build[@]}" -p archivist

say "Starting ZooKeeper"
# A ZooKeeper that was already serving (tests, another tool) is left running at the end.
zk_was_running=0
if bash scripts/zk.sh status >/dev/null 2>&1; then
    zk_was_running=1
fi
connect=$(bash scripts/zk.sh start | tail -n 1)
export ARCHIVIST_ZK=$connect
export ARCHIVIST_CHROOT=/archivist-quickstart
# The quickstart's own database, reset with its tree below.
export ARCHIVIST_DATABASE_URL=sqlite://$qs/archivist.db

# Stop what a previous --keep run left, then start from a clean tree.
for pidfile in "$qs"/*.pid; do
    [[ -f $pidfile ]] || continue
    kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
done
sleep 0.5
/usr/share/zookeeper/bin/zkCli.sh -server "$connect" deleteall "$ARCHIVIST_CHROOT" >/dev/null 2>&1 || true
rm -rf "$qs"
mkdir -p "$qs/media"

cleanup() {
    if [[ $keep -eq 0 ]]; then
        for pidfile in "$qs"/*.pid; do
            [[ -f $pidfile ]] || continue
            kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
        done
        wait 2>/dev/null || true
        rm -f "$qs"/*.pid
        if [[ $zk_was_running -eq 0 ]]; then
            bash "$repo/scripts/zk.sh" stop >/dev/null 2>&1 || true
        fi
    fi
}
trap cleanup EXIT

say "Serving sample media on loopback"
"$bin" serve-files "$qs/media" --addr 127.0.0.1:0 >"$qs/files.log" 2>&1 &
files_pid=$!
echo $files_pid >"$qs/files.pid"
# The log may not exist yet on a busy machine: wait for the line, not for a fixed time.
base=$(wait_for_log_value "$files_pid" "$qs/files.log" 's|^serving .* at \(http://[^ ]*\)$|\1|p' "the file server's address")
echo "media at $base"

say "Generating $episodes sample episodes of $minutes minutes with known clips"
"$bin" sample generate "$qs/media" --base-url "$base" --episodes "$episodes" --minutes "$minutes" --seed "$seed"

say "Creating the tree and curating the sample catalog"
"$bin" init
"$bin" curate manifest "$qs/media/manifest.yml"

cat >"$qs/archivist.yml" <<EOF
planner:
  tick_ms: 1000
  lease_duration_ms: 120000
  work_item_ttl_ms: 60000
recorder:
  poll_ms: 500
reaper:
  interval_ms: 2000
  work_item_ttl_ms: 60000
researcher:
  concurrency: 2
  work_dir: $qs/work
console:
  chart_every_s: 2     # a short run: a chart sample every 2 s rather than every minute
  overview_cache_s: 1
EOF

say "Running every daemon (planner, researcher, recorder, reaper, batcher) and the web console in one process"
"$bin" --config "$qs/archivist.yml" --metrics-addr 127.0.0.1:0 run --all \
    --console "127.0.0.1:${ARCHIVIST_CONSOLE_PORT:-0}" >"$qs/daemons.log" 2>&1 &
daemons_pid=$!
echo $daemons_pid >"$qs/daemons.pid"
metrics=$(wait_for_log_value "$daemons_pid" "$qs/daemons.log" 's|.*serving /metrics, /healthz and /readyz.*bound=\([0-9.:]*\).*|\1|p' "the daemons' metrics address")
wait_for_http "$daemons_pid" "$qs/daemons.log" "http://$metrics/readyz" "every daemon to be ready (/readyz)"
echo "daemons ready (metrics at http://$metrics/metrics)"
console=$(wait_for_log_value "$daemons_pid" "$qs/daemons.log" 's|^console at \(http://[^ ]*\) .*|\1|p' "the web console's address")
echo "web console at $console (read-only; docs/console.md)"

say "Waiting until every (episode, clip) pair is recorded"
status=0
"$bin" sample check "$qs/media" --wait-s 900 || status=$?

say "Where things stand (jobs in ZooKeeper, catalog and results in the database)"
"$bin" status || true
cat <<EOF

Look at the tree yourself:
  /usr/share/zookeeper/bin/zkCli.sh -server $connect ls -R $ARCHIVIST_CHROOT
  ARCHIVIST_ZK=$connect ARCHIVIST_CHROOT=$ARCHIVIST_CHROOT ARCHIVIST_DATABASE_URL=$ARCHIVIST_DATABASE_URL $bin status
  ARCHIVIST_ZK=$connect ARCHIVIST_CHROOT=$ARCHIVIST_CHROOT ARCHIVIST_DATABASE_URL=$ARCHIVIST_DATABASE_URL $bin results --episode e0000001   # the answers, from the database
  ARCHIVIST_ZK=$connect ARCHIVIST_CHROOT=$ARCHIVIST_CHROOT ARCHIVIST_DATABASE_URL=$ARCHIVIST_DATABASE_URL $bin export -o json | head
  ARCHIVIST_ZK=$connect ARCHIVIST_CHROOT=$ARCHIVIST_CHROOT $bin tree /jobs
Daemon logs: $qs/daemons.log
Web console: $console
EOF
if [[ $keep -eq 1 ]]; then
    if [[ $zk_was_running -eq 1 ]]; then
        stop_zk="(ZooKeeper was serving before the quickstart: it is left as it was)"
    else
        stop_zk="scripts/zk.sh stop"
    fi
    cat <<EOF

Left running (--keep): the daemons and the web console at $console, and the file server.
To stop them:
  kill \$(cat $qs/*.pid); $stop_zk
EOF
fi
exit $status
