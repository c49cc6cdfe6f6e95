#!/usr/bin/env bash
# The fairness bench on the GPU machine (docs/reliability.md, "Fairness
# between sessions"): a client's short ops (op_run + sync) alone and beside
# another client's long ones (add over 350 Mi floats, or a bf16 GEMM that
# keeps every SM), first on tileopsd as it starts by default
# (session_queue_us = 2000), then with the limit off (session_queue_us = 0).
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (tileopsd, tileops-bench-fairness, tileops-stat). Results go to $OUT:
# fairness.jsonl (one JSON line per measurement), fairness.log (every
# program's output, the daemons' stats and logs) and fairness.md (the
# tables). SAMPLES (default 2000) round trips are measured each time;
# FAIRNESS_ARGS adds options to every tileops-bench-fairness (sizes).
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
samples=${SAMPLES:-2000}
json=$out/fairness.jsonl
log=$out/fairness.log
table=$out/fairness.md
: >"$json"
: >"$log"
: >"$table"
run=$(mktemp -d /tmp/tileops-fairness.XXXXXX)
trap 'bench_stop_daemon; rm -rf "$run"' EXIT
trap 'exit 130' INT TERM
bench_header

for limit in 2000 0; do
	conf=$run/limit-$limit.conf
	echo "session_queue_us = $limit" >"$conf"
	if ! bench_start_daemon --config "$conf"; then
		echo "tileopsd did not start (session_queue_us = $limit)" >>"$log"
		cat "$run/tileopsd.log" >>"$log"
		failed=1
		continue
	fi
	label="limit $limit us"
	[ "$limit" = 0 ] && label="limit off"
	for heavy in add gemm; do
		echo "## $label, heavy $heavy" >>"$table"
		bench_step "$bin/tileops-bench-fairness" --address "$addr" --heavy "$heavy" \
			--samples "$samples" --label "$label" --json "$json" ${FAIRNESS_ARGS:-}
		# The table the bench printed last, from the log.
		awk '/^\| measurement/{t=""} /^\|/{t=t $0 "\n"} END{printf "%s\n", t}' "$log" \
			>>"$table"
	done
	echo "==== stats (session_queue_us = $limit)" >>"$log"
	"$bin/tileops-stat" --address "$stats" --raw >>"$log" 2>&1
	bench_stop_daemon
done
cat "$table"
exit "$failed"
