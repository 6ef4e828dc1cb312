#!/usr/bin/env bash
# The scale benchmark of issue 22 (docs/benchmarks.md, "Scale"): a synthetic archive of
# N episodes x M clips, 90% researched, written as the daemons write it, then today's
# design and the database design measured in the same run, figure by figure.
#
#   scripts/scale-bench.sh                      1,000 x 2,000 (a few minutes)
#   SCALE_EPISODES=100000 scripts/scale-bench.sh  the real one (about 40 minutes; see below)
#
# Knobs (environment):
#   SCALE_EPISODES (1000)  SCALE_CLIPS (2000)  SCALE_RESEARCHED (0.9)  SCALE_SEED (22)
#   ZK_PORT (2193)         the private ZooKeeper's port; ZK_HEAP (4g) its heap
#   SCALE_RSS_CAP_MB (4096) a measured command whose RSS passes this is killed, and its
#                          figure reported as killed (today's `export` and `status` grow
#                          with the archive: on a shared machine they must not take it all)
#   SCALE_EXPORT_S (120)   an export still running after this is stopped; its rows/s are
#                          counted over the rows it wrote
#   SCALE_DB (sqlite)      the database design's backend: `sqlite` (a file in the run's
#                          directory), a `postgres://` URL, or `none` to measure today's
#                          design only. Needs `archivist migrate` (issue 22); without it the
#                          database column says "not built".
#   SCALE_KEEP (0)         1 keeps ZooKeeper's data and the database
#   SCALE_PROFILE (release) the cargo profile of the binaries (`dev` to try the script out)
#   SCALE_TODAY (1)        0 skips the admin commands on today's design (its tree's size
#                          is still measured): since the database binding (outside 22
#                          finding 8) one binary reads the database the tree is bound to,
#                          so "today's" commands are only measured with an old binary;
#                          issue 22 quotes their figures
#   SCALE_BASELINE_BIN ()  another archivist binary (an earlier build) whose admin
#                          commands and planner are measured on the same database right
#                          after this build's, in a column of their own
#
# The ZooKeeper is private (scripts/zk.sh on ZK_PORT, its files under
# .local/scale/zk): a fresh, empty data directory for each run, a snapshot count high
# enough that the generation writes no snapshot (the 100k run's tree is about half a
# gigabyte; every snapshot would be that again), and everything deleted at the end.
# Refuses to start with less than 8 GB free plus an estimate of the run's needs.
# Outputs (each command's stdout/stderr, the table) go to .local/scale/<UTC time>/.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=lib/wait.sh
source "$repo/scripts/lib/wait.sh"

episodes=${SCALE_EPISODES:-1000}
clips=${SCALE_CLIPS:-2000}
researched=${SCALE_RESEARCHED:-0.9}
seed=${SCALE_SEED:-22}
port=${ZK_PORT:-2193}
rss_cap_mb=${SCALE_RSS_CAP_MB:-4096}
export_s=${SCALE_EXPORT_S:-120}
db=${SCALE_DB:-sqlite}
keep=${SCALE_KEEP:-0}
today_cmds=${SCALE_TODAY:-1}
baseline_bin=${SCALE_BASELINE_BIN:-}
zk=127.0.0.1:$port
chroot=/archivist
scale_local=$repo/.local/scale
out=$scale_local/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
target=${CARGO_TARGET_DIR:-$repo/target}
profile=${SCALE_PROFILE:-release}
profile_dir=$profile
[[ $profile == dev ]] && profile_dir=debug
bin=$target/$profile_dir/archivist
synth=$target/$profile_dir/examples/synth_archive

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# --- disk -----------------------------------------------------------------------------
# About 6 KB of ZooKeeper data, transaction log and snapshot per episode, twice (today's
# tree and the database), plus the 8 GB floor the machine keeps free.
need_kb=$((8 * 1024 * 1024 + episodes * 12))
free_kb=$(df -Pk "$repo" | awk 'NR == 2 { print $4 }')
if ((free_kb < need_kb)); then
    echo "scale-bench: $((free_kb / 1024)) MB free, this run needs $((need_kb / 1024)) MB; use a smaller SCALE_EPISODES" >&2
    exit 1
fi

# --- build ----------------------------------------------------------------------------
say "building the release binary and the generator"
cargo build -q --profile "$profile" -p archivist --bin archivist --example synth_archive

has_migrate=0
if "$bin" migrate --help >/dev/null 2>&1; then has_migrate=1; fi
case $db in
    none) db_url= ;;
    sqlite) db_url=sqlite://$out/archivist.db ;;
    *) db_url=$db ;;
esac

# --- ZooKeeper ------------------------------------------------------------------------
zk_env=(env ARCHIVIST_LOCAL="$scale_local" ZK_PORT="$port" ZK_HEAP="${ZK_HEAP:-4g}"
    SERVER_JVMFLAGS="-Dzookeeper.snapCount=100000000 ${SERVER_JVMFLAGS:-}")
zk_dir=$scale_local/zk/standalone-$port
"${zk_env[@]}" bash scripts/zk.sh stop >/dev/null 2>&1 || true
rm -rf "$zk_dir/data"
cleanup() {
    "${zk_env[@]}" bash scripts/zk.sh stop >/dev/null 2>&1 || true
    if [[ $keep != 1 ]]; then
        rm -rf "$zk_dir/data" "$out/archivist.db"*
    fi
}
trap cleanup EXIT
"${zk_env[@]}" bash scripts/zk.sh start >/dev/null
flw() { { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 0; printf '%s' "$1" >&3; timeout 5 cat <&3 || true; exec 3>&- 3<&- || true; }
zk_pid() { cat "$zk_dir/pid"; }
# zk.sh waits 15 s for a server; one loading a big tree takes longer
wait_zk() {
    local deadline=$((SECONDS + 600))
    until flw srvr | grep -q '^Mode:'; do
        ((SECONDS < deadline)) || { echo "scale-bench: ZooKeeper on $zk did not serve within 600 s" >&2; exit 1; }
        sleep 1
    done
}
mntr() { flw mntr | awk -v k="$1" '$1 == k { print $2 }'; }
live_heap_mb() {
    jcmd "$(zk_pid)" GC.run >/dev/null 2>&1 || true
    jcmd "$(zk_pid)" GC.heap_info 2>/dev/null | sed -n 's/.*total [0-9]*K, used \([0-9]*\)K.*/\1/p' | head -n 1 | awk '{ printf "%.0f", $1 / 1024 }'
}

# --- results: one row per figure, a column per design -----------------------------------
declare -A today dbd base
figures=()
record() { # design figure value
    local -n column=$1
    [[ " ${figures[*]} " == *" $2 "* ]] || figures+=("$2")
    column[$2]=$3
}

# measure NAME STDOUT_FILE CMD...: runs CMD with GNU time and a watchdog (RSS cap, and
# SCALE_EXPORT_S for exports); sets m_wall, m_rss_mb, m_killed and m_load.
measure() {
    local name=$1 stdout=$2
    shift 2
    m_load=$(load)
    local tf=$out/$name.time
    /usr/bin/time -f '%e %M' -o "$tf" "$@" >"$stdout" 2>"$out/$name.err" &
    local tpid=$! cpid= rss limit_s=0 started=$SECONDS
    [[ $name == export* ]] && limit_s=$export_s
    m_killed=
    while kill -0 "$tpid" 2>/dev/null; do
        [[ -n $cpid ]] || cpid=$(pgrep -P "$tpid" | head -n 1 || true)
        if [[ -n $cpid ]]; then
            rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$cpid/status" 2>/dev/null || echo 0)
            if ((${rss:-0} > rss_cap_mb * 1024)); then
                m_killed="killed at $((rss / 1024)) MB RSS after $((SECONDS - started)) s"
                kill -9 "$cpid" 2>/dev/null || true
            elif ((limit_s > 0 && SECONDS - started >= limit_s)); then
                m_killed="stopped after ${limit_s} s"
                kill -9 "$cpid" 2>/dev/null || true
            fi
        fi
        sleep 0.2
    done
    wait "$tpid" || true
    read -r m_wall m_rss_kb < <(tail -n 1 "$tf") || { m_wall=?; m_rss_kb=0; }
    m_rss_mb=$((m_rss_kb / 1024))
    echo "$name: ${m_wall} s, ${m_rss_mb} MB RSS${m_killed:+, $m_killed} (load $m_load)" >&2
}

# admin_figures DESIGN ARGS...: status, fsck, results --episode/--clip, export, planner
# ready, with the global ARGS (the database URL for the database design).
admin_figures() {
    local design=$1
    shift
    local cli=("$bin" --zk "$zk" --chroot "$chroot" "$@")
    measure "$design-status" "$out/$design-status.out" "${cli[@]}" status
    record "$design" "status" "${m_killed:-${m_wall} s, ${m_rss_mb} MB} (load $m_load)"
    measure "$design-fsck" "$out/$design-fsck.out" "${cli[@]}" fsck
    record "$design" "fsck" "${m_killed:-${m_wall} s, ${m_rss_mb} MB} (load $m_load)"
    measure "$design-results-episode" "$out/$design-results-episode.out" "${cli[@]}" results --episode "$first_researched"
    record "$design" "results --episode" "${m_wall} s (load $m_load)"
    measure "$design-results-clip" "$out/$design-results-clip.out" "${cli[@]}" results --clip c000001
    record "$design" "results --clip" "${m_killed:-${m_wall} s, ${m_rss_mb} MB} (load $m_load)"
    # export to a pipe that counts lines (a 100k export is gigabytes: never on disk)
    local fifo=$out/export.fifo count=$out/$design-export.rows
    rm -f "$fifo"
    mkfifo "$fifo"
    wc -l <"$fifo" >"$count" &
    local counter=$!
    measure "export-$design" "$fifo" "${cli[@]}" export --format csv
    wait "$counter" || true
    rm -f "$fifo"
    local rows
    rows=$(($(cat "$count") - 1))
    ((rows < 0)) && rows=0
    record "$design" "export" "$rows rows, $(awk -v r="$rows" -v s="$m_wall" 'BEGIN { printf "%.0f", r / (s > 0 ? s : 1) }') rows/s, ${m_rss_mb} MB${m_killed:+ ($m_killed)} (load $m_load)"
    # planner: from start to "planner index loaded" (its log says how long the load took)
    local plog=$out/$design-planner.log started took pid
    m_load=$(load)
    started=$(date +%s.%N)
    "${cli[@]}" planner >"$plog" 2>&1 &
    pid=$!
    if took=$(ARCHIVIST_WAIT_S=900 wait_for_log_value "$pid" "$plog" 's/.*planner index loaded.*took_ms[=:]"\{0,1\}\([0-9]*\).*/\1/p' "the planner's index"); then
        local wall rss
        wall=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        rss=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
        record "$design" "planner ready" "${wall} s (index load ${took} ms), ${rss} MB (load $m_load)"
    else
        record "$design" "planner ready" "failed (see $plog)"
    fi
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

zk_figures() { # design
    record "$1" "ZooKeeper data (mntr)" "$(awk -v b="$(mntr zk_approximate_data_size)" 'BEGIN { printf "%.1f MB", b / 1e6 }'), $(mntr zk_znode_count) znodes"
    record "$1" "ZooKeeper live heap" "$(live_heap_mb) MB"
    "$synth" --zk "$zk" --chroot "$chroot" listing >"$out/$1-listing.out" 2>&1 || true
    record "$1" "largest listing" "$(sed -n 's/^summary: largest listing //p' "$out/$1-listing.out")"
}

# --- today's design -------------------------------------------------------------------
say "generating $episodes x $clips, $researched researched (load $(load))"
gen_load=$(load)
"$synth" --zk "$zk" --chroot "$chroot" generate --catalog nodes --episodes "$episodes" --clips "$clips" \
    --researched "$researched" --seed "$seed" | tee "$out/generate.out"
record today "curation" "$(sed -n 's/^summary: curation //p' "$out/generate.out") (load $gen_load)"
record today "research written" "$(sed -n 's/^summary: research //p' "$out/generate.out")"
first_researched=$(sed -n 's/^first researched: //p' "$out/generate.out")
first_researched=${first_researched:-e0000001}

say "today's design (ZooKeeper only)"
zk_figures today
# ZooKeeper writes a snapshot when it starts: restart it to see a whole tree's snapshot
"${zk_env[@]}" bash scripts/zk.sh stop >/dev/null
restarted=$SECONDS
"${zk_env[@]}" bash scripts/zk.sh start >/dev/null 2>&1 || true
wait_zk
record today "ZooKeeper restart" "$((SECONDS - restarted)) s until it serves"
snap=$(find "$zk_dir/data" -name 'snapshot.*' -printf '%s\n' | sort -n | tail -n 1)
record today "ZooKeeper snapshot" "$(awk -v b="${snap:-0}" 'BEGIN { printf "%.1f MB", b / 1e6 }')"
if [[ $today_cmds == 1 ]]; then
    admin_figures today
fi

# --- the database design --------------------------------------------------------------
if [[ -z $db_url ]]; then
    say "SCALE_DB=none: today's design only"
elif ((has_migrate == 0)); then
    say "this build has no \`archivist migrate\`: the database design is not measured"
    for f in "${figures[@]}"; do record dbd "$f" "not built"; done
else
    say "the database design ($db): archivist migrate, then the same commands"
    export ARCHIVIST_DATABASE_URL=$db_url # not a flag: a PostgreSQL URL carries a password
    measure migrate "$out/migrate.out" "$bin" --zk "$zk" --chroot "$chroot" migrate
    record dbd "migrate" "${m_wall} s, ${m_rss_mb} MB (load $m_load)"
    admin_figures dbd
    if [[ -n $baseline_bin ]]; then
        say "the same commands with the baseline binary $baseline_bin"
        built_bin=$bin
        bin=$baseline_bin
        admin_figures base
        bin=$built_bin
    fi
    measure migrate-delete "$out/migrate-delete.out" "$bin" --zk "$zk" --chroot "$chroot" migrate --delete-zk
    zk_figures dbd
    if [[ $db == sqlite ]]; then
        record dbd "database size" "$(du -cb "$out"/archivist.db* | awk 'END { printf "%.1f MB", $1 / 1e6 }')"
    fi
fi

# --- the table ------------------------------------------------------------------------
{
    printf '\n%s x %s clips, %s researched; %s, %s cores; ZooKeeper %s (private); outputs in %s\n\n' \
        "$episodes" "$clips" "$researched" "$(date -u +%FT%TZ)" "$(nproc)" "$zk" "$out"
    if [[ -n $baseline_bin ]]; then
        echo "| figure | today's design (ZooKeeper only) | database design ($db) | the same, baseline binary |"
        echo "|---|---|---|---|"
        for f in "${figures[@]}"; do
            echo "| $f | ${today[$f]:-} | ${dbd[$f]:-} | ${base[$f]:-} |"
        done
    else
        echo "| figure | today's design (ZooKeeper only) | database design ($db) |"
        echo "|---|---|---|"
        for f in "${figures[@]}"; do
            echo "| $f | ${today[$f]:-} | ${dbd[$f]:-} |"
        done
    fi
} | tee "$out/table.md"
