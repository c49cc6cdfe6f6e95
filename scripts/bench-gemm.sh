#!/usr/bin/env bash
# The GEMM bench, on the GPU machine: our GEMM kernels against cuBLASLt on
# every gemm and bmm workload of the manifest, 8192^3 bf16, and the decode
# shapes at M = 1, 16, 64, 128, all in one run of tileops-bench-gemm
# (docs/tuning.md says what it measures and how). Under 3 minutes.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/bin/tileops-bench-gemm, .carry/lib, .carry/manifest). cuBLASLt is
# not packed: it is loaded from /usr/local/cuda/lib64 there. The tuning
# cache is $TUNE, else deploy/gemm-tune-h200.txt when it exists, else none
# (the built-in choice). Results go to $OUT: gemm-bench.json,
# gemm-bench.md (the table, also printed) and gemm-bench.log.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
log=$out/gemm-bench.log
: >"$log"
bench_header

tune=${TUNE:-}
[ -z "$tune" ] && [ -f "$root/deploy/gemm-tune-h200.txt" ] && tune=$root/deploy/gemm-tune-h200.txt
tune_args=()
[ -n "$tune" ] && tune_args=(--tune "$tune")

bench_step timeout 170 "$bin/tileops-bench-gemm" --manifest "$manifest" \
	--json "$out/gemm-bench.json" --md "$out/gemm-bench.md" ${tune_args[@]+"${tune_args[@]}"}
cat "$out/gemm-bench.md" 2>/dev/null || tail -n 40 "$log"
[ "$failed" = 0 ] || echo "the bench failed or found a mismatch: see $log"
exit "$failed"
