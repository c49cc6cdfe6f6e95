#!/usr/bin/env bash
# build.sh DIR [CMAKE OPTIONS...] - configure (once) and build TileOPs in DIR.
# CUDA is built when nvcc is found (on PATH or in /usr/local/cuda/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/build.sh DIR [CMAKE OPTIONS...]}
shift
cmake -S . -B "$dir" -G Ninja "$@"
cmake --build "$dir" -j "$(nproc)"
