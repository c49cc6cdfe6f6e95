#!/usr/bin/env bash
# Tunes the GEMM kernels on the GPU machine: tileops-tune over every gemm
# and bmm workload of the manifest (each at its own M, then at the smaller
# powers of two), writing the tuning cache $OUT/gemm-tune-h200.txt that is
# shipped as deploy/gemm-tune-h200.txt (docs/tuning.md). Under 4 minutes:
# TIME_LIMIT (seconds, default 200) stops it starting new shapes, and
# BUDGET_MS (default 10) is the timing per candidate.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/bin/tileops-tune, .carry/manifest). Starting from an existing
# cache ($TUNE_FROM) keeps its entries that are not measured again.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
log=$out/gemm-tune.log
: >"$log"
bench_header
cache=$out/gemm-tune-h200.txt
rm -f "$cache"
[ -n "${TUNE_FROM:-}" ] && cp "$TUNE_FROM" "$cache"

bench_step timeout 235 "$bin/tileops-tune" --manifest "$manifest" --out "$cache" \
	--trace "$out/gemm-tune-trace.txt" \
	--budget-ms "${BUDGET_MS:-10}" --time-limit-s "${TIME_LIMIT:-200}"
tail -n 5 "$log"
echo "cache: $cache ($(grep -c '|' "$cache" 2>/dev/null || echo 0) entries)"
exit "$failed"
