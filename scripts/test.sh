#!/usr/bin/env bash
# test.sh - install what is missing, build, and run every test that needs
# no GPU (labels smoke and full) twice: in the normal build and in a build
# with AddressSanitizer and UndefinedBehaviorSanitizer (CPU backend only);
# then build the fuzz harnesses with clang and fuzz each for a minute
# (label fuzz). The GPU tests run on a GPU machine with `ctest -L gpu`
# (see README.md). With CI=true as root, scripts/test-install.sh then
# installs the build's .deb packages and tests them (tests/README.md).
#
# Environment: TILEOPS_BUILD (default build), TILEOPS_SAN_BUILD (default
# build-san), TILEOPS_FUZZ_BUILD (default build-fuzz) name the build
# folders; TILEOPS_SKIP_SANITIZE=1 and TILEOPS_SKIP_FUZZ=1 skip those builds;
# TILEOPS_FUZZ_SECONDS (default 60) is how long each harness runs;
# TILEOPS_TEST_JOBS (default: the CPU count) how many tests run at once.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TILEOPS_BUILD:-build}
san_build=${TILEOPS_SAN_BUILD:-build-san}
fuzz_build=${TILEOPS_FUZZ_BUILD:-build-fuzz}
# Tests run side by side, one per CPU (those that share the suite's daemon
# take turns: tests/CMakeLists.txt gives them one resource lock).
jobs=${TILEOPS_TEST_JOBS:-$(nproc)}

# Each step is announced with the seconds the run has taken so far, so a
# slow CI says where its time went.
start=$SECONDS
step() { echo "== $* (at $((SECONDS - start)) s)"; }

./scripts/deps.sh test

step "build ($build)"
./scripts/build.sh "$build"
step "tests ($build)"
(cd "$build" && ctest -LE gpu --output-on-failure -j"$jobs")

# The .deb packages installed for real (dpkg -i, then purged): CI only,
# where the machine is disposable and this runs as root.
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
	step "install test ($build)"
	./scripts/test-install.sh "$build"
	step "operations walkthrough ($build)"
	./scripts/test-operations.sh "$build"
fi

if [ "${TILEOPS_SKIP_SANITIZE:-0}" != 1 ]; then
	step "sanitizer build ($san_build)"
	./scripts/build.sh "$san_build" -DTILEOPS_SANITIZE=ON -DTILEOPS_CUDA=OFF
	step "tests ($san_build)"
	(cd "$san_build" && ctest -LE gpu --output-on-failure -j"$jobs")
fi

if [ "${TILEOPS_SKIP_FUZZ:-0}" != 1 ]; then
	step "fuzz build ($fuzz_build)"
	CC=clang TILEOPS_TARGETS="fuzz_seeds fuzz_control fuzz_ring fuzz_manifest fuzz_expr" \
		./scripts/build.sh "$fuzz_build" -DTILEOPS_FUZZ=ON -DTILEOPS_CUDA=OFF \
		-DTILEOPS_FUZZ_SECONDS="${TILEOPS_FUZZ_SECONDS:-60}"
	step "fuzz ($fuzz_build)"
	(cd "$fuzz_build" && ctest -L fuzz --output-on-failure -j"$jobs")
fi
step "all tests passed"
