/*
 * spin.cu - the diagnostic `spin` op: `blocks` blocks of one warp, each
 * waiting `ns` nanoseconds on the device's timer before block b writes
 * out[b % n] = x[b % n] + 1 (spin.cuh). Elements no block writes (index
 * >= blocks) keep what they held. It stands for a kernel of a known length
 * when dispatch is measured: the time is set by `ns`, not by the data.
 * x and out are packed f32 vectors of the same length; out must not be x.
 */
#include "cuda_common.cuh"
#include "spin.cuh"

namespace
{

__global__ void spin_kernel(const float *x, float *out, int64_t n, uint64_t ns)
{
	tkc::spin_block(x, out, n, ns);
}

bool spin_vector(const tk_tensor *t, int64_t n)
{
	return t->dtype == TK_F32 && t->ndim == 1 && t->shape[0] == n &&
	       (n <= 1 || t->stride[0] == 1);
}

} /* namespace */

extern "C" tk_status tk_cuda_spin(const tk_call *call, void *stream)
{
	if (call->n_in < 1 || call->n_out < 1 || call->in[0].ndim != 1)
		return TK_ERR_UNSUPPORTED;
	int64_t n = call->in[0].shape[0];
	double ns = tk_param_num(call, 0, 5000.0), blocks = tk_param_num(call, 1, 4.0);

	if (!spin_vector(&call->in[0], n) || !spin_vector(&call->out[0], n))
		return TK_ERR_UNSUPPORTED;
	if (!(ns >= 0.0 && ns <= 1e9) || !(blocks >= 1.0 && blocks <= 1024.0))
		return TK_ERR_UNSUPPORTED;
	tkc::launch_begin();
	spin_kernel<<<(unsigned)blocks, tkc::kSpinThreads, 0, static_cast<cudaStream_t>(stream)>>>(
	        static_cast<const float *>(call->in[0].data),
	        static_cast<float *>(call->out[0].data), n, (uint64_t)ns);
	return tkc::launch_status();
}
