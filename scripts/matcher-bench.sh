#!/usr/bin/env bash
# Runs the clip-matcher benchmark (release build) and prints its tables.
# Environment (all optional): BENCH_MINUTES (60), BENCH_CLEAN_HOURS (2),
# BENCH_LIB (1000), BENCH_DIR (.local/matcher-bench), BENCH_BASELINE_LARGE (1).
# Generated corpus files are cached in BENCH_DIR (deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/matcher-deps.sh --audfprint
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/.local/target-matcher}"
cargo bench -p archivist-matcher --bench matcher 2>&1 | grep -v '^\s*\(Compiling\|Finished\|Running\)'
