/*
 * fuzz_ops.h - what the control and ring harnesses share: the project's
 * manifest, loaded once, and a decoded op checked by the op layer against
 * it over made-up tensors (handles 1 to 8, of several dtypes and shapes,
 * empty ones included), as the executor would before a launch. Nothing
 * is launched: the views' data pointers are never read.
 */
#ifndef TILEOPS_FUZZ_OPS_H
#define TILEOPS_FUZZ_OPS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "oplayer.h"
#include "request.h"

static manifest *fuzz_manifest;

static void fuzz_load_manifest(void)
{
	const char *path = getenv("TILEOPS_MANIFEST");
	char err[1024];
	if (!path)
		path = TILEOPS_SOURCE_DIR "/manifest";
	if (manifest_load(path, &fuzz_manifest, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz: manifest %s: %s\n", path, err);
		abort();
	}
	fuzz_manifest->serve_diagnostic = 1;
}

static tk_tensor fuzz_view(uint64_t handle)
{
	static char backing[64];
	static const struct {
		tk_dtype dt;
		int ndim;
		int64_t shape[4];
	} kinds[8] = {
		{ TK_F32, 2, { 4, 4096 } },  { TK_BF16, 1, { 4096 } },
		{ TK_F16, 3, { 2, 8, 64 } }, { TK_I32, 1, { 4 } },
		{ TK_BF16, 2, { 0, 4096 } }, { TK_F32, 0, { 0 } },
		{ TK_I64, 2, { 1, 1 } },     { TK_FP8_E4M3, 2, { 128, 128 } },
	};
	tk_tensor t;
	memset(&t, 0, sizeof(t));
	int k = (int)((handle - 1) % 8);
	t.data = backing;
	t.dtype = kinds[k].dt;
	t.ndim = kinds[k].ndim;
	memcpy(t.shape, kinds[k].shape, sizeof(kinds[k].shape));
	tk_set_contiguous(&t);
	return t;
}

/* Check one op as launch_prepare does (handles 1..8 exist, others do not). */
static void fuzz_check_op(const op_desc *d)
{
	tk_tensor in[TK_MAX_INPUTS], out[TK_MAX_OUTPUTS];
	const char *names[TK_MAX_PARAMS];
	uint32_t left_out = 0;
	for (int i = 0; i < d->n_in; i++) {
		if (d->in[i] == 0 || d->in[i] > 8) {
			memset(&in[i], 0, sizeof(in[i]));
			if (d->in[i] > 8)
				return; /* an unknown handle: refused before the op layer */
			left_out |= 1u << i;
		} else {
			in[i] = fuzz_view(d->in[i]);
		}
	}
	for (int i = 0; i < d->n_out; i++) {
		if (d->out[i] == 0 || d->out[i] > 8) {
			memset(&out[i], 0, sizeof(out[i]));
			if (d->out[i] > 8)
				return;
			left_out |= 1u << (TK_MAX_INPUTS + i);
		} else {
			out[i] = fuzz_view(d->out[i]);
		}
	}
	for (int i = 0; i < d->n_params; i++)
		names[i] = d->param_names[i];
	op_request req = { .op = d->op,
		           .n_in = d->n_in,
		           .n_out = d->n_out,
		           .in = in,
		           .out = out,
		           .n_params = (size_t)d->n_params,
		           .param_names = names,
		           .param_values = d->params,
		           .left_out = left_out };
	tk_call call;
	const tk_kernel_entry *k;
	op_cost cost;
	char err[512];
	(void)oplayer_prepare(fuzz_manifest, &req, 0, &call, &k, &cost, err, sizeof(err));
	(void)oplayer_prepare(fuzz_manifest, &req, 1, &call, &k, &cost, err, sizeof(err));
}

/* Check what a decoded request would run. */
static void fuzz_check_request(const request *r)
{
	if (r->kind == REQ_OP_RUN)
		fuzz_check_op(&r->u.op);
	else if (r->kind == REQ_PLAN_CREATE)
		for (int i = 0; i < r->u.plan->n_ops; i++)
			fuzz_check_op(&r->u.plan->ops[i]);
}

#endif
