/*
 * parity_gpu.c - one case on the GPU against the CPU reference: device
 * copies of the inputs and of the poisoned outputs, the launch (with the
 * workspace the table entry declares, as tileopsd hands it, and once more
 * without: every kernel must work both ways), and the comparison of every
 * tensor the op writes.
 */
#include "parity/parity.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_util.h"
#include "kernels/tk_test_util.h"

static int written_index(const parity_run *r, int i)
{
	for (int k = 0; k < r->n_written; k++)
		if (r->written[k] == i)
			return k;
	return -1;
}

/*
 * Launch r's call on the GPU from the state before any run (inputs as
 * generated, outputs poisoned) and copy every written tensor back into
 * got[k] (span bytes each, laid out as the host's).
 */
static void gpu_launch(const parity_run *r, int with_workspace, unsigned char **got,
                       const char *name)
{
	const manifest_op *op = r->c->op;
	void *dev[PARITY_MAX_T] = { 0 };
	tk_call dc = r->call;
	cudaStream_t stream;
	cudaError_t e;

	for (int i = 0; i < op->n_in + op->n_out; i++) {
		size_t span = r->given[i] ? tt_span_bytes(&r->t[i]) : 0;
		tk_tensor *ct = i < op->n_in ? &dc.in[i] : &dc.out[i - op->n_in];
		int k = written_index(r, i);

		if (i < op->n_in && i >= dc.n_in)
			continue;
		if (!span) {
			/* No bytes behind an empty tensor: a launcher that reads it faults. */
			ct->data = NULL;
			continue;
		}
		cr_assert_eq(cudaMalloc(&dev[i], r->alloc[i]), cudaSuccess, "%s: cudaMalloc %zu",
		             name, r->alloc[i]);
		cr_assert_eq(cudaMemcpy(dev[i], r->base[i], r->alloc[i], cudaMemcpyHostToDevice),
		             cudaSuccess);
		if (k >= 0)
			cr_assert_eq(cudaMemcpy((char *)dev[i] + r->offset[i], r->before[k], span,
			                        cudaMemcpyHostToDevice),
			             cudaSuccess);
		ct->data = (char *)dev[i] + r->offset[i];
	}
	dc.workspace = NULL;
	dc.workspace_bytes = 0;
	if (with_workspace && r->entry->workspace > 0) {
		cr_assert_eq(cudaMalloc(&dc.workspace, r->entry->workspace), cudaSuccess);
		dc.workspace_bytes = r->entry->workspace;
	}
	cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
	cr_assert_eq(r->entry->cuda(&dc, stream), TK_OK, "%s: the CUDA launcher refused the call",
	             name);
	e = cudaStreamSynchronize(stream);
	cr_assert_eq(e, cudaSuccess, "%s: %s (seed 0x%llx)", name, cudaGetErrorString(e),
	             (unsigned long long)r->seed);
	cudaStreamDestroy(stream);
	cudaFree(dc.workspace);
	for (int k = 0; k < r->n_written; k++) {
		int i = r->written[k];
		size_t span = tt_span_bytes(&r->t[i]);

		got[k] = malloc(span ? span : 1);
		cr_assert_not_null(got[k]);
		if (span)
			cr_assert_eq(cudaMemcpy(got[k], (char *)dev[i] + r->offset[i], span,
			                        cudaMemcpyDeviceToHost),
			             cudaSuccess);
	}
	for (int i = 0; i < PARITY_MAX_T; i++)
		cudaFree(dev[i]);
}

int parity_check(parity_case *c)
{
	uint64_t seed = parity_seed();
	char err[1024], name[256], msg[768], line[2048];
	tileops_status st;
	parity_run r;

	gpu_require();
	parity_name(c, name, sizeof(name));
	st = parity_prepare(&r, c, 1, seed, err, sizeof(err));
	if (st == TILEOPS_ERR_UNSUPPORTED) {
		fprintf(stderr, "[parity] %s: not run on the GPU: %s\n", name, err);
		cr_expect(c->workload >= 0, "%s: %s", name, err);
		parity_free(&r);
		return 0;
	}
	cr_assert_eq(st, TILEOPS_OK, "%s: %s (seed 0x%llx)", name, err, (unsigned long long)seed);

	unsigned char *got[2][PARITY_MAX_T] = { { 0 } };
	int runs = r.entry->workspace > 0 ? 2 : 1;
	for (int run = 0; run < runs; run++)
		gpu_launch(&r, run == 0, got[run], name);
	cr_assert_eq(r.entry->cpu(&r.call), TK_OK, "%s: the CPU reference refused the call", name);
	if (c->verify)
		c->verify(&r);

	for (int run = 0; run < runs; run++) {
		for (int k = 0; k < r.n_written; k++) {
			const char *ws = runs == 1  ? ""
			                 : run == 0 ? " with workspace"
			                            : " without workspace";
			int ok = parity_compare(&r, k, got[run][k], msg, sizeof(msg));

			snprintf(line, sizeof(line), "%s%s: %s%s%s%s", name, ws, msg,
			         c->scaling[0] ? " [" : "", c->scaling, c->scaling[0] ? "]" : "");
			parity_log(line);
			if (c->workload >= 0 || !ok)
				fprintf(stderr, "[parity] %s%s\n", ok ? "" : "FAIL ", line);
			cr_expect(ok, "%s%s: %s; seed 0x%llx (TILEOPS_TEST_SEED reruns it)", name,
			          ws, msg, (unsigned long long)seed);
			cr_expect(parity_padding_kept(&r, k, got[run][k]),
			          "%s%s: %s wrote outside its elements (seed 0x%llx)", name, ws,
			          c->op->tensors[r.written[k]].name, (unsigned long long)seed);
			free(got[run][k]);
		}
	}
	parity_free(&r);
	return 1;
}
