#!/usr/bin/env bash
# Tests of scripts/lib/wait.sh: a process that is slow to start (its log appears late, as
# on a busy machine) is waited for; one that dies fails the wait at once with its log.
#
#   bash scripts/tests/wait_test.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../lib/wait.sh
source "$repo/scripts/lib/wait.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if "$@"; then echo "ok: ${desc}"; else echo "FAIL: ${desc}" >&2; fails=1; fi; }

desc="a log that does not exist yet is waited for (busy machine: 2 s before the process starts)"
bash -c "sleep 2; exec >'$tmp/late.log'; echo 'serving /x at http://127.0.0.1:1234'; sleep 30" &
late=$!
got=$(wait_for_log_value "$late" "$tmp/late.log" 's|^serving .* at \(http://[^ ]*\)$|\1|p' "the server's address") || got=
check test "$got" = "http://127.0.0.1:1234"
kill "$late" 2>/dev/null || true

desc="a process that exits fails the wait at once, showing its log"
bash -c "echo 'boom: cannot bind' >'$tmp/dead.log'; exit 3" &
dead=$!
start=$SECONDS
if wait_for_log_value "$dead" "$tmp/dead.log" 's|^serving \(.*\)$|\1|p' "the address" 2>"$tmp/err"; then
    check false
else
    check grep -q "boom: cannot bind" "$tmp/err"
    desc="... within seconds, not after the deadline"
    check test $((SECONDS - start)) -lt 10
fi

desc="a slow process is given up on after ARCHIVIST_WAIT_S, saying what was awaited"
sleep 30 &
slow=$!
# Set after sourcing, as a caller would for one wait.
if ARCHIVIST_WAIT_S=1 wait_for_log_value "$slow" "$tmp/none.log" p "the thing" 2>"$tmp/err2"; then
    check false
else
    check grep -q "gave up after 1s waiting for the thing" "$tmp/err2"
fi
kill "$slow" 2>/dev/null || true

exit $fails
