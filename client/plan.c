/*
 * plan.c - plans: ops recorded on the client, sent to tileopsd once
 * (PlanCreate), then replayed by handle (PlanRun) as often as wanted; and
 * the admin reset of the daemon's graph caches.
 *
 * A plan being built lives only here: tileops_plan_add checks each op as
 * tileops_op_run would and keeps its encoded OpRun. tileops_plan_end sends
 * them all in one request; the daemon checks every op for every bucket and
 * answers with the plan's handle. Runs travel like single ops: through the
 * session's submission ring when it has one and the request fits an entry,
 * over nng otherwise, in the client's program order either way.
 *
 * A plan holds a reference to its client, so tileops_plan_free is safe
 * after tileops_close (the daemon freed the session's plans already; only
 * the local memory goes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tileops_plan {
	tileops_client *client;
	uint64_t handle; /* the daemon's, once ended; 0 before */
	char *name;
	int64_t *buckets;
	size_t n_buckets;
	uint64_t *bucketed;
	size_t n_bucketed;
	Tileops__OpRun **ops; /* owned copies (protobuf-c unpacked) */
	size_t n_ops;
	size_t cap_ops;
	Tileops__PlanOpenReply *opened; /* a warm-up plan: its tensors; owned */
};

/* ---- building ------------------------------------------------------------ */

static tileops_status plan_check_options(const tileops_plan_options *o)
{
	size_t i;

	if (o->n_buckets > 0 && o->buckets == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_begin: buckets is NULL with n_buckets %zu", o->n_buckets);
	if (o->n_bucketed > 0 && o->bucketed == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_begin: bucketed is NULL with n_bucketed %zu", o->n_bucketed);
	if (o->n_bucketed > 0 && o->n_buckets == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_begin: %zu bucketed tensors but no buckets", o->n_bucketed);
	for (i = 0; i < o->n_buckets; i++)
		if (o->buckets[i] < 1 || (i > 0 && o->buckets[i] <= o->buckets[i - 1]))
			return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
			                 "plan_begin: buckets must be positive and ascending "
			                 "(bucket %zu is %lld)",
			                 i, (long long)o->buckets[i]);
	return TILEOPS_OK;
}

/* Copy n elements of `size` bytes; NULL for none. Returns -1 out of memory. */
static int copy_array(void **dst, const void *src, size_t n, size_t size)
{
	*dst = NULL;
	if (n == 0)
		return 0;
	if ((*dst = malloc(n * size)) == NULL)
		return -1;
	memcpy(*dst, src, n * size);
	return 0;
}

static void plan_destroy(tileops_plan *p)
{
	size_t i;

	for (i = 0; i < p->n_ops; i++)
		tileops__op_run__free_unpacked(p->ops[i], NULL);
	free(p->ops);
	free(p->buckets);
	free(p->bucketed);
	free(p->name);
	if (p->opened)
		tileops__plan_open_reply__free_unpacked(p->opened, NULL);
	tci_client_release(p->client);
	free(p);
}

TILEOPS_API tileops_status tileops_plan_begin(tileops_client *c, const tileops_plan_options *opts,
                                              tileops_plan **out)
{
	tileops_plan_options none;
	tileops_plan *p;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_begin: out is NULL");
	*out = NULL;
	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_begin: client is NULL");
	if (opts == NULL) {
		memset(&none, 0, sizeof(none));
		opts = &none;
	}
	if ((st = plan_check_options(opts)) != TILEOPS_OK)
		return st;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_begin: out of memory");
	p->client = c;
	tci_client_retain(c);
	p->n_buckets = opts->n_buckets;
	p->n_bucketed = opts->n_bucketed;
	p->name = strdup(opts->name != NULL ? opts->name : "");
	if (p->name == NULL ||
	    copy_array((void **)&p->buckets, opts->buckets, p->n_buckets, sizeof(int64_t)) ||
	    copy_array((void **)&p->bucketed, opts->bucketed, p->n_bucketed, sizeof(uint64_t))) {
		plan_destroy(p);
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_begin: out of memory");
	}
	*out = p;
	return TILEOPS_OK;
}

/* An owned copy of the op's OpRun: packed from the stack message, unpacked. */
static Tileops__OpRun *op_copy(const tileops_op *op)
{
	struct tci_op_msg m;
	Tileops__OpRun *copy;
	uint8_t *buf;
	size_t len;

	tci_op_msg_build(&m, op);
	len = tileops__op_run__get_packed_size(&m.body);
	if ((buf = malloc(len > 0 ? len : 1)) == NULL)
		return NULL;
	tileops__op_run__pack(&m.body, buf);
	copy = tileops__op_run__unpack(NULL, len, buf);
	free(buf);
	return copy;
}

TILEOPS_API tileops_status tileops_plan_add(tileops_plan *p, const tileops_op *op)
{
	Tileops__OpRun *copy;
	tileops_status st;

	if (p == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_add: plan is NULL");
	if (p->handle != 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_add: the plan was ended already; begin a new one");
	if ((st = tci_op_check("plan_add", p->client, op)) != TILEOPS_OK)
		return st;
	if (p->n_ops == p->cap_ops) {
		size_t cap = p->cap_ops != 0 ? p->cap_ops * 2 : 8;
		Tileops__OpRun **ops = realloc(p->ops, cap * sizeof(*ops));

		if (ops == NULL)
			return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_add: out of memory");
		p->ops = ops;
		p->cap_ops = cap;
	}
	if ((copy = op_copy(op)) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_add: out of memory for op %s",
		                 op->name);
	p->ops[p->n_ops++] = copy;
	return TILEOPS_OK;
}

/* The size cap is checked here so the message can say what makes a plan big. */
static tileops_status plan_check_size(const tileops_plan *p, const Tileops__Request *req)
{
	uint64_t cap = p->client->info.max_message_bytes;
	size_t size = tileops__request__get_packed_size(req);

	if (cap != 0 && size > cap)
		return tci_error(
		        TILEOPS_ERR_TOO_LARGE,
		        "plan_end: the plan's %zu ops encode to %zu bytes, over tileopsd's "
		        "limit of %llu bytes (max_message_bytes): split it into smaller "
		        "plans",
		        p->n_ops, size, (unsigned long long)cap);
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_plan_end(tileops_plan *p)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__PlanCreate body = TILEOPS__PLAN_CREATE__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;

	if (p == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_end: plan is NULL");
	if (p->handle != 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_end: the plan was ended already");
	if (p->n_ops == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_end: the plan has no ops (add them with tileops_plan_add)");
	body.n_ops = p->n_ops;
	body.ops = p->ops;
	body.n_buckets = p->n_buckets;
	body.buckets = p->buckets;
	body.n_bucketed = p->n_bucketed;
	body.bucketed = p->bucketed;
	body.name = p->name;
	req.body_case = TILEOPS__REQUEST__BODY_PLAN_CREATE;
	req.plan_create = &body;
	if ((st = plan_check_size(p, &req)) != TILEOPS_OK)
		return st;
	if ((st = tci_request_call(p->client, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	if (reply->body_case != TILEOPS__REPLY__BODY_PLAN_CREATE || reply->plan_create == NULL ||
	    reply->plan_create->plan == 0)
		st = tci_error(TILEOPS_ERR_PROTOCOL,
		               "plan_end: tileopsd answered PlanCreate without a plan handle");
	else
		p->handle = reply->plan_create->plan;
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

/* ---- running ------------------------------------------------------------- */

/* A PlanRun request built on the caller's stack; it points into `bindings`. */
struct plan_run_msg {
	Tileops__Request req;
	Tileops__PlanRun body;
	Tileops__PlanBinding **binding_ptrs;
	Tileops__PlanBinding *bindings;
};

static tileops_status plan_run_check(const char *call, const tileops_plan *p, int64_t size,
                                     const tileops_binding *bindings, size_t n_bindings)
{
	if (p == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: plan is NULL", call);
	if (p->handle == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: the plan was not sent yet (call tileops_plan_end first)",
		                 call);
	if (size < 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: size is %lld, expected >= 0 (0: the largest bucket)", call,
		                 (long long)size);
	if (n_bindings > 0 && bindings == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: bindings is NULL with n_bindings %zu", call, n_bindings);
	return TILEOPS_OK;
}

/* Fill m; its binding arrays are malloc'd (plan_run_msg_free). */
static tileops_status plan_run_msg_build(struct plan_run_msg *m, const tileops_plan *p,
                                         int64_t size, const tileops_binding *bindings,
                                         size_t n_bindings)
{
	size_t i;

	tileops__request__init(&m->req);
	tileops__plan_run__init(&m->body);
	m->bindings = NULL;
	m->binding_ptrs = NULL;
	if (n_bindings > 0) {
		m->bindings = calloc(n_bindings, sizeof(*m->bindings));
		m->binding_ptrs = calloc(n_bindings, sizeof(*m->binding_ptrs));
		if (m->bindings == NULL || m->binding_ptrs == NULL) {
			free(m->bindings);
			free(m->binding_ptrs);
			return tci_error(TILEOPS_ERR_OUT_OF_MEMORY,
			                 "plan_run: out of memory for %zu bindings", n_bindings);
		}
	}
	for (i = 0; i < n_bindings; i++) {
		tileops__plan_binding__init(&m->bindings[i]);
		m->bindings[i].plan_tensor = bindings[i].plan_tensor;
		m->bindings[i].tensor = bindings[i].tensor;
		m->binding_ptrs[i] = &m->bindings[i];
	}
	m->body.plan = p->handle;
	m->body.size = size;
	m->body.n_bindings = n_bindings;
	m->body.bindings = m->binding_ptrs;
	m->req.body_case = TILEOPS__REQUEST__BODY_PLAN_RUN;
	m->req.plan_run = &m->body;
	return TILEOPS_OK;
}

static void plan_run_msg_free(struct plan_run_msg *m)
{
	free(m->bindings);
	free(m->binding_ptrs);
}

TILEOPS_API tileops_status tileops_plan_run(tileops_plan *p, int64_t size,
                                            const tileops_binding *bindings, size_t n_bindings)
{
	struct plan_run_msg m;
	tileops_status st;

	if ((st = plan_run_check("plan_run", p, size, bindings, n_bindings)) != TILEOPS_OK)
		return st;
	if ((st = plan_run_msg_build(&m, p, size, bindings, n_bindings)) != TILEOPS_OK)
		return st;
	st = tci_op_call(p->client, &m.req);
	plan_run_msg_free(&m);
	return st;
}

TILEOPS_API tileops_status tileops_plan_submit(tileops_plan *p, int64_t size,
                                               const tileops_binding *bindings, size_t n_bindings,
                                               tileops_completion **out)
{
	struct plan_run_msg m;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_submit: out is NULL");
	*out = NULL;
	if ((st = plan_run_check("plan_submit", p, size, bindings, n_bindings)) != TILEOPS_OK)
		return st;
	if ((st = plan_run_msg_build(&m, p, size, bindings, n_bindings)) != TILEOPS_OK)
		return st;
	/* The request is packed (ring) or copied into an nng message here. */
	st = tci_op_send(p->client, &m.req, 0, out);
	plan_run_msg_free(&m);
	return st;
}

/* ---- freeing and the admin reset ----------------------------------------- */

/* Tell the daemon; best effort, and the caller's last error is kept. */
static void plan_send_free(tileops_plan *p)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__PlanFree body = TILEOPS__PLAN_FREE__INIT;
	char saved[1024];

	snprintf(saved, sizeof(saved), "%s", tileops_last_error());
	body.plan = p->handle;
	req.body_case = TILEOPS__REQUEST__BODY_PLAN_FREE;
	req.plan_free = &body;
	(void)tci_request_call(p->client, &req, 0, NULL);
	tci_error_set_text(saved);
}

TILEOPS_API void tileops_plan_free(tileops_plan *p)
{
	if (p == NULL)
		return;
	/* A warm-up plan is the daemon's: only the local handle goes. */
	if (p->handle != 0 && !p->opened)
		plan_send_free(p);
	plan_destroy(p);
}

/* ---- warm-up plans ------------------------------------------------------- */

/* Move the reply's PlanOpenReply out of it, so the plan can own it. */
static Tileops__PlanOpenReply *take_open_reply(Tileops__Reply *reply)
{
	Tileops__PlanOpenReply *r = NULL;
	size_t len = tileops__plan_open_reply__get_packed_size(reply->plan_open);
	uint8_t *buf = malloc(len ? len : 1);
	if (buf != NULL) {
		tileops__plan_open_reply__pack(reply->plan_open, buf);
		r = tileops__plan_open_reply__unpack(NULL, len, buf);
		free(buf);
	}
	return r;
}

TILEOPS_API tileops_status tileops_plan_open(tileops_client *c, const char *name,
                                             tileops_plan **out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__PlanOpen body = TILEOPS__PLAN_OPEN__INIT;
	Tileops__Reply *reply = NULL;
	tileops_plan *p = NULL;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_open: out is NULL");
	*out = NULL;
	if (c == NULL || name == NULL || name[0] == '\0')
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_open: %s",
		                 c == NULL ? "client is NULL" : "no plan name");
	if ((st = tileops_plan_begin(c, NULL, &p)) != TILEOPS_OK)
		return st;
	body.name = (char *)name;
	req.body_case = TILEOPS__REQUEST__BODY_PLAN_OPEN;
	req.plan_open = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK) {
		plan_destroy(p);
		return st;
	}
	if (reply->body_case != TILEOPS__REPLY__BODY_PLAN_OPEN || reply->plan_open == NULL ||
	    reply->plan_open->plan == 0)
		st = tci_error(TILEOPS_ERR_PROTOCOL,
		               "plan_open: tileopsd answered PlanOpen without a plan");
	else if ((p->opened = take_open_reply(reply)) == NULL)
		st = tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_open: out of memory");
	tileops__reply__free_unpacked(reply, NULL);
	if (st != TILEOPS_OK) {
		plan_destroy(p);
		return st;
	}
	p->handle = p->opened->plan;
	free(p->name);
	if ((p->name = strdup(name)) == NULL) {
		plan_destroy(p);
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "plan_open: out of memory");
	}
	*out = p;
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_plan_tensor(const tileops_plan *p, const char *name,
                                               tileops_tensor *handle, tileops_dtype *dtype,
                                               int *ndim, int64_t *shape)
{
	size_t i, k;

	if (p == NULL || name == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_tensor: plan or name is NULL");
	if (p->opened == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "plan_tensor: only plans opened with tileops_plan_open have named "
		                 "tensors");
	for (i = 0; i < p->opened->n_tensors; i++) {
		const Tileops__PlanTensor *t = p->opened->tensors[i];
		if (strcmp(t->name, name) != 0)
			continue;
		if (handle != NULL)
			*handle = t->handle;
		if (dtype != NULL)
			*dtype = (tileops_dtype)t->dtype;
		if (ndim != NULL)
			*ndim = (int)t->n_shape;
		for (k = 0; shape != NULL && k < t->n_shape && k < TILEOPS_MAX_DIMS; k++)
			shape[k] = t->shape[k];
		return TILEOPS_OK;
	}
	return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "plan_tensor: plan '%s' has no tensor '%s'",
	                 p->name != NULL && p->name[0] ? p->name : "(warm-up)", name);
}

TILEOPS_API tileops_status tileops_admin_reset(tileops_client *c)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__AdminReset body = TILEOPS__ADMIN_RESET__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "admin_reset: client is NULL");
	req.body_case = TILEOPS__REQUEST__BODY_ADMIN_RESET;
	req.admin_reset = &body;
	return tci_request_call(c, &req, 0, NULL);
}
