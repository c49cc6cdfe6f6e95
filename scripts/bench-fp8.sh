#!/usr/bin/env bash
# bench-fp8.sh - the fp8 GEMMs on the GPU machine, one run: gemm_fp8 on
# every workload of manifest/gemm_fp8.yaml (Llama 3.1 8B/70B projections per
# tensor and rowwise, DeepSeek-V3's with 128-block scales, M = 1, 16, 64,
# 128, 4096) three ways, and PyTorch on the same shapes after the daemon has
# given the GPU back:
#   tileops-bench-fp8     our gemm_fp8 and our bf16 gemm of the same shape,
#                         back to back in CUDA graphs, with the weight-read floor
#   tileops-bench         the family through the launchers and (--daemon)
#                         through tileopsd, the user's path
#   fp8_torch.py          torch._scaled_mm (cuBLASLt) per tensor and rowwise
#                         (blockwise where this torch has it), and bf16 F.linear
# The rows join by workload label into $OUT/fp8.md, with the targets' figures
# below it: the geometric mean against torch._scaled_mm per layout, decode
# (M <= 16) against our bf16 gemm, the 128-block TFLOP/s at M = 4096 and the
# % of the weight-read floor at M <= 128.
#
# Run from the repository root with what scripts/gpu-pack.sh packed. Results
# go to $OUT: fp8.jsonl (tileops-bench-fp8), fp8_ops.json (tileops-bench),
# fp8_torch.jsonl, fp8.md and fp8.log. Each run is bounded, within the 300
# seconds scripts/gpu-session.sh gives the step: STEP_LIMIT seconds for
# tileops-bench-fp8 (110, REPS replays of each graph, 10), OPS_LIMIT for
# tileops-bench (80), TORCH_LIMIT for the PyTorch script (100).
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
bench_model_outputs fp8
ops_json=$out/fp8_ops.json
list=$run/fp8_workloads.json

bench_header
bench_step timeout "${STEP_LIMIT:-110}" "$bin/tileops-bench-fp8" --manifest "$manifest" \
	--json "$json" --md "$run/fp8_ours.md" --reps "${REPS:-10}"
if bench_start_daemon; then
	bench_step timeout "${OPS_LIMIT:-80}" "$bin/tileops-bench" --manifest "$manifest" \
		--family gemm_fp8 --daemon "$addr" --json "$ops_json"
	bench_stop_daemon
else
	echo "tileopsd did not start" | tee -a "$log"
	cat "$run/tileopsd.log" >>"$log"
	failed=1
fi
bench_step "$bin/tileops-bench" --manifest "$manifest" --family gemm_fp8 --list "$list"
bench_step timeout "${TORCH_LIMIT:-100}" python3 "$PWD/tools/bench/fp8_torch.py" \
	--workloads "$list" --json "$tjson" --iters "${ITERS:-20}"

python3 - "$json" "$ops_json" "$tjson" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	>"$table" <<'PY'
import json, math, sys, time
def lines(p):
    # A run cut off by its time limit may leave a partial last line.
    out = []
    try:
        for l in open(p):
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
    except OSError:
        pass
    return out
ours = {r["label"]: r for r in lines(sys.argv[1])}
try:
    ops = {r["label"]: r for r in json.load(open(sys.argv[2]))["results"] if r.get("ok")}
except (OSError, ValueError, KeyError):
    ops = {}
theirs = lines(sys.argv[3])
env = next((t for t in theirs if t.get("mode") == "env"), {})
torch_rows = {t["label"]: t for t in theirs if "label" in t}
print(f"gemm_fp8 vs torch._scaled_mm and bf16, commit {sys.argv[4]}, "
      f"{time.strftime('%Y-%m-%d', time.gmtime())}; torch {env.get('torch', '?')}")
print("\n| workload | scales | fp8 us | tileopsd us | scaled_mm us | vs scaled_mm | our bf16 us |"
      " bf16/fp8 | torch bf16 us | TFLOP/s | % of floor |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
f = lambda v: "%.2f" % v if v else "-"
vs = {"per_tensor": [], "rowwise": [], "block": []}
decode = []
for label, o in ours.items():
    t, d = torch_rows.get(label, {}), ops.get(label, {})
    sm = t.get("scaled_mm_us")
    if sm:
        vs[o["layout"]].append(sm / o["fp8_us"])
    if o["m"] <= 16:
        decode.append(o["bf16_us"] / o["fp8_us"])
    print(f"| {label} | {o['layout']} | {f(o['fp8_us'])} | {f(d.get('daemon_us'))} | {f(sm)} |"
          f" {'%.2fx' % (sm / o['fp8_us']) if sm else '-'} | {f(o['bf16_us'])} |"
          f" {o['bf16_us'] / o['fp8_us']:.2f}x | {f(t.get('bf16_us'))} | {o['tflops']:.0f} |"
          f" {100 * o['floor_us'] / o['fp8_us']:.0f}% |")
gm = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
print()
for k, v in vs.items():
    print(f"- geometric mean vs torch._scaled_mm, {k}: {gm(v):.2f}x over {len(v)} workloads")
print(f"- decode (M <= 16), our bf16 time / our fp8 time: geometric mean {gm(decode):.2f}x, "
      f"min {min(decode) if decode else float('nan'):.2f}x")
for o in ours.values():
    if o["layout"] == "block" and o["m"] == 4096 and (o["n"], o["k"]) in ((7168, 2048), (2112, 7168)):
        print(f"- block, M 4096 N {o['n']} K {o['k']}: {o['tflops']:.0f} TFLOP/s")
blk = [100 * o["floor_us"] / o["fp8_us"] for o in ours.values()
       if o["layout"] == "block" and o["m"] <= 128]
if blk:
    print(f"- block, M <= 128: {min(blk):.0f}% to {max(blk):.0f}% of the weight-read floor")
PY
cat "$table"
[ "$failed" = 0 ] || { echo "some steps failed: see $log"; tail -n 30 "$log"; }
exit "$failed"
