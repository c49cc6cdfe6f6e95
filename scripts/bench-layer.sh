#!/usr/bin/env bash
# The decode-layer bench, on the GPU machine, in one run: the layer through
# tileopsd as single ops and as a plan (one client, then PROCS client
# processes at once), then the same kernels in-process (launched one by one
# and as a CUDA graph). Prints one markdown table with the plan targets met
# or not (docs/perf.md, "A decode layer: single ops and plans", says what every number measures).
#
# Run from the repository root with what scripts/gpu-pack.sh packed:
# .carry/pack.tar.xz is unpacked to .carry/bin (tileopsd,
# tileops-bench-layer, tileops-bench-layer-baseline), .carry/lib and
# .carry/manifest when .carry/bin is missing. The manifest is
# $TILEOPS_MANIFEST, else .carry/manifest, else ./manifest. Results go to
# $OUT: layer.jsonl (one JSON line per measurement), layer.log (every
# program's output and the daemon's log) and layer.md (the table).
# PROCS, LAYERS and RUNS override 8, 200 and 200; LAYER_ARGS adds layer
# size options (e.g. "--batch 1").
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
procs=${PROCS:-8}
layers=${LAYERS:-200}
runs=${RUNS:-200}
read -r -a layer_args <<<"${LAYER_ARGS:-}"
json=$out/layer.jsonl
log=$out/layer.log
table=$out/layer.md
: >"$json"
: >"$log"

run=$(mktemp -d /tmp/tileops-layer.XXXXXX)

cleanup() {
	bench_stop_daemon
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_header

# ---- through tileopsd --------------------------------------------------------
if bench_start_daemon; then
	bench_step "$bin/tileops-bench-layer" --address "$addr" --runs "$runs" --json "$json" \
		${layer_args[@]+"${layer_args[@]}"}
	bench_step "$bin/tileops-bench-layer" --address "$addr" --procs "$procs" --layers "$layers" \
		--json "$json" ${layer_args[@]+"${layer_args[@]}"}
else
	echo "tileopsd did not become ready" >>"$log"
	failed=1
fi
bench_stop_daemon

# ---- in-process CUDA ---------------------------------------------------------
bench_step "$bin/tileops-bench-layer-baseline" --runs "$runs" --json "$json" \
	${layer_args[@]+"${layer_args[@]}"}

# ---- the table ------------------------------------------------------------------
python3 - "$json" "$procs" "$layers" >"$table" <<'EOF'
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
procs, layers = sys.argv[2], sys.argv[3]

def get(bench, name, kernel):
    for r in rows:
        if r["bench"] == bench and r["name"] == name and r["kernel"] == kernel:
            return r["value"]
    return None

def fmt(v, unit="us"):
    if v is None:
        return "not measured"
    return "%.0f layers/s" % v if unit == "l/s" else "%.2f us" % v

def verdict(ok, detail):
    if ok is None:
        return "not measured"
    return ("met" if ok else "not met") + (" " + detail if detail else "")

labels = []
for r in rows:
    k = r["kernel"]
    if r["name"] in ("plan_layer_us", "graph_layer_us") and k not in labels:
        labels.append(k)

print("| layer (bf16) | measurement | tileopsd | in-process CUDA | target | result |")
print("| --- | --- | ---: | ---: | --- | --- |")
for b in labels:
    plan = get("layer", "plan_layer_us", b)
    graph = get("layer-baseline", "graph_layer_us", b)
    single = get("layer", "single_ops_layer_us", b)
    eager = get("layer-baseline", "eager_layer_us", b)
    ksum = get("layer", "kernel_sum_us", b)
    ksum_in = get("layer-baseline", "kernel_sum_us", b)
    per_op = get("layer", "overhead_per_op_us", b)
    per_op_in = get("layer-baseline", "eager_overhead_per_op_us", b)
    plan_ov = get("layer", "plan_overhead_us", b)
    graph_ov = get("layer-baseline", "graph_overhead_us", b)
    ok = None if plan is None or graph is None else plan <= 1.2 * graph + 15.0
    detail = "" if ok is None else "(limit %.2f us)" % (1.2 * graph + 15.0)
    print("| %s | plan run + sync / graph launch + synchronize, median | %s | %s "
          "| <= 1.2x in-process + 15 us | %s |" % (b, fmt(plan), fmt(graph), verdict(ok, detail)))
    print("| %s | 13 single ops, async submit + sync / launches + synchronize, median "
          "| %s | %s | | |" % (b, fmt(single), fmt(eager)))
    print("| %s | sum of the 13 kernel times (events), median | %s | %s | | |" % (
        b, fmt(ksum), fmt(ksum_in)))
    ok = None if per_op is None else per_op <= 10.0
    print("| %s | overhead per op, single ops async (layer - kernels) / 13 | %s | %s "
          "| <= 10 us per op | %s |" % (b, fmt(per_op), fmt(per_op_in), verdict(ok, "")))
    print("| %s | overhead of the whole layer as a plan / graph (layer - kernels) "
          "| %s | %s | | |" % (b, fmt(plan_ov), fmt(graph_ov)))
    for name, what in (("procs_plan_layers_per_s", "plans"),
                       ("procs_single_layers_per_s", "single ops")):
        v = get("layer", name, "%s x%s procs" % (b, procs))
        print("| %s | %s processes x %s layers as %s, aggregate | %s | | | |" % (
            b, procs, layers, what, fmt(v, "l/s")))
EOF
cat "$table"
[ "$failed" = 0 ] || echo "some steps failed: see $log"
exit "$failed"
