#!/usr/bin/env bash
# The attention decode bench, on the GPU machine: tileops-bench-decode
# times attention_decode, attention_decode_paged and kv_cache_append
# through their L1 launchers (CUDA graphs of back-to-back calls, full
# sequences, random page tables) against the copy bandwidth it measures in
# the same run, and prints one markdown table (us, KV TB/s, % of copy),
# then a sweep of every split count the kernel's tuning interface offers
# (exact choices through tk_call.choice, docs/tuning.md) over the batch-1
# 65536-token and the 70B batch-32 cases, a row per count after the
# built-in rule's (NO_SWEEP=1 leaves it out).
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/pack.tar.xz is unpacked to .carry/bin and .carry/lib when
# .carry/bin is missing). Results go to $OUT: decode.jsonl (one JSON line
# per measurement), decode.md (the table) and decode.log (every program's
# output). CHECK=1 first runs test_gpu_attention_decode; SANITIZE=1 runs it
# under compute-sanitizer (memcheck) instead.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
json=$out/decode.jsonl
log=$out/decode.log
table=$out/decode.md
: >"$json"
: >"$log"

bench_header

test_bin=$bin/test_gpu_attention_decode
if [ "${SANITIZE:-0}" = 1 ] && [ -x "$test_bin" ]; then
	bench_step compute-sanitizer --tool memcheck --error-exitcode 3 "$test_bin" --jobs=1
elif [ "${CHECK:-0}" = 1 ] && [ -x "$test_bin" ]; then
	bench_step "$test_bin" --jobs=1
fi

sweep=
[ "${NO_SWEEP:-0}" = 1 ] && sweep=--no-sweep
bench_step "$bin/tileops-bench-decode" --json "$json" --md "$table" $sweep

cat "$table" 2>/dev/null
[ "$failed" = 0 ] || { echo "some steps failed: see $log"; tail -n 30 "$log"; }
exit "$failed"
