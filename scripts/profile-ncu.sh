#!/usr/bin/env bash
# Nsight Compute profiles of the kernels whose targets are not met, on the
# GPU machine, from the packed binaries (.carry/, scripts/gpu-pack.sh).
# Each profile runs a bench under ncu, restricted to one kernel family and
# a few launches, with the sections that say where the time goes: speed of
# light, memory workload, compute pipes, occupancy, launch statistics, warp
# states and schedulers. The clocks are left alone (--clock-control none).
#
# PROFILES picks a subset (default: all):
#   gemm-decode  our GEMM and cuBLASLt on m128 n2112 k7168 (DeepSeek q_a+kv_a)
#   gemm-m1      our GEMM on 1 x 4096 x 14336 (Llama 8B down_proj, M = 1)
#   gemm-large   our GEMM and cuBLASLt on 4096 x 2112 x 7168
#   gemm-f32     our f32 GEMM (simt family) on 128 x 6144 x 4096
#   gemm-m128    our GEMM and cuBLASLt on 128 x 4096 x 4096 (Llama 8B o_proj, M = 128)
#   gemm-m64     our GEMM and cuBLASLt on 64 x 6144 x 4096 (Llama 8B qkv_proj, M = 64)
#   gemm-o64     our GEMM and cuBLASLt on 64 x 4096 x 4096 (Llama 8B o_proj, M = 64)
#   gemm-wide    our GEMM and cuBLASLt on 16 x 28672 x 4096 (Llama 8B gate_up_proj, M = 16)
#   gemm-405b    our GEMM and cuBLASLt on 4096 x 106496 x 16384 (Llama 405B gate_up_proj)
#   gemm-nn      our GEMM and cuBLASLt on 8192^3 with b [K, N] and a bias
#   gemm-nt      our GEMM and cuBLASLt on 8192^3 with b [N, K]
#   gemm-o1      our GEMM and cuBLASLt on 1 x 4096 x 4096 (Llama 8B o_proj, M = 1)
#   gemm-qa1     our GEMM and cuBLASLt on 1 x 2112 x 7168 (DeepSeek q_a+kv_a, M = 1)
#   gemm-70b     our GEMM and cuBLASLt on 128 x 8192 x 8192 (Llama 70B o_proj, M = 128)
#   gemm-70b1    our GEMM and cuBLASLt on 1 x 8192 x 8192 (Llama 70B o_proj, M = 1)
#   prefill      attention_prefill, d128 B4 H32 S4096 non-causal
#   prefill-more the same kernel on d128 causal, d64 B16 H16 S1024 and d256 B4 H16 S4096
#   bmm          our GEMM and cuBLASLt on the bmm b32 2048x2048x128 (attention scores)
#   softmax      softmax of 32768 x 8192 bf16, then of 128 x 128256 bf16 (split)
#   norm         rms_norm of 4096 x 7168 bf16 (DeepSeek-V3 hidden)
#   fp8          quant_fp8_per_token of 4096 x 7168 bf16
#   decode       one row: rms_norm of 1 x 4096 bf16, then add of 1 x 4096 bf16
#   decode-fp8   one token of 8192 bf16: quant_fp8_per_tensor with a given scale,
#                then quant_fp8_per_token
#   norm-compile rms_norm of 32768 x 8192 bf16 (Llama 70B prefill): ours, then
#                torch.compile's kernel on the same shape
#   sum-compile  sum of 32768 x 8192 bf16 rows: ours, then torch.compile's
#   pool2d       avg_pool2d and max_pool2d 2x2 stride 2 of 32 x 64 x 224 x 224 bf16
#   pow          pow of 4096 x 8192 bf16 with a broadcast row (ew_rows2d), then of
#                4096 x 7168 by a same-shape tensor (ew_flat)
# Each writes $OUT/ncu-NAME.txt (the details page) and a log.
set -u
out=${OUT:-/tmp/tileops-out}
mkdir -p "$out"
. "$PWD/scripts/bench-lib.sh"
bench_setup_paths
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
log=$out/ncu.log
: >"$log"
bench_header
tune=$root/deploy/gemm-tune-h200.txt
profiles=${PROFILES:-gemm-decode gemm-m1 gemm-large gemm-f32 gemm-m128 gemm-m64 gemm-wide gemm-405b prefill prefill-more bmm softmax norm fp8 decode decode-fp8 norm-compile sum-compile pool2d pow}
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis
	--section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section LaunchStats
	--section WarpStateStats --section SchedulerStats --section SourceCounters)

# profile NAME KERNEL_REGEX SKIP COUNT -- COMMAND...
profile() {
	local name=$1 regex=$2 skip=$3 count=$4
	shift 5
	echo "==== $name: -k regex:$regex -s $skip -c $count $*" >>"$log"
	timeout "${NCU_LIMIT:-120}" "$ncu" --clock-control none --target-processes all \
		-k "regex:$regex" -s "$skip" -c "$count" "${sections[@]}" \
		--print-units base "$@" >"$out/ncu-$name.txt" 2>>"$log"
	echo "==== rc=$?" >>"$log"
}

has() { case " $profiles " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

gemm=("$bin/tileops-bench-gemm" --manifest "$manifest" --tune "$tune" --no-sass --reps 5)
ours='gemm_sm90|smallm|splitk|gemm_decode'
cublas='nvjet|xmma|cutlass'
# gemm_pair NAME OURS CUBLAS FILTER: the first OURS launches of our GEMM
# kernels, then the first CUBLAS of cuBLASLt's (its candidates in the order
# the bench tries them, the picked one among them), on the workloads FILTER
# picks.
gemm_pair() {
	has "$1" || return 0
	profile "$1" "$ours" 0 "$2" -- "${gemm[@]}" --filter "$4"
	profile "$1-cublas" "$cublas" 0 "$3" -- "${gemm[@]}" --filter "$4"
}
gemm_pair gemm-decode 3 8 "q_a + kv_a proj decode"
gemm_pair gemm-m1 3 6 "down_proj decode m1"
gemm_pair gemm-large 1 6 "q_a + kv_a proj prefill"
gemm_pair gemm-m128 3 6 "o_proj decode m128"
gemm_pair gemm-m64 3 6 "qkv_proj decode m64"
gemm_pair gemm-o64 3 6 "o_proj decode m64"
gemm_pair gemm-wide 3 6 "gate_up_proj decode m16"
gemm_pair gemm-405b 1 4 "405b gate_up_proj prefill"
gemm_pair gemm-nn 1 4 "square with bias"
gemm_pair gemm-nt 1 4 "square 8192^3 nt"
gemm_pair gemm-o1 3 6 "o_proj decode m1"
gemm_pair gemm-qa1 3 6 "q_a + kv_a proj decode, M=1"
gemm_pair gemm-70b 3 6 "70b o_proj decode"
gemm_pair gemm-70b1 3 6 "70b o_proj decode, M=1"
if has gemm-f32; then
	profile gemm-f32 'gemm_simt' 0 1 -- "${gemm[@]}" --filter "qkv_proj decode"
fi
# tileops-bench-prefill --quick runs the six target shapes in order, each
# 14 launches (1 check, 3 warm-up, 10 timed): -s picks one shape's third.
prefill=("$bin/tileops-bench-prefill" --quick --variants d --runs 10)
if has prefill; then
	profile prefill 'prefill_kernel' 2 1 -- "${prefill[@]}"
fi
if has prefill-more; then
	profile prefill-causal 'prefill_kernel' 16 1 -- "${prefill[@]}"
	profile prefill-d64 'prefill_kernel' 30 1 -- "${prefill[@]}"
	profile prefill-d256 'prefill_kernel' 58 1 -- "${prefill[@]}"
fi
gemm_pair bmm 1 4 "attention scores prefill"
# tileops-bench: the copy and the empty kernels come first; -s skips the
# first warm-up calls of the one workload left by --op and --workload.
membound() {
	local name=$1 regex=$2 op=$3 workload=$4
	profile "$name" "$regex" 2 1 -- "$bin/tileops-bench" --op "$op" --workload "$workload" \
		--runs 5
}
if has softmax; then
	membound softmax softmax_vec softmax "wide rows"
	# the 128-row logits take the split kernels (statistics, then the write)
	profile softmax-logits softmax_split 4 2 -- "$bin/tileops-bench" --op softmax \
		--workload "logits decode" --runs 5
fi
has norm && membound norm norm_vec rms_norm "deepseek-v3 hidden"
has fp8 && membound fp8 quant_token quant_fp8_per_token "deepseek-v3 activations"
if has pow; then
	membound pow-broadcast ew_rows2d pow "bias broadcast"
	membound pow-flat ew_flat pow "deepseek-v3 residual"
fi
if has norm-compile; then
	membound norm-70b norm_vec rms_norm "llama3.1-70b prefill"
	cat >"$out/rms_norm_compile.py" <<'PY'
import torch
import torch.nn.functional as F
x = torch.rand(32768, 8192, device="cuda", dtype=torch.bfloat16)
w = torch.rand(8192, device="cuda", dtype=torch.bfloat16)
f = torch.compile(lambda x, w: F.rms_norm(x, (8192,), w, 1e-5))
for _ in range(4):
    f(x, w)
torch.cuda.synchronize()
PY
	profile norm-70b-compile triton 2 1 -- python3 "$out/rms_norm_compile.py"
fi
if has sum-compile; then
	membound sum-wide reduce_row sum "wide rows"
	cat >"$out/sum_compile.py" <<'PY'
import torch
x = torch.rand(32768, 8192, device="cuda", dtype=torch.bfloat16)
f = torch.compile(lambda x: torch.sum(x, dim=-1))
for _ in range(4):
    f(x)
torch.cuda.synchronize()
PY
	profile sum-wide-compile triton 2 1 -- python3 "$out/sum_compile.py"
fi
if has pool2d; then
	membound avg-pool2d pool avg_pool2d "vision stem"
	membound max-pool2d pool max_pool2d "vision stem"
fi
if has decode-fp8; then
	membound decode-fp8-tensor quant_tensor quant_fp8_per_tensor "one token, given scale"
	membound decode-fp8-token quant_token quant_fp8_per_token "llama3.1-70b one token"
fi
if has decode; then
	membound decode-norm norm_vec rms_norm "llama3.1-8b decode"
	membound decode-add ew_flat add "llama3.1-8b one token"
fi

ls -la "$out" >>"$log"
