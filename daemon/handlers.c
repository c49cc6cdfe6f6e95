/*
 * handlers.c - what the daemon does with each request, on the loop thread.
 *
 * A request is decoded, matched to the session of its connection and run in
 * the session's seq order. Work that needs the device becomes a job for the
 * executor; the answer goes out when the job is done (handle_job_done).
 * Requests whose result later requests need (create, import, Hello) raise
 * the session's barrier: nothing after them runs until they are done.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "manifest.h"
#include "oplayer.h"
#include "server.h"
#include "tileops.pb-c.h"

#define GAP_TIMEOUT_SECONDS 2.0
#define MAX_TENSOR_BYTES (1ull << 46)

/* ---- replies ------------------------------------------------------------- */

static void send_reply(server *srv, tp_worker *w, Tileops__Reply *r)
{
	srv->st.requests++;
	if (r->status != TILEOPS__STATUS__STATUS_OK)
		srv->st.errors++;
	if (!w)
		return;
	size_t len = tileops__reply__get_packed_size(r);
	nng_msg *m;
	if (nng_msg_alloc(&m, len) != 0) {
		log_error("out of memory for a %zu-byte reply; the client will time out", len);
		return;
	}
	tileops__reply__pack(r, nng_msg_body(m));
	transport_reply(w, m);
}

static void reply_status(server *srv, tp_worker *w, uint64_t seq, tileops_status st,
                         const char *msg)
{
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = seq;
	r.status = (Tileops__Status)st;
	r.message = (char *)(msg ? msg : "");
	if (st != TILEOPS_OK)
		log_debug("request %llu: status %d: %s", (unsigned long long)seq, (int)st,
		          r.message);
	send_reply(srv, w, &r);
}

static void reply_fmt(server *srv, tp_worker *w, uint64_t seq, tileops_status st,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void reply_fmt(server *srv, tp_worker *w, uint64_t seq, tileops_status st,
                      const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_status(srv, w, seq, st, msg);
}

static job *job_new(job_kind kind, tp_worker *w, uint64_t seq)
{
	job *j = calloc(1, sizeof(*j));
	if (j) {
		j->kind = kind;
		j->w = w;
		j->seq = seq;
	}
	return j;
}

static session *session_by_pipe(server *srv, uint32_t pipe)
{
	for (session *s = srv->sessions; s; s = s->next)
		if (s->pipe == pipe)
			return s;
	return NULL;
}

/* ---- tensors ------------------------------------------------------------- */

/* Check dtype and shape; fill the view and the byte count. */
static tileops_status tensor_describe(Tileops__DType dtype, size_t ndim, const int64_t *shape,
                                      tensor *t, char *err, size_t errlen)
{
	if (dtype <= TILEOPS__DTYPE__DTYPE_INVALID || dtype >= (Tileops__DType)TK_DTYPE_COUNT) {
		snprintf(err, errlen, "unknown dtype %d", (int)dtype);
		return TILEOPS_ERR_DTYPE;
	}
	if (ndim > TK_MAX_DIMS) {
		snprintf(err, errlen, "rank %zu is over the limit of %d dimensions", ndim,
		         TK_MAX_DIMS);
		return TILEOPS_ERR_SHAPE;
	}
	uint64_t n = 1;
	for (size_t i = 0; i < ndim; i++) {
		if (shape[i] < 0) {
			snprintf(err, errlen, "dimension %zu has extent %lld; extents must be >= 0", i,
			         (long long)shape[i]);
			return TILEOPS_ERR_SHAPE;
		}
		if (shape[i] && n > MAX_TENSOR_BYTES / (uint64_t)shape[i]) {
			snprintf(err, errlen, "shape is too large (over 2^46 bytes)");
			return TILEOPS_ERR_SHAPE;
		}
		n *= (uint64_t)shape[i];
	}
	size_t es = tk_dtype_size((tk_dtype)dtype);
	if (n > MAX_TENSOR_BYTES / es) {
		snprintf(err, errlen, "shape is too large (over 2^46 bytes)");
		return TILEOPS_ERR_SHAPE;
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

static void do_tensor_make(server *srv, session *s, tp_worker *w, uint64_t seq,
                           Tileops__DType dtype, size_t ndim, const int64_t *shape,
                           const ProtobufCBinaryData *ipc)
{
	char err[256];
	tensor *t = calloc(1, sizeof(*t));
	job *j = job_new(ipc ? JOB_IMPORT : JOB_ALLOC, w, seq);
	if (!t || !j) {
		free(t);
		free(j);
		reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	tileops_status st = tensor_describe(dtype, ndim, shape, t, err, sizeof(err));
	if (st == TILEOPS_OK && ipc && ipc->len != 64) {
		snprintf(err, sizeof(err), "ipc_handle has %zu bytes, expected 64", ipc->len);
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	}
	size_t limit = srv->cfg.session_memory_limit;
	if (st == TILEOPS_OK && !ipc && limit && s->bytes + t->nbytes > limit) {
		snprintf(err, sizeof(err),
		         "session memory quota exceeded: %zu bytes held + %zu requested > %zu "
		         "(session_memory_limit)",
		         s->bytes, t->nbytes, limit);
		st = TILEOPS_ERR_QUOTA;
	}
	if (st != TILEOPS_OK) {
		free(t);
		free(j);
		reply_fmt(srv, w, seq, st, "tensor: %s", err);
		return;
	}
	t->handle = srv->next_handle++;
	t->imported = ipc != NULL;
	if (ipc)
		memcpy(j->ipc, ipc->data, 64);
	j->bytes = t->nbytes;
	j->tensor = t;
	s->barrier = 1;
	server_submit(srv, s, j);
}

static tensor *find_or_reply(server *srv, session *s, tp_worker *w, uint64_t seq,
                             uint64_t handle, const char *what)
{
	tensor *t = session_tensor_find(s, handle);
	if (!t)
		reply_fmt(srv, w, seq, TILEOPS_ERR_UNKNOWN_HANDLE,
		          "%s: tensor handle %llu is not a tensor of this session (never created "
		          "here, or already freed)",
		          what, (unsigned long long)handle);
	return t;
}

static void do_tensor_free(server *srv, session *s, tp_worker *w, uint64_t seq,
                           Tileops__TensorFree *m)
{
	if (!find_or_reply(srv, s, w, seq, m->handle, "tensor_free"))
		return;
	job *j = job_new(JOB_FREE, w, seq);
	if (!j) {
		reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	tensor *t = session_tensor_remove(s, m->handle);
	j->ptr = t->view.data;
	j->imported = t->imported;
	free(t);
	server_submit(srv, s, j);
}

static void do_tensor_copy(server *srv, session *s, tp_worker *w, uint64_t seq, int write,
                           uint64_t handle, uint64_t toff, uint64_t aoff, uint64_t len)
{
	const char *what = write ? "tensor_write" : "tensor_read";
	tensor *t = find_or_reply(srv, s, w, seq, handle, what);
	if (!t)
		return;
	if (toff > t->nbytes || len > t->nbytes - toff) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_RANGE,
		          "%s: tensor bytes [%llu, %llu + %llu) are outside the tensor's %zu bytes",
		          what, (unsigned long long)toff, (unsigned long long)toff,
		          (unsigned long long)len, t->nbytes);
		return;
	}
	if (!arena_range_ok(&s->arena, aoff, len)) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_RANGE,
		          "%s: arena bytes [%llu, %llu + %llu) are outside the %zu-byte arena", what,
		          (unsigned long long)aoff, (unsigned long long)aoff, (unsigned long long)len,
		          s->arena.size);
		return;
	}
	if (len == 0) {
		reply_status(srv, w, seq, TILEOPS_OK, NULL);
		return;
	}
	job *j = job_new(write ? JOB_WRITE : JOB_READ, w, seq);
	if (!j) {
		reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	j->ptr = t->view.data;
	j->toff = (size_t)toff;
	j->aoff = (size_t)aoff;
	j->bytes = (size_t)len;
	server_submit(srv, s, j);
}

static void do_tensor_export(server *srv, session *s, tp_worker *w, uint64_t seq,
                             Tileops__TensorExport *m)
{
	tensor *t = find_or_reply(srv, s, w, seq, m->handle, "tensor_export");
	if (!t)
		return;
	if (t->imported) {
		reply_status(srv, w, seq, TILEOPS_ERR_UNSUPPORTED,
		             "tensor_export: an imported tensor belongs to its exporter; export "
		             "it from there");
		return;
	}
	job *j = job_new(JOB_EXPORT, w, seq);
	if (!j) {
		reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	j->ptr = t->view.data;
	server_submit(srv, s, j);
}

/* ---- ops ----------------------------------------------------------------- */

static tileops_status resolve_tensors(session *s, const char *op, const char *role,
                                      size_t n, const uint64_t *handles, size_t max,
                                      tk_tensor *views, char *err, size_t errlen)
{
	if (n > max) {
		snprintf(err, errlen, "%s: %zu %s given, at most %zu", op, n, role, max);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < n; i++) {
		tensor *t = session_tensor_find(s, handles[i]);
		if (!t) {
			snprintf(err, errlen,
			         "%s: %s %zu: tensor handle %llu is not a tensor of this session",
			         op, role, i, (unsigned long long)handles[i]);
			return TILEOPS_ERR_UNKNOWN_HANDLE;
		}
		views[i] = t->view;
	}
	return TILEOPS_OK;
}

static tileops_status decode_params(const char *op, Tileops__OpRun *m, const char **names,
                                    tk_param *values, char *err, size_t errlen)
{
	if (m->n_params > TK_MAX_PARAMS) {
		snprintf(err, errlen, "%s: %zu params given, at most %d", op, m->n_params,
		         TK_MAX_PARAMS);
		return TILEOPS_ERR_PARAM;
	}
	for (size_t i = 0; i < m->n_params; i++) {
		Tileops__Param *p = m->params[i];
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

static void do_op_run(server *srv, session *s, tp_worker *w, uint64_t seq, Tileops__OpRun *m)
{
	char err[512];
	const char *op = m->op && m->op[0] ? m->op : "(no name)";
	tk_tensor in[TK_MAX_INPUTS], out[TK_MAX_OUTPUTS];
	const char *names[TK_MAX_PARAMS];
	tk_param values[TK_MAX_PARAMS];
	tileops_status st =
		resolve_tensors(s, op, "input", m->n_inputs, m->inputs, TK_MAX_INPUTS, in, err,
		                sizeof(err));
	if (st == TILEOPS_OK)
		st = resolve_tensors(s, op, "output", m->n_outputs, m->outputs, TK_MAX_OUTPUTS, out,
		                     err, sizeof(err));
	if (st == TILEOPS_OK)
		st = decode_params(op, m, names, values, err, sizeof(err));
	job *j = NULL;
	const tk_kernel_entry *kernel = NULL;
	op_cost cost = {0, 0};
	if (st == TILEOPS_OK) {
		j = job_new(JOB_OP, w, seq);
		if (!j) {
			reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
			return;
		}
		op_request req = {
			.op = op,
			.n_in = (int)m->n_inputs,
			.n_out = (int)m->n_outputs,
			.in = in,
			.out = out,
			.n_params = m->n_params,
			.param_names = names,
			.param_values = values,
		};
		st = oplayer_prepare(srv->mf, &req, srv->be->is_gpu, &j->call, &kernel, &cost, err,
		                     sizeof(err));
	}
	/* Count errors under the op's name only for ops the manifest knows, so
	 * made-up names cannot grow the stats table. */
	int slot = (st == TILEOPS_OK || (st != TILEOPS_ERR_UNKNOWN_OP && m->op &&
	            manifest_find(srv->mf, m->op)))
		           ? stats_op_slot(&srv->st, m->op)
		           : -1;
	if (st != TILEOPS_OK) {
		stats_op_count(&srv->st, slot, 1, 0, 0);
		free(j);
		reply_status(srv, w, seq, st, err);
		return;
	}
	j->kernel = kernel;
	j->op_slot = slot;
	stats_op_count(&srv->st, slot, 0, cost.flops, cost.bytes);
	server_submit(srv, s, j);
}

static void do_simple_job(server *srv, session *s, tp_worker *w, uint64_t seq, job_kind kind)
{
	job *j = job_new(kind, w, seq);
	if (!j) {
		reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	server_submit(srv, s, j);
}

/* ---- dispatch in seq order ----------------------------------------------- */

static void run_request(server *srv, session *s, tp_worker *w, Tileops__Request *req)
{
	uint64_t seq = req->seq;
	if (srv->stopping) {
		reply_status(srv, w, seq, TILEOPS_ERR_SHUTDOWN, "tileopsd is stopping");
		return;
	}
	switch (req->body_case) {
	case TILEOPS__REQUEST__BODY_TENSOR_CREATE:
		do_tensor_make(srv, s, w, seq, req->tensor_create->dtype, req->tensor_create->n_shape,
		               req->tensor_create->shape, NULL);
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_IMPORT:
		do_tensor_make(srv, s, w, seq, req->tensor_import->dtype, req->tensor_import->n_shape,
		               req->tensor_import->shape, &req->tensor_import->ipc_handle);
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_FREE:
		do_tensor_free(srv, s, w, seq, req->tensor_free);
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_WRITE: {
		Tileops__TensorWrite *m = req->tensor_write;
		do_tensor_copy(srv, s, w, seq, 1, m->handle, m->tensor_offset, m->arena_offset,
		               m->length);
		break;
	}
	case TILEOPS__REQUEST__BODY_TENSOR_READ: {
		Tileops__TensorRead *m = req->tensor_read;
		do_tensor_copy(srv, s, w, seq, 0, m->handle, m->tensor_offset, m->arena_offset,
		               m->length);
		break;
	}
	case TILEOPS__REQUEST__BODY_TENSOR_EXPORT:
		do_tensor_export(srv, s, w, seq, req->tensor_export);
		break;
	case TILEOPS__REQUEST__BODY_OP_RUN:
		do_op_run(srv, s, w, seq, req->op_run);
		break;
	case TILEOPS__REQUEST__BODY_SYNC:
		do_simple_job(srv, s, w, seq, JOB_SYNC);
		break;
	case TILEOPS__REQUEST__BODY_GOODBYE:
		reply_status(srv, w, seq, TILEOPS_OK, NULL);
		session_reap(srv, s, "client said goodbye");
		break;
	case TILEOPS__REQUEST__BODY_HELLO:
		reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
		          "this connection already has session %llu", (unsigned long long)s->id);
		break;
	default:
		reply_status(srv, w, seq, TILEOPS_ERR_PROTOCOL, "request has no body");
		break;
	}
}

/* Run every held request whose turn has come. */
static void session_pump(server *srv, session *s)
{
	while (!s->barrier && !s->closing) {
		held_request *h = session_next_ready(s);
		if (!h)
			break;
		s->next_seq++;
		run_request(srv, s, h->w, h->req);
		tileops__request__free_unpacked(h->req, NULL);
		free(h);
	}
	if (!s->held || s->held->seq == s->next_seq)
		s->gap_since = 0;
	else if (s->gap_since == 0)
		s->gap_since = server_now();
}

static void enqueue_request(server *srv, session *s, tp_worker *w, Tileops__Request *req)
{
	uint64_t seq = req->seq;
	if (seq < s->next_seq) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
		          "request seq %llu was already used (the next expected is %llu)",
		          (unsigned long long)seq, (unsigned long long)s->next_seq);
	} else if (s->n_held >= srv->cfg.max_pending) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_BUSY,
		          "too many requests waiting in this session (max_pending = %d)",
		          srv->cfg.max_pending);
	} else {
		held_request *h = calloc(1, sizeof(*h));
		if (!h) {
			reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		} else {
			h->seq = seq;
			h->w = w;
			h->req = req;
			if (session_hold(s, h) == 0) {
				session_pump(srv, s);
				return;
			}
			free(h);
			reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
			          "request seq %llu was sent twice", (unsigned long long)seq);
		}
	}
	tileops__request__free_unpacked(req, NULL);
}

/* ---- Hello --------------------------------------------------------------- */

static void do_hello(server *srv, tp_worker *w, Tileops__Request *req, uint32_t pipe,
                     int64_t uid, int64_t pid)
{
	Tileops__Hello *h = req->hello;
	char err[512];
	if (srv->stopping) {
		reply_status(srv, w, req->seq, TILEOPS_ERR_SHUTDOWN, "tileopsd is stopping");
		return;
	}
	if (h->protocol_version != TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_VERSION,
		          "protocol version %u is not supported (this tileopsd speaks version %d)",
		          h->protocol_version, TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
		return;
	}
	if (srv->n_sessions >= srv->cfg.max_sessions) {
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_BUSY,
		          "the daemon already serves %d sessions (max_sessions)", srv->n_sessions);
		return;
	}
	if (uid < 0) {
		reply_status(srv, w, req->seq, TILEOPS_ERR_PERMISSION,
		             "sessions need a local ipc:// connection (peer credentials unknown)");
		return;
	}
	session *s = session_new(srv->next_session_id, pipe);
	if (!s) {
		reply_status(srv, w, req->seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	if (arena_map(&s->arena, h->arena_name, h->arena_bytes, srv->cfg.max_arena_bytes,
	              (uid_t)uid, err, sizeof(err)) != 0) {
		session_unref(s);
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_INVALID_ARGUMENT, "hello: %s", err);
		return;
	}
	srv->next_session_id++;
	s->uid = uid;
	s->pid = pid;
	size_t k = 0;
	for (const char *p = h->client_name; *p && k < sizeof(s->name) - 1; p++)
		s->name[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	s->name[k] = '\0';
	s->next = srv->sessions;
	srv->sessions = s;
	srv->n_sessions++;
	s->barrier = 1;
	do_simple_job(srv, s, w, req->seq, JOB_OPEN);
}

void handle_request(server *srv, tp_worker *w, nng_msg *msg)
{
	uint32_t pipe;
	int64_t uid, pid;
	transport_peer(msg, &pipe, &uid, &pid);
	size_t len = nng_msg_len(msg);
	Tileops__Request *req = tileops__request__unpack(NULL, len, nng_msg_body(msg));
	nng_msg_free(msg);
	if (!req) {
		reply_fmt(srv, w, 0, TILEOPS_ERR_PROTOCOL,
		          "the %zu-byte message is not a valid tileops.Request (garbage or "
		          "truncated)",
		          len);
		return;
	}
	session *s = session_by_pipe(srv, pipe);
	if (req->body_case == TILEOPS__REQUEST__BODY_HELLO && !s) {
		do_hello(srv, w, req, pipe, uid, pid);
		tileops__request__free_unpacked(req, NULL);
	} else if (!s) {
		reply_status(srv, w, req->seq, TILEOPS_ERR_NO_SESSION,
		             "no session on this connection: send Hello first");
		tileops__request__free_unpacked(req, NULL);
	} else {
		enqueue_request(srv, s, w, req);
	}
}

/* ---- finished jobs ------------------------------------------------------- */

static void open_done(server *srv, session *s, job *j)
{
	if (j->status != TILEOPS_OK) {
		reply_status(srv, j->w, j->seq, j->status, j->msg);
		session_reap(srv, s, "could not be opened");
		return;
	}
	Tileops__HelloReply hr = TILEOPS__HELLO_REPLY__INIT;
	hr.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	hr.daemon_version = (char *)TILEOPS_VERSION;
	hr.backend = (char *)srv->be->name;
	hr.device = srv->be->device;
	hr.capabilities = srv->be->capabilities;
	hr.session_id = s->id;
	hr.max_message_bytes = srv->cfg.max_message_bytes;
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = j->seq;
	r.message = (char *)"";
	r.body_case = TILEOPS__REPLY__BODY_HELLO;
	r.hello = &hr;
	send_reply(srv, j->w, &r);
	log_info("session %llu opened (pid %lld, uid %lld, '%s', arena %zu bytes%s)",
	         (unsigned long long)s->id, (long long)s->pid, (long long)s->uid, s->name,
	         s->arena.size, s->arena.pinned ? ", pinned" : "");
}

static void make_done(server *srv, session *s, job *j)
{
	tensor *t = j->tensor;
	if (j->status == TILEOPS_OK && s->closing) {
		/* The session went away while its memory was being made. */
		job *f = job_new(JOB_FREE, NULL, 0);
		if (f) {
			f->ptr = j->ptr;
			f->imported = t->imported;
			server_submit(srv, s, f);
		}
		free(t);
		return;
	}
	if (j->status != TILEOPS_OK) {
		free(t);
		reply_fmt(srv, j->w, j->seq, j->status, "tensor: %s", j->msg);
		return;
	}
	t->view.data = j->ptr;
	if (session_tensor_insert(s, t) != 0) {
		job *f = job_new(JOB_FREE, NULL, 0);
		if (f) {
			f->ptr = j->ptr;
			f->imported = t->imported;
			server_submit(srv, s, f);
		}
		free(t);
		reply_status(srv, j->w, j->seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	Tileops__TensorCreateReply tr = TILEOPS__TENSOR_CREATE_REPLY__INIT;
	tr.handle = t->handle;
	tr.nbytes = t->nbytes;
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = j->seq;
	r.message = (char *)"";
	if (j->kind == JOB_IMPORT) {
		r.body_case = TILEOPS__REPLY__BODY_TENSOR_IMPORT;
		r.tensor_import = &tr;
	} else {
		r.body_case = TILEOPS__REPLY__BODY_TENSOR_CREATE;
		r.tensor_create = &tr;
	}
	send_reply(srv, j->w, &r);
}

static void export_done(server *srv, job *j)
{
	if (j->status != TILEOPS_OK) {
		reply_status(srv, j->w, j->seq, j->status, j->msg);
		return;
	}
	Tileops__TensorExportReply er = TILEOPS__TENSOR_EXPORT_REPLY__INIT;
	er.ipc_handle.data = j->ipc;
	er.ipc_handle.len = 64;
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = j->seq;
	r.message = (char *)"";
	r.body_case = TILEOPS__REPLY__BODY_TENSOR_EXPORT;
	r.tensor_export = &er;
	send_reply(srv, j->w, &r);
}

void handle_job_done(server *srv, job *j)
{
	session *s = j->s;
	switch (j->kind) {
	case JOB_OPEN:
		s->barrier = 0;
		open_done(srv, s, j);
		break;
	case JOB_ALLOC:
	case JOB_IMPORT:
		s->barrier = 0;
		make_done(srv, s, j);
		break;
	case JOB_EXPORT:
		export_done(srv, j);
		break;
	case JOB_CLOSE:
		arena_unmap(&s->arena);
		free(j->buffers);
		break;
	case JOB_OP:
		if (j->status != TILEOPS_OK)
			stats_op_count(&srv->st, j->op_slot, 1, 0, 0);
		/* fall through */
	default:
		if (j->w)
			reply_status(srv, j->w, j->seq, j->status, j->msg);
		break;
	}
	if (!s->closing)
		session_pump(srv, s);
	session_unref(s);
	free(j);
}

/* ---- closing sessions ---------------------------------------------------- */

void session_reap(server *srv, session *s, const char *why)
{
	if (s->closing)
		return;
	s->closing = 1;
	for (session **pp = &srv->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			srv->n_sessions--;
			break;
		}
	}
	while (s->held) {
		held_request *h = s->held;
		s->held = h->next;
		reply_fmt(srv, h->w, h->seq, TILEOPS_ERR_CLOSED, "session closed: %s", why);
		tileops__request__free_unpacked(h->req, NULL);
		free(h);
	}
	s->n_held = 0;
	size_t n = s->n_tensors, bytes = s->bytes;
	job *j = job_new(JOB_CLOSE, NULL, 0);
	job_buffer *bufs = n ? calloc(n, sizeof(*bufs)) : NULL;
	if (!j || (n && !bufs)) {
		/* Without memory for the job the device memory leaks, but the daemon
		 * stays consistent. */
		log_error("session %llu: out of memory while closing; %zu bytes leaked",
		          (unsigned long long)s->id, bytes);
		free(j);
		free(bufs);
		session_unref(s);
		return;
	}
	size_t k = 0;
	for (size_t b = 0; b < s->n_buckets; b++)
		for (tensor *t = s->buckets[b]; t; t = t->next)
			bufs[k++] = (job_buffer){t->view.data, t->imported};
	j->buffers = bufs;
	j->n_buffers = k;
	server_submit(srv, s, j);
	log_info("session %llu closed (%s): freeing %zu tensors, %zu bytes",
	         (unsigned long long)s->id, why, n, bytes);
	session_unref(s);
}

void sessions_check_gaps(server *srv)
{
	double now = server_now();
	for (session *s = srv->sessions; s; s = s->next) {
		if (!s->gap_since || now - s->gap_since < GAP_TIMEOUT_SECONDS || s->barrier)
			continue;
		/* A request never arrived; the ones after it cannot run in order. */
		uint64_t missing = s->next_seq;
		while (s->held) {
			held_request *h = s->held;
			s->held = h->next;
			s->next_seq = h->seq + 1;
			reply_fmt(srv, h->w, h->seq, TILEOPS_ERR_PROTOCOL,
			          "request seq %llu never arrived; requests after it were refused",
			          (unsigned long long)missing);
			tileops__request__free_unpacked(h->req, NULL);
			free(h);
		}
		s->n_held = 0;
		s->gap_since = 0;
	}
}

/* ---- the stats socket ---------------------------------------------------- */

void handle_stats(server *srv, tp_worker *w)
{
	size_t tensors = 0, bytes = 0;
	for (session *s = srv->sessions; s; s = s->next) {
		tensors += s->n_tensors;
		bytes += s->bytes;
	}
	strbuf sb = {0};
	sb_printf(&sb, "{\"version\":");
	sb_json_string(&sb, TILEOPS_VERSION);
	sb_printf(&sb, ",\"uptime_s\":%.3f,\"backend\":", server_now() - srv->started_at);
	sb_json_string(&sb, srv->be->name);
	sb_printf(&sb, ",\"device\":");
	sb_json_string(&sb, srv->be->device);
	sb_printf(&sb,
	          ",\"ready\":%s,\"stopping\":%s,\"sessions\":%d,\"tensors\":%zu,"
	          "\"bytes_in_use\":%zu,\"requests\":%llu,\"errors\":%llu,"
	          "\"jobs_in_flight\":%zu,",
	          srv->stopping ? "false" : "true", srv->stopping ? "true" : "false",
	          srv->n_sessions, tensors, bytes, (unsigned long long)srv->st.requests,
	          (unsigned long long)srv->st.errors, srv->jobs_in_flight);
	stats_write_ops_json(&srv->st, &sb);
	sb_printf(&sb, "}");
	nng_msg *m = NULL;
	if (nng_msg_alloc(&m, 0) != 0) {
		log_error("out of memory answering a stats request; the asker will time out");
		sb_free(&sb);
		return;
	}
	/* On failure an empty answer still frees the worker. */
	if (sb.oom || nng_msg_append(m, sb.buf, sb.len) != 0) {
		log_error("out of memory answering a stats request");
		nng_msg_clear(m);
	}
	sb_free(&sb);
	transport_reply(w, m);
}
