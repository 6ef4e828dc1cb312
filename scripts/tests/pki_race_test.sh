#!/usr/bin/env bash
# scripts/zk.sh makes the test PKI once even when several servers start at once (the
# secured tests run in parallel on a fresh clone): three concurrent `zk.sh pki` in an
# empty ARCHIVIST_LOCAL all succeed and leave certificates that match their keys. Before
# the lock, two of three failed and CI's secured ensemble did not start.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ARCHIVIST_LOCAL
ARCHIVIST_LOCAL=$(mktemp -d)
trap 'rm -rf "$ARCHIVIST_LOCAL"' EXIT
pids=()
for i in 1 2 3; do
    bash "$repo/scripts/zk.sh" pki >"$ARCHIVIST_LOCAL/out$i" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || { echo "FAIL: a concurrent zk.sh pki failed:"; cat "$ARCHIVIST_LOCAL"/out*; exit 1; }
done
pki=$ARCHIVIST_LOCAL/zk/pki
for c in server client; do
    cert=$(openssl x509 -noout -modulus -in "$pki/$c.pem" | sha256sum)
    key=$(openssl rsa -noout -modulus -in "$pki/$c.key" 2>/dev/null | sha256sum)
    [[ $cert == "$key" ]] || { echo "FAIL: $c certificate and key do not match"; exit 1; }
done
echo "ok: three concurrent zk.sh pki made one PKI whose certificates match their keys"
