#!/usr/bin/env bash
# profile-llama.sh - where a decode step of Llama 3.1 8B goes, kernel by
# kernel, on the GPU machine: tileopsd runs under Nsight Compute (one metric,
# gpu__time_duration, every kernel node of the decode plan's graph, caches
# and clocks left alone) while tileops-example-llama --8b --context CONTEXT
# runs GEN (3) decode steps at batch BATCH (1). The last step (from its
# decode_advance kernel to the end) is printed kernel by kernel and summed
# by kernel name into $OUT/llama-profile.txt. ncu serializes the kernels, so
# the sum is the step's kernel time without overlap or launch gaps; the
# difference from the step time bench-llama.sh measures is the gaps.
#
# Run from the repository root with what scripts/gpu-pack.sh packed.
# Results: $OUT/llama-profile.txt, $OUT/llama-profile.csv (ncu's raw rows)
# and $OUT/llama-profile.log.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
log=$out/llama-profile.log
csv=$out/llama-profile.csv
: >"$log"
run=$(mktemp -d /tmp/tileops-llama-prof.XXXXXX)
# tileopsd is ncu's child: SIGTERM goes to it (its pid from the ready file),
# then ncu writes the report.
stop() {
	[ -s "$run/tileopsd.pid" ] && kill -TERM "$(cat "$run/tileopsd.pid")" 2>/dev/null
	[ -n "$daemon" ] && wait "$daemon"
	echo "ncu exit status: $?" >>"$log"
	daemon=
}
trap 'stop; rm -rf "$run"' EXIT
bench_header
rm -f "$run/tileopsd.pid"
"$ncu" --clock-control none --cache-control none --target-processes all \
	--metrics gpu__time_duration.sum -o "$run/prof" \
	"$bin/tileopsd" --backend cuda --listen "ipc://$run/tileopsd.sock" \
	--stats "ipc://$run/stats.sock" --manifest "$manifest" --ready-file "$run/tileopsd.pid" \
	>"$run/tileopsd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 1200); do
	[ -s "$run/tileopsd.pid" ] && break
	kill -0 "$daemon" 2>/dev/null || break
	sleep 0.1
done
bench_step timeout "${STEP_LIMIT:-240}" "$bin/tileops-example-llama" "ipc://$run/tileopsd.sock" \
	--8b --batch "${BATCH:-1}" --context "${CONTEXT:-1024}" --gen "${GEN:-3}" \
	--temperature 0.8 --top-p 0.95 --top-k 0
stop
tail -20 "$run/tileopsd.log" >>"$log"
"$ncu" -i "$run/prof.ncu-rep" --csv --page raw --print-units base >"$csv" 2>>"$log"
python3 - "$csv" >"$out/llama-profile.txt" <<'PY'
import collections, csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
if head is None:
    sys.exit("no kernel rows in the ncu output")
cols = rows[head]
name_i, dur_i = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum")
grid_i = next((cols.index(c) for c in ("Grid Size", "launch__grid_size") if c in cols), None)
num = lambda v: v.replace(",", "").replace(".", "").isdigit()  # noqa: E731
unit = rows[head + 1][dur_i] if not num(rows[head + 1][dur_i]) else "ns"
kern = [r for r in rows[head + 1:] if len(r) == len(cols) and num(r[dur_i])]
for r in kern:
    r[dur_i] = r[dur_i].replace(",", "")
starts = [i for i, r in enumerate(kern) if "decode_advance" in r[name_i]]
if not starts:
    sys.exit("no decode_advance kernel: %d kernels" % len(kern))
step = kern[starts[-1]:]
total = sum(float(r[dur_i]) for r in step)
print("kernels profiled %d; decode steps seen %d; the last step: %d kernels, %.1f us of kernel time (%s)"
      % (len(kern), len(starts), len(step), total / 1e3, unit))
by = collections.OrderedDict()
for r in step:
    n = r[name_i].split("(")[0][:70]
    c, t = by.get(n, (0, 0.0))
    by[n] = (c + 1, t + float(r[dur_i]))
print("\n%-72s %6s %10s %9s %6s" % ("kernel", "count", "total us", "mean us", "share"))
for n, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print("%-72s %6d %10.1f %9.2f %5.1f%%" % (n, c, t / 1e3, t / c / 1e3, 100 * t / total))
print("\nthe first 40 kernels of the step:")
for r in step[:40]:
    print("  %9.2f us  %s  %s" % (float(r[dur_i]) / 1e3, r[grid_i] if grid_i is not None else "",
                                r[name_i][:90]))
PY
echo "llama-profile rc=$?" >>"$log"
