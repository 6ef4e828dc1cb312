#!/usr/bin/env bash
# Installs the Debian tools used by the matcher's corpus generator and benchmark
# (lame for MP3 encoding, sox and espeak-ng for optional audio work, ffmpeg for
# the audfprint baseline), festival and three sets of system sounds for the held-out
# corpus (scripts/heldout-corpus.py) and, optionally, the audfprint baseline itself.
#   scripts/matcher-deps.sh            # Debian tools
#   scripts/matcher-deps.sh --audfprint  # also .local/audfprint (PyPI audfprint2)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for t in sox lame espeak-ng ffmpeg; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
command -v text2wave >/dev/null 2>&1 || missing+=(festival)
[ -d /usr/share/festival/voices/english/kal_diphone ] || missing+=(festvox-kallpc16k)
[ -d /usr/share/sounds/freedesktop ] || missing+=(sound-theme-freedesktop)
[ -d /usr/share/sounds/Yaru ] || missing+=(yaru-theme-sound)
[ -d /usr/share/sounds/alsa ] || missing+=(alsa-utils)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
if [ "${1:-}" = "--audfprint" ] && [ ! -x .local/audfprint/bin/audfprint ]; then
  mkdir -p .local
  if python3 -m venv .local/audfprint && .local/audfprint/bin/pip install -q audfprint2; then
    echo "audfprint baseline installed in .local/audfprint"
  else
    echo "audfprint baseline unavailable (pip install audfprint2 failed); the benchmark will say so"
  fi
fi
echo "matcher deps ok"
