#!/usr/bin/env bash
# bench_collective_cpu.sh TILEOPSD BENCH MANIFEST - tileops-bench-collective
# end to end on the CPU backend: a tileopsd with `devices = 0-3`, the bench
# over 2 and 4 ranks, two small sizes, all three ops. It must exit 0 (its
# own check of every case matched) and its JSON must hold a busbw > 0 for
# each of the 12 cases; asking for more ranks than the daemon serves must
# fail, naming the count.
set -euo pipefail

tileopsd=$1 bench=$2 manifest=$3
dir=$(mktemp -d /tmp/tileops-collective-XXXXXX)
daemon=
cleanup() {
	if [ -n "$daemon" ]; then
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

echo "devices = 0-3" >"$dir/conf"
"$tileopsd" --backend cpu --config "$dir/conf" --manifest "$manifest" \
	--listen "ipc://$dir/tileopsd.sock" --stats "ipc://$dir/stats.sock" \
	--ready-file "$dir/pid" 2>"$dir/log" &
daemon=$!
for _ in $(seq 100); do [ -s "$dir/pid" ] && break; sleep 0.1; done
[ -s "$dir/pid" ] || { echo "bench_collective_cpu: tileopsd did not start:"; cat "$dir/log"; exit 1; }

"$bench" --address "ipc://$dir/tileopsd.sock" --ops all_reduce,all_gather,reduce_scatter \
	--ranks "2 4" --sizes "4096 65536" --json "$dir/out.jsonl"

fail=0
for op in all_reduce all_gather reduce_scatter; do
	for n in 2 4; do
		for size in "4 KiB" "64 KiB"; do
			line=$(grep -F "\"name\":\"$op x$n\",\"kernel\":\"$size bf16\",\"stat\":\"busbw\"" \
				"$dir/out.jsonl" || true)
			v=$(printf '%s' "$line" | sed -n 's/.*"value":\([0-9.]*\).*/\1/p')
			if [ -z "$v" ] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
				echo "bench_collective_cpu: $op x$n, $size: busbw '${v:-missing}'"
				fail=1
			fi
		done
	done
done
[ "$fail" = 0 ] || exit 1
[ "$(grep -c '"stat":"busbw"' "$dir/out.jsonl")" = 12 ] ||
	{ echo "bench_collective_cpu: expected 12 busbw lines"; cat "$dir/out.jsonl"; exit 1; }

if "$bench" --address "ipc://$dir/tileopsd.sock" --ranks 8 --sizes 4096 2>"$dir/err"; then
	echo "bench_collective_cpu: 8 ranks on a daemon of 4 devices succeeded"
	exit 1
fi
grep -q "serves 4 devices" "$dir/err" ||
	{ echo "bench_collective_cpu: no count in: $(cat "$dir/err")"; exit 1; }
echo "bench_collective_cpu: 12 cases, every busbw > 0"
