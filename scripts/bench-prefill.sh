#!/usr/bin/env bash
# The attention prefill bench, on the GPU machine, in one run: our kernels
# (tileops-bench-prefill) on the manifest's workloads and the target shapes,
# then PyTorch's scaled_dot_product_attention forced to cuDNN and to flash
# on the same shapes (tools/bench/attention_torch.py), then one markdown
# table side by side with the ratios.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (.carry/bin holds tileops-bench-prefill). Results go to $OUT:
# prefill.jsonl (ours), prefill-torch.jsonl (torch), prefill.log (every
# program's output) and prefill.md (the table). RUNS overrides 20.
#
# Every shape is timed with each choice in VARIANTS (default
# "d,plain,turns,turns-wide,lean-wide": d the launcher's built-in choice per
# shape, then the schedules of the kernel's tuning interface as exact
# choices (docs/tuning.md): plain the free-running consumers, turns the
# consumers taking turns with the lean loop, turns-wide and lean-wide with
# wide key tiles for non-causal d128 and d256 and a longest-first causal
# order across groups of heads; "all" is every schedule the interface offers
# for a shape), one row each. Each choice runs in its own process with its
# own time limit, the default first, so a choice that fails or hangs costs
# only its own rows. Torch runs each shape once and every row is compared
# with it.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
runs=${RUNS:-20}
variants=${VARIANTS:-d,plain,turns,turns-wide,lean-wide}
ours=$out/prefill.jsonl
theirs=$out/prefill-torch.jsonl
shapes=$out/prefill-shapes.jsonl
log=$out/prefill.log
table=$out/prefill.md
: >"$log"
: >"$ours"
: >"$theirs"

bench_header
# A hung kernel must not hold the machine: each step has a time limit.
for v in ${variants//,/ }; do
	rm -f "$out/prefill-v$v.jsonl"
	bench_step timeout 120 "$bin/tileops-bench-prefill" --json "$out/prefill-v$v.jsonl" \
		--runs "$runs" --variants "$v"
	cat "$out/prefill-v$v.jsonl" >>"$ours" 2>/dev/null
done
# One row per shape for torch: the first variant's.
python3 - "$ours" >"$shapes" <<'PY'
import json, sys
seen = set()
for l in open(sys.argv[1]):
    if not l.strip().startswith("{"):
        continue
    r = json.loads(l)
    k = (r["label"], r["dtype"], r["causal"])
    if k not in seen:
        seen.add(k)
        sys.stdout.write(l)
PY
bench_step timeout 300 python3 "$PWD/tools/bench/attention_torch.py" --shapes "$shapes" \
	--json "$theirs" --runs "$runs"

python3 - "$ours" "$theirs" >"$table" <<'PY'
import json, sys

def rows(path):
    try:
        return [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    except OSError:
        return []

ours, theirs = rows(sys.argv[1]), rows(sys.argv[2])
# Each shape's choices together, in the order the shapes and choices were first timed.
first, order = {}, {}
for i, r in enumerate(ours):
    first.setdefault((r["label"], r["dtype"], r["causal"]), i)
    order.setdefault(str(r.get("variant", "d")), i)
ours.sort(key=lambda r: (first[(r["label"], r["dtype"], r["causal"])],
                         order[str(r.get("variant", "d"))]))

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
print("| shape | dtype | causal | choice | ours | cuDNN | flash | ours/cuDNN | ours/flash "
      "| gqa in torch |")
print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for r in ours:
    c = torch_by.get((key(r), "torch-cudnn"))
    f = torch_by.get((key(r), "torch-flash"))
    gqa = (c or f or {}).get("gqa", "")
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r["label"], r["dtype"], "yes" if r["causal"] else "no", r.get("variant", "d"), cell(r),
        cell(c), cell(f), ratio(r, c), ratio(r, f), gqa))
PY
cat "$table"
[ "$failed" = 0 ] || echo "some steps failed: see $log"
exit "$failed"
