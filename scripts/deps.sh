#!/usr/bin/env bash
# Installs what Archivist needs from Debian's packages, if missing: ZooKeeper (3.8, with
# Java) for every test and daemon; sox, lame and espeak-ng for the audio corpus; festival,
# ffmpeg and three sets of system sounds for the matcher's held-out corpus
# (scripts/heldout-corpus.py).
set -euo pipefail
need=()
[[ -f /usr/share/java/zookeeper.jar ]] || need+=(zookeeper)
command -v sox >/dev/null || need+=(sox)
command -v lame >/dev/null || need+=(lame)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
command -v ffmpeg >/dev/null || need+=(ffmpeg)
command -v text2wave >/dev/null || need+=(festival)
[[ -d /usr/share/festival/voices/english/kal_diphone ]] || need+=(festvox-kallpc16k)
[[ -d /usr/share/sounds/freedesktop ]] || need+=(sound-theme-freedesktop)
[[ -d /usr/share/sounds/Yaru ]] || need+=(yaru-theme-sound)
[[ -d /usr/share/sounds/alsa ]] || need+=(alsa-utils)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "deps.sh: installing ${need[*]} from Debian's packages" >&2
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
