#!/usr/bin/env bash
# bench-python.sh - the Python package's two speed targets on the GPU
# machine, each round against one CUDA tileopsd:
#   client/python/bench/bench_overhead.py   the per-op time of a small op
#       (add and rms_norm of 1 x 4096 bf16) called from Python through
#       tileopsd, pipelined, against the same op in eager PyTorch;
#   client/python/examples/llama_decode_layer.py   a Llama 3.1 8B decoder
#       layer with torch-owned weights, KV cache and activations at decode
#       (batch BATCHES, default "1 32"; a cache of CTX tokens, 1024), its
#       time a step through tileopsd and in plain PyTorch;
#   tileops-bench-layer   the C client's single ops and plan of the same
#       layer's shapes (scripts/bench-layer.sh says what it runs).
# Two rounds: tileopsd and the Python processes under an NVIDIA MPS server,
# as docs/python.md says to run torch beside tileopsd (the GPU runs both
# processes' kernels side by side), then without one (the GPU time-slices
# between their contexts). MPS=0 runs the second round alone; MPS=1 the
# first alone.
# Results: $OUT/python.md (every program's output lines that carry a
# figure, under the round's heading) and $OUT/python.log.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
log=$out/python.log
: >"$log"
run=$(mktemp -d /tmp/tileops-python.XXXXXX)
trap 'bench_stop_daemon; bench_stop_mps; rm -rf "$run"' EXIT
bench_header
pyp=$root/client/python
python3 -c 'import pytest' 2>/dev/null || pyp=$pyp:$pack/pylib
export PYTHONPATH=$pyp PYTHONDONTWRITEBYTECODE=1 TILEOPS_LIBRARY=$pack/lib/libtileops.so.0

# One round: the daemon, the two per-op benches, the decode layer at each
# batch and once with --breakdown, the C client's layer; then the daemon stops.
round() {
	echo "## round: $1" >>"$log"
	if ! bench_start_daemon; then
		echo "tileopsd did not start" >>"$log"
		cat "$run/tileopsd.log" >>"$log"
		failed=1
		return
	fi
	grep -E "MPS|time-slices" "$run/tileopsd.log" >>"$log"
	for op in add rms_norm; do
		bench_step timeout 120 python3 "$root/client/python/bench/bench_overhead.py" \
			--address "$addr" --op "$op"
	done
	for b in ${BATCHES:-1 32}; do
		bench_step timeout 180 python3 "$root/client/python/examples/llama_decode_layer.py" \
			--address "$addr" --device cuda --batch "$b" --hidden 4096 --heads 32 --kv-heads 8 \
			--inter 14336 --ctx "${CTX:-1024}" --steps "${PY_STEPS:-200}"
	done
	# Where a batch-1 step's host time goes (the op calls, the two event calls, the rest).
	bench_step timeout 180 python3 "$root/client/python/examples/llama_decode_layer.py" \
		--address "$addr" --device cuda --batch 1 --hidden 4096 --heads 32 --kv-heads 8 \
		--inter 14336 --ctx "${CTX:-1024}" --steps "${PY_STEPS:-200}" --breakdown
	bench_step timeout 180 "$bin/tileops-bench-layer" --address "$addr" --runs 200 \
		--batch "$(echo ${BATCHES:-1 32} | tr ' ' ,)"
	bench_stop_daemon
}

if [ "${MPS:-}" != 0 ]; then
	if bench_start_mps; then
		export CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log
		round "tileopsd and the Python processes under MPS"
		bench_stop_mps
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	else
		echo "## round: under MPS: nvidia-cuda-mps-control -d failed" >>"$log"
		failed=1
	fi
fi
[ "${MPS:-}" = 1 ] || round "no MPS (the GPU time-slices between the processes' contexts)"
{
	echo "# The Python package on the GPU, commit $(git rev-parse --short HEAD 2>/dev/null), $(date -u +%F)"
	echo
	grep -E '^## round|^\{|per step|max \||PASS|FAIL|layer|us|MPS|time-slices' "$log" |
		grep -v '^====' | head -240
} >"$out/python.md"
[ "$failed" = 0 ]
