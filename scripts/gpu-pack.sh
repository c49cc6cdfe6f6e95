#!/usr/bin/env bash
# Build for Hopper on this machine and pack what the GPU machine runs into
# .carry/ (git-ignored): binaries, and the shared libraries the Criterion
# tests need that the GPU machine lacks. scripts/gpu-run.sh runs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
cmake -S . -B "$build" -G Ninja -DTILEOPS_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
# TARGETS (space-separated) builds only those and packs them with what the
# folder already holds.
# shellcheck disable=SC2086
ninja -C "$build" -j"$(nproc)" ${TARGETS:-}
rm -rf .carry && mkdir -p .carry/bin .carry/lib
# Every executable the build made: the daemon, tools, examples, tests.
find "$build" -type f -perm -u+x \( -path '*/daemon/*' -o -path '*/client/*' -o -path '*/tests/*' \
	-o -path '*/tools/*' \) \
	! -name '*.so*' ! -name '*.sh' ! -path '*/CMakeFiles/*' -exec cp {} .carry/bin/ \;
for f in .carry/bin/*; do
	ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | grep -v -e '/libc.so' -e '/libm.so' -e '/libstdc++' -e '/libgcc_s' \
	-e '/libpthread' -e '/libdl.so' -e '/librt.so' -e 'ld-linux' -e '/libcublas' \
	| xargs -r -I{} cp -L {} .carry/lib/
# cuBLAS (the GEMM bench's reference only) is on the GPU machine already:
# /usr/local/cuda/lib64, which scripts/gpu-session.sh puts on the path.
cp tests/fixtures/*.sh .carry/bin/ 2>/dev/null || true
# The CPU-only tests ran here already; leave them behind.
rm -f .carry/bin/test_cpu_* .carry/bin/test_manifest_* .carry/bin/test_client_*
cp -r manifest .carry/manifest
# Each binary carries the kernels' device code: compress for the trip
# (scripts/gpu-run.sh unpacks).
tar -C .carry -cJf .carry/pack.tar.xz bin lib manifest
rm -rf .carry/bin .carry/lib .carry/manifest
du -sh .carry
