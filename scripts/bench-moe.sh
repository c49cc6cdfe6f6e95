#!/usr/bin/env bash
# bench-moe.sh - one MoE layer of Qwen3-30B-A3B, Mixtral-8x7B and
# DeepSeek-V2-Lite (bf16) on the GPU machine, through tileopsd as one plan
# (tileops-bench-moe: moe_route, moe_align, moe_gate_up, moe_grouped_gemm,
# moe_unpermute, and DeepSeek's shared experts), at TOKENS (1 8 64 4096),
# against PyTorch in the same run (tools/bench/moe_torch.py: the reference
# models' per-expert loop, torch._grouped_mm where this torch has it, the
# gate-up grouped GEMM alone) and the floor of reading the active experts'
# weights once. The single ops' kernels are timed on the manifest's
# workloads by tileops-bench (`tileops-bench --family moe`).
#
# Run from the repository root with what scripts/gpu-pack.sh packed. Results
# go to $OUT: moe.jsonl (tileopsd), moe_torch.jsonl (PyTorch), moe.md (the
# table) and moe.log. Each run is bounded: STEP_LIMIT seconds a layer run
# (90), OPS_LIMIT for tileops-bench over the family's workloads (150),
# TORCH_LIMIT for the PyTorch script (300).
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
bench_model_outputs moe

bench_header
limit=${STEP_LIMIT:-90}
models=${MODELS:-qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite}
tokens=${TOKENS:-1 8 64 4096}
if ! bench_start_daemon; then
	echo "tileopsd did not start" | tee -a "$log"
	cat "$run/tileopsd.log" >>"$log"
	exit 1
fi
# Above 64 tokens each block_m of PREFILL_BLOCK_M (64 128) in turn: the
# padding it costs against the GEMM kernel it allows (docs/moe.md).
for m in $models; do
	for t in $tokens; do
		bms=0
		[ "$t" -gt 64 ] && bms=${PREFILL_BLOCK_M:-64 128}
		for bm in $bms; do
			bench_step timeout "$limit" "$bin/tileops-bench-moe" "$addr" "$m" "$t" \
				"${ITERS:-10}" "$bm"
		done
	done
done
bench_step timeout "${OPS_LIMIT:-150}" "$bin/tileops-bench" --family moe --json "$out/moe_ops.json"
grep '^BENCH ' "$log" | sed 's/^BENCH //' >"$json"
bench_stop_daemon

# PyTorch after the daemon has given the GPU's memory back.
bench_step timeout "${TORCH_LIMIT:-300}" python3 "$PWD/tools/bench/moe_torch.py" \
	--json "$tjson" --models "$(echo "$models" | tr ' ' ,)" --tokens "$(echo "$tokens" | tr ' ' ,)"

python3 - "$json" "$tjson" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	>"$table" <<'PY'
import json, sys, time
ours = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
theirs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
env = next((t for t in theirs if t.get("mode") == "env"), {})
print(f"MoE layers bf16 through tileopsd vs PyTorch, commit {sys.argv[3]}, "
      f"{time.strftime('%Y-%m-%d', time.gmtime())}; torch {env.get('torch', '?')}, "
      f"copy {env.get('copy_tbps', 0):.2f} TB/s")
def get(model, t, mode, key="ms"):
    r = [x for x in theirs if x.get("model") == model and x.get("tokens") == t
         and x.get("mode") == mode and key in x]
    return r[0][key] if r else None
f = lambda v: "%.3f" % v if v else "-"
print("\n| layer | tokens | block_m | tileopsd ms | synced ms | loop ms | vs loop | grouped_mm ms |"
      " vs grouped_mm | floor ms | % of floor | torch gate-up TFLOP/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for o in ours:
    m, t, ms = o["model"], o["tokens"], o["layer_ms"]
    lp, gm, fl = get(m, t, "loop"), get(m, t, "grouped_mm"), get(m, t, "floor", "floor_ms")
    tf = get(m, t, "grouped_mm_gate_up", "tflops")
    print(f"| {m} | {t} | {o['block_m']} | {ms:.3f} | {o['synced_ms']:.3f} | {f(lp)} |"
          f" {'%.2fx' % (lp / ms) if lp else '-'} | {f(gm)} | {'%.2fx' % (gm / ms) if gm else '-'} |"
          f" {f(fl)} | {'%.0f%%' % (100 * fl / ms) if fl else '-'} | {'%.0f' % tf if tf else '-'} |")
PY
cat "$table"
[ "$failed" = 0 ] || { echo "some steps failed: see $log"; tail -n 30 "$log"; }
exit "$failed"
