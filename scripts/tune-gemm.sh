#!/usr/bin/env bash
# Tunes the tunable kernels on the GPU machine: tileops-tune over every
# workload of the manifest's tunable ops (attention prefill and decode at
# their shapes; gemm and bmm at their own M, then at the smaller powers of
# two), writing the tuning table $OUT/gemm-tune-h200.txt that is shipped as
# deploy/gemm-tune-h200.txt (docs/tuning.md). Under 4 minutes: TIME_LIMIT
# (seconds, default 200) stops it starting new shapes, and BUDGET_MS
# (default 10) is the timing per candidate. OP=gemm (or another tunable
# op) keeps one op's workloads.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/bin/tileops-tune, .carry/manifest). Starting from an existing
# table ($TUNE_FROM) keeps its entries that are not measured again.
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
	--trace "$out/gemm-tune-trace.txt" ${OP:+--op "$OP"} \
	--budget-ms "${BUDGET_MS:-10}" --time-limit-s "${TIME_LIMIT:-200}"
tail -n 5 "$log"
echo "table: $cache ($(grep -c '^[^#]*|' "$cache" 2>/dev/null || echo 0) entries)"
exit "$failed"
