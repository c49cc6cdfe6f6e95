#!/usr/bin/env bash
# bench-llama.sh - Llama 3.1 8B end to end on the GPU machine, through
# tileopsd as a client uses it (tileops-example-llama: a decode step is one
# request, the decode plan's replay, which advances positions, slots and
# lengths on the device with decode_advance), against the same model in
# PyTorch in the same run
# (tools/bench/llama_torch.py: the decode step as an eager CUDA graph and as
# torch.compile in a CUDA graph; the prefill compiled), and the weight-read
# floor of a decode step at batch 1 (the weights' bytes over the copy
# bandwidth measured in the same run).
#
#   decode at batch BATCHES (1 8 32 128) from a cache of CONTEXTS (1024 4096)
#   tokens, GEN (32) steps each, the mean step after the first (which
#   captures; the steps overlap, so one span to a sync); a prefill of PREFILL
#   (2048) tokens; first the example's own check of the 8B logits against its
#   CPU reference (a short prompt).
#
# Run from the repository root with what scripts/gpu-pack.sh packed. Results
# go to $OUT: llama.jsonl (tileopsd), llama_torch.jsonl (PyTorch), llama.md
# (the table) and llama.log. Each run is bounded: STEP_LIMIT seconds an
# example run (300), TORCH_LIMIT for the PyTorch script (900). MODES picks
# the PyTorch variants (eager+graph,compile+graph); TORCH_PREFILL=0 leaves
# out its compiled prefill (tens of seconds of compiling).
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
bench_model_outputs llama

bench_header
ex=$bin/tileops-example-llama
limit=${STEP_LIMIT:-300}
if ! bench_start_daemon; then
	echo "tileopsd did not start" | tee -a "$log"
	cat "$run/tileopsd.log" >>"$log"
	exit 1
fi

bench_step timeout "$limit" "$ex" "$addr" --8b --batch 4 --prompt 16 --gen 8 --check-steps 2
for ctx in ${CONTEXTS:-1024 4096}; do
	for b in ${BATCHES:-1 8 32 128}; do
		bench_step timeout "$limit" "$ex" "$addr" --8b --batch "$b" --context "$ctx" \
			--gen "${GEN:-32}" --temperature 0.8 --top-p 0.95 --top-k 0
	done
done
bench_step timeout "$limit" "$ex" "$addr" --8b --bench --batch 1 --prompt "${PREFILL:-2048}" \
	--gen 1
grep '^BENCH ' "$log" | sed 's/^BENCH //' >"$json"
bench_stop_daemon

# PyTorch after the daemon has given the GPU's memory back.
bench_step timeout "${TORCH_LIMIT:-900}" python3 "$PWD/tools/bench/llama_torch.py" \
	--json "$tjson" --batches "$(echo ${BATCHES:-1 8 32 128} | tr ' ' ,)" \
	--contexts "$(echo ${CONTEXTS:-1024 4096} | tr ' ' ,)" \
	--prefill "${TORCH_PREFILL:-${PREFILL:-2048}}" --modes "${MODES:-eager+graph,compile+graph}"

python3 - "$json" "$tjson" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	>"$table" <<'EOF'
import json, sys, time
ours = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
theirs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
floor = next((t for t in theirs if t.get("mode") == "floor"), None)
print(f"Llama 3.1 8B bf16 through tileopsd vs PyTorch, commit {sys.argv[3]}, "
      f"{time.strftime('%Y-%m-%d', time.gmtime())}")
if floor:
    print(f"\ncopy bandwidth {floor['copy_tbps']:.2f} TB/s; weights {floor['weight_bytes'] / 1e9:.2f} GB;"
          f" weight-read floor {floor['floor_ms']:.2f} ms a step")
print("\n| decode | tileopsd ms | tok/s | requests | eager+graph ms | compile+graph ms |"
      " vs best torch | % of floor |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
def torch_ms(mode, b, c):
    r = [t for t in theirs if t.get("mode") == "decode" and t.get("impl") == mode
         and t.get("batch") == b and t.get("context") == c and "step_ms" in t]
    return r[0]["step_ms"] if r else None
for o in ours:
    if o["mode"] != "decode":
        continue
    b, c = o["batch"], o["context"]
    eg, cg = torch_ms("eager+graph", b, c), torch_ms("compile+graph", b, c)
    best = min(x for x in (eg, cg) if x) if (eg or cg) else None
    fl = f"{100 * floor['floor_ms'] / o['step_ms']:.0f}%" if floor and b == 1 else ""
    f = lambda x: "%.2f" % x if x else "-"
    speed = "%.2fx" % (best / o["step_ms"]) if best else "-"
    print(f"| b{b} ctx{c} | {o['step_ms']:.2f} | {o['tokens_per_s']:.0f} | {o['requests_per_step']} |"
          f" {f(eg)} | {f(cg)} | {speed} | {fl} |")
for o in ours:
    if o["mode"] == "prefill":
        t = [x for x in theirs if x.get("mode") == "prefill" and "ms" in x]
        tm = t[0]["ms"] if t else None
        print(f"\nprefill {o['tokens']} tokens: tileopsd {o['ms']:.1f} ms ({o['tokens_per_s']:.0f} tok/s)"
              + (f", torch.compile {tm:.1f} ms: {tm / o['ms']:.2f}x" if tm else ""))
EOF
cat "$table"
[ "$failed" = 0 ] || { echo "some steps failed: see $log"; tail -n 30 "$log"; }
exit "$failed"
