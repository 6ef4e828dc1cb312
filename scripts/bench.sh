#!/usr/bin/env bash
# The coordination benchmarks (docs/benchmarks.md) in one command, one table at the end:
#   transitions  cargo bench -p archivist-engine --bench transitions (vs ZooKeeper's ceiling)
#   planner      cargo bench -p archivist-planner --bench pick
#   curation     cargo run --release -p archivist-catalog --example curate_bench
#   recovery     cargo bench -p archivist --bench recovery (SIGKILL a researcher)
#   e2e          cargo bench -p archivist --bench end_to_end (1, 2, 4 researchers)
#   fetch-once   cargo bench -p archivist --bench fetch_once (issue 23: media store off vs
#                on; not in the default set: at full size it is a long run, see the docs)
#
#   scripts/bench.sh [NAME...]      (default: the first five, in this order)
#
# Starts the local ZooKeeper (scripts/zk.sh) if none serves. Each benchmark's full output
# goes to .local/bench/<UTC time>/<name>.txt; the load average is printed before and
# after each one. The benchmarks' own knobs are environment variables (see each file):
# BENCH_JOBS, BENCH_CONSUMERS, BENCH_RECOVERY_TIMEOUTS_MS, BENCH_RECOVERY_REPS,
# BENCH_E2E_RESEARCHERS, BENCH_E2E_EPISODES, BENCH_E2E_MINUTES, BENCH_FETCH_EPISODES,
# BENCH_FETCH_MINUTES, BENCH_FETCH_CLIPS, ...
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

all=(transitions planner curation recovery e2e)
selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=("${all[@]}")
for name in "${selected[@]}"; do
    case $name in
        transitions | planner | curation | recovery | e2e | fetch-once) ;;
        *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
out=$repo/.local/bench/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
connect=$(bash scripts/zk.sh start | tail -n 1)
export ARCHIVIST_TEST_ZK=$connect

summary=()
run() { # name command...
    local name=$1
    shift
    local before
    before=$(load)
    printf '\n\033[1m==> %s: %s\033[0m (load average %s, %s)\n' "$name" "$*" "$before" "$(date -u +%FT%TZ)"
    "$@" 2>&1 | tee "$out/$name.txt"
    local after
    after=$(load)
    echo "(load average after: $after)"
    while IFS= read -r line; do
        summary+=("| $name | ${line#summary: } | $before / $after |")
    done < <(grep -E '^summary: ' "$out/$name.txt" || true)
}

for name in "${selected[@]}"; do
    case $name in
        transitions) run transitions cargo bench -q -p archivist-engine --bench transitions ;;
        planner)
            run planner cargo bench -q -p archivist-planner --bench pick
            while IFS= read -r line; do
                summary+=("| planner | $(echo "$line" | tr -s ' ') | |")
            done < <(grep -E '^10k x 2k +index' "$out/planner.txt" || true)
            ;;
        curation)
            run curation cargo run -q --release -p archivist-catalog --example curate_bench
            while IFS= read -r line; do
                summary+=("| curation | ${line#curate_bench: } | |")
            done < <(grep -E '^curate_bench: ' "$out/curation.txt" || true)
            ;;
        recovery) run recovery cargo bench -q -p archivist --bench recovery ;;
        e2e) run e2e cargo bench -q -p archivist --bench end_to_end ;;
        fetch-once) run fetch-once cargo bench -q -p archivist --bench fetch_once ;;
    esac
done

printf '\n\033[1m==> Summary\033[0m (%s; %s cores; ZooKeeper %s; outputs in %s)\n\n' \
    "$(date -u +%FT%TZ)" "$(nproc)" "$connect" "$out"
echo "| benchmark | result | load average (1/5/15 min) before / after |"
echo "|---|---|---|"
printf '%s\n' "${summary[@]}" | tee "$out/summary.md"
