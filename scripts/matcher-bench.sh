#!/usr/bin/env bash
# Runs the clip-matcher benchmark (release build) and prints its tables.
# Environment (all optional): BENCH_MINUTES (60), BENCH_CLEAN_HOURS (10),
# BENCH_LIB (1000), BENCH_DIR (.local/matcher-bench), BENCH_BASELINE_LARGE (1),
# BENCH_EPISODES, BENCH_CLIPFREE_MODES, BENCH_AUDFPRINT(_EPISODES|_BIN),
# BENCH_SKIP_ACCURACY, BENCH_SKIP_SPEED, BENCH_SPEED_MODES, BENCH_PROBE_CLIPS,
# BENCH_GENERATE_ONLY (see the header of daemons/matcher/benches/matcher.rs).
# Generated corpus files are cached in BENCH_DIR (deterministic; the 10 clip-free
# hours take a few minutes each to generate the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/matcher-deps.sh --audfprint
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/.local/target-matcher}"
cargo bench -p archivist-matcher --bench matcher 2>&1 | grep -v '^\s*\(Compiling\|Finished\|Running\)'
