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
# tables, then one summary: per heavy client, the small client's round
# trips alone, with the limit and without it, and the heavy session's holds
# and demotions, all from this run). SAMPLES (default 2000) round trips are
# measured each time; HEAVY (default "add gemm") picks the heavy clients;
# FAIRNESS_ARGS adds options to every tileops-bench-fairness (sizes).
# TILEOPS_BENCH_BACKEND=cpu runs it on the CPU backend (with small sizes in
# FAIRNESS_ARGS: the mechanism end to end, not figures for docs/perf.md).
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

# The executor threads' `what` counter summed, from the daemon's stats.
stat_sum() {
	"$bin/tileops-stat" --address "$stats" --raw 2>/dev/null |
		grep -o "\"$1\":[0-9]*" | awk -F: '{s += $2} END {print s + 0}'
}

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
	for heavy in ${HEAVY:-add gemm}; do
		echo "## $label, heavy $heavy" >>"$table"
		holds0=$(stat_sum queue_holds)
		demoted0=$(stat_sum demotions)
		bench_step "$bin/tileops-bench-fairness" --address "$addr" --heavy "$heavy" \
			--samples "$samples" --label "$label" --json "$json" ${FAIRNESS_ARGS:-}
		# The heavy session's holds and demotions in that run (the small
		# session's ops are never held: far under the limit).
		holds=$(($(stat_sum queue_holds) - holds0))
		demoted=$(($(stat_sum demotions) - demoted0))
		for c in "queue_holds $holds" "demotions $demoted"; do
			set -- $c
			printf '{"bench":"fairness","name":"%s","kernel":"%s","stat":"%s",' \
				"$label" "$heavy" "$1" >>"$json"
			printf '"value":%d,"unit":"count","n":1}\n' "$2" >>"$json"
		done
		# The table the bench printed last, from the log.
		awk '/^\| measurement/{t=""} /^\|/{t=t $0 "\n"} END{printf "%s\n", t}' "$log" \
			>>"$table"
	done
	echo "==== stats (session_queue_us = $limit)" >>"$log"
	"$bin/tileops-stat" --address "$stats" --raw >>"$log" 2>&1
	bench_stop_daemon
done
# One table from the JSON lines: per heavy client, alone (from the run with
# the limit), with the limit and without it.
awk -v heavies="${HEAVY:-add gemm}" '
'"$bench_awk_field"'
{
	name = field("name"); kernel = field("kernel"); stat = field("stat")
	v[name "|" kernel "|" stat] = field("value")
}
function g(k) { return k in v ? sprintf("%.1f", v[k]) : "-" }
function c(k) { return k in v ? sprintf("%d", v[k]) : "-" }
END {
	on = "limit 2000 us"; off = "limit off"
	print "## Summary: the small client'"'"'s round trips (us), the heavy session'"'"'s holds"
	print ""
	print "| heavy | alone p50 / p99 | limit p50 | limit p99 | limit max | holds | demotions | off p50 | off p99 | off max | heavy ops/s limit / off |"
	print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
	n = split(heavies, hs, " ")
	for (i = 1; i <= n; i++) {
		h = hs[i]; a = on ", alone|small add|"; w = on ", beside " h "|small add|"
		o = off ", beside " h "|small add|"
		printf "| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", h,
			g(a "p50"), g(a "p99"), g(w "p50"), g(w "p99"), g(w "max"),
			c(on "|" h "|queue_holds"), c(on "|" h "|demotions"),
			g(o "p50"), g(o "p99"), g(o "max"),
			g(on "|" h "|heavy ops/s"), g(off "|" h "|heavy ops/s")
	}
}' "$json" >>"$table"
cat "$table"
exit "$failed"
