#!/usr/bin/env bash
# Screenshots of the web console for docs/console.md, from a quickstart run:
#   runs scripts/quickstart.sh --keep (the pipeline and the console on sample audio),
#   takes PNG screenshots of the overview, a job, an episode's timeline and a clip's
#   page with headless Chromium, stops what the quickstart left running, and writes
#   them to docs/console/.
#
#   scripts/console-screenshots.sh [quickstart options; default --episodes 8 --minutes 6]
#
# Needs chromium (scripts/deps.sh installs it) and curl. ARCHIVIST_QUICKSTART_PROFILE=dev
# uses a debug build, as for the quickstart.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
out=$repo/docs/console
qs=$repo/.local/quickstart
mkdir -p "$out"

# A ZooKeeper that was serving before is left running at the end, as the quickstart does.
zk_was_running=0
if bash scripts/zk.sh status >/dev/null 2>&1; then
    zk_was_running=1
fi
log=$(mktemp)
stop() {
    for pidfile in "$qs"/*.pid; do
        [[ -f $pidfile ]] || continue
        kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    done
    if [[ $zk_was_running -eq 0 ]]; then
        bash scripts/zk.sh stop >/dev/null 2>&1 || true
    fi
    rm -f "$log"
}
trap stop EXIT

# A run long enough for the overview's chart to show progress over time.
if [[ $# -eq 0 ]]; then set -- --episodes 8 --minutes 6; fi
bash scripts/quickstart.sh --keep "$@" | tee "$log"
console=$(sed -n 's|^web console at \(http://[^ ]*\) .*|\1|p' "$log" | head -n 1)
[[ -n $console ]] || { echo "the quickstart printed no console address" >&2; exit 1; }
console=${console%/}

# What to show: the first job, the first episode, a clip found in it (read from the
# console's own pages, so the script needs nothing else).
job=$(curl -fsS "$console/jobs" | grep -o 'href="/jobs/j[0-9]*"' | head -n 1 | sed 's|.*/jobs/\(j[0-9]*\)"|\1|')
episode=$(curl -fsS "$console/jobs/$job" | grep -o 'href="/episodes/e[0-9]*"' | head -n 1 | sed 's|.*/episodes/\(e[0-9]*\)"|\1|')
clip=$(curl -fsS "$console/episodes/$episode" | grep -o 'href="/clips/c[0-9]*"' | head -n 1 | sed 's|.*/clips/\(c[0-9]*\)"|\1|')
[[ -n $job && -n $episode && -n $clip ]] || { echo "no job, episode or clip to show ($job $episode $clip)" >&2; exit 1; }

shot() {
    local name=$1 path=$2 height=${3:-1000}
    # --no-sandbox: the sandbox cannot start as root (CI containers); headless only.
    chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --mute-audio \
        --window-size="1280,$height" --screenshot="$out/$name.png" "$console$path" >/dev/null 2>&1
    [[ -s $out/$name.png ]] || { echo "no screenshot of $path" >&2; exit 1; }
    echo "wrote docs/console/$name.png ($path)"
}
# A few more chart samples (the quickstart samples every 2 s) and a fresh overview.
sleep 8
shot overview / 1400
shot job "/jobs/$job" 1200
shot episode "/episodes/$episode" 1000
shot clip "/clips/$clip" 700
