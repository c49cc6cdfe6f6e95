#!/usr/bin/env bash
# build.sh DIR [CMAKE OPTIONS...] - configure and build TileOPs in DIR.
# CUDA is built when nvcc is found (on PATH or in /usr/local/cuda/bin).
# TILEOPS_TARGETS, if set, names the targets to build (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: scripts/build.sh DIR [CMAKE OPTIONS...]}
shift
cmake -S . -B "$dir" -G Ninja "$@"
targets=()
for t in ${TILEOPS_TARGETS:-}; do
	targets+=(--target "$t")
done
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
