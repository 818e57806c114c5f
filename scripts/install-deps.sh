#!/usr/bin/env bash
# Installs what lfmvox needs, from Debian 12's packages only (nothing is downloaded at build or run time).
#   scripts/install-deps.sh          to build and run (scripts/run.sh)
#   scripts/install-deps.sh --test   and to test (scripts/test.sh): GoogleTest, clang's sanitizers and
#                                    libFuzzer, clang-format, and the real clients the tests drive
# Safe to re-run: when every package is present it does nothing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git  # toolchain
  ninja-build                           # the build tool scripts/build.sh picks: schedules both cores, logs each file's time
  ccache                                # compiler cache, used when present: a rebuild recompiles only what changed
  libhwy-dev                            # Highway: portable SIMD with run-time CPU dispatch (Apache-2.0)
  nlohmann-json3-dev                    # JSON: config.json, safetensors headers, tokenizer.json (MIT)
  libsndfile1-dev                       # audio files: WAV/FLAC/Ogg/MP3 in and out (LGPL-2.1, dynamic)
  libavformat-dev libavcodec-dev libavutil-dev  # FFmpeg: M4A/AAC, WebM/Opus in (libsndfile has none), AAC out (LGPL-2.1+, dynamic)
  libpcre2-dev                          # PCRE2: Unicode-property regex, tokenizer pre-tokenizer (BSD-3)
  libboost-dev                          # Boost.Beast/Asio, header-only: HTTP/1.1 (and WebSocket) for `lfmvox serve` (BSL-1.0)
  libwebrtc-audio-processing-dev        # WebRTC's voice detector: the realtime endpoint's server VAD (BSD-3)
  libsoundtouch-dev                     # SoundTouch: time-scale modification for the speech endpoint's `speed` (LGPL-2.1)
)
TEST_PACKAGES=(
  libgtest-dev                          # GoogleTest: unit, parity and streaming tests
  clang libclang-rt-14-dev              # the sanitized tree (ASan + UBSan) and libFuzzer for the parser fuzz targets
  clang-format                          # the checked-in .clang-format, enforced by scripts/test.sh
  libkissfft-dev                        # only a yardstick in bench_fft, which picks our own FFT (BSD-3)
  nginx curl                            # two `serve` replicas behind deploy/nginx.conf (docs/deploy.md)
  chromium                              # headless, opens the page `lfmvox serve` serves (tests/browser)
)

with_tests=0
case "${1:-}" in
  "") ;;
  --test) with_tests=1 ;;
  *) echo "usage: scripts/install-deps.sh [--test]" >&2; exit 2 ;;
esac
wanted=("${PACKAGES[@]}")
if [ "$with_tests" = 1 ]; then wanted+=("${TEST_PACKAGES[@]}"); fi

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Test only: Node.js and npm run the official `openai` npm client against
# `lfmvox serve` (tests/clients). Many machines carry them from NodeSource,
# whose nodejs bundles npm and conflicts with Debian's npm package, so they
# are asked for as commands, and Debian's packages are installed only when
# the commands are absent.
if [ "$with_tests" = 1 ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
