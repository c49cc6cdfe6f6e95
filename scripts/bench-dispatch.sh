#!/usr/bin/env bash
# The dispatch bench, on the GPU machine, all in one run: rounds of tiny ops
# from one client through tileopsd and in-process, then rounds of the many-process
# work: 8 client processes through tileopsd, 8 processes with their own
# CUDA contexts, 8 streams of one context, and 8 processes under NVIDIA MPS,
# one of each per round. Prints one markdown table,
# ours beside the in-process figures, with each target met or not
# (docs/perf.md says what every number measures).
#
# Run from the repository root with what scripts/gpu-pack.sh packed:
# .carry/bin (tileopsd, tileops-bench-dispatch,
# tileops-bench-dispatch-baseline) and .carry/lib. The manifest is
# $TILEOPS_MANIFEST, else ./manifest. Results go to
# $OUT: dispatch.jsonl (one JSON line per measurement), dispatch.log (every
# program's output and the daemon's log) and dispatch.md (the table).
# PROCS and KERNELS override 8 and 2000. The many-process runs vary from run
# to run, so there are RUNS rounds (default 5) and the table shows each
# side's median (every run is in dispatch.jsonl). MPS is always stopped on
# exit.
#
# Then the rows of the calls a serving engine makes (tileops-bench-dispatch
# --api): pipelined op_run, op_run + sync each, windowed submit and a plan
# replay per step, each at P = $API_PROCS processes (default 1 2 4 8 16),
# API_OPS (2000) spin ops per process, a fresh tileopsd per case, API_RUNS
# (3) rounds (the slowest round's rate over the fastest's is the bimodality
# check), beside separate contexts and MPS at the same P; then one traced
# round (tileops_trace_start), apart from the timed rounds, for where each
# request's time goes; then 8 processes replaying the decode-layer plan
# (tileops-bench-layer --procs 8, batch 1 and 32) beside 8 processes
# replaying it as an in-process CUDA graph with their own contexts and under
# MPS (tileops-bench-layer-baseline --procs 8). These follow the first table
# in dispatch.md.
#
# BACKEND=cpu runs only what needs no GPU (the serving-engine rows through
# tileopsd on the CPU backend): a check that the bench works end to end,
# not figures to keep.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
procs=${PROCS:-8}
kernels=${KERNELS:-2000}
runs=${RUNS:-5}
backend=${BACKEND:-cuda}
api_procs=${API_PROCS:-1 2 4 8 16}
api_modes=${API_MODES:-pipelined sync windowed plan}
api_ops=${API_OPS:-2000}
api_runs=${API_RUNS:-3}
export TILEOPS_BENCH_BACKEND=$backend
json=$out/dispatch.jsonl
log=$out/dispatch.log
table=$out/dispatch.md
: >"$json"
: >"$log"

run=$(mktemp -d /tmp/tileops-dispatch.XXXXXX)

cleanup() {
	bench_stop_daemon
	bench_stop_mps
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bench_header

# What else runs on the machine (a process left spinning slows every side).
{
	echo "load average: $(cat /proc/loadavg)"
	ps -eo pcpu,pid,comm --sort=-pcpu | head -6
} >>"$log" 2>&1

# ---- one client: through tileopsd and in-process, in turn ----------------------
# Three rounds (the table takes each figure's median), the GPU warmed up
# first by one untimed round of the in-process bench: a device fresh from
# idle runs its first second at lower clocks, which would fall on
# whichever side went first.
base=$bin/tileops-bench-dispatch-baseline
[ "$backend" = cuda ] && "$base" >/dev/null 2>&1
for round in 1 2 3; do
	[ "$backend" = cuda ] || break
	if bench_start_daemon; then
		bench_step "$bin/tileops-bench-dispatch" --address "$addr" --json "$json"
		# Each executor thread's cost per op and per launch call.
		"$bin/tileops-stat" --address "ipc://$run/stats.sock" >>"$log" 2>&1
	else
		echo "tileopsd did not become ready" >>"$log"
		failed=1
	fi
	bench_stop_daemon
	bench_step "$base" --json "$json"
done

# ---- many processes, in rounds -------------------------------------------------
# Each round runs every side once, in turn: tileopsd (a fresh daemon), 8
# processes with their own contexts, 8 streams of one context, then the
# same processes under MPS, so that whatever changes on the machine over
# the minute (clocks, other load) falls on every side alike.
for round in $(seq 1 "$runs"); do
	[ "$backend" = cuda ] || break
	echo "---- round $round" >>"$log"
	if bench_start_daemon; then
		bench_step "$bin/tileops-bench-dispatch" --address "$addr" --procs "$procs" \
			--kernels "$kernels" --json "$json"
	else
		echo "tileopsd did not become ready" >>"$log"
		failed=1
	fi
	bench_stop_daemon
	bench_step "$base" --procs "$procs" --kernels "$kernels" --label contexts --json "$json"
	bench_step "$base" --streams "$procs" --kernels "$kernels" --json "$json"
	if bench_start_mps; then
		# Only these processes may see the MPS pipe.
		CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
			bench_step "$base" --procs "$procs" --kernels "$kernels" --label mps \
			--json "$json"
		bench_stop_mps
	else
		echo "nvidia-cuda-mps-control -d failed: no MPS figures" >>"$log"
		failed=1
	fi
done

# ---- the serving engine's calls, P processes, in rounds ---------------------------
# One fresh tileopsd per case (mode and P), as a user would meet it.
api_case() {
	local mode=$1 p=$2
	shift 2
	if bench_start_daemon; then
		bench_step "$bin/tileops-bench-dispatch" --address "$addr" --api "$mode" \
			--procs "$p" --ops "$api_ops" --json "$json" "$@"
	else
		echo "tileopsd did not become ready" >>"$log"
		failed=1
	fi
	bench_stop_daemon
}
for round in $(seq 1 "$api_runs"); do
	echo "---- api round $round" >>"$log"
	for mode in $api_modes; do
		for p in $api_procs; do
			api_case "$mode" "$p"
		done
	done
	[ "$backend" = cuda ] || continue
	# The same spin kernels, P processes with their own contexts, then under MPS.
	for p in $api_procs; do
		bench_step "$base" --procs "$p" --kernels "$api_ops" --label "contexts P=$p" \
			--json "$json"
	done
	if bench_start_mps; then
		for p in $api_procs; do
			CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
				bench_step "$base" --procs "$p" --kernels "$api_ops" \
				--label "mps P=$p" --json "$json"
		done
		bench_stop_mps
	fi
done
echo "---- api traced round" >>"$log"
for mode in $api_modes; do
	for p in $api_procs; do
		api_case "$mode" "$p" --trace
	done
done
# 8 processes replaying the decode-layer plan with a sync per step (batch 1
# and 32), then the same layer as an in-process CUDA graph in 8 processes
# with their own contexts, and under MPS.
if [ "$backend" = cuda ]; then
	if bench_start_daemon; then
		bench_step "$bin/tileops-bench-layer" --address "$addr" --procs 8 \
			--layers "${LAYERS:-200}" --json "$json"
	else
		failed=1
	fi
	bench_stop_daemon
	bench_step "$bin/tileops-bench-layer-baseline" --procs 8 --layers "${LAYERS:-200}" \
		--label contexts --json "$json"
	if bench_start_mps; then
		CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
			bench_step "$bin/tileops-bench-layer-baseline" --procs 8 \
			--layers "${LAYERS:-200}" --label mps --json "$json"
		bench_stop_mps
	else
		failed=1
	fi
fi

echo "---- MPS control log" >>"$log"
tail -n 20 "$mps_log/control.log" >>"$log" 2>/dev/null

# ---- the table ------------------------------------------------------------------
python3 - "$json" "$procs" "$kernels" >"$table" <<'EOF'
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
procs, kernels = sys.argv[2], sys.argv[3]

def get(bench, name, kernel=None):
    """The median over the runs of one measurement (most are taken once)."""
    v = sorted(r["value"] for r in rows
               if r["bench"] == bench and r["name"] == name
               and (kernel is None or r["kernel"] == kernel))
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

def spread(bench, name, kernel=None):
    v = [r["value"] for r in rows
         if r["bench"] == bench and r["name"] == name
         and (kernel is None or r["kernel"] == kernel)]
    return "" if len(v) < 2 else " (median of %d: %.0fk to %.0fk)" % (
        len(v), min(v) / 1e3, max(v) / 1e3)

def fmt(v, unit=""):
    if v is None:
        return "not measured"
    if unit == "k/s":
        return "%.0fk/s" % (v / 1e3)
    return "%.2f us" % v

def verdict(ok):
    return "not measured" if ok is None else ("met" if ok else "not met")

ours_async = get("dispatch", "async_per_op_us")
ours_sync = get("dispatch", "sync_run_us")
ours_timed = get("dispatch", "sync_timed_us")
ours_gpu = get("dispatch", "kernel_gpu_us")
ours_procs = get("dispatch", "procs_kernels_per_s")
in_async = get("dispatch-baseline", "async_per_op_us", "add256-l1")
in_async_raw = get("dispatch-baseline", "async_per_op_us", "add256")
in_host = get("dispatch-baseline", "async_host_us", "add256")
in_sync = get("dispatch-baseline", "sync_us", "add256-l1")
in_sync_raw = get("dispatch-baseline", "sync_us", "add256")
in_graph = get("dispatch-baseline", "graph12_sync_us")
in_gpu = get("dispatch-baseline", "kernel_gpu_us")
ctx = get("dispatch-baseline", "procs_kernels_per_s", "contexts")
mps = get("dispatch-baseline", "procs_kernels_per_s", "mps")
streams = get("dispatch-baseline", "streams_kernels_per_s")

def both(a, b):
    return None if a is None or b is None else (a, b)

def sub(a, b):
    return None if a is None or b is None else a - b

t_async = both(ours_async, in_async)
t_sync = both(ours_sync, in_sync)
t_ctx = both(ours_procs, ctx)
t_mps = both(ours_procs, mps)
print("| measurement | tileopsd | in-process CUDA | target | result |")
print("| --- | ---: | ---: | --- | --- |")
print("| async tiny op (add, 256 f32), per op | %s | %s (raw kernel %s; host %s per launch) "
      "| <= 1.25x in-process | %s%s |" % (
          fmt(ours_async), fmt(in_async), fmt(in_async_raw), fmt(in_host),
          verdict(t_async and t_async[0] <= 1.25 * t_async[1]),
          "" if not t_async else " (%.2fx)" % (t_async[0] / t_async[1])))
print("| sync round trip: op_run + sync / launch + synchronize, median | %s | %s (raw kernel %s) "
      "| <= in-process + 6 us | %s%s |" % (
          fmt(ours_sync), fmt(in_sync), fmt(in_sync_raw),
          verdict(t_sync and t_sync[0] <= t_sync[1] + 6.0),
          "" if not t_sync else " (%+.2f us)" % (t_sync[0] - t_sync[1])))
print("| sync round trip: submit_timed + wait, median | %s | | | |" % fmt(ours_timed))
print("| kernel device time (events), median | %s | %s | | |" % (fmt(ours_gpu), fmt(in_gpu)))
print("| overhead per op, async (kernel time excluded) | %s | %s | | |" % (
    fmt(sub(ours_async, ours_gpu)), fmt(sub(in_async, in_gpu))))
print("| overhead per op, sync (kernel time excluded) | %s | %s | | |" % (
    fmt(sub(ours_sync, ours_gpu)), fmt(sub(in_sync, in_gpu))))
ours_plan = get("dispatch", "plan12_run_sync_us")
t_plan = both(ours_plan, in_graph)
print("| 12-op plan run + sync / 12-node graph launch + synchronize, median | %s | %s "
      "| <= 1.2x in-process + 15 us | %s%s |" % (
          fmt(ours_plan), fmt(in_graph),
          verdict(t_plan and t_plan[0] <= 1.2 * t_plan[1] + 15.0),
          "" if not t_plan else " (%+.2f us over 1.2x)" % (t_plan[0] - 1.2 * t_plan[1])))
print("| %s processes x %s spin kernels (5 us, 4 blocks): tileopsd vs own contexts "
      "| %s%s | %s%s | >= 5x | %s%s |" % (
          procs, kernels, fmt(ours_procs, "k/s"),
          spread("dispatch", "procs_kernels_per_s"), fmt(ctx, "k/s"),
          spread("dispatch-baseline", "procs_kernels_per_s", "contexts"),
          verdict(t_ctx and t_ctx[0] >= 5 * t_ctx[1]),
          "" if not t_ctx else " (%.2fx)" % (t_ctx[0] / t_ctx[1])))
print("| same, tileopsd vs MPS | %s | %s%s | >= 0.8x | %s%s |" % (
    fmt(ours_procs, "k/s"), fmt(mps, "k/s"),
    spread("dispatch-baseline", "procs_kernels_per_s", "mps"),
    verdict(t_mps and t_mps[0] >= 0.8 * t_mps[1]),
    "" if not t_mps else " (%.2fx)" % (t_mps[0] / t_mps[1])))
print("| same, %s streams of one context (one process) | | %s | | |" % (
    procs, fmt(streams, "k/s")))
EOF

# ---- the serving engine's calls: their table ---------------------------------------
python3 - "$json" "$api_modes" "$api_procs" "$api_ops" >>"$table" <<'EOF'
import json, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
modes, procs, ops = sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]

def vals(name, kernel, bench="dispatch"):
    return [r["value"] for r in rows
            if r.get("bench") == bench and r["name"] == name and r["kernel"] == kernel]

def median(v):
    v = sorted(v)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

def us(v):
    return "" if v is None else "%.1f" % v

def rate(v):
    return "" if v is None else "%.0fk" % (v / 1e3)

what = {"pipelined": "pipelined op_run (N op_run, one sync)",
        "sync": "op_run + sync each",
        "windowed": "windowed tileops_op_submit (128 outstanding)",
        "plan": "plan_run + sync per step (8-op plan)"}
print()
print("Serving-engine calls: %s spin ops per process (5 us, 4 blocks); medians over the "
      "rounds; a latency is one call (pipelined: one op_run; sync: op_run + sync; "
      "windowed: submit to its wait's end; plan: one step)." % ops)
print()
print("| case | P | us per op per process | ops/s, all | p50 latency, us | p99, us "
      "| max, us | slowest / fastest round | own contexts ops/s | MPS ops/s |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in modes:
    for p in procs:
        k = "%s P=%s" % (m, p)
        rates = vals("api_ops_per_s", k)
        ratio = "" if len(rates) < 2 or min(rates) <= 0 else "%.2f" % (max(rates) / min(rates))
        ctx = median(vals("procs_kernels_per_s", "contexts P=%s" % p, "dispatch-baseline"))
        mps = median(vals("procs_kernels_per_s", "mps P=%s" % p, "dispatch-baseline"))
        pipe = m == "pipelined"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            what.get(m, m), p, us(median(vals("api_us_per_op", k))), rate(median(rates)),
            us(median(vals("api_lat_p50_us", k))), us(median(vals("api_lat_p99_us", k))),
            us(median(vals("api_lat_max_us", k))), ratio,
            rate(ctx) if pipe else "", rate(mps) if pipe else ""))
insync = median(vals("sync_us", "add256", "dispatch-baseline"))
if insync is not None:
    print()
    print("In-process launch + synchronize (add, 256 f32), median: %.2f us." % insync)
# The sync-each targets, against the same spin op launched and synchronized
# in-process: p50 <= that + 6 us at P=1 and <= 2x (that + 6 us) at P=8; p99
# <= 3x p50 at every P.
spinsync = median(vals("sync_us", "spin", "dispatch-baseline"))
if spinsync is not None:
    print()
    print("In-process launch + synchronize of the same spin op (5 us, 4 blocks), median: "
          "%.2f us." % spinsync)
    print()
    print("| target | value | limit | result |")
    print("| --- | ---: | ---: | --- |")
    for p, factor in (("1", 1), ("8", 2)):
        p50 = median(vals("api_lat_p50_us", "sync P=%s" % p))
        if p50 is not None:
            lim = factor * (spinsync + 6.0)
            print("| sync each p50, P=%s | %.1f us | %.1f us | %s |" % (
                p, p50, lim, "met" if p50 <= lim else "not met"))
    for p in procs:
        p50 = median(vals("api_lat_p50_us", "sync P=%s" % p))
        p99 = median(vals("api_lat_p99_us", "sync P=%s" % p))
        if p50 and p99 is not None:
            print("| sync each p99 / p50, P=%s | %.2f | 3 | %s |" % (
                p, p99 / p50, "met" if p99 <= 3 * p50 else "not met"))

stages = ["ring", "launch", "post", "wake", "total"]
print()
print("Where the time goes (the traced round, medians over every request, us): ring = "
      "submitted to taken by the executor, launch = taken to launched (a sync: its fence "
      "placed), post = to the completion posted, wake = to the client reading it.")
print()
print("| case | P | request | " + " | ".join(stages) + " |")
print("| --- | ---: | --- | " + " | ".join("---:" for _ in stages) + " |")
for m in modes:
    for p in procs:
        for kind in ("op", "plan", "sync"):
            v = [median(vals("api_stage_us", "%s P=%s %s %s" % (m, p, kind, s)))
                 for s in stages]
            if all(x is None for x in v):
                continue
            print("| %s | %s | %s | %s |" % (m, p, kind, " | ".join(us(x) for x in v)))

layer = [r for r in rows
         if r.get("bench") == "layer" and r["name"] == "procs_plan_layers_per_s"]
print()
print("| 8 processes, decode-layer plan run + sync per step | tileopsd | in-process graphs, "
      "own contexts | same, under MPS |")
print("| --- | ---: | ---: | ---: |")
base = {r["kernel"]: r["value"] for r in rows
        if r.get("bench") == "layer-baseline" and r["name"] == "procs_graph_layers_per_s"}
if not layer:
    print("| (not measured) | | | |")
for r in layer:
    own = base.get(r["kernel"] + " contexts")
    mps = base.get(r["kernel"] + " mps")
    cell = lambda v: "%.0f layers/s" % v if v else "not measured"
    print("| %s | %.0f layers/s | %s | %s%s |" % (
        r["kernel"], r["value"], cell(own), cell(mps),
        " (tileopsd %.2fx; target >= 0.9x)" % (r["value"] / mps) if mps else ""))
EOF
cat "$table"
[ "$failed" = 0 ] || echo "some steps failed: see $log"
exit "$failed"
