#!/bin/bash
# tileopsd-node.sh - one tileopsd per GPU of this node, as one container.
#
#   tileopsd-node.sh [TILEOPSD OPTIONS...]   start and supervise the daemons
#   tileopsd-node.sh --ready                 exit 0 when every GPU's daemon is ready
#   tileopsd-node.sh --alive                 exit 0 when every GPU's stats socket answers
#
# GPU i gets its own folder $TILEOPS_RUN_DIR/gpu<i> (default /run/tileopsd)
# with tileopsd.sock, stats.sock and the arena folder `arenas` (arena_dir in
# the config); a client picks the GPU by its socket:
#   TILEOPS_ADDRESS=ipc:///run/tileopsd/gpu<i>/tileopsd.sock
# Each daemon reads the same config file and gets --device, --listen and
# --stats here; further options are passed to every daemon.
#
# SIGTERM and SIGINT are passed on to every daemon (each drains its work and
# exits); SIGHUP too (each reloads its config). When one daemon exits on its
# own, the others are stopped and the script exits with the first one's
# status, so the kubelet restarts the container with a full set.
#
# The GPUs: TILEOPS_GPUS (a count, for tests and for nodes without
# nvidia-smi), else the lines of `nvidia-smi -L`, else the /dev/nvidia<N>
# nodes. CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's device i the GPU that
# nvidia-smi lists as i.
set -u

run=${TILEOPS_RUN_DIR:-/run/tileopsd}
conf=${TILEOPS_CONFIG:-/etc/tileops/tileopsd.conf}
tileopsd=${TILEOPSD:-tileopsd}
stat=${TILEOPS_STAT:-tileops-stat}
export CUDA_DEVICE_ORDER=PCI_BUS_ID

say() { echo "tileopsd-node: $*" >&2; }

# The number of GPUs, on stdout.
count_gpus() {
	local n
	if [ -n "${TILEOPS_GPUS:-}" ]; then
		echo "$TILEOPS_GPUS"
		return
	fi
	if n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]'); then
		echo "$n"
		return
	fi
	n=0
	for dev in /dev/nvidia[0-9]*; do
		[ -e "$dev" ] && n=$((n + 1))
	done
	echo "$n"
}

# probe OPTION: run tileops-stat OPTION on every GPU's stats socket listed
# in $run/gpus at start; fail at the first that does not answer.
probe() {
	local list i
	list=$(cat "$run/gpus" 2>/dev/null) || { say "$run/gpus is missing: not started"; exit 1; }
	for i in $list; do
		"$stat" "$@" --address "ipc://$run/gpu$i/stats.sock" >/dev/null ||
			{ say "GPU $i: tileops-stat $* failed"; exit 1; }
	done
	exit 0
}

case "${1:-}" in
--ready) probe --check ;;
--alive) probe --raw ;;
esac

n=$(count_gpus)
if ! [ "$n" -ge 1 ] 2>/dev/null; then
	say "no GPU found (nvidia-smi -L, /dev/nvidia*); is the pod's runtimeClass nvidia?"
	exit 1
fi

pids=()
gpu_of=()
stopping=0
forward() {
	local p
	for p in "${pids[@]}"; do
		kill -s "$1" "$p" 2>/dev/null
	done
}
trap 'stopping=1; forward TERM' TERM INT
trap 'forward HUP' HUP

list=""
for ((i = 0; i < n; i++)); do
	dir=$run/gpu$i
	mkdir -p "$dir" && chmod 0750 "$dir" || exit 1
	"$tileopsd" --config "$conf" --device "$i" --listen "ipc://$dir/tileopsd.sock" \
		--stats "ipc://$dir/stats.sock" "$@" &
	pids+=($!)
	gpu_of[$!]=$i
	list="$list $i"
done
# What the probes check; written after every daemon was started.
echo "$list" >"$run/gpus.tmp" && mv "$run/gpus.tmp" "$run/gpus"
say "started ${#pids[@]} daemons (GPUs$list)"

# Wait for the first daemon to exit; a trapped signal interrupts the wait
# without one, and the loop waits again.
status=0
first=""
while [ -z "$first" ]; do
	done_pid=""
	wait -n -p done_pid "${pids[@]}"
	rc=$?
	[ -n "${done_pid:-}" ] || continue
	first=$done_pid
	status=$rc
done
if [ "$stopping" = 0 ]; then
	say "tileopsd for GPU ${gpu_of[$first]} exited with status $status; stopping the others"
	stopping=1
	forward TERM
else
	say "tileopsd for GPU ${gpu_of[$first]} stopped with status $status"
fi
# The others drain (each within its stop timeout); keep the first failure.
for p in "${pids[@]}"; do
	[ "$p" = "$first" ] && continue
	# A trapped signal interrupts a wait before the exit: wait again until
	# it is gone, then once more for the status bash kept.
	while kill -0 "$p" 2>/dev/null; do
		wait "$p"
	done
	wait "$p"
	rc=$?
	if [ "$rc" != 0 ] && [ "$status" = 0 ]; then
		say "tileopsd for GPU ${gpu_of[$p]} exited with status $rc"
		status=$rc
	fi
done
rm -f "$run/gpus"
exit "$status"
