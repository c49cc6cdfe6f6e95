/*
 * exec.c - running requests on the executor thread: tensors, ops, syncs,
 * for control-plane jobs and ring entries alike, so both planes follow the
 * same rules and give the same errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor_int.h"
#include "log.h"
#include "manifest.h"
#include "opcache.h"
#include "oplayer.h"
#include "sqe.h"
#include "tileops.pb-c.h"
#include "warmup.h"

#define MAX_TENSOR_BYTES (1ull << 46)

/* ---- completions --------------------------------------------------------- */

void exec_post(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
               const char *msg)
{
	if (ring_post(&s->ring, &s->arena, tag, (int)st, gpu_us, msg) == 0)
		stats_count_request(ex->cfg.st, st != TILEOPS_OK);
}

uint64_t exec_next_handle(executor *ex)
{
	return __atomic_fetch_add(&ex->next_handle, 1, __ATOMIC_RELAXED);
}

void exec_defer(worker *w, session *s, job *j, uint64_t tag)
{
	executor *ex = w->ex;
	char msg[256];
	pending *p = calloc(1, sizeof(*p));
	void *fence = NULL;
	tileops_status st =
	        p ? ex->be->ops->fence_create(ex->be, s->stream, &fence, msg, sizeof(msg))
	          : TILEOPS_ERR_OUT_OF_MEMORY;
	if (st != TILEOPS_OK) {
		free(p);
		if (!p)
			snprintf(msg, sizeof(msg), "out of host memory");
		if (j) {
			j->status = st;
			snprintf(j->msg, sizeof(j->msg), "%s", msg);
			executor_hand_back(ex, j);
		} else {
			exec_post(ex, s, tag, st, -1.0, msg);
		}
		return;
	}
	p->fence = fence;
	p->job = j;
	p->tag = tag;
	if (!j) {
		p->s = s;
		session_ref(s);
	}
	if (w->pend_tail)
		w->pend_tail->next = p;
	else
		w->pend = p;
	w->pend_tail = p;
}

void exec_timed(void *ctx, int slot, void *arg, double us)
{
	executor *ex = ctx;
	stats_op_time(ex->cfg.st, slot, us);
	timed_cqe *t = arg;
	if (!t)
		return;
	if (exec_worker)
		exec_worker->timed_owed--;
	exec_post(ex, t->s, t->tag, TILEOPS_OK, us, "");
	session_unref(t->s);
	free(t);
}

/* ---- tensors ------------------------------------------------------------- */

/* Check dtype and shape; fill the view and the byte count. */
static tileops_status tensor_describe(int dtype, size_t ndim, const int64_t *shape, tensor *t,
                                      char *err, size_t errlen)
{
	if (dtype <= 0 || dtype >= TK_DTYPE_COUNT) {
		snprintf(err, errlen, "unknown dtype %d", dtype);
		return TILEOPS_ERR_DTYPE;
	}
	if (ndim > TK_MAX_DIMS) {
		snprintf(err, errlen, "rank %zu is over the limit of %d dimensions", ndim,
		         TK_MAX_DIMS);
		return TILEOPS_ERR_SHAPE;
	}
	uint64_t n = 1;
	size_t es = tk_dtype_size((tk_dtype)dtype);
	for (size_t i = 0; i < ndim; i++) {
		if (shape[i] < 0) {
			snprintf(err, errlen, "dimension %zu has extent %lld; extents must be >= 0",
			         i, (long long)shape[i]);
			return TILEOPS_ERR_SHAPE;
		}
		if (shape[i] && n > MAX_TENSOR_BYTES / es / (uint64_t)shape[i]) {
			snprintf(err, errlen, "shape is too large (over 2^46 bytes)");
			return TILEOPS_ERR_SHAPE;
		}
		n *= (uint64_t)shape[i];
	}
	memset(&t->view, 0, sizeof(t->view));
	t->view.dtype = (tk_dtype)dtype;
	t->view.ndim = (int)ndim;
	for (size_t i = 0; i < ndim; i++)
		t->view.shape[i] = shape[i];
	tk_set_contiguous(&t->view);
	t->nbytes = (size_t)(n * es);
	return TILEOPS_OK;
}

static void tensor_make(executor *ex, session *s, job *j, int dtype, size_t ndim,
                        const int64_t *shape, const ProtobufCBinaryData *ipc)
{
	tensor *t = calloc(1, sizeof(*t));
	if (!t) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	char err[256];
	tileops_status st = tensor_describe(dtype, ndim, shape, t, err, sizeof(err));
	if (st == TILEOPS_OK && ipc && ipc->len != 64) {
		snprintf(err, sizeof(err), "ipc_handle has %zu bytes, expected 64", ipc->len);
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	}
	size_t limit = __atomic_load_n(ex->cfg.memory_limit, __ATOMIC_RELAXED);
	if (st == TILEOPS_OK && !ipc && limit && s->bytes + t->nbytes > limit) {
		snprintf(err, sizeof(err),
		         "session memory quota exceeded: %zu bytes held + %zu requested > %zu "
		         "(session_memory_limit)",
		         s->bytes, t->nbytes, limit);
		st = TILEOPS_ERR_QUOTA;
	}
	void *ptr = NULL;
	if (st == TILEOPS_OK)
		st = ipc ? ex->be->ops->ipc_import(ex->be, ipc->data, &ptr, err, sizeof(err))
		         : ex->be->ops->alloc(ex->be, t->nbytes, &ptr, err, sizeof(err));
	if (st != TILEOPS_OK) {
		free(t);
		j->status = st;
		snprintf(j->msg, sizeof(j->msg), "tensor: %s", err);
		return;
	}
	t->view.data = ptr;
	t->imported = ipc != NULL;
	t->handle = exec_next_handle(ex);
	if (session_tensor_insert(s, t) != 0) {
		if (t->imported)
			ex->be->ops->ipc_close(ex->be, ptr);
		else
			ex->be->ops->free(ex->be, s->stream, ptr);
		free(t);
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	j->handle = t->handle;
	j->nbytes = t->nbytes;
}

void exec_make_tensor(executor *ex, session *s, job *j, const warm_tensor *t)
{
	tensor_make(ex, s, j, (int)t->dtype, (size_t)t->ndim, t->shape, NULL);
	if (j->status != TILEOPS_OK) {
		char msg[sizeof(j->msg)];
		snprintf(msg, sizeof(msg), "%s", j->msg);
		snprintf(j->msg, sizeof(j->msg), "tensor '%.40s': %.400s", t->name, msg);
	}
}

static tensor *tensor_find(session *s, job *j, uint64_t handle, const char *what)
{
	tensor *t = session_tensor_find(s, handle);
	if (!t) {
		j->status = TILEOPS_ERR_UNKNOWN_HANDLE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: tensor handle %llu is not a tensor of this session (never created "
		         "here, or already freed)",
		         what, (unsigned long long)handle);
	}
	return t;
}

static void tensor_release(executor *ex, session *s, tensor *t)
{
	opcache_forget(s, t->handle);
	if (t->imported)
		ex->be->ops->ipc_close(ex->be, t->view.data);
	else
		ex->be->ops->free(ex->be, s->stream, t->view.data);
	free(t);
}

static void tensor_free(executor *ex, session *s, job *j, uint64_t handle)
{
	if (!tensor_find(s, j, handle, "tensor_free"))
		return;
	plan_forget_tensor(ex, s, handle);
	tensor_release(ex, s, session_tensor_remove(s, handle));
}

/* Returns 1 when the answer is owed until the copy is done. */
static int tensor_copy(worker *w, session *s, job *j, int write, uint64_t handle, uint64_t toff,
                       uint64_t aoff, uint64_t len)
{
	executor *ex = w->ex;
	const char *what = write ? "tensor_write" : "tensor_read";
	tensor *t = tensor_find(s, j, handle, what);
	if (!t)
		return 0;
	if (toff > t->nbytes || len > t->nbytes - toff) {
		j->status = TILEOPS_ERR_RANGE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: tensor bytes [%llu, %llu + %llu) are outside the tensor's %zu bytes",
		         what, (unsigned long long)toff, (unsigned long long)toff,
		         (unsigned long long)len, t->nbytes);
		return 0;
	}
	if (!arena_range_ok(&s->arena, aoff, len) || !ring_data_range_ok(&s->ring, aoff, len)) {
		j->status = TILEOPS_ERR_RANGE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: arena bytes [%llu, %llu + %llu) are outside the arena's data area "
		         "[%llu, %zu)",
		         what, (unsigned long long)aoff, (unsigned long long)aoff,
		         (unsigned long long)len,
		         (unsigned long long)(s->ring.enabled ? s->ring.data_off : 0),
		         s->arena.size);
		return 0;
	}
	if (len == 0)
		return 0;
	char *dev = (char *)t->view.data + toff;
	j->status = write ? ex->be->ops->write(ex->be, s->stream, dev, &s->arena, (size_t)aoff,
	                                       (size_t)len, j->msg, sizeof(j->msg))
	                  : ex->be->ops->read(ex->be, s->stream, dev, &s->arena, (size_t)aoff,
	                                      (size_t)len, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return 0;
	exec_defer(w, s, j, 0);
	return 1;
}

static void tensor_export(executor *ex, session *s, job *j, uint64_t handle)
{
	tensor *t = tensor_find(s, j, handle, "tensor_export");
	if (!t)
		return;
	if (t->imported) {
		j->status = TILEOPS_ERR_UNSUPPORTED;
		snprintf(j->msg, sizeof(j->msg),
		         "tensor_export: an imported tensor belongs to its exporter; export it "
		         "from there");
		return;
	}
	j->status = ex->be->ops->ipc_export(ex->be, t->view.data, j->ipc, j->msg, sizeof(j->msg));
}

/* ---- ops ----------------------------------------------------------------- */

/* The view of `handle` for an op: the session's tensor, or what the plan
 * being captured maps it to. */
static tileops_status view_of(session *s, const plan_view *pv, uint64_t handle, tk_tensor *v)
{
	if (pv)
		return plan_view_of(pv, handle, v);
	tensor *t = session_tensor_find(s, handle);
	if (!t)
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	*v = t->view;
	return TILEOPS_OK;
}

/*
 * Views of the tensors a request names. The handle 0 leaves a tensor out:
 * its view is zeroed and its bit (from bit0 on) set in *left_out; the op
 * layer accepts that for optional tensors only.
 */
static tileops_status resolve(session *s, const plan_view *pv, const char *op, const char *role,
                              size_t n, const uint64_t *handles, size_t max, tk_tensor *views,
                              uint32_t *left_out, int bit0, char *err, size_t errlen)
{
	if (n > max) {
		snprintf(err, errlen, "%s: %zu %ss given, at most %zu", op, n, role, max);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < n; i++) {
		if (handles[i] == 0) {
			memset(&views[i], 0, sizeof(views[i]));
			*left_out |= 1u << (bit0 + (int)i);
			continue;
		}
		if (view_of(s, pv, handles[i], &views[i]) != TILEOPS_OK) {
			snprintf(err, errlen,
			         "%s: %s %zu: tensor handle %llu is not a tensor of this session",
			         op, role, i, (unsigned long long)handles[i]);
			return TILEOPS_ERR_UNKNOWN_HANDLE;
		}
	}
	return TILEOPS_OK;
}

static tileops_status decode_params(const char *op, const Tileops__OpRun *m, const char **names,
                                    tk_param *values, char *err, size_t errlen)
{
	if (m->n_params > TK_MAX_PARAMS) {
		snprintf(err, errlen, "%s: %zu params given, at most %d", op, m->n_params,
		         TK_MAX_PARAMS);
		return TILEOPS_ERR_PARAM;
	}
	for (size_t i = 0; i < m->n_params; i++) {
		const Tileops__Param *p = m->params[i];
		names[i] = p->name;
		switch (p->value_case) {
		case TILEOPS__PARAM__VALUE_I:
			values[i].kind = TK_PARAM_INT;
			values[i].v.i = p->i;
			break;
		case TILEOPS__PARAM__VALUE_F:
			values[i].kind = TK_PARAM_FLOAT;
			values[i].v.f = p->f;
			break;
		case TILEOPS__PARAM__VALUE_B:
			values[i].kind = TK_PARAM_BOOL;
			values[i].v.b = p->b ? 1 : 0;
			break;
		default:
			snprintf(err, errlen, "%s: param '%.64s' has no value", op, p->name);
			return TILEOPS_ERR_PARAM;
		}
	}
	return TILEOPS_OK;
}

tileops_status exec_prepare_op(executor *ex, session *s, const plan_view *pv,
                               const Tileops__OpRun *m, prepared_op *out, char *err, size_t errlen)
{
	const char *op = m->op && m->op[0] ? m->op : "(no name)";
	tk_tensor in[TK_MAX_INPUTS], outs[TK_MAX_OUTPUTS];
	const char *names[TK_MAX_PARAMS];
	tk_param values[TK_MAX_PARAMS];
	out->kernel = NULL;
	out->cost = (op_cost){ 0, 0 };
	uint32_t left_out = 0;
	tileops_status st = resolve(s, pv, op, "input", m->n_inputs, m->inputs, TK_MAX_INPUTS, in,
	                            &left_out, 0, err, errlen);
	if (st == TILEOPS_OK)
		st = resolve(s, pv, op, "output", m->n_outputs, m->outputs, TK_MAX_OUTPUTS, outs,
		             &left_out, TK_MAX_INPUTS, err, errlen);
	if (st == TILEOPS_OK)
		st = decode_params(op, m, names, values, err, errlen);
	if (st == TILEOPS_OK) {
		op_request req = {
			.op = op,
			.n_in = (int)m->n_inputs,
			.n_out = (int)m->n_outputs,
			.in = in,
			.out = outs,
			.n_params = m->n_params,
			.param_names = names,
			.param_values = values,
			.left_out = left_out,
		};
		st = oplayer_prepare(ex->mf, &req, ex->be->is_gpu, &out->call, &out->kernel,
		                     &out->cost, err, errlen);
	}
	/* Only ops the manifest knows get a stats slot, so made-up names cannot
	 * grow the table. */
	out->slot = -1;
	if (st == TILEOPS_OK ||
	    (st != TILEOPS_ERR_UNKNOWN_OP && m->op && manifest_find(ex->mf, m->op)))
		out->slot = stats_op_slot(ex->cfg.st, m->op);
	return st;
}

/*
 * Launch a prepared op (or count its failure, st). `timed`, when not NULL,
 * receives the op's device time through the timing callback (it is consumed
 * only on success).
 */
static tileops_status exec_run_prepared(executor *ex, session *s, const prepared_op *p,
                                        tileops_status st, timed_cqe *timed, char *err,
                                        size_t errlen)
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
	if (st == TILEOPS_OK) {
		int clocked = exec_worker && n % LAUNCH_SAMPLE == 0;
		double t0 = clocked ? exec_now_us() : 0.0;
		st = ex->be->ops->launch(ex->be, s->stream, p->kernel, &p->call, sampled, p->slot,
		                         timed, err, errlen);
		if (clocked)
			executor_count_launch(exec_worker, exec_now_us() - t0);
	}
	stats_op_count(ex->cfg.st, p->slot, st != TILEOPS_OK, sampled, p->cost.flops,
	               p->cost.bytes);
	return st;
}

/*
 * Validate and launch one op. With `key` (a ring op descriptor, `hash` its
 * hash from opcache_find), an op that checks out is remembered under it.
 */
static tileops_status exec_op(executor *ex, session *s, const Tileops__OpRun *m,
                              const tileops_sqe *key, uint64_t hash, timed_cqe *timed, char *err,
                              size_t errlen)
{
	prepared_op p;
	tileops_status st = exec_prepare_op(ex, s, NULL, m, &p, err, errlen);
	if (st == TILEOPS_OK && key &&
	    m->n_inputs + m->n_outputs <= TK_MAX_INPUTS + TK_MAX_OUTPUTS) {
		uint64_t handles[TK_MAX_INPUTS + TK_MAX_OUTPUTS];
		memcpy(handles, m->inputs, sizeof(handles[0]) * m->n_inputs);
		memcpy(handles + m->n_inputs, m->outputs, sizeof(handles[0]) * m->n_outputs);
		opcache_put(s, key, hash, ex->mf_gen, &p, handles,
		            (int)(m->n_inputs + m->n_outputs));
	}
	return exec_run_prepared(ex, s, &p, st, timed, err, errlen);
}

/* ---- ring entries -------------------------------------------------------- */

/*
 * Run one op from the ring and post (or owe, when timed) its completion:
 * `hit` when its descriptor was prepared before, else m (decoded), which
 * `key` (when not NULL; `hash` its hash) remembers once it checks out.
 */
static void sqe_op(worker *w, session *s, const tileops_sqe *e, const Tileops__OpRun *m,
                   const prepared_op *hit, const tileops_sqe *key, uint64_t hash)
{
	executor *ex = w->ex;
	char err[256] = "";
	timed_cqe *t = NULL;
	if ((e->flags & TILEOPS_SQE_F_TIMING) && (t = calloc(1, sizeof(*t)))) {
		t->s = s;
		t->tag = e->tag;
		session_ref(s);
		w->timed_owed++; /* the worker keeps polling until it is posted */
	}
	tileops_status st = hit ? exec_run_prepared(ex, s, hit, TILEOPS_OK, t, err, sizeof(err))
	                        : exec_op(ex, s, m, key, hash, t, err, sizeof(err));
	if (st != TILEOPS_OK || !t)
		exec_post(ex, s, e->tag, st, -1.0, err);
	if (st != TILEOPS_OK && t) {
		w->timed_owed--;
		session_unref(s);
		free(t);
	}
}

/* A packed tileops.Request (TILEOPS_SQE_REQUEST). */
static void sqe_request(worker *w, session *s, const tileops_sqe *e)
{
	executor *ex = w->ex;
	char err[256] = "";
	Tileops__Request *req = tileops__request__unpack(NULL, e->length, e->payload);
	if (!req) {
		snprintf(err, sizeof(err),
		         "ring entry: the %u-byte payload is not a valid tileops.Request",
		         e->length);
		exec_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
		return;
	}
	if (req->body_case == TILEOPS__REQUEST__BODY_OP_RUN) {
		sqe_op(w, s, e, req->op_run, NULL, NULL, 0);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_PLAN_RUN) {
		tileops_status st = plan_run(ex, s, req->plan_run, err, sizeof(err));
		exec_post(ex, s, e->tag, st, -1.0, err);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_SYNC) {
		exec_defer(w, s, NULL, e->tag);
	} else {
		exec_post(ex, s, e->tag, TILEOPS_ERR_UNSUPPORTED, -1.0,
		          "ring entry: only op_run, plan_run and sync go through the ring");
	}
	tileops__request__free_unpacked(req, NULL);
}

void exec_sqe(worker *w, session *s, const tileops_sqe *e)
{
	executor *ex = w->ex;
	char err[256] = "";
	tileops_status st;
	if (e->length > sizeof(e->payload)) {
		snprintf(err, sizeof(err), "ring entry: length is %u bytes, at most %zu", e->length,
		         sizeof(e->payload));
		exec_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
		return;
	}
	switch (e->kind) {
	case TILEOPS_SQE_REQUEST:
		sqe_request(w, s, e);
		return;
	case TILEOPS_SQE_OP: {
		uint64_t hash;
		const prepared_op *hit = opcache_find(s, e, ex->mf_gen, &hash);
		if (hit) {
			executor_count_reuse(w);
			sqe_op(w, s, e, NULL, hit, NULL, 0);
			return;
		}
		sqe_op_run o;
		if ((st = sqe_decode_op(e, &o, err, sizeof(err))) == TILEOPS_OK)
			sqe_op(w, s, e, &o.run, NULL, e, hash);
		else
			exec_post(ex, s, e->tag, st, -1.0, err);
		return;
	}
	case TILEOPS_SQE_PLAN_RUN: {
		sqe_plan_run o;
		if ((st = sqe_decode_plan_run(e, &o, err, sizeof(err))) == TILEOPS_OK)
			st = plan_run(ex, s, &o.run, err, sizeof(err));
		exec_post(ex, s, e->tag, st, -1.0, err);
		return;
	}
	default:
		snprintf(err, sizeof(err),
		         "ring entry: kind is %u, expected %u (request), %u (op) or %u (plan run)",
		         e->kind, TILEOPS_SQE_REQUEST, TILEOPS_SQE_OP, TILEOPS_SQE_PLAN_RUN);
		exec_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
	}
}

tileops_status exec_ring_until(worker *w, session *s, uint64_t mark, char *err, size_t errlen)
{
	while (s->ring.consumed < mark) {
		uint64_t avail = ring_available(&s->ring, &s->arena);
		if (s->ring.broken) {
			snprintf(err, errlen, "the session's ring is broken: %s", s->ring.why);
			return TILEOPS_ERR_PROTOCOL;
		}
		if (s->ring.consumed + avail < mark) {
			snprintf(err, errlen, "ring_mark %llu is past the %llu entries submitted",
			         (unsigned long long)mark,
			         (unsigned long long)(s->ring.consumed + avail));
			return TILEOPS_ERR_PROTOCOL;
		}
		if (ring_cq_room(&s->ring, &s->arena) == 0) {
			snprintf(err, errlen,
			         "the completion ring is full: read completions before "
			         "sending more requests");
			return TILEOPS_ERR_BUSY;
		}
		tileops_sqe e;
		if (ring_take(&s->ring, &s->arena, &e) != 0)
			continue;
		exec_sqe(w, s, &e);
	}
	return TILEOPS_OK;
}

/* ---- jobs from the loop -------------------------------------------------- */

static void exec_open(worker *w, session *s, job *j)
{
	executor *ex = w->ex;
	j->status = plan_join_tenant(ex, s, j->tenant, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return;
	j->status = ex->be->ops->stream_create(ex->be, &s->stream, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return;
	ex->be->ops->arena_attach(ex->be, &s->arena);
	if (!j->want_rings)
		return;
	if (ring_setup(&s->ring, &s->arena, j->msg, sizeof(j->msg)) != 0) {
		j->status = TILEOPS_ERR_INVALID_ARGUMENT;
		return;
	}
	j->rings = 1;
	s->ring_next = w->rings;
	w->rings = s;
	session_ref(s);
}

static void exec_warmup(executor *ex, session *s, job *j)
{
	j->status = plan_join_tenant(ex, s, j->warm->tenant, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		j->status = ex->be->ops->stream_create(ex->be, &s->stream, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		plan_warmup(ex, s, j, j->warm);
}

static void exec_close(worker *w, session *s)
{
	executor *ex = w->ex;
	if (s->ring.enabled) {
		for (session **pp = &w->rings; *pp; pp = &(*pp)->ring_next) {
			if (*pp == s) {
				*pp = s->ring_next;
				break;
			}
		}
		if (w->rr_next == s)
			w->rr_next = s->ring_next;
		s->ring_next = NULL;
	}
	plan_close_session(ex, s);
	for (size_t b = 0; b < s->n_buckets; b++) {
		while (s->buckets[b]) {
			tensor *t = session_tensor_remove(s, s->buckets[b]->handle);
			tensor_release(ex, s, t);
		}
	}
	opcache_free(s);
	if (s->stream) {
		/* Destroying the stream waits for its work; then every completion it
		 * owes can be posted before the arena goes away. */
		ex->be->ops->stream_destroy(ex->be, s->stream);
		s->stream = NULL;
		if (ex->be->ops->collect_timings)
			ex->be->ops->collect_timings(ex->be);
		executor_poll_pending(w);
	}
	ring_break(&s->ring, "the session is closed");
	if (s->arena.base)
		ex->be->ops->arena_detach(ex->be, &s->arena);
	s->ex_closed = 1;
	if (s->ring.enabled)
		session_unref(s); /* the rings list's reference */
}

static int exec_request(worker *w, session *s, job *j)
{
	executor *ex = w->ex;
	Tileops__Request *req = j->req;
	if (s->ex_closed) {
		j->status = TILEOPS_ERR_CLOSED;
		snprintf(j->msg, sizeof(j->msg), "the session is closed");
		return 0;
	}
	if (s->ring.enabled && req->ring_mark > s->ring.consumed) {
		j->status = exec_ring_until(w, s, req->ring_mark, j->msg, sizeof(j->msg));
		if (j->status != TILEOPS_OK)
			return 0;
	}
	switch (req->body_case) {
	case TILEOPS__REQUEST__BODY_TENSOR_CREATE:
		tensor_make(ex, s, j, req->tensor_create->dtype, req->tensor_create->n_shape,
		            req->tensor_create->shape, NULL);
		return 0;
	case TILEOPS__REQUEST__BODY_TENSOR_IMPORT:
		tensor_make(ex, s, j, req->tensor_import->dtype, req->tensor_import->n_shape,
		            req->tensor_import->shape, &req->tensor_import->ipc_handle);
		return 0;
	case TILEOPS__REQUEST__BODY_TENSOR_FREE:
		tensor_free(ex, s, j, req->tensor_free->handle);
		return 0;
	case TILEOPS__REQUEST__BODY_TENSOR_WRITE: {
		const Tileops__TensorWrite *m = req->tensor_write;
		return tensor_copy(w, s, j, 1, m->handle, m->tensor_offset, m->arena_offset,
		                   m->length);
	}
	case TILEOPS__REQUEST__BODY_TENSOR_READ: {
		const Tileops__TensorRead *m = req->tensor_read;
		return tensor_copy(w, s, j, 0, m->handle, m->tensor_offset, m->arena_offset,
		                   m->length);
	}
	case TILEOPS__REQUEST__BODY_TENSOR_EXPORT:
		tensor_export(ex, s, j, req->tensor_export->handle);
		return 0;
	case TILEOPS__REQUEST__BODY_OP_RUN:
		j->status = exec_op(ex, s, req->op_run, NULL, 0, NULL, j->msg, sizeof(j->msg));
		return 0;
	case TILEOPS__REQUEST__BODY_SYNC:
		exec_defer(w, s, j, 0);
		return 1;
	case TILEOPS__REQUEST__BODY_PLAN_CREATE:
		plan_create(ex, s, j, req->plan_create);
		return 0;
	case TILEOPS__REQUEST__BODY_PLAN_RUN:
		j->status = plan_run(ex, s, req->plan_run, j->msg, sizeof(j->msg));
		return 0;
	case TILEOPS__REQUEST__BODY_PLAN_FREE:
		plan_free(ex, s, j, req->plan_free->plan);
		return 0;
	case TILEOPS__REQUEST__BODY_PLAN_OPEN:
		plan_open(ex, s, j, req->plan_open->name);
		return 0;
	default:
		j->status = TILEOPS_ERR_PROTOCOL;
		snprintf(j->msg, sizeof(j->msg), "request has no body the executor runs");
		return 0;
	}
}

void exec_job(worker *w, job *j)
{
	executor *ex = w->ex;
	j->status = TILEOPS_OK;
	j->msg[0] = '\0';
	switch (j->kind) {
	case JOB_OPEN:
		exec_open(w, j->s, j);
		break;
	case JOB_CLOSE:
		exec_close(w, j->s);
		break;
	case JOB_REQUEST:
		if (exec_request(w, j->s, j))
			return; /* answered when its fence passes */
		break;
	case JOB_RESET:
		plan_reset_caches(ex);
		break;
	case JOB_WARMUP:
		exec_warmup(ex, j->s, j);
		break;
	}
	executor_hand_back(ex, j);
}
