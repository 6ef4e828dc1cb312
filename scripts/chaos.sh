#!/usr/bin/env bash
# The long chaos run: every daemon as a separate process on a 3-node ensemble, faults
# injected for CHAOS_SECONDS (default 1800) over CHAOS_EPISODES (default 40) episodes,
# then every pair checked. Prints the seed (replay with CHAOS_SEED=...) and a summary.
# ARCHIVIST_TEST_DB_BACKEND=postgres runs the daemons on a PostgreSQL database
# (scripts/pg.sh, started here) instead of SQLite.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash scripts/deps.sh
export CHAOS_SECONDS=${CHAOS_SECONDS:-1800}
export CHAOS_EPISODES=${CHAOS_EPISODES:-40}
export CHAOS_ZK_BASE=${CHAOS_ZK_BASE:-24180}
export CHAOS_SEED=${CHAOS_SEED:-$(date +%s)}
if [[ ${ARCHIVIST_TEST_DB_BACKEND:-} == postgres && -z ${ARCHIVIST_TEST_PG:-} ]]; then
    ARCHIVIST_TEST_PG=$(bash scripts/pg.sh start | tail -n 1)
    export ARCHIVIST_TEST_PG
fi
cargo test --release -p archivist --test chaos -- --nocapture
