/*
 * spin.c - CPU reference of the diagnostic `spin` op: busy-wait `ns`
 * nanoseconds on CLOCK_MONOTONIC, then write out[b % n] = x[b % n] + 1
 * for every block b < `blocks`, as the CUDA kernel does (spin.cuh).
 * Elements no block writes (index >= blocks) keep what they held. The wait
 * is one busy loop, not one per block: the CPU backend runs a call at a
 * time, and the op exists to stand for work of a known length.
 */
#include <time.h>

#include "tk_internal.h"

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int spin_vector(const tk_tensor *t, int64_t n)
{
	return t->dtype == TK_F32 && t->ndim == 1 && t->shape[0] == n &&
	       (n <= 1 || t->stride[0] == 1);
}

tk_status tk_cpu_spin(const tk_call *call)
{
	if (call->n_in < 1 || call->n_out < 1 || call->in[0].ndim != 1)
		return TK_ERR_UNSUPPORTED;
	int64_t n = call->in[0].shape[0];
	double ns = tk_param_num(call, 0, 5000.0), blocks = tk_param_num(call, 1, 4.0);

	if (!spin_vector(&call->in[0], n) || !spin_vector(&call->out[0], n))
		return TK_ERR_UNSUPPORTED;
	if (!(ns >= 0.0 && ns <= 1e9) || !(blocks >= 1.0 && blocks <= 1024.0))
		return TK_ERR_UNSUPPORTED;

	int64_t t0 = monotonic_ns();
	while (monotonic_ns() - t0 < (int64_t)ns) {
	}
	/* Blocks b and b + n write the same value, so each element once is enough. */
	const float *x = call->in[0].data;
	float *out = call->out[0].data;
	int64_t writes = (int64_t)blocks < n ? (int64_t)blocks : n;
	for (int64_t i = 0; i < writes; i++)
		out[i] = x[i] + 1.0f;
	return TK_OK;
}
