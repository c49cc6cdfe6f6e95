#!/usr/bin/env bash
# gpu-run.sh - on a GPU machine, from a checkout's root, with what
# scripts/gpu-pack.sh packed into $TILEOPS_PACK (default .carry/): the GPU
# tests (test_gpu_*: each kernel family's own cases; parity_*: every CUDA
# kernel against its CPU reference on the manifest's workloads), the example
# and the integration suites against tileopsd on the CUDA backend
# (TILEOPS_TEST_BACKEND=cuda, so the daemons they start run on the GPU
# too), then the benches named in $TILEOPS_GPU_BENCH (a space-separated
# list of commands, run from the packed bin/). Logs and a summary go to
# $OUT (default /tmp/tileops-out). Each step is cut off after STEP_LIMIT
# seconds (default 240; rc 124 in the summary). INTEGRATION names a
# subset of the integration suites.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
root=$PWD
# The packed binaries (scripts/gpu-pack.sh): TILEOPS_PACK, else .carry/.
pack=${TILEOPS_PACK:-$root/.carry}
if [ -f "$pack/pack.tar.xz" ] && [ ! -d "$pack/bin" ]; then
	tar -C "$pack" -xJf "$pack/pack.tar.xz"
fi
bin=$pack/bin
# The manifest the binaries were built with travels with them.
manifest=$root/manifest
[ -d "$pack/manifest" ] && manifest=$pack/manifest
export LD_LIBRARY_PATH=$pack/lib
log=$out/gpu-run.log
summary=$out/summary.txt
: >"$log"
: >"$summary"

step() {
	local name=$1
	shift
	local t0 t1 rc
	t0=$(date +%s.%N)
	echo "==== $name: $*" >>"$log"
	timeout "${STEP_LIMIT:-240}" "$@" >>"$log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	printf '%-34s rc=%-3d %6.1f s\n' "$name" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" >>"$summary"
	return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
	--format=csv >>"$summary" 2>&1

# GPU_KTESTS=0 leaves the kernel tests out (gpu-session.sh's ktests step
# runs them side by side instead).
if [ "${GPU_KTESTS:-1}" != 0 ]; then
	for t in "$bin"/test_gpu_* "$bin"/parity_*; do
		[ -x "$t" ] && step "$(basename "$t")" "$t" --jobs=1
	done
fi

run=/tmp/tileops-run
rm -rf "$run" && mkdir -p "$run"
"$bin/tileopsd" --backend cuda --listen "ipc://$run/tileopsd.sock" \
	--stats "ipc://$run/stats.sock" --manifest "$manifest" \
	--ready-file "$run/tileopsd.pid" --log-level info >"$out/tileopsd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 200); do
	[ -s "$run/tileopsd.pid" ] && break
	sleep 0.1
done
export TILEOPS_ADDRESS=ipc://$run/tileopsd.sock
export TILEOPS_STATS_ADDRESS=ipc://$run/stats.sock
export TILEOPS_TEST_RUNDIR=$run TILEOPS_TEST_BACKEND=cuda
export TILEOPSD=$bin/tileopsd TILEOPS_MANIFEST=$manifest

step example_f32 "$bin/tileops-example-mlp" --dtype f32
step example_bf16_llama8b "$bin/tileops-example-mlp" --dtype bf16 --tokens 16 --hidden 4096 \
	--inter 14336
step example_f16 "$bin/tileops-example-mlp" --dtype f16
# The model example: the tiny config, then the 8B one with its logits checked
# against the CPU reference for the first steps.
step example_llama_tiny "$bin/tileops-example-llama" --tiny
step example_llama_8b "$bin/tileops-example-llama" --8b --batch 4 --prompt 16 --gen 8 \
	--check-steps 2
# INTEGRATION names a subset of the suites (e.g. "integration_plans").
for t in ${INTEGRATION:-$(cd "$bin" && echo integration_*)}; do
	t=$bin/$(basename "$t")
	[ -x "$t" ] && step "$(basename "$t")" "$t" --jobs=1
done
for cmd in ${TILEOPS_GPU_BENCH:-}; do
	step "bench $cmd" bash -c "cd '$bin' && ./$cmd"
done
"$bin/tileops-stat" --raw >"$out/stats.json" 2>&1
kill -TERM "$daemon"
wait "$daemon"
echo "tileopsd exit status after SIGTERM: $?" >>"$summary"
cat "$summary"
