#!/usr/bin/env bash
# The attention prefill bench, on the GPU machine, in one run: our kernels
# (tileops-bench-prefill) on the manifest's workloads and the target shapes,
# then PyTorch's scaled_dot_product_attention forced to cuDNN and to flash
# on the same shapes (kernels/bench/attention_torch.py), then one markdown
# table side by side with the ratios.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/bin holds tileops-bench-prefill). Results go to $OUT:
# prefill.jsonl (ours), prefill-torch.jsonl (torch), prefill.log (every
# program's output) and prefill.md (the table). RUNS overrides 20.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
runs=${RUNS:-20}
ours=$out/prefill.jsonl
theirs=$out/prefill-torch.jsonl
log=$out/prefill.log
table=$out/prefill.md
: >"$log"
: >"$ours"
: >"$theirs"

bench_header
# A hung kernel must not hold the machine: each step has a time limit.
bench_step timeout 300 "$bin/tileops-bench-prefill" --json "$ours" --runs "$runs"
bench_step timeout 300 python3 "$PWD/kernels/bench/attention_torch.py" --shapes "$ours" --json "$theirs" \
	--runs "$runs"

python3 - "$ours" "$theirs" >"$table" <<'PY'
import json, sys

def rows(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []

ours, theirs = rows(sys.argv[1]), rows(sys.argv[2])

def key(r):
    return (r["label"], r["dtype"], r["causal"])

torch_by = {}
for r in theirs:
    torch_by[(key(r), r["impl"])] = r

def cell(r):
    if r is None:
        return "not run"
    if not r.get("supported"):
        return "unsupported"
    return "%.1f" % r["tflops"]

def ratio(a, b):
    if a is None or b is None or not a.get("supported") or not b.get("supported"):
        return ""
    return "%.2fx" % (a["tflops"] / b["tflops"])

print("TFLOP/s (causal counts half the FLOPs); ratios are ours over theirs.\n")
print("| shape | dtype | causal | ours | cuDNN | flash | ours/cuDNN | ours/flash | gqa in torch |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for r in ours:
    c = torch_by.get((key(r), "torch-cudnn"))
    f = torch_by.get((key(r), "torch-flash"))
    gqa = (c or f or {}).get("gqa", "")
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["label"], r["dtype"], "yes" if r["causal"] else "no", cell(r), cell(c), cell(f),
        ratio(r, c), ratio(r, f), gqa))
PY
cat "$table"
[ "$failed" = 0 ] || echo "some steps failed: see $log"
exit "$failed"
