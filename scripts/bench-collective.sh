#!/usr/bin/env bash
# The collective bench on the GPU machine (docs/perf.md, "Several GPUs"):
# all_reduce bus bandwidth through tileopsd (tileops-bench-collective)
# against torch.distributed with NCCL (tools/bench/collective_torch.py under
# torchrun) in the same run, for N = 2, 4 and 8 GPUs, as many of them as the
# machine has (nvidia-smi -L). For each N: a tileopsd with `devices = 0-(N-1)`,
# the bench over N ranks, the daemon stopped, then the baseline on N
# processes. The target: >= 0.95x torch's busbw at 64 MiB and more.
#
# Run from the repository root with what scripts/gpu-pack.sh packed
# (tileopsd, tileops-bench-collective). Results go to $OUT: collective.jsonl
# (ours), collective_torch.jsonl (the baseline), collective.log (every
# program's output and the daemons' logs) and collective.md (per N and size:
# ours, torch, the ratio and whether the target is met). SIZES (bytes per
# rank, default 1 MiB to 1 GiB by powers of 4) and OPS (default all_reduce)
# pick the cases; COLLECTIVE_ARGS adds options to both sides (--window,
# --rounds). With one GPU there is nothing to measure: it says so and exits 0.
#
# NVLink multicast (NVLS) stays off on both sides: NCCL_NVLS_ENABLE=0.
#
# BACKEND=cpu runs only tileopsd on the CPU backend (`devices = 0-3`, N = 2
# and 4, small sizes): the path end to end, no baseline, figures not to keep.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
export NCCL_NVLS_ENABLE=0
json=$out/collective.jsonl
tjson=$out/collective_torch.jsonl
log=$out/collective.log
table=$out/collective.md
: >"$json"
: >"$tjson"
: >"$log"
: >"$table"
run=$(mktemp -d /tmp/tileops-collective.XXXXXX)
trap 'bench_stop_daemon; rm -rf "$run"' EXIT
trap 'exit 130' INT TERM
ops=${OPS:-all_reduce}
big=$((64 << 20))

if [ "${BACKEND:-cuda}" = cpu ]; then
	export TILEOPS_BENCH_BACKEND=cpu
	echo "devices = 0-3" >"$run/cpu.conf"
	if ! bench_start_daemon --config "$run/cpu.conf"; then
		cat "$run/tileopsd.log" >>"$log"
		echo "tileopsd (CPU backend, devices = 0-3) did not start; see $log"
		exit 1
	fi
	# shellcheck disable=SC2086
	bench_step "$bin/tileops-bench-collective" --address "$addr" --ops "$ops" --ranks "2 4" \
		--sizes "${SIZES:-65536 1048576}" --json "$json" ${COLLECTIVE_ARGS:-}
	bench_stop_daemon
	{
		echo "## Collectives on the CPU backend (devices = 0-3): an end-to-end check, not figures"
		echo
		awk '/^\| op \|/{t=""} /^\|/{t=t $0 "\n"} END{printf "%s", t}' "$log"
	} >"$table"
	cat "$table"
	exit "$failed"
fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
bench_header
if [ "$gpus" -lt 2 ]; then
	echo "One GPU (nvidia-smi -L lists $gpus): nothing to measure, a collective needs two." |
		tee "$table"
	exit 0
fi
torchrun=$(command -v torchrun || echo "python3 -m torch.distributed.run")
for n in 2 4 8; do
	[ "$n" -le "$gpus" ] || continue
	conf=$run/devices-$n.conf
	echo "devices = 0-$((n - 1))" >"$conf"
	if bench_start_daemon --config "$conf"; then
		# shellcheck disable=SC2086
		bench_step "$bin/tileops-bench-collective" --address "$addr" --ops "$ops" \
			--ranks "$n" ${SIZES:+--sizes "$SIZES"} --json "$json" ${COLLECTIVE_ARGS:-}
	else
		echo "tileopsd did not start (devices = 0-$((n - 1)))" >>"$log"
		failed=1
	fi
	bench_stop_daemon
	# shellcheck disable=SC2086
	bench_step $torchrun --standalone --nproc-per-node "$n" \
		"$root/tools/bench/collective_torch.py" --ops "$ops" ${SIZES:+--sizes "$SIZES"} \
		--json "$tjson" ${COLLECTIVE_ARGS:-}
done

# Ours beside torch's, per op, N and size, from the JSON lines of both.
cat "$json" "$tjson" | awk -v big="$big" '
'"$bench_awk_field"'
# "64 MiB bf16" in bytes
function bytes(kernel,   a) {
	split(kernel, a, " ")
	return a[1] * (a[2] == "GiB" ? 2^30 : a[2] == "MiB" ? 2^20 : a[2] == "KiB" ? 2^10 : 1)
}
field("stat") == "busbw" {
	key = field("name") "|" field("kernel")
	if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
	if (field("bench") == "collective") ours[key] = field("value"); else torch[key] = field("value")
}
END {
	print "## Collectives: busbw through tileopsd against torch.distributed (GB/s)"
	print ""
	print "| op x ranks | size per rank | ours | torch | ratio | target (>= 0.95x at >= 64 MiB) |"
	print "| --- | --- | ---: | ---: | ---: | --- |"
	for (i = 1; i <= n; i++) {
		split(keys[i], kv, "|")
		o = keys[i] in ours ? sprintf("%.1f", ours[keys[i]]) : "-"
		t = keys[i] in torch ? sprintf("%.1f", torch[keys[i]]) : "-"
		r = "-"; verdict = "no figures"
		if ((keys[i] in ours) && (keys[i] in torch) && torch[keys[i]] > 0) {
			ratio = ours[keys[i]] / torch[keys[i]]
			r = sprintf("%.3f", ratio)
			verdict = bytes(kv[2]) < big ? "below 64 MiB: not a target" : (ratio >= 0.95 ? "met" : "missed")
		}
		printf "| %s | %s | %s | %s | %s | %s |\n", kv[1], kv[2], o, t, r, verdict
	}
}' >"$table"
cat "$table"
exit "$failed"
