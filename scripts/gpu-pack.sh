#!/usr/bin/env bash
# gpu-pack.sh - build for Hopper on this machine and pack what a GPU
# machine runs into one folder, $TILEOPS_PACK (default .carry/, git-ignored):
# the daemon, the tools and benches, the GPU and integration tests, the
# shared libraries the Criterion tests need that a bare GPU machine lacks,
# the manifest and the test fixtures, as pack.tar.xz. Copy the folder to any
# machine with an NVIDIA driver and the CUDA libraries (cuBLASLt for the GEMM
# bench's reference) and run scripts/gpu-run.sh or scripts/gpu-session.sh
# there with TILEOPS_PACK pointing at it.
#
# BUILD (default build-gpu) is the build folder; TARGETS (space-separated)
# builds only those.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
pack=${TILEOPS_PACK:-.carry}
cmake -S . -B "$build" -G Ninja -DTILEOPS_CUDA=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" -j"$(nproc)" ${TARGETS:-}
rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
# What needs a GPU, or runs against a daemon on one: the daemon, the tools
# and benches, the example, the GPU tests (test_gpu_*, parity_*) and the
# integration tests. The CPU-only tests ran on the build machine.
find "$build" -type f -perm -u+x ! -path '*/CMakeFiles/*' ! -name '*.so*' ! -name '*.sh' \
	\( -name tileopsd -o -name 'tileops-*' -o -name 'test_gpu_*' -o -name 'parity_*' \
	-o -name 'integration_*' \) -exec cp {} "$pack/bin/" \;
cp -L "$build"/client/libtileops.so.0 "$pack/lib/"
for f in "$pack"/bin/* "$pack"/lib/libtileops.so.0; do
	ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | grep -v -e '/libc.so' -e '/libm.so' -e '/libstdc++' -e '/libgcc_s' \
	-e '/libpthread' -e '/libdl.so' -e '/librt.so' -e 'ld-linux' -e '/libcublas' \
	| xargs -r -I{} cp -L {} "$pack/lib/"
cp tests/fixtures/*.sh "$pack/bin/" 2>/dev/null || true
# The Python package's GPU suite (gpu-session.sh's python step) brings
# Debian's pytest where the machine has none (the client library and what it
# links are in lib/).
mkdir -p "$pack/pylib"
for m in pytest _pytest pluggy iniconfig packaging attr attrs py.py; do
	[ -e "/usr/lib/python3/dist-packages/$m" ] && cp -r "/usr/lib/python3/dist-packages/$m" "$pack/pylib/"
done
cp -r manifest "$pack/manifest"
cp deploy/gemm-tune-h200.txt "$pack/" 2>/dev/null || true
# Where an installed tileopsd finds its tuning table (bin/../share/tileops,
# daemon/base/datadir.c): the packed daemon starts with the shipped table,
# as one started from the build tree or installed does.
mkdir -p "$pack/share/tileops"
cp deploy/gemm-tune-h200.txt "$pack/share/tileops/"
# Each binary carries the kernels' device code, the same bytes over and
# over: a dictionary larger than all of them together lets xz store them
# about once (the run scripts unpack).
strip --strip-unneeded "$pack"/bin/* 2>/dev/null || true
tar -C "$pack" -cf - bin lib manifest pylib share | xz -T1 -9 --lzma2=dict=1536MiB >"$pack/pack.tar.xz"
rm -rf "$pack/bin" "$pack/lib" "$pack/manifest" "$pack/pylib" "$pack/share"
du -sh "$pack"
