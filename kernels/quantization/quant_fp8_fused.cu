/*
 * quant_fp8_fused.cu - the fp8 e4m3 quantizations that feed gemm_fp8 beyond
 * one scale per tensor or row (definitions: quant_fp8_fused.c; both
 * backends give the same codes and scales):
 * - quant_fp8_per_token_group: one warp a group (64 or 128 values held in
 *   registers), its amax by shuffles, the scale and the codes.
 * - rms_norm_quant_fp8: one block a row; the mean square summed in double
 *   and rounded to f32 once as the reference does, so the f32 row, its
 *   amax and the codes come out the same; the row is read three times
 *   (mean square, amax, codes), the later reads from L1/L2.
 * Rows must be evenly spaced (tk_matrix_view); other views are refused.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <float.h>

#include "cuda_common.cuh"

namespace
{

using namespace tkc;

__device__ __forceinline__ uint8_t code_of(float v, float scale, float inv)
{
	return scale > 0.0f ? (uint8_t)__nv_cvt_float_to_fp8(v * inv, __NV_SATFINITE, __NV_E4M3)
	                    : 0;
}

__device__ __forceinline__ float inv_of(float scale)
{
	return fminf(1.0f / scale, FLT_MAX);
}

/* ---- per token group --------------------------------------------------------------------- */

struct GroupArgs {
	const void *x;
	uint8_t *q;
	float *scale;
	int64_t rows, d, ldx, ldq, gs, groups;
};

template <typename T, int VPL> __global__ void __launch_bounds__(256) group_quant(GroupArgs p)
{
	const int lane = threadIdx.x & 31;
	const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
	const T *x = static_cast<const T *>(p.x);

	for (int64_t w = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
	     w < p.rows * p.groups; w += warps) {
		const int64_t r = w / p.groups, gi = w % p.groups, j0 = gi * p.gs;
		const int64_t len = min(p.gs, p.d - j0);
		float v[VPL], m = 0.0f;
#pragma unroll
		for (int i = 0; i < VPL; i++) {
			int64_t j = lane + 32 * i;
			v[i] = j < len ? to_f32(x[r * p.ldx + j0 + j]) : 0.0f;
			m = fmaxf(m, fabsf(v[i]));
		}
		m = warp_max(m);
		const float s = m / 448.0f, inv = inv_of(s);
		if (lane == 0)
			p.scale[w] = s;
#pragma unroll
		for (int i = 0; i < VPL; i++) {
			int64_t j = lane + 32 * i;
			if (j < len)
				p.q[r * p.ldq + j0 + j] = code_of(v[i], s, inv);
		}
	}
}

template <typename T> cudaError_t group_launch(const GroupArgs &p, cudaStream_t s)
{
	unsigned grid = grid_for(p.rows * p.groups, 8);

	if (p.gs == 64)
		group_quant<T, 2><<<grid, 256, 0, s>>>(p);
	else
		group_quant<T, 4><<<grid, 256, 0, s>>>(p);
	return cudaGetLastError();
}

/* ---- rms_norm then per-token quantization ----------------------------------------------- */

struct RmsArgs {
	const void *x, *w;
	const float *given;
	uint8_t *q;
	float *scale;
	int64_t rows, d, ldx, ldq;
	float eps;
};

constexpr int R_THREADS = 256;

/* The block's sum (double) or max (float) of each thread's value; every thread gets it. */
__device__ double block_sum(double v, double *sh)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	double t = 0.0;
	for (int i = 0; i < R_THREADS / 32; i++)
		t += sh[i];
	return t;
}

__device__ float block_max(float v, double *sh)
{
	v = warp_max(v);
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = 0.0f;
	for (int i = 0; i < R_THREADS / 32; i++)
		t = fmaxf(t, (float)sh[i]);
	return t;
}

template <typename T> __global__ void __launch_bounds__(R_THREADS) rms_quant(RmsArgs p)
{
	__shared__ double sh[R_THREADS / 32];
	const T *x = static_cast<const T *>(p.x), *w = static_cast<const T *>(p.w);

	for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
		const T *xr = x + r * p.ldx;
		double ss = 0.0;
		for (int64_t j = threadIdx.x; j < p.d; j += R_THREADS) {
			double v = to_f32(xr[j]);
			ss += v * v;
		}
		ss = block_sum(ss, sh);
		const float rr = 1.0f / sqrtf((p.d > 0 ? (float)(ss / (double)p.d) : 0.0f) + p.eps);
		float s;
		if (p.given) {
			s = p.given[0];
		} else {
			float m = 0.0f;
			for (int64_t j = threadIdx.x; j < p.d; j += R_THREADS)
				m = fmaxf(m, fabsf(to_f32(xr[j]) * rr * to_f32(w[j])));
			s = block_max(m, sh) / 448.0f;
		}
		const float inv = inv_of(s);
		if (threadIdx.x == 0)
			p.scale[r] = s;
		for (int64_t j = threadIdx.x; j < p.d; j += R_THREADS)
			p.q[r * p.ldq + j] = code_of(to_f32(xr[j]) * rr * to_f32(w[j]), s, inv);
		__syncthreads();
	}
}

/* x and q as matrices of evenly spaced rows of the same shape. */
bool rows_of(const tk_call *call, int64_t *rows, int64_t *d, int64_t *ldx, int64_t *ldq)
{
	int64_t qr, qd;

	return call->n_in >= 1 && call->n_out >= 2 && call->out[0].dtype == TK_FP8_E4M3 &&
	       call->out[1].dtype == TK_F32 && tk_is_contiguous(&call->out[1]) &&
	       tk_matrix_view(&call->in[0], rows, d, ldx) == TK_OK &&
	       tk_matrix_view(&call->out[0], &qr, &qd, ldq) == TK_OK && qr == *rows && qd == *d;
}

} /* namespace */

extern "C" tk_status tk_cuda_quant_fp8_per_token_group(const tk_call *call, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	GroupArgs p = {};
	tk_dtype dt = call->in[0].dtype;

	if (!rows_of(call, &p.rows, &p.d, &p.ldx, &p.ldq) ||
	    (dt != TK_BF16 && dt != TK_F16 && dt != TK_F32))
		return TK_ERR_UNSUPPORTED;
	p.gs = (int64_t)tk_param_num(call, 0, 128);
	if (p.gs != 64 && p.gs != 128)
		return TK_ERR_UNSUPPORTED;
	p.groups = (p.d + p.gs - 1) / p.gs;
	if (tk_numel(&call->out[1]) != p.rows * p.groups)
		return TK_ERR_UNSUPPORTED;
	if (p.rows * p.groups == 0)
		return TK_OK;
	p.x = call->in[0].data;
	p.q = static_cast<uint8_t *>(call->out[0].data);
	p.scale = static_cast<float *>(call->out[1].data);
	launch_begin();
	cudaError_t e = dt == TK_BF16  ? group_launch<__nv_bfloat16>(p, s)
	                : dt == TK_F16 ? group_launch<__half>(p, s)
	                               : group_launch<float>(p, s);
	return e == cudaSuccess ? launch_status() : TK_ERR_LAUNCH;
}

extern "C" tk_status tk_cuda_rms_norm_quant_fp8(const tk_call *call, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	RmsArgs p = {};
	tk_dtype dt = call->in[0].dtype;

	if (call->n_in < 2 || !rows_of(call, &p.rows, &p.d, &p.ldx, &p.ldq) ||
	    call->in[1].dtype != dt || !tk_is_vector_of(&call->in[1], p.d) ||
	    tk_numel(&call->out[1]) != p.rows)
		return TK_ERR_UNSUPPORTED;
	if (dt != TK_BF16 && dt != TK_F16 && dt != TK_F32)
		return TK_ERR_UNSUPPORTED;
	if (tk_has_input(call, 2)) {
		if (call->in[2].dtype != TK_F32 || tk_numel(&call->in[2]) != 1)
			return TK_ERR_UNSUPPORTED;
		p.given = static_cast<const float *>(call->in[2].data);
	}
	if (p.rows == 0)
		return TK_OK;
	p.x = call->in[0].data;
	p.w = call->in[1].data;
	p.q = static_cast<uint8_t *>(call->out[0].data);
	p.scale = static_cast<float *>(call->out[1].data);
	p.eps = (float)tk_param_num(call, 0, 1e-6);
	unsigned grid = (unsigned)(p.rows < 65535 ? p.rows : 65535);
	launch_begin();
	if (dt == TK_BF16)
		rms_quant<__nv_bfloat16><<<grid, R_THREADS, 0, s>>>(p);
	else if (dt == TK_F16)
		rms_quant<__half><<<grid, R_THREADS, 0, s>>>(p);
	else
		rms_quant<float><<<grid, R_THREADS, 0, s>>>(p);
	return launch_status();
}
