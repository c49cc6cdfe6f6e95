#!/usr/bin/env bash
# One GPU-machine session: the tests (scripts/gpu-run.sh), the roofline bench
# of the memory-bound ops, the dispatch bench (scripts/bench-dispatch.sh), and
# PyTorch on the same workloads. Everything lands in $OUT/results.tar.gz;
# the summary and the tables are also copied to $OUT (the device tool brings
# back at most eight files). STEPS picks a subset:
#   fairness collective ktests tests bench dispatch layer torch tune gemm membound
#   decode prefill scaling ncu llama moe fp8 python pybench llamaprof
set -u
root=$PWD
# The packed binaries (scripts/gpu-pack.sh): TILEOPS_PACK, else .carry/.
pack=${TILEOPS_PACK:-$root/.carry}
out=${OUT:-/tmp/tileops-out}
res=/tmp/tileops-results
rm -rf "$res" && mkdir -p "$res"
steps=${STEPS:-tests bench dispatch torch}
if [ -f "$pack/pack.tar.xz" ] && [ ! -d "$pack/bin" ]; then
	tar -C "$pack" -xJf "$pack/pack.tar.xz"
fi
# Binaries rebuilt after the pack was made replace the packed ones (NAME.xz
# compressed, the others as they are).
if [ -d "$pack/override" ]; then
	for f in "$pack/override/"*; do
		case $f in
		*.xz) xz -dc "$f" >"$pack/bin/$(basename "$f" .xz)" &&
			chmod +x "$pack/bin/$(basename "$f" .xz)" ;;
		*) cp "$f" "$pack/bin/" ;;
		esac
	done
fi
export LD_LIBRARY_PATH=$pack/lib:/usr/local/cuda/lib64
bin=$pack/bin
export TILEOPS_MANIFEST=$pack/manifest
# The kernel tests that start a daemon of their own (test_gpu_ipc) run the packed one.
export TILEOPSD=$bin/tileopsd TILEOPS_TEST_BACKEND=cuda

has() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# fairness: one client's short ops beside another's long ones, with
# session_queue_us at its default and off (scripts/bench-fairness.sh).
# First, while nothing else has warmed or loaded the GPU.
if has fairness; then
	OUT=$res/fairness timeout "${LIMIT_FAIRNESS:-150}" bash "$root/scripts/bench-fairness.sh" \
		>/dev/null 2>&1
	echo "bench-fairness.sh rc=$?" >>"$out/summary.txt"
	cp "$res/fairness/fairness.md" "$out/fairness.md" 2>/dev/null
fi
# collective: all_reduce bus bandwidth through tileopsd against
# torch.distributed on 2, 4 and 8 GPUs, as many as there are
# (scripts/bench-collective.sh; one GPU: nothing to measure).
if has collective; then
	OUT=$res/collective timeout "${LIMIT_COLLECTIVE:-400}" \
		bash "$root/scripts/bench-collective.sh" >/dev/null 2>&1
	echo "bench-collective.sh rc=$?" >>"$out/summary.txt"
	cp "$res/collective/collective.md" "$out/collective.md" 2>/dev/null
fi
# ktests: only the kernel test binaries (test_gpu_*, parity_*), all at once
# (they check correctness, not speed, so they may share the GPU), each
# capped at KTEST_LIMIT seconds; one log each, a line per binary in the
# summary. KTESTS names a subset (e.g. "test_gpu_gemm parity_gemm").
if has ktests; then
	mkdir -p "$res/ktests"
	# The tests that start a tileopsd of their own (tests/integration/daemon2.c
	# gives it 20 s to be ready) run one at a time after the others: beside
	# twenty kernel tests loading the GPU and every core, a daemon's start can
	# take longer than that.
	own_daemon=" test_gpu_devices test_gpu_events test_gpu_ipc test_gpu_collective "
	later=""
	for t in ${KTESTS:-$(cd "$bin" && echo test_gpu_* parity_*)}; do
		n=$(basename "$t")
		t=$bin/$n
		case $own_daemon in *" $n "*) later="$later $n"; continue ;; esac
		( timeout "${KTEST_LIMIT:-240}" "$t" --jobs=2 >"$res/ktests/$n.log" 2>&1
		  echo "$n rc=$?" >"$res/ktests/$n.rc" ) &
	done
	wait
	for n in $later; do
		timeout "${KTEST_LIMIT:-240}" "$bin/$n" --jobs=1 >"$res/ktests/$n.log" 2>&1
		echo "$n rc=$?" >"$res/ktests/$n.rc"
	done
	cat "$res/ktests"/*.rc >>"$out/summary.txt"
	for f in "$res/ktests"/*.log; do
		echo "== $(basename "$f")"
		grep -E "Synthesis|FAIL|Assertion|rel|error" "$f" | head -40
	done >"$out/ktests.txt" 2>&1
fi
if has tests; then
	OUT=$res/tests bash "$root/scripts/gpu-run.sh" >/dev/null 2>&1
	cat "$res/tests/summary.txt" >>"$out/summary.txt"
	# The failures' output, where the whole log would be too long to bring back.
	grep -E "^====|FAIL|Assertion|\[----\]" "$res/tests/gpu-run.log" | head -400 >"$out/tests.txt"
fi
# python: the Python package's GPU suite (client/python/tests, -m gpu) with
# the packed libtileops.so and a CUDA tileopsd; pytest from the pack's
# pylib/ where the machine's python has none.
if has python; then
	pyp=$root/client/python
	python3 -c 'import pytest' 2>/dev/null || pyp=$pyp:$pack/pylib
	PYTHONPATH=$pyp PYTHONDONTWRITEBYTECODE=1 TILEOPS_LIBRARY=$pack/lib/libtileops.so.0 \
		TILEOPSD=$bin/tileopsd timeout "${LIMIT_PYTHON:-240}" python3 -m pytest -q \
		-p no:cacheprovider -rs -m gpu "$root/client/python/tests" >"$res/python_gpu.log" 2>&1
	echo "python_gpu rc=$?" >>"$out/summary.txt"
	tail -60 "$res/python_gpu.log" >"$out/python_gpu.txt"
fi
# pybench: the Python package's per-op overhead and its decode layer with
# torch-owned tensors against PyTorch and the C client (scripts/bench-python.sh).
if has pybench; then
	OUT=$res/pybench timeout "${LIMIT_PYBENCH:-400}" bash "$root/scripts/bench-python.sh" \
		>/dev/null 2>&1
	echo "bench-python.sh rc=$?" >>"$out/summary.txt"
	cp "$res/pybench/python.md" "$out/python.md" 2>/dev/null
fi
# llamaprof: a decode step of the 8B model kernel by kernel under Nsight
# Compute (scripts/profile-llama.sh).
if has llamaprof; then
	OUT=$res/llamaprof timeout "${LIMIT_LLAMAPROF:-300}" bash "$root/scripts/profile-llama.sh" \
		>/dev/null 2>&1
	echo "profile-llama.sh rc=$?" >>"$out/summary.txt"
	cp "$res/llamaprof/llama-profile.txt" "$out/" 2>/dev/null
fi
if has bench; then
	mkdir -p "$res/bench"
	"$bin/tileops-bench" --list "$res/bench/workloads.json" >/dev/null 2>&1
	# shellcheck disable=SC2086
	timeout 420 "$bin/tileops-bench" ${BENCH_ARGS:-} --json "$res/bench/tileops.json" \
		>"$res/bench/tileops.md" 2>"$res/bench/tileops.log"
	echo "tileops-bench rc=$?" >>"$out/summary.txt"
	cp "$res/bench/tileops.md" "$out/tileops.md"
fi
if has dispatch; then
	# The serving-engine rows (P up to 16, in rounds) make this the longest bench step.
	OUT=$res/dispatch timeout "${LIMIT_DISPATCH:-560}" bash "$root/scripts/bench-dispatch.sh" \
		>/dev/null 2>&1
	echo "bench-dispatch rc=$?" >>"$out/summary.txt"
	cp "$res/dispatch/dispatch.md" "$out/dispatch.md" 2>/dev/null
fi
if has layer; then
	OUT=$res/layer timeout 400 bash "$root/scripts/bench-layer.sh" >/dev/null 2>&1
	echo "bench-layer rc=$?" >>"$out/summary.txt"
	cp "$res/layer/layer.md" "$out/layer.md" 2>/dev/null
fi
# The kernel benches with their own references (cuBLASLt, cuDNN/flash via
# PyTorch); each script writes a markdown table and JSON under its OUT.
bench_step() {
	local name=$1 script=$2 limit=$3
	OUT=$res/$name timeout "$limit" bash "$root/scripts/$script" >"$res/$name.log" 2>&1
	echo "$script rc=$?" >>"$out/summary.txt"
	cat "$res/$name"/*.md >"$out/$name.md" 2>/dev/null
}
# tune before gemm: the GEMM bench then runs with the table just measured.
if has tune; then
	bench_step tune tune-gemm.sh "${LIMIT_TUNE:-300}"
	cp "$res/tune/gemm-tune-h200.txt" "$out/gemm-tune-h200.txt" 2>/dev/null &&
		export TUNE=$res/tune/gemm-tune-h200.txt
fi
has gemm && bench_step gemm bench-gemm.sh "${LIMIT_GEMM:-300}"
has decode && bench_step decode bench-decode.sh "${LIMIT_DECODE:-200}"
has prefill && bench_step prefill bench-prefill.sh "${LIMIT_PREFILL:-300}"
has membound && bench_step membound bench-membound.sh "${LIMIT_MEMBOUND:-300}"
# llama: Llama 3.1 8B end to end through tileopsd against PyTorch
# (scripts/bench-llama.sh); its runs are bounded by STEP_LIMIT and
# TORCH_LIMIT inside, the whole step by LIMIT_LLAMA.
has llama && bench_step llama bench-llama.sh "${LIMIT_LLAMA:-580}"
# moe: the MoE layers of Qwen3-30B-A3B, Mixtral-8x7B and DeepSeek-V2-Lite as
# plans through tileopsd against PyTorch (scripts/bench-moe.sh), the whole
# step bounded by LIMIT_MOE.
has moe && bench_step moe bench-moe.sh "${LIMIT_MOE:-580}"
# fp8: gemm_fp8 against torch._scaled_mm and our bf16 gemm on the manifest's
# fp8 workloads (scripts/bench-fp8.sh), the whole step bounded by LIMIT_FP8.
has fp8 && bench_step fp8 bench-fp8.sh "${LIMIT_FP8:-300}"
# scaling: the many-process dispatch rate under each daemon configuration
# of $CONFIGS (scripts/dispatch-scaling.sh).
if has scaling; then
	OUT=$res/scaling timeout "${LIMIT_SCALING:-240}" bash "$root/scripts/dispatch-scaling.sh" \
		>/dev/null 2>&1
	echo "dispatch-scaling.sh rc=$?" >>"$out/summary.txt"
	cp "$res/scaling/scaling.txt" "$res/scaling/scaling-procs.txt" "$out/" 2>/dev/null
fi
# ncu: Nsight Compute profiles of the kernels short of their targets
# (scripts/profile-ncu.sh; PROFILES picks them).
if has ncu; then
	OUT=$res/ncu timeout "${LIMIT_NCU:-400}" bash "$root/scripts/profile-ncu.sh" \
		>"$res/ncu.stdout" 2>&1
	echo "profile-ncu.sh rc=$?" >>"$out/summary.txt"
fi
if has torch; then
	# From this call's bench, or carried from an earlier call's results.
	if [ ! -f "$res/bench/tileops.json" ] && [ -d "$pack/bench" ]; then
		mkdir -p "$res/bench" && cp "$pack/bench/"*.json "$res/bench/"
	fi
	timeout 560 python3 "$root/tools/bench/torch_baseline.py" \
		--workloads "$res/bench/workloads.json" --json "$res/bench/torch.json" \
		--compile-budget-s "${COMPILE_BUDGET_S:-150}" >"$res/bench/torch.log" 2>&1
	echo "torch_baseline rc=$?" >>"$out/summary.txt"
	python3 "$root/tools/bench/compare.py" "$res/bench/tileops.json" \
		"$res/bench/torch.json" --md "$out/compare.md" --csv "$out/bench-results.csv" \
		--date "$(date -u +%F)" >"$res/bench/compare.txt" 2>&1
	echo "compare rc=$?" >>"$out/summary.txt"
fi
tar -C "$res" -czf "$out/results.tar.gz" .
cat "$out/summary.txt"
