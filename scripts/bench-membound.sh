#!/usr/bin/env bash
# The memory-bound ops' roofline bench on the GPU machine, each workload
# timed as a direct kernel call and through a tileopsd started here on the
# CUDA backend (tileops-bench --daemon). OPS is a space-separated list of
# op-name substrings (tileops-bench --op), one run each; empty: every
# workload in one run. Results go to $OUT: membound.md (the tables),
# membound-*.json and membound.log.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
log=$out/membound.log
run=/tmp/tileops-membound
rm -rf "$run" && mkdir -p "$run"
: >"$log"
: >"$out/membound.md"
bench_header
trap bench_stop_daemon EXIT
bench_start_daemon || { echo "tileopsd did not start: see $log"; exit 1; }
ops=${OPS:-}
for op in ${ops:-all}; do
	filter=()
	[ "$op" = all ] || filter=(--op "$op")
	echo "### $op" >>"$out/membound.md"
	echo "==== tileops-bench --op $op" >>"$log"
	"$bin/tileops-bench" --daemon "$addr" --json "$out/membound-$op.json" \
		${filter[@]+"${filter[@]}"} >>"$out/membound.md" 2>>"$log" || failed=1
done
cat "$out/membound.md"
exit "$failed"
