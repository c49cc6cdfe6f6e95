/*
 * launch.c - one op from its request to the device (see launch.h).
 */
#include "launch.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "completion.h"
#include "devices.h"
#include "log.h"
#include "manifest.h"
#include "tuning.h"

/* Where an op's tensors are: the device of the first one named, and the
 * role and position it was named in (for the message when another differs).
 * A collective's tensors are on a device each: `each` gets them. */
typedef struct op_place {
	int device; /* -1 until a tensor is named */
	const char *role;
	int index;
	int *each; /* NULL: one device for all */
} op_place;

/*
 * Views of the tensors an op names. The handle 0 leaves a tensor out: its
 * view is zeroed and its bit (from bit0 on) set in *left_out; the op layer
 * accepts that for optional tensors only. Every tensor must be on the
 * device of the first (a kernel reads and writes its own device's memory).
 */
static tileops_status resolve(const tensor_resolver *views, const char *op, const char *role, int n,
                              const uint64_t *handles, tk_tensor *out, uint32_t *left_out, int bit0,
                              op_place *at, char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		int device = 0;
		if (handles[i] == 0) {
			memset(&out[i], 0, sizeof(out[i]));
			*left_out |= 1u << (bit0 + i);
			continue;
		}
		if (views->view(views->ctx, handles[i], &out[i], &device) != TILEOPS_OK) {
			snprintf(err, errlen,
			         "%s: %s %d: tensor handle %llu is not a tensor of this session",
			         op, role, i, (unsigned long long)handles[i]);
			return TILEOPS_ERR_UNKNOWN_HANDLE;
		}
		if (at->each) {
			at->each[i] = device;
			if (at->device < 0)
				at->device = device;
		} else if (at->device < 0) {
			*at = (op_place){ device, role, i, NULL };
		} else if (device != at->device) {
			snprintf(
			        err, errlen,
			        "%s: %s %d (tensor %llu) is on device %d, %s %d on device %d: an "
			        "op's tensors must all be on one device (tileops_tensor_copy moves "
			        "one)",
			        op, role, i, (unsigned long long)handles[i], device, at->role,
			        at->index, at->device);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	return TILEOPS_OK;
}

/*
 * A collective's ranks: one tensor each, given in rank order with none left
 * out, every one on a device of its own, and (gathering or scattering in
 * place) each a whole number of ranks' parts.
 */
static tileops_status check_ranks(const op_desc *d, const prepared_op *p, char *err, size_t errlen)
{
	for (int r = 0; r < d->n_in; r++) {
		if (d->in[r] == 0) {
			snprintf(err, errlen,
			         "%s: input %d left out: a collective takes one tensor per rank, "
			         "in rank order, with none left out",
			         d->op, r);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
		for (int q = 0; q < r; q++)
			if (p->rank_device[q] == p->rank_device[r]) {
				snprintf(
				        err, errlen,
				        "%s: ranks %d and %d are both on device %d: each rank of a "
				        "collective is on a device of its own",
				        d->op, q, r, p->rank_device[r]);
				return TILEOPS_ERR_INVALID_ARGUMENT;
			}
	}
	int64_t numel = tk_numel(&p->call.in[0]);
	if (p->collective != MANIFEST_ALL_REDUCE && numel % d->n_in != 0) {
		snprintf(err, errlen,
		         "%s: %lld elements per rank do not split into %d equal parts, one per "
		         "rank",
		         d->op, (long long)numel, d->n_in);
		return TILEOPS_ERR_SHAPE;
	}
	return TILEOPS_OK;
}

tileops_status launch_prepare(executor *ex, const tensor_resolver *views, const op_desc *d,
                              prepared_op *out, char *err, size_t errlen)
{
	tk_tensor in[TK_MAX_INPUTS], outs[TK_MAX_OUTPUTS];
	const char *names[TK_MAX_PARAMS];
	out->kernel = NULL;
	out->cost = (op_cost){ 0, 0 };
	const manifest_op *mo = manifest_find(ex->mf, d->op);
	out->collective = mo ? (int)mo->collective : 0;
	uint32_t left_out = 0;
	op_place at = { -1, NULL, 0, out->collective ? out->rank_device : NULL };
	tileops_status st =
	        resolve(views, d->op, "input", d->n_in, d->in, in, &left_out, 0, &at, err, errlen);
	if (st == TILEOPS_OK)
		st = resolve(views, d->op, "output", d->n_out, d->out, outs, &left_out,
		             TK_MAX_INPUTS, &at, err, errlen);
	out->device = at.device < 0 ? 0 : at.device;
	if (st == TILEOPS_OK) {
		for (int i = 0; i < d->n_params; i++)
			names[i] = d->param_names[i];
		op_request req = {
			.op = d->op,
			.n_in = d->n_in,
			.n_out = d->n_out,
			.in = in,
			.out = outs,
			.n_params = (size_t)d->n_params,
			.param_names = names,
			.param_values = d->params,
			.left_out = left_out,
		};
		st = oplayer_prepare(ex->mf, &req, ex->be->is_gpu, &out->call, &out->kernel,
		                     &out->cost, err, errlen);
	}
	if (st == TILEOPS_OK && out->collective)
		st = check_ranks(d, out, err, errlen);
	out->writes_nothing = st == TILEOPS_OK && oplayer_writes_nothing(ex->mf, d->op, &out->call);
	out->est_us = st == TILEOPS_OK ? share_estimate_us(ex->be, &out->cost) : 0.0;
	/* The tuning table's choice for the call (or none), once per prepared
	 * op: ring ops are cached prepared, plans keep theirs in the graph. */
	if (st == TILEOPS_OK && out->kernel)
		tuning_apply(ex->be->is_gpu ? ex->cfg.tuning : NULL, out->kernel, &out->call);
	out->slot = -1;
	if (st == TILEOPS_OK || (st != TILEOPS_ERR_UNKNOWN_OP && mo))
		out->slot = stats_op_slot(ex->cfg.st, d->op);
	return st;
}

int launch_first_use(executor *ex, session *s, prepared_op *p)
{
	char cls[TK_TUNING_TEXT_MAX], err[512];

	void *stream = NULL;
	if (!ex->be->is_gpu || !p->kernel ||
	    !tuning_claim(ex->cfg.tuning, p->kernel, &p->call, cls, sizeof(cls)))
		return 0;
	if (devices_stream(ex, s, p->device, &stream, err, sizeof(err)) != TILEOPS_OK ||
	    ex->be->ops->sync(ex->be, stream, err, sizeof(err)) != TILEOPS_OK) {
		log_warn("tuning: %s %s not measured: %s", p->kernel->op, cls, err);
		return 0;
	}
	(void)tuning_measure(ex->cfg.tuning, p->kernel, &p->call, cls, err, sizeof(err));
	tuning_apply(ex->cfg.tuning, p->kernel, &p->call);
	return 1;
}

/* The dtype the op computes in, for its roofline peak: its first tensor's. */
static int launch_dtype(const prepared_op *p)
{
	if (p->call.n_in > 0)
		return (int)p->call.in[0].dtype;
	return p->call.n_out > 0 ? (int)p->call.out[0].dtype : 0;
}

void launch_share(executor *ex, session *s, double us)
{
	if (share_launch(ex->be, s->stream, &s->share, ex->cfg.queue_us, us) && exec_worker)
		__atomic_fetch_add(&ex->pace[exec_worker->index].demotions, 1, __ATOMIC_RELAXED);
}

/* The ranks work in place: ALL_GATHER's rank r sends its part r of its
 * tensor, REDUCE_SCATTER's receives it (NCCL's in-place layout). Its one
 * param, when the op declares it, is the reduction. */
tileops_status launch_collective(executor *ex, session *s, const prepared_op *p, char *err,
                                 size_t errlen)
{
	static const backend_coll_kind kinds[] = {
		[MANIFEST_ALL_REDUCE] = BACKEND_ALL_REDUCE,
		[MANIFEST_ALL_GATHER] = BACKEND_ALL_GATHER,
		[MANIFEST_REDUCE_SCATTER] = BACKEND_REDUCE_SCATTER,
	};
	const tk_call *call = &p->call;
	if (!ex->be->ops->collective) {
		snprintf(err, errlen, "the %s backend runs no collectives", ex->be->name);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	backend_coll c = {
		.kind = kinds[p->collective],
		.reduce = call->n_params > 0 ? (backend_reduce)call->params[0].v.i : BACKEND_SUM,
		.dtype = call->in[0].dtype,
		.n = call->n_in,
	};
	size_t numel = (size_t)tk_numel(&call->in[0]), esize = tk_dtype_size(c.dtype);
	c.count = c.kind == BACKEND_ALL_REDUCE ? numel : numel / (size_t)c.n;
	for (int r = 0; r < c.n; r++) {
		tileops_status st =
		        devices_stream(ex, s, p->rank_device[r], &c.parts[r].stream, err, errlen);
		if (st != TILEOPS_OK)
			return st;
		char *base = call->in[r].data, *part = base + (size_t)r * c.count * esize;
		c.parts[r].send = c.kind == BACKEND_ALL_GATHER ? part : base;
		c.parts[r].recv = c.kind == BACKEND_REDUCE_SCATTER ? part : base;
	}
	return ex->be->ops->collective(ex->be, &c, err, errlen);
}

tileops_status launch_prepared(executor *ex, session *s, const prepared_op *p, tileops_status st,
                               timed_cqe *timed, char *err, size_t errlen)
{
	/* Device time for the stats comes from a sample of the ops (every one
	 * on the CPU, where timing is free), and from every op that asks. Each
	 * thread counts its own launches: one counter shared by all of them
	 * would bounce between their cores on every op. */
	uint64_t n = exec_worker ? exec_worker->launches++ : 0;
	int sampled = timed != NULL || !ex->be->is_gpu ||
	              (ex->cfg.stats_sample > 0 && n % (uint64_t)ex->cfg.stats_sample == 0);
	/* The launch call is timed for the stats in one op of LAUNCH_SAMPLE
	 * (a clock read costs tens of nanoseconds). */
	char why[256];
	if (st == TILEOPS_OK && backend_lost(ex->be, why, sizeof(why))) {
		snprintf(err, errlen, "%s: the device failed (%s); tileopsd is restarting",
		         p->kernel ? p->kernel->op : "op", why);
		st = TILEOPS_ERR_BACKEND;
	}
	if (st == TILEOPS_OK && p->writes_nothing) {
		/* Done already: nothing to write. A timed ring op gets its answer now. */
		stats_op_count(ex->cfg.st, p->slot, 0, 0, p->cost.flops, p->cost.bytes, 0);
		if (timed)
			completion_timed(ex, p->slot, timed, 0.0);
		return TILEOPS_OK;
	}
	if (st == TILEOPS_OK && p->collective) {
		/* Not timed: its time on one device says little of the whole. */
		st = launch_collective(ex, s, p, err, errlen);
		stats_op_count(ex->cfg.st, p->slot, st != TILEOPS_OK, 0, p->cost.flops,
		               p->cost.bytes, 0);
		if (st == TILEOPS_OK && timed)
			completion_timed(ex, p->slot, timed, 0.0);
		return st;
	}
	void *stream = s->stream;
	if (st == TILEOPS_OK && p->device != 0)
		st = devices_stream(ex, s, p->device, &stream, err, errlen);
	if (st == TILEOPS_OK) {
		int clocked = exec_worker && n % LAUNCH_SAMPLE == 0;
		launch_share(ex, s, p->est_us);
		double t0 = clocked ? clock_now_us() : 0.0;
		st = ex->be->ops->launch(ex->be, stream, p->kernel, &p->call, sampled, p->slot,
		                         timed, err, errlen);
		if (clocked)
			executor_count_launch(exec_worker, clock_now_us() - t0);
		if (st == TILEOPS_OK)
			share_charge(ex->be, s->stream, &s->share, ex->cfg.queue_us, p->est_us);
	}
	stats_op_count(ex->cfg.st, p->slot, st != TILEOPS_OK, sampled, p->cost.flops, p->cost.bytes,
	               st == TILEOPS_OK ? launch_dtype(p) : 0);
	return st;
}
