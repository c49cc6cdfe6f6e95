/*
 * plan.c - plans: op sequences captured once per shape bucket and replayed,
 * and the per-tenant graph cache that holds the captures.
 *
 * A plan belongs to a session; its captured graphs belong to the session's
 * tenant's cache, keyed by (tenant, plan, bucket). Each tenant has its own
 * quota (graphs and bytes) and its own LRU list: filling one tenant's cache
 * evicts only that tenant's least recently used graph, and a graph that does
 * not fit is run without being kept, so a plan never fails for want of room.
 * There is no slot pool shared between tenants to exhaust.
 *
 * A plan's ops may be on several devices, with collectives among them (a
 * tensor-parallel layer). When the plan is made its ops are split into
 * segments: a collective is a segment of its own, queued at every run
 * (a backend collective is not captured), and the other ops between two
 * collectives are one segment per device, captured into one graph on the
 * session's stream of that device. A bucket's cache entry holds the graph
 * of each segment (and each collective prepared for the bucket); a plan on
 * one device without collectives is one segment, one graph, one launch.
 *
 * Executor threads share the cache: every entry point below holds the
 * executor's cache_mu (the loop takes it too, to read the tenants for
 * stats). The static functions expect it held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

#include "clock.h"
#include "devices.h"
#include "launch.h"
#include "log.h"
#include "tensors.h"

/* A captured segment of one bucket: its graph, or its collective. */
typedef struct plan_part {
	void *graph;       /* NULL for a collective */
	prepared_op *coll; /* the collective, prepared for the bucket; owned */
} plan_part;

/* A bucket's entry in the tenant's cache: every segment of it, in plan order. */
typedef struct plan_graph {
	struct plan *plan;
	int bucket;
	size_t bytes; /* the sum over its graphs */
	uint64_t gen; /* the plan's binding generation it was captured with */
	uint64_t last_used;
	struct plan_graph *prev, *next; /* the tenant's LRU list, most recent first */
	int n_parts;
	plan_part parts[]; /* one per segment of the plan */
} plan_graph;

/*
 * Ops a run launches as one: the ops of one device between two collectives
 * (their indices in plan order at seg_ops[first, end)), replayed as one
 * graph on that device's stream; or one collective (device -1).
 */
typedef struct plan_segment {
	int device;
	int first, end;
} plan_segment;

typedef plan_binding binding;

typedef struct plan {
	uint64_t handle;
	char name[64];
	tenant *t;
	session *owner;        /* whose tensors the plan names */
	int shared;            /* a warm-up plan: bindings are per run */
	uint64_t bind_session; /* shared: the session whose tensors are bound */
	int n_named;           /* shared: the tensors, by name, for PlanOpen */
	char (*names)[WARM_NAME_MAX];
	uint64_t *named_handles;
	struct plan *shared_next; /* the tenant's shared plans */
	plan_def *def;            /* owned */
	int n_buckets;            /* 0: no buckets (one graph) */
	int64_t buckets[PLAN_MAX_BUCKETS];
	binding binds[PLAN_MAX_BINDINGS];
	int n_binds;
	uint64_t gen; /* bumped when the bindings change */
	plan_graph *graphs[PLAN_MAX_BUCKETS];
	double est_us[PLAN_MAX_BUCKETS]; /* a run's device time, estimated (share.h) */
	int n_segs;                      /* at least 1 */
	plan_segment *segs;              /* owned */
	int *seg_ops;                    /* every op index once, segment by segment; owned */
	struct plan *next;               /* the session's plans */
} plan;

/* How a plan's ops see tensors while it is checked or captured. */
typedef struct plan_view {
	const session *owner;  /* unbound handles resolve here */
	const session *runner; /* bound tensors resolve here */
	const plan *p;
	int bucket;
} plan_view;

/* ---- tenants ------------------------------------------------------------- */

static tenant *tenant_find(executor *ex, const char *name)
{
	for (tenant *t = ex->tenants; t; t = t->next)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static tenant *tenant_add(executor *ex, const char *name, const tenant_quota *q)
{
	tenant *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->quota = *q;
	t->next = ex->tenants;
	ex->tenants = t;
	return t;
}

static void tenant_remove(executor *ex, tenant *t)
{
	for (tenant **pp = &ex->tenants; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	free(t);
}

static tileops_status plan_join_tenant_locked(executor *ex, session *s, const char *name, char *err,
                                              size_t errlen)
{
	if (!name || !name[0]) {
		char own[64];
		snprintf(own, sizeof(own), "session-%llu", (unsigned long long)s->id);
		s->tenant = tenant_add(ex, own, &ex->cfg.default_quota);
		if (!s->tenant) {
			snprintf(err, errlen, "out of host memory");
			return TILEOPS_ERR_OUT_OF_MEMORY;
		}
		s->tenant->private_to = s->id;
		s->tenant->sessions = 1;
		return TILEOPS_OK;
	}
	const tenant_config *tc = NULL;
	for (int i = 0; i < ex->cfg.n_tenants; i++)
		if (strcmp(ex->cfg.tenants[i].name, name) == 0)
			tc = &ex->cfg.tenants[i];
	if (!tc) {
		snprintf(err, errlen,
		         "tenant '%.64s' is not configured (see 'tenant' in the config)", name);
		return TILEOPS_ERR_PERMISSION;
	}
	if (!s->internal && ((tc->uid >= 0 && s->uid != tc->uid && s->uid != 0) ||
	                     (tc->gid >= 0 && !session_in_group(s, tc->gid) && s->uid != 0))) {
		snprintf(err, errlen,
		         "uid %lld may not join tenant '%s' (it admits uid %lld and gid %lld, -1 "
		         "meaning any; root always)",
		         (long long)s->uid, tc->name, (long long)tc->uid, (long long)tc->gid);
		return TILEOPS_ERR_PERMISSION;
	}
	tenant *t = tenant_find(ex, name);
	if (!t)
		t = tenant_add(ex, name, &tc->quota);
	if (!t) {
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	t->sessions++;
	s->tenant = t;
	return TILEOPS_OK;
}

/* ---- the cache ----------------------------------------------------------- */

static void lru_unlink(tenant *t, plan_graph *g)
{
	if (g->prev)
		g->prev->next = g->next;
	else
		t->lru_head = g->next;
	if (g->next)
		g->next->prev = g->prev;
	else
		t->lru_tail = g->prev;
	g->prev = g->next = NULL;
}

static void lru_push_front(tenant *t, plan_graph *g)
{
	g->prev = NULL;
	g->next = t->lru_head;
	if (t->lru_head)
		t->lru_head->prev = g;
	t->lru_head = g;
	if (!t->lru_tail)
		t->lru_tail = g;
}

/* An entry for bucket b of p, its parts empty (not in the cache). */
static plan_graph *graph_entry_new(plan *p, int b)
{
	plan_graph *g = calloc(1, sizeof(*g) + sizeof(plan_part) * (size_t)p->n_segs);
	if (!g)
		return NULL;
	g->plan = p;
	g->bucket = b;
	g->n_parts = p->n_segs;
	return g;
}

/* Destroy an entry's graphs and free it (taken out of the cache before).
 * NULL is a no-op. */
static void graph_entry_free(executor *ex, plan_graph *g)
{
	if (!g)
		return;
	for (int k = 0; k < g->n_parts; k++) {
		ex->be->ops->graph_destroy(ex->be, g->parts[k].graph);
		free(g->parts[k].coll);
	}
	free(g);
}

/* Take an entry out of its tenant's cache (the entry stays). */
static void graph_uncache(plan_graph *g)
{
	tenant *t = g->plan->t;
	lru_unlink(t, g);
	g->plan->graphs[g->bucket] = NULL;
	t->n_graphs--;
	t->n_segments -= g->n_parts;
	t->bytes -= g->bytes;
}

static void graph_drop(executor *ex, plan_graph *g, int evicted)
{
	if (evicted)
		g->plan->t->st.evictions++;
	graph_uncache(g);
	graph_entry_free(ex, g);
}

/* Make room for one more graph in t, evicting t's own LRU graphs only. */
static void cache_make_room(executor *ex, tenant *t, size_t more_bytes)
{
	while (t->lru_tail && (t->n_graphs + 1 > t->quota.graphs ||
	                       (t->quota.bytes && t->bytes + more_bytes > t->quota.bytes)))
		graph_drop(ex, t->lru_tail, 1);
}

static void plan_reset_caches_locked(executor *ex)
{
	for (tenant *t = ex->tenants; t; t = t->next)
		while (t->lru_tail)
			graph_drop(ex, t->lru_tail, 0);
	for (tenant *t = ex->tenants; t; t = t->next)
		memset(&t->st, 0, sizeof(t->st));
}

/* ---- views --------------------------------------------------------------- */

static int is_bucketed(const plan *p, uint64_t handle)
{
	for (int i = 0; i < p->def->n_bucketed; i++)
		if (p->def->bucketed[i] == handle)
			return 1;
	return 0;
}

/* The view of a handle as the plan's ops see it (a tensor_resolver). */
static tileops_status plan_view_of(const void *ctx, uint64_t handle, tk_tensor *v, int *device)
{
	const plan_view *pv = ctx;
	const session *where = pv->owner;
	uint64_t h = handle;
	for (int i = 0; i < pv->p->n_binds; i++) {
		if (pv->p->binds[i].plan_tensor == handle) {
			h = pv->p->binds[i].tensor;
			where = pv->runner;
		}
	}
	tensor *t = session_tensor_find(where, h);
	if (!t)
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	*v = t->view;
	*device = t->mem->device;
	if (pv->p->n_buckets && is_bucketed(pv->p, handle))
		v->shape[0] = pv->p->buckets[pv->bucket];
	return TILEOPS_OK;
}

/* The message of a failure of op i of p for a bucket: it names both. */
static void plan_op_error(const plan *p, int bucket, int i, const char *msg, char *err,
                          size_t errlen)
{
	int w = p->n_buckets ? snprintf(err, errlen, "plan op %d, bucket %lld: %s", i,
	                                (long long)p->buckets[bucket], msg)
	                     : snprintf(err, errlen, "plan op %d: %s", i, msg);
	/* Cut to fit: its end says so. */
	if (w >= (int)errlen && errlen > 4)
		memcpy(err + errlen - 4, "...", 4);
}

/* Prepare op i of p for a bucket (launch_prepare, the error named). */
static tileops_status plan_op_prepare(executor *ex, const tensor_resolver *views, const plan *p,
                                      int bucket, int i, prepared_op *op, char *err, size_t errlen)
{
	char msg[400];
	tileops_status st = launch_prepare(ex, views, &p->def->ops[i], op, msg, sizeof(msg));
	if (st != TILEOPS_OK)
		plan_op_error(p, bucket, i, msg, err, errlen);
	return st;
}

/*
 * Check every op of p for a bucket, in plan order, and estimate the
 * bucket's device time (without its collectives, which are neither timed
 * nor charged, as outside plans). device_of, when not NULL, gets each op's
 * device, -1 for a collective.
 */
static tileops_status plan_check(executor *ex, session *s, plan *p, int bucket, int *device_of,
                                 char *err, size_t errlen)
{
	plan_view pv = { p->owner ? p->owner : s, s, p, bucket };
	tensor_resolver views = { plan_view_of, &pv };
	double est = 0.0;
	for (int i = 0; i < p->def->n_ops; i++) {
		prepared_op op;
		tileops_status st = plan_op_prepare(ex, &views, p, bucket, i, &op, err, errlen);
		if (st != TILEOPS_OK)
			return st;
		if (!op.collective && !op.writes_nothing)
			est += op.est_us;
		if (device_of)
			device_of[i] = op.collective ? -1 : op.device;
	}
	p->est_us[bucket] = est;
	return TILEOPS_OK;
}

/*
 * Split p's ops into segments, from each op's device (-1: a collective).
 * Between two collectives, the ops of each device, in plan order, are one
 * segment, the devices taken in the order of their first op there; each
 * collective is a segment of its own. This keeps the order of every
 * device's ops, and a collective comes after everything before it on its
 * ranks' devices and before everything after it. Ops on two devices share
 * no memory (an op's tensors are on one device, and only collectives move
 * data between devices), so how their segments interleave does not matter,
 * and ops interleaved over devices cost one launch per device, not per op.
 * The devices are those of every bucket (a bucket changes shapes, not
 * tensors), so the segments are the plan's, found once.
 */
static tileops_status plan_split(plan *p, const int *device_of, char *err, size_t errlen)
{
	int n = p->def->n_ops;
	p->segs = calloc((size_t)n + 1, sizeof(*p->segs));
	p->seg_ops = calloc((size_t)n + 1, sizeof(*p->seg_ops));
	if (!p->segs || !p->seg_ops) {
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	int k = 0, at = 0;
	for (int i = 0; i < n;) {
		if (device_of[i] < 0) {
			p->segs[k++] = (plan_segment){ -1, at, at + 1 };
			p->seg_ops[at++] = i++;
			continue;
		}
		int end = i, stretch = k;
		while (end < n && device_of[end] >= 0)
			end++;
		for (int j = i; j < end; j++) {
			int seen = 0;
			for (int m = stretch; m < k && !seen; m++)
				seen = p->segs[m].device == device_of[j];
			if (seen)
				continue;
			p->segs[k] = (plan_segment){ device_of[j], at, at };
			for (int q = j; q < end; q++)
				if (device_of[q] == device_of[j])
					p->seg_ops[at++] = q;
			p->segs[k++].end = at;
		}
		i = end;
	}
	if (k == 0) /* no ops: one empty graph, as on device 0 */
		p->segs[k++] = (plan_segment){ 0, 0, 0 };
	p->n_segs = k;
	return TILEOPS_OK;
}

/* ---- create, run, free --------------------------------------------------- */

/* Check what the definition says of the session's tensors and buckets
 * (its counts were bounded when it was decoded). */
static tileops_status plan_check_def(const plan_def *d, plan *p, session *s, char *err,
                                     size_t errlen)
{
	for (int i = 0; i < d->n_buckets; i++) {
		if (d->buckets[i] < 1 || (i && d->buckets[i] <= d->buckets[i - 1])) {
			snprintf(err, errlen,
			         "buckets must be positive and ascending (bucket %d is %lld)", i,
			         (long long)d->buckets[i]);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
		p->buckets[i] = d->buckets[i];
	}
	p->n_buckets = d->n_buckets;
	if (d->n_bucketed && !d->n_buckets) {
		snprintf(err, errlen, "bucketed tensors given without buckets");
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	int64_t largest = d->n_buckets ? d->buckets[d->n_buckets - 1] : 0;
	for (int i = 0; i < d->n_bucketed; i++) {
		tensor *t = session_tensor_find(s, d->bucketed[i]);
		if (!t) {
			snprintf(err, errlen,
			         "bucketed tensor %llu is not a tensor of this session",
			         (unsigned long long)d->bucketed[i]);
			return TILEOPS_ERR_UNKNOWN_HANDLE;
		}
		if (t->view.ndim < 1 || t->view.shape[0] != largest) {
			snprintf(err, errlen,
			         "bucketed tensor %llu has dim 0 of %lld; it must equal "
			         "the largest bucket, %lld",
			         (unsigned long long)d->bucketed[i],
			         (long long)(t->view.ndim ? t->view.shape[0] : 0),
			         (long long)largest);
			return TILEOPS_ERR_SHAPE;
		}
	}
	return TILEOPS_OK;
}

void plan_create(executor *ex, session *s, job *j, plan_def **defp)
{
	plan *p = calloc(1, sizeof(*p));
	if (!p) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	p->def = *defp;
	*defp = NULL;
	p->t = s->tenant;
	p->owner = s;
	snprintf(p->name, sizeof(p->name), "%s", p->def->name);
	j->status = plan_check_def(p->def, p, s, j->msg, sizeof(j->msg));
	/* Every op, every bucket, checked now: a run never meets a rule error. */
	int nb = p->n_buckets ? p->n_buckets : 1;
	int *device_of = calloc((size_t)p->def->n_ops + 1, sizeof(*device_of));
	if (!device_of && j->status == TILEOPS_OK) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
	}
	for (int b = 0; b < nb && j->status == TILEOPS_OK; b++)
		j->status =
		        plan_check(ex, s, p, b, b == 0 ? device_of : NULL, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		j->status = plan_split(p, device_of, j->msg, sizeof(j->msg));
	free(device_of);
	if (j->status != TILEOPS_OK) {
		plan_def_free(p->def);
		free(p->segs);
		free(p->seg_ops);
		free(p);
		return;
	}
	p->handle = exec_next_handle(ex);
	p->next = s->plans;
	s->plans = p;
	j->handle = p->handle;
}

static plan *plan_find(session *s, uint64_t handle)
{
	for (plan *p = s->plans; p; p = p->next)
		if (p->handle == handle)
			return p;
	for (plan *p = s->tenant ? s->tenant->shared : NULL; p; p = p->shared_next)
		if (p->handle == handle)
			return p;
	return NULL;
}

/* Check binding i: the plan tensor (in `owner`) and the tensor to use in
 * its place (in `runner`) exist and agree in dtype and shape. */
static tileops_status binding_check(const session *owner, const session *runner, int i,
                                    const plan_binding *b, char *err, size_t errlen)
{
	tensor *from = session_tensor_find(owner, b->plan_tensor);
	tensor *to = session_tensor_find(runner, b->tensor);
	if (!from || !to) {
		snprintf(err, errlen, "binding %d: tensor %llu is not a %s", i,
		         (unsigned long long)(from ? b->tensor : b->plan_tensor),
		         from || owner == runner ? "tensor of this session" : "tensor of the plan");
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	}
	if (from->view.dtype != to->view.dtype || from->view.ndim != to->view.ndim ||
	    memcmp(from->view.shape, to->view.shape, sizeof(int64_t) * (size_t)from->view.ndim)) {
		snprintf(err, errlen,
		         "binding %d: tensor %llu differs in dtype or shape from "
		         "plan tensor %llu",
		         i, (unsigned long long)b->tensor, (unsigned long long)b->plan_tensor);
		return TILEOPS_ERR_SHAPE;
	}
	if (from->mem->device != to->mem->device) {
		snprintf(err, errlen,
		         "binding %d: tensor %llu is on device %d, plan tensor %llu on device %d: "
		         "a binding must be on the device of the tensor it replaces (the plan's "
		         "ops on it run there)",
		         i, (unsigned long long)b->tensor, to->mem->device,
		         (unsigned long long)b->plan_tensor, from->mem->device);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	return TILEOPS_OK;
}

/* A shared plan's bindings are those of the run: set them, and note whether
 * they changed (another session, or other tensors). */
static tileops_status plan_bind_shared(session *s, plan *p, const plan_run_desc *m, char *err,
                                       size_t errlen)
{
	for (int i = 0; i < m->n_bindings; i++) {
		tileops_status st = binding_check(p->owner, s, i, &m->bindings[i], err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	int same = p->bind_session == s->id && p->n_binds == m->n_bindings &&
	           memcmp(p->binds, m->bindings, sizeof(binding) * (size_t)m->n_bindings) == 0;
	if (!same) {
		memcpy(p->binds, m->bindings, sizeof(binding) * (size_t)m->n_bindings);
		p->n_binds = m->n_bindings;
		p->bind_session = s->id;
		p->gen++;
	}
	return TILEOPS_OK;
}

static tileops_status plan_bind(session *s, plan *p, const plan_run_desc *m, char *err,
                                size_t errlen)
{
	if (p->shared)
		return plan_bind_shared(s, p, m, err, errlen);
	for (int i = 0; i < m->n_bindings; i++) {
		const plan_binding *b = &m->bindings[i];
		tileops_status st = binding_check(s, s, i, b, err, errlen);
		if (st != TILEOPS_OK)
			return st;
		int k = 0;
		while (k < p->n_binds && p->binds[k].plan_tensor != b->plan_tensor)
			k++;
		if (k == PLAN_MAX_BINDINGS) {
			snprintf(err, errlen, "a plan keeps at most %d bindings",
			         PLAN_MAX_BINDINGS);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
		uint64_t now = k < p->n_binds ? p->binds[k].tensor : b->plan_tensor;
		if (now == b->tensor)
			continue;
		p->binds[k] = (binding){ b->plan_tensor, b->tensor };
		if (k == p->n_binds)
			p->n_binds++;
		p->gen++;
	}
	return TILEOPS_OK;
}

/* 1 when the tensor bound in place of a plan tensor is laid out otherwise
 * (a view with other strides): the plan's ops were checked with the plan's
 * own layout, so they are checked again with the new one. */
static int binding_restrides(const plan *p, const session *runner, const plan_run_desc *m)
{
	for (int i = 0; i < m->n_bindings; i++) {
		const tensor *from = session_tensor_find(p->owner, m->bindings[i].plan_tensor);
		const tensor *to = session_tensor_find(runner, m->bindings[i].tensor);
		if (!from || !to)
			continue;
		for (int d = 0; d < to->view.ndim; d++)
			if (to->view.shape[d] > 1 && to->view.stride[d] != from->view.stride[d])
				return 1;
	}
	return 0;
}

/* Bind the run's tensors; a binding to a tensor of another layout is checked
 * against every op and bucket first, and refused (the plan's bindings left
 * as they were) when an op cannot take it. */
static tileops_status plan_bind_checked(executor *ex, session *s, plan *p, const plan_run_desc *m,
                                        char *err, size_t errlen)
{
	binding saved[PLAN_MAX_BINDINGS];
	int n_saved = p->n_binds;
	uint64_t gen = p->gen, bind_session = p->bind_session;
	memcpy(saved, p->binds, sizeof(binding) * (size_t)n_saved);
	tileops_status st = plan_bind(s, p, m, err, errlen);
	if (st != TILEOPS_OK || p->gen == gen || !binding_restrides(p, s, m))
		return st;
	char msg[400];
	int nb = p->n_buckets ? p->n_buckets : 1;
	for (int b = 0; b < nb && st == TILEOPS_OK; b++)
		st = plan_check(ex, s, p, b, NULL, msg, sizeof(msg));
	if (st != TILEOPS_OK) {
		snprintf(err, errlen, "plan_run: a binding's layout does not suit the plan: %s",
		         msg);
		memcpy(p->binds, saved, sizeof(binding) * (size_t)n_saved);
		p->n_binds = n_saved;
		p->bind_session = bind_session;
		p->gen = gen;
		for (int b = 0; b < nb; b++) /* the estimates of the bindings kept */
			(void)plan_check(ex, s, p, b, NULL, msg, sizeof(msg));
	}
	return st;
}

static int pick_bucket(const plan *p, int64_t size)
{
	if (!p->n_buckets)
		return 0;
	if (size <= 0)
		return p->n_buckets - 1;
	for (int b = 0; b < p->n_buckets; b++)
		if (p->buckets[b] >= size)
			return b;
	return -1;
}

/*
 * Record segment sg of p for a bucket into a graph on s's stream of its
 * device. *graph, when not NULL, is the segment's earlier graph, updated in
 * place where the backend can (capture_end).
 */
static tileops_status plan_capture_graph(executor *ex, session *s, const tensor_resolver *views,
                                         const plan *p, int bucket, const plan_segment *sg,
                                         void **graph, size_t *bytes, char *err, size_t errlen)
{
	void *stream = NULL;
	tileops_status st = devices_stream(ex, s, sg->device, &stream, err, errlen);
	if (st == TILEOPS_OK)
		st = ex->be->ops->capture_begin(ex->be, stream, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	for (int k = sg->first; k < sg->end; k++) {
		int i = p->seg_ops[k];
		prepared_op op;
		char msg[400];
		st = plan_op_prepare(ex, views, p, bucket, i, &op, err, errlen);
		if (st != TILEOPS_OK)
			break;
		if (op.device != sg->device) {
			/* Bindings keep their tensors' devices: this is a bug. */
			snprintf(msg, sizeof(msg), "on device %d, its segment's device is %d",
			         op.device, sg->device);
			st = TILEOPS_ERR_INTERNAL;
		} else if (!op.writes_nothing) {
			st = ex->be->ops->launch(ex->be, stream, op.kernel, &op.call, 0, -1, NULL,
			                         msg, sizeof(msg));
		}
		if (st != TILEOPS_OK) {
			plan_op_error(p, bucket, i, msg, err, errlen);
			break;
		}
	}
	if (st != TILEOPS_OK) {
		ex->be->ops->capture_abort(ex->be, stream);
		return st;
	}
	return ex->be->ops->capture_end(ex->be, stream, graph, bytes, err, errlen);
}

/* Prepare the collective op i of p for a bucket into *coll (made on first use). */
static tileops_status plan_prepare_collective(executor *ex, const tensor_resolver *views,
                                              const plan *p, int bucket, int i, prepared_op **coll,
                                              char *err, size_t errlen)
{
	if (!*coll && !(*coll = malloc(sizeof(**coll)))) {
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	return plan_op_prepare(ex, views, p, bucket, i, *coll, err, errlen);
}

/* Capture (or update) every segment of bucket b into g, which is not cached. */
static tileops_status plan_capture(executor *ex, session *s, plan *p, int b, plan_graph *g,
                                   char *err, size_t errlen)
{
	plan_view pv = { p->owner ? p->owner : s, s, p, b };
	tensor_resolver views = { plan_view_of, &pv };
	double t0 = clock_now_us();
	tileops_status st = TILEOPS_OK;
	g->bytes = 0;
	for (int k = 0; k < p->n_segs && st == TILEOPS_OK; k++) {
		const plan_segment *sg = &p->segs[k];
		size_t bytes = 0;
		if (sg->device < 0)
			st = plan_prepare_collective(ex, &views, p, b, p->seg_ops[sg->first],
			                             &g->parts[k].coll, err, errlen);
		else
			st = plan_capture_graph(ex, s, &views, p, b, sg, &g->parts[k].graph, &bytes,
			                        err, errlen);
		g->bytes += bytes;
	}
	if (st == TILEOPS_OK) {
		p->t->st.captures++;
		p->t->st.capture_us += clock_now_us() - t0;
	}
	return st;
}

/*
 * The entry of bucket b in the tenant's cache, captured (or updated in place
 * after new bindings) when it is missing or stale. When the tenant's quota
 * cannot hold it even after evicting, *once gets an entry to launch once and
 * free (graph_entry_free), and *out is NULL.
 */
static tileops_status plan_graph_get(executor *ex, session *s, plan *p, int b, plan_graph **out,
                                     plan_graph **once, char *err, size_t errlen)
{
	tenant *t = p->t;
	plan_graph *g = p->graphs[b];
	*out = NULL;
	*once = NULL;
	if (g && g->gen == p->gen) {
		t->st.hits++;
		*out = g;
		return TILEOPS_OK;
	}
	t->st.misses++;
	if (g) /* new bindings: its graphs are updated in place */
		graph_uncache(g);
	else if (!(g = graph_entry_new(p, b))) {
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	tileops_status st = plan_capture(ex, s, p, b, g, err, errlen);
	if (st != TILEOPS_OK) {
		graph_entry_free(ex, g);
		return st;
	}
	g->gen = p->gen;
	cache_make_room(ex, t, g->bytes);
	if (t->n_graphs + 1 > t->quota.graphs ||
	    (t->quota.bytes && t->bytes + g->bytes > t->quota.bytes)) {
		*once = g;
		return TILEOPS_OK;
	}
	p->graphs[b] = g;
	lru_push_front(t, g);
	t->n_graphs++;
	t->n_segments += g->n_parts;
	t->bytes += g->bytes;
	*out = g;
	return TILEOPS_OK;
}

/*
 * Replay a captured bucket: its segments in plan order, each graph on s's
 * stream of its device and each collective on the streams of its ranks'
 * devices. A failure stops the run there; what was launched stays queued.
 */
static tileops_status plan_launch(executor *ex, session *s, const plan *p, const plan_graph *g,
                                  char *err, size_t errlen)
{
	for (int k = 0; k < g->n_parts; k++) {
		const plan_part *part = &g->parts[k];
		void *stream = NULL;
		tileops_status st;
		if (p->segs[k].device >= 0) {
			st = devices_stream(ex, s, p->segs[k].device, &stream, err, errlen);
			if (st == TILEOPS_OK)
				st = ex->be->ops->graph_launch(ex->be, stream, part->graph, err,
				                               errlen);
		} else if (!part->coll->writes_nothing) {
			char msg[400];
			st = launch_collective(ex, s, part->coll, msg, sizeof(msg));
			if (st != TILEOPS_OK)
				plan_op_error(p, g->bucket, p->seg_ops[p->segs[k].first], msg, err,
				              errlen);
		} else {
			st = TILEOPS_OK;
		}
		if (st != TILEOPS_OK)
			return st;
	}
	return TILEOPS_OK;
}

static tileops_status plan_run_locked(executor *ex, session *s, const plan_run_desc *m, char *err,
                                      size_t errlen)
{
	plan *p = plan_find(s, m->plan);
	if (!p) {
		snprintf(err, errlen, "plan_run: plan %llu is not a plan of this session",
		         (unsigned long long)m->plan);
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	}
	int b = pick_bucket(p, m->size);
	if (b < 0) {
		snprintf(err, errlen, "plan_run: size %lld is larger than the largest bucket, %lld",
		         (long long)m->size, (long long)p->buckets[p->n_buckets - 1]);
		return TILEOPS_ERR_SHAPE;
	}
	tileops_status st = plan_bind_checked(ex, s, p, m, err, errlen);
	plan_graph *g = NULL, *once = NULL;
	if (st == TILEOPS_OK)
		st = plan_graph_get(ex, s, p, b, &g, &once, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	p->t->st.runs++;
	launch_share(ex, s, p->est_us[b]);
	if (once) {
		/* Over the quota even when empty: run it once, keep nothing. */
		st = plan_launch(ex, s, p, once, err, errlen);
		graph_entry_free(ex, once);
	} else {
		if (g->prev) {
			lru_unlink(p->t, g);
			lru_push_front(p->t, g);
		}
		g->last_used = ++ex->lru_clock;
		st = plan_launch(ex, s, p, g, err, errlen);
	}
	if (st == TILEOPS_OK)
		share_charge(ex->be, s->stream, &s->share, ex->cfg.queue_us, p->est_us[b]);
	return st;
}

static void plan_drop_graphs(executor *ex, plan *p)
{
	for (int b = 0; b < PLAN_MAX_BUCKETS; b++)
		if (p->graphs[b])
			graph_drop(ex, p->graphs[b], 0);
}

static void plan_destroy(executor *ex, plan *p)
{
	plan_drop_graphs(ex, p);
	plan_def_free(p->def);
	free(p->segs);
	free(p->seg_ops);
	free(p->names);
	free(p->named_handles);
	free(p);
}

/* A session that bound its tensors into a shared plan is done with them:
 * drop the graphs that hold their addresses and forget the bindings. */
static void plan_unbind_shared(executor *ex, session *s, uint64_t handle)
{
	for (plan *p = s->tenant ? s->tenant->shared : NULL; p; p = p->shared_next) {
		if (p->bind_session != s->id)
			continue;
		int uses = handle == 0;
		for (int i = 0; i < p->n_binds && !uses; i++)
			uses = p->binds[i].tensor == handle;
		if (!uses)
			continue;
		plan_drop_graphs(ex, p);
		p->n_binds = 0;
		p->bind_session = 0;
		p->gen++;
	}
}

static void plan_free_locked(executor *ex, session *s, job *j, uint64_t handle)
{
	for (plan **pp = &s->plans; *pp; pp = &(*pp)->next) {
		if ((*pp)->handle == handle) {
			plan *p = *pp;
			*pp = p->next;
			plan_destroy(ex, p);
			return;
		}
	}
	j->status = TILEOPS_ERR_UNKNOWN_HANDLE;
	snprintf(j->msg, sizeof(j->msg), "plan_free: plan %llu is not a plan of this session",
	         (unsigned long long)handle);
}

static void plan_forget_tensor_locked(executor *ex, session *s, uint64_t handle)
{
	/* A graph holds the tensor's address: drop every graph that may use it,
	 * so the next run captures again (and reports the missing tensor). */
	plan_unbind_shared(ex, s, handle);
	for (plan *p = s->plans; p; p = p->next) {
		int uses = 0;
		for (int i = 0; i < p->n_binds; i++)
			uses |= p->binds[i].tensor == handle || p->binds[i].plan_tensor == handle;
		for (int i = 0; i < p->def->n_ops && !uses; i++) {
			const op_desc *op = &p->def->ops[i];
			for (int k = 0; k < op->n_in; k++)
				uses |= op->in[k] == handle;
			for (int k = 0; k < op->n_out; k++)
				uses |= op->out[k] == handle;
		}
		if (uses)
			plan_drop_graphs(ex, p);
	}
}

static void plan_close_session_locked(executor *ex, session *s)
{
	if (s->tenant) {
		plan_unbind_shared(ex, s, 0);
		/* A warm-up session going away takes its shared plans along. */
		for (plan **pp = &s->tenant->shared; *pp;) {
			if ((*pp)->owner == s)
				*pp = (*pp)->shared_next;
			else
				pp = &(*pp)->shared_next;
		}
	}
	while (s->plans) {
		plan *p = s->plans;
		s->plans = p->next;
		plan_destroy(ex, p);
	}
	tenant *t = s->tenant;
	s->tenant = NULL;
	if (!t)
		return;
	int last = --t->sessions == 0;
	if (last && t->private_to)
		tenant_remove(ex, t);
}

/* ---- warm-up plans ------------------------------------------------------- */

/* The definition of a warm-up plan over the tensors just made. */
static plan_def *warm_def(const warm_plan *wp, const uint64_t *handles)
{
	plan_def *d = calloc(1, sizeof(*d));
	if (!d || !(d->ops = calloc((size_t)wp->n_ops + 1, sizeof(*d->ops))) ||
	    !(d->bucketed = calloc((size_t)wp->n_bucketed + 1, sizeof(*d->bucketed)))) {
		plan_def_free(d);
		return NULL;
	}
	snprintf(d->name, sizeof(d->name), "%s", wp->name);
	d->n_ops = wp->n_ops;
	for (int i = 0; i < wp->n_ops; i++) {
		const warm_op *o = &wp->ops[i];
		op_desc *r = &d->ops[i];
		snprintf(r->op, sizeof(r->op), "%s", o->op);
		r->n_in = o->n_in;
		for (int k = 0; k < o->n_in; k++)
			r->in[k] = handles[o->in[k]];
		r->n_out = o->n_out;
		for (int k = 0; k < o->n_out; k++)
			r->out[k] = handles[o->out[k]];
		r->n_params = o->n_params;
		for (int k = 0; k < o->n_params; k++) {
			snprintf(r->param_names[k], sizeof(r->param_names[k]), "%s",
			         o->param_names[k]);
			r->params[k] = o->params[k];
		}
	}
	d->n_buckets = wp->n_buckets;
	memcpy(d->buckets, wp->buckets, sizeof(int64_t) * (size_t)wp->n_buckets);
	d->n_bucketed = wp->n_bucketed;
	for (int i = 0; i < wp->n_bucketed; i++)
		d->bucketed[i] = handles[wp->bucketed[i]];
	return d;
}

static tileops_status plan_warmup_locked(executor *ex, session *s, job *j, const warm_plan *wp)
{
	/* The tensors, then the plan over them, then every bucket captured. */
	uint64_t handles[WARM_MAX_TENSORS];
	for (int i = 0; i < wp->n_tensors; i++) {
		tensors_make_warm(ex, s, j, &wp->tensors[i]);
		if (j->status != TILEOPS_OK)
			return j->status;
		handles[i] = j->handle;
	}
	plan_def *d = warm_def(wp, handles);
	if (!d) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return j->status;
	}
	plan_create(ex, s, j, &d);
	if (j->status != TILEOPS_OK)
		return j->status;
	plan *p = s->plans; /* plan_create put it first */
	p->shared = 1;
	p->names = calloc((size_t)wp->n_tensors, sizeof(*p->names));
	p->named_handles = calloc((size_t)wp->n_tensors, sizeof(*p->named_handles));
	if (!p->names || !p->named_handles) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return j->status;
	}
	for (int i = 0; i < wp->n_tensors; i++) {
		snprintf(p->names[i], WARM_NAME_MAX, "%s", wp->tensors[i].name);
		p->named_handles[i] = handles[i];
	}
	p->n_named = wp->n_tensors;
	p->shared_next = s->tenant->shared;
	s->tenant->shared = p;
	int nb = p->n_buckets ? p->n_buckets : 1;
	for (int b = 0; b < nb; b++) {
		plan_graph *g, *once;
		j->status = plan_graph_get(ex, s, p, b, &g, &once, j->msg, sizeof(j->msg));
		if (j->status != TILEOPS_OK)
			return j->status;
		if (once) {
			graph_entry_free(ex, once);
			log_warn(
			        "warm-up plan '%s': tenant '%s' cannot keep bucket %lld within its "
			        "quota; it will be captured when run",
			        p->name, p->t->name, (long long)(p->n_buckets ? p->buckets[b] : 0));
		}
	}
	return TILEOPS_OK;
}

static void plan_open_locked(executor *ex, session *s, job *j, const char *name)
{
	plan *p = s->tenant ? s->tenant->shared : NULL;
	while (p && strcmp(p->name, name ? name : "") != 0)
		p = p->shared_next;
	if (!p) {
		j->status = TILEOPS_ERR_UNKNOWN_HANDLE;
		snprintf(j->msg, sizeof(j->msg),
		         "plan_open: no warm-up plan '%.64s' in tenant '%s'", name ? name : "",
		         s->tenant ? s->tenant->name : "?");
		return;
	}
	plan_open_result *r = calloc(1, sizeof(*r));
	plan_open_tensor *ts = calloc((size_t)p->n_named + 1, sizeof(*ts));
	if (!r || !ts) {
		free(r);
		free(ts);
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	r->plan = p->handle;
	r->tensors = ts;
	r->n_tensors = p->n_named;
	for (int i = 0; i < p->n_named; i++) {
		const tensor *t = session_tensor_find(p->owner, p->named_handles[i]);
		snprintf(ts[i].name, sizeof(ts[i].name), "%s", p->names[i]);
		ts[i].handle = p->named_handles[i];
		if (t) {
			ts[i].dtype = (int)t->view.dtype;
			ts[i].ndim = t->view.ndim;
			memcpy(ts[i].shape, t->view.shape, sizeof(int64_t) * (size_t)t->view.ndim);
		}
	}
	r->n_buckets = p->n_buckets;
	memcpy(r->buckets, p->buckets, sizeof(int64_t) * (size_t)p->n_buckets);
	j->open = r;
}

void plan_open_result_free(plan_open_result *r)
{
	if (!r)
		return;
	free(r->tensors);
	free(r);
}

static void plan_write_tenants_json_locked(executor *ex, strbuf *sb)
{
	sb_printf(sb, "\"tenants\":{");
	int first = 1;
	for (tenant *t = ex->tenants; t; t = t->next) {
		sb_printf(sb, "%s", first ? "" : ",");
		first = 0;
		sb_json_string(sb, t->name);
		sb_printf(
		        sb,
		        ":{\"sessions\":%d,\"graphs\":%d,\"graph_segments\":%d,\"graph_bytes\":%zu,"
		        "\"quota_graphs\":%d,\"quota_bytes\":%zu,\"runs\":%llu,\"hits\":%llu,"
		        "\"misses\":%llu,\"captures\":%llu,\"evictions\":%llu,\"capture_us\":%.1f}",
		        t->sessions, t->n_graphs, t->n_segments, t->bytes, t->quota.graphs,
		        t->quota.bytes, (unsigned long long)t->st.runs,
		        (unsigned long long)t->st.hits, (unsigned long long)t->st.misses,
		        (unsigned long long)t->st.captures, (unsigned long long)t->st.evictions,
		        t->st.capture_us);
	}
	sb_printf(sb, "}");
}

/* ---- the entry points: each holds the cache lock -------------------------- */

tileops_status plan_join_tenant(executor *ex, session *s, const char *name, char *err,
                                size_t errlen)
{
	pthread_mutex_lock(&ex->cache_mu);
	tileops_status st = plan_join_tenant_locked(ex, s, name, err, errlen);
	pthread_mutex_unlock(&ex->cache_mu);
	return st;
}

void plan_reset_caches(executor *ex)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_reset_caches_locked(ex);
	pthread_mutex_unlock(&ex->cache_mu);
}

tileops_status plan_run(executor *ex, session *s, const plan_run_desc *m, char *err, size_t errlen)
{
	pthread_mutex_lock(&ex->cache_mu);
	tileops_status st = plan_run_locked(ex, s, m, err, errlen);
	pthread_mutex_unlock(&ex->cache_mu);
	return st;
}

void plan_free(executor *ex, session *s, job *j, uint64_t handle)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_free_locked(ex, s, j, handle);
	pthread_mutex_unlock(&ex->cache_mu);
}

void plan_forget_tensor(executor *ex, session *s, uint64_t handle)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_forget_tensor_locked(ex, s, handle);
	pthread_mutex_unlock(&ex->cache_mu);
}

void plan_close_session(executor *ex, session *s)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_close_session_locked(ex, s);
	pthread_mutex_unlock(&ex->cache_mu);
}

tileops_status plan_warmup(executor *ex, session *s, job *j, const warm_plan *wp)
{
	pthread_mutex_lock(&ex->cache_mu);
	tileops_status st = plan_warmup_locked(ex, s, j, wp);
	pthread_mutex_unlock(&ex->cache_mu);
	return st;
}

void plan_open(executor *ex, session *s, job *j, const char *name)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_open_locked(ex, s, j, name);
	pthread_mutex_unlock(&ex->cache_mu);
}

void plan_write_tenants_json(executor *ex, strbuf *sb)
{
	pthread_mutex_lock(&ex->cache_mu);
	plan_write_tenants_json_locked(ex, sb);
	pthread_mutex_unlock(&ex->cache_mu);
}
