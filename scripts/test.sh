#!/usr/bin/env bash
# test.sh - install what is missing, build, and run every test that needs
# no GPU (labels smoke and full) twice: in the normal build and in a build
# with AddressSanitizer and UndefinedBehaviorSanitizer (CPU backend only).
# The GPU tests run on a GPU machine with `ctest -L gpu` (see README.md).
#
# Environment: TILEOPS_BUILD (default build), TILEOPS_SAN_BUILD (default
# build-san) name the build folders; TILEOPS_SKIP_SANITIZE=1 skips the
# second build.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TILEOPS_BUILD:-build}
san_build=${TILEOPS_SAN_BUILD:-build-san}

./scripts/deps.sh

echo "== build ($build)"
./scripts/build.sh "$build"
echo "== tests ($build)"
(cd "$build" && ctest -LE gpu --output-on-failure)

if [ "${TILEOPS_SKIP_SANITIZE:-0}" != 1 ]; then
	echo "== sanitizer build ($san_build)"
	./scripts/build.sh "$san_build" -DTILEOPS_SANITIZE=ON -DTILEOPS_CUDA=OFF
	echo "== tests ($san_build)"
	(cd "$san_build" && ctest -LE gpu --output-on-failure)
fi
echo "== all tests passed"
