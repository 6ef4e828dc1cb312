#!/usr/bin/env bash
# Runs every test: formatting, lints, and the whole workspace's tests against a real
# local ZooKeeper (started here if none serves; see scripts/zk.sh), both database
# backends: SQLite, and a private PostgreSQL cluster (scripts/pg.sh, started here;
# ARCHIVIST_TEST_PG names it, so the database tests run on both), and a real S3 server
# for the media store's S3 backend (SeaweedFS, scripts/s3.sh, started here;
# ARCHIVIST_TEST_S3 names it).
#
#   scripts/test.sh            everything
#   scripts/test.sh -p NAME    one package (extra args go to `cargo test`)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bash scripts/deps.sh
# A full run builds every test binary once: no incremental caches (they double the
# build's disk use and a fresh build gains nothing from them).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# A fresh build of every test measured 3.2 GB (2026-11-25); it needs about $need_gb GB on the target directory's disk; say so
# before starting rather than failing 15 minutes in with "No space left on device".
need_gb=5
target_dir=${CARGO_TARGET_DIR:-$repo/target}
probe=$target_dir
while [[ ! -d $probe ]]; do probe=$(dirname "$probe"); done
free_gb=$(( $(df -Pk "$probe" | awk 'NR==2 {print $4}') / 1024 / 1024 ))
if (( free_gb < need_gb )); then
    echo "warning: ${free_gb} GB free under $probe; a fresh build of every test needs about ${need_gb} GB" >&2
fi
# Every archivist a test starts without naming its database or media store uses the
# defaults under $XDG_DATA_HOME: a fresh directory here, never the user's own
# ~/.local/share/archivist (whose database another build may have migrated further).
export XDG_DATA_HOME="$repo/.local/test-data-home"
rm -rf "$XDG_DATA_HOME" && mkdir -p "$XDG_DATA_HOME"
export ARCHIVIST_TEST_ZK=${ARCHIVIST_TEST_ZK:-127.0.0.1:2181}
ZK_PORT=${ARCHIVIST_TEST_ZK##*:} bash scripts/zk.sh start >/dev/null
if [[ -z ${ARCHIVIST_TEST_PG:-} ]]; then
    ARCHIVIST_TEST_PG=$(bash scripts/pg.sh start | tail -n 1)
    export ARCHIVIST_TEST_PG
fi
if [[ -z ${ARCHIVIST_TEST_S3:-} ]]; then
    bash scripts/s3.sh start >/dev/null
    eval "$(bash scripts/s3.sh env)"
fi

if [[ $# -eq 0 ]]; then
    bash scripts/tests/wait_test.sh
    bash scripts/tests/pki_race_test.sh
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --quiet -- -D warnings
    cargo test --workspace
else
    cargo test "$@"
fi
