/*
 * handlers.c - the loop thread's side of requests: decode, find the session
 * of the connection, put requests in seq order, hand them to the executor,
 * and answer them when their jobs come back. Hello, Goodbye and reaping are
 * done here; everything that touches tensors runs on the executor (exec.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "clock.h"
#include "decode.h"
#include "handlers.h"
#include "log.h"
#include "manifest.h"
#include "order.h"
#include "plan.h"
#include "reply.h"
#include "sessions.h"
#include "tileops.pb-c.h"

/* The wire enums carry the numbers of proto/tileops_codes.h. */
#define WIRE_STATUS_SAME(name, wire, value, text)                      \
	_Static_assert((int)TILEOPS__STATUS__STATUS_##wire == (value), \
	               "tileops.proto: STATUS_" #wire " differs from tileops_codes.h");
TILEOPS_STATUS_LIST(WIRE_STATUS_SAME)
#undef WIRE_STATUS_SAME
#define WIRE_DTYPE_SAME(name, value, text, bytes)                    \
	_Static_assert((int)TILEOPS__DTYPE__DTYPE_##name == (value), \
	               "tileops.proto: DTYPE_" #name " differs from tileops_codes.h");
TILEOPS_DTYPE_LIST(WIRE_DTYPE_SAME)
#undef WIRE_DTYPE_SAME

/* ---- requests in seq order ----------------------------------------------- */

static int is_admin(server *srv, session *s)
{
	return s->uid == 0 || s->uid == (int64_t)srv->uid ||
	       (srv->cfg.admin_gid != (gid_t)-1 && s->gid == (int64_t)srv->cfg.admin_gid);
}

static void run_request(server *srv, session *s, tp_worker *w, Tileops__Request *req,
                        double received_us)
{
	uint64_t seq = req->seq;
	if (srv->stopping) {
		reply_status(srv, w, seq, TILEOPS_ERR_SHUTDOWN, "tileopsd is stopping");
	} else if (req->body_case == TILEOPS__REQUEST__BODY_GOODBYE) {
		reply_status(srv, w, seq, TILEOPS_OK, NULL);
		session_reap(srv, s, "client said goodbye");
	} else if (req->body_case == TILEOPS__REQUEST__BODY_HELLO) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
		          "hello: this connection already has session %llu",
		          (unsigned long long)s->id);
	} else if (req->body_case == TILEOPS__REQUEST__BODY__NOT_SET) {
		reply_status(srv, w, seq, TILEOPS_ERR_PROTOCOL, "request has no body");
	} else if (req->body_case == TILEOPS__REQUEST__BODY_ADMIN_RESET && !is_admin(srv, s)) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_PERMISSION,
		          "admin_reset: uid %lld is not the daemon's uid, root or in admin_group",
		          (long long)s->uid);
	} else {
		/* Decoded when its turn comes, so an error is answered in order too. */
		job *j = calloc(1, sizeof(*j));
		request *r = NULL;
		int reset = req->body_case == TILEOPS__REQUEST__BODY_ADMIN_RESET;
		char err[512];
		tileops_status st = TILEOPS_OK;
		if (!j || (!reset && !(r = calloc(1, sizeof(*r))))) {
			st = TILEOPS_ERR_OUT_OF_MEMORY;
			snprintf(err, sizeof(err), "out of host memory");
		} else if (!reset) {
			st = wire_decode(req, r, err, sizeof(err));
		}
		if (st != TILEOPS_OK) {
			reply_status(srv, w, seq, st, err);
			request_free(r);
			free(j);
		} else {
			j->kind = reset ? JOB_RESET : JOB_REQUEST;
			j->w = w;
			j->seq = seq;
			j->received_us = received_us;
			j->req = r; /* freed when the job comes back */
			s->n_running++;
			sessions_submit(srv, s, j);
		}
	}
	tileops__request__free_unpacked(req, NULL);
}

/* Run every held request whose turn has come. */
static void session_pump(server *srv, session *s)
{
	held_request *h;
	while (s->opened && !s->closing && (h = session_next_ready(s))) {
		s->next_seq++;
		run_request(srv, s, h->w, h->req, h->received_us);
		free(h);
	}
	if (!s->held || s->held->seq == s->next_seq)
		s->gap_since = 0;
	else if (s->gap_since == 0)
		s->gap_since = clock_now_s();
}

/* How far ahead of the next expected seq a request may be: the client
 * numbers its requests 1, 2, 3..., so only reordering in flight puts one
 * ahead, never by much; a seq near 2^64 would wrap the order. */
#define SEQ_WINDOW (1u << 16)

static void enqueue_request(server *srv, session *s, tp_worker *w, Tileops__Request *req,
                            double received_us)
{
	uint64_t seq = req->seq;
	if (seq < s->next_seq) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
		          "request seq %llu was already used (the next expected is %llu)",
		          (unsigned long long)seq, (unsigned long long)s->next_seq);
	} else if (seq - s->next_seq >= SEQ_WINDOW) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_PROTOCOL,
		          "request seq %llu is too far ahead of the next expected, %llu (at most "
		          "%u ahead)",
		          (unsigned long long)seq, (unsigned long long)s->next_seq, SEQ_WINDOW);
	} else if (s->n_held + s->n_running >= srv->cfg.max_pending) {
		reply_fmt(srv, w, seq, TILEOPS_ERR_BUSY,
		          "too many requests in flight in this session (max_pending = %d)",
		          srv->cfg.max_pending);
	} else {
		held_request *h = calloc(1, sizeof(*h));
		if (!h) {
			reply_status(srv, w, seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		} else {
			h->seq = seq;
			h->w = w;
			h->req = req;
			h->received_us = received_us;
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

static void do_hello(server *srv, tp_worker *w, Tileops__Request *req, uint32_t pipe, int64_t uid,
                     int64_t gid, int64_t pid)
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
	int mine = 0;
	for (session *t = srv->sessions; t; t = t->next)
		mine += t->pid == pid;
	if (pid > 0 && mine >= srv->cfg.max_sessions_per_process) {
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_BUSY,
		          "process %lld already has %d sessions (max_sessions_per_process)",
		          (long long)pid, mine);
		return;
	}
	if (srv->n_sessions >= srv->cfg.max_sessions) {
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_BUSY,
		          "the daemon already serves %d sessions (max_sessions)", srv->n_sessions);
		return;
	}
	peer who;
	admission_peer(&who, uid, gid, pid);
	if (!admission_allowed(&who, srv->uid,
	                       __atomic_load_n(&srv->cfg.allow_gid, __ATOMIC_RELAXED), err,
	                       sizeof(err))) {
		log_warn("refused a session of pid %lld: %s", (long long)pid, err);
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_PERMISSION, "hello: %s", err);
		return;
	}
	session *s = session_new(srv->next_session_id, pipe);
	job *j = calloc(1, sizeof(*j));
	if (!s || !j) {
		session_unref(s);
		free(j);
		reply_status(srv, w, req->seq, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
		return;
	}
	/* "/tileops-..." is a POSIX shm name; a bare name is a file of arena_dir. */
	char adir[CONFIG_PATH_MAX];
	config_arena_dir(&srv->cfg, adir, sizeof(adir));
	int unmapped =
	        h->arena_name[0] == '/'
	                ? arena_map(&s->arena, h->arena_name, h->arena_bytes,
	                            srv->cfg.max_arena_bytes, (uid_t)uid, err, sizeof(err))
	                : arena_map_in_dir(&s->arena, adir, h->arena_name, h->arena_bytes,
	                                   srv->cfg.max_arena_bytes, (uid_t)uid, err, sizeof(err));
	if (unmapped && h->arena_name[0] == '/' && adir[0] && strstr(err, "cannot open")) {
		/* Most likely a client of another container, blind to our /dev/shm. */
		size_t n = strlen(err);
		snprintf(err + n, sizeof(err) - n,
		         "; a client that does not share this host's /dev/shm must create its "
		         "arena in arena_dir %.300s",
		         adir);
	}
	if (unmapped) {
		session_unref(s);
		free(j);
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_INVALID_ARGUMENT, "hello: %s", err);
		return;
	}
	srv->next_session_id++;
	s->uid = uid;
	s->gid = gid;
	s->pid = pid;
	s->n_groups = who.n_groups < SESSION_MAX_GROUPS ? who.n_groups : SESSION_MAX_GROUPS;
	memcpy(s->groups, who.groups, sizeof(int64_t) * (size_t)s->n_groups);
	size_t k = 0;
	for (const char *p = h->client_name; *p && k < sizeof(s->name) - 1; p++)
		s->name[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	s->name[k] = '\0';
	s->worker = executor_pick_worker(srv->ex, s->id);
	s->next = srv->sessions;
	srv->sessions = s;
	srv->n_sessions++;
	j->kind = JOB_OPEN;
	j->w = w;
	j->seq = req->seq;
	j->want_rings = h->rings;
	snprintf(j->tenant, sizeof(j->tenant), "%s", h->tenant ? h->tenant : "");
	sessions_submit(srv, s, j);
}

void handle_request(server *srv, tp_worker *w, nng_msg *msg, double received_us)
{
	uint32_t pipe;
	int64_t uid, gid, pid;
	transport_peer(msg, &pipe, &uid, &gid, &pid);
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
	session *s = sessions_by_pipe(srv, pipe);
	if (!s && !transport_admit(srv->control, pipe)) {
		reply_fmt(srv, w, req->seq, TILEOPS_ERR_BUSY,
		          "the daemon already has %d connections (max_connections); try again "
		          "when one closes",
		          transport_max_connections(srv->control));
		tileops__request__free_unpacked(req, NULL);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_HELLO && !s) {
		do_hello(srv, w, req, pipe, uid, gid, pid);
		tileops__request__free_unpacked(req, NULL);
	} else if (!s) {
		reply_status(srv, w, req->seq, TILEOPS_ERR_NO_SESSION,
		             "no session on this connection: send Hello first");
		tileops__request__free_unpacked(req, NULL);
	} else {
		enqueue_request(srv, s, w, req, received_us);
	}
}

/* ---- finished jobs ------------------------------------------------------- */

static void open_done(server *srv, session *s, job *j)
{
	if (j->status != TILEOPS_OK) {
		/* Requests pipelined behind the Hello are answered by the reap. */
		reply_fmt(srv, j->w, j->seq, j->status, "hello: %s", j->msg);
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
	hr.rings = j->rings;
	Tileops__DeviceInfo dev[BACKEND_MAX_DEVICES], *devs[BACKEND_MAX_DEVICES];
	for (int i = 0; i < srv->be->n_devices; i++) {
		tileops__device_info__init(&dev[i]);
		dev[i].index = (uint32_t)i;
		dev[i].ordinal = srv->be->devices[i].ordinal;
		dev[i].name = srv->be->devices[i].name;
		dev[i].memory_bytes = srv->be->devices[i].memory_bytes;
		devs[i] = &dev[i];
	}
	hr.n_devices = (size_t)srv->be->n_devices;
	hr.devices = devs;
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = j->seq;
	r.message = (char *)"";
	r.body_case = TILEOPS__REPLY__BODY_HELLO;
	r.hello = &hr;
	reply_send(srv, j->w, &r);
	log_info("session %llu opened (pid %lld, uid %lld, '%s', arena %zu bytes%s%s, "
	         "executor thread %d)",
	         (unsigned long long)s->id, (long long)s->pid, (long long)s->uid, s->name,
	         s->arena.size, s->arena.pinned ? ", pinned" : "", j->rings ? ", rings" : "",
	         s->worker);
	s->opened = 1;
	session_pump(srv, s);
}

/* PlanOpenReply from what plan_open found; the strings and arrays stay the
 * result's. Returns 0, or -1 when out of memory (nothing to free then). */
static int encode_plan_open(const plan_open_result *o, Tileops__PlanOpenReply *r)
{
	tileops__plan_open_reply__init(r);
	r->plan = o->plan;
	r->n_buckets = (size_t)o->n_buckets;
	r->buckets = (int64_t *)o->buckets;
	r->n_tensors = (size_t)o->n_tensors;
	if (!o->n_tensors)
		return 0;
	Tileops__PlanTensor *ts = calloc((size_t)o->n_tensors, sizeof(*ts));
	Tileops__PlanTensor **tp = calloc((size_t)o->n_tensors, sizeof(*tp));
	if (!ts || !tp) {
		free(ts);
		free(tp);
		return -1;
	}
	for (int i = 0; i < o->n_tensors; i++) {
		tileops__plan_tensor__init(&ts[i]);
		ts[i].name = (char *)o->tensors[i].name;
		ts[i].handle = o->tensors[i].handle;
		ts[i].dtype = (Tileops__DType)o->tensors[i].dtype;
		ts[i].n_shape = (size_t)o->tensors[i].ndim;
		ts[i].shape = (int64_t *)o->tensors[i].shape;
		tp[i] = &ts[i];
	}
	r->tensors = tp;
	return 0;
}

static void request_done(server *srv, job *j)
{
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	Tileops__TensorCreateReply tr = TILEOPS__TENSOR_CREATE_REPLY__INIT;
	Tileops__TensorExportReply er = TILEOPS__TENSOR_EXPORT_REPLY__INIT;
	Tileops__EventRecordReply evr = TILEOPS__EVENT_RECORD_REPLY__INIT;
	Tileops__EventRegisterReply egr = TILEOPS__EVENT_REGISTER_REPLY__INIT;
	Tileops__PlanCreateReply pr = TILEOPS__PLAN_CREATE_REPLY__INIT;
	Tileops__PlanOpenReply por;
	int encoded_open = 0;
	r.seq = j->seq;
	r.status = (Tileops__Status)j->status;
	r.message = j->msg;
	if (j->status == TILEOPS_OK && j->req) {
		switch (j->req->kind) {
		case REQ_TENSOR_CREATE:
		case REQ_TENSOR_IMPORT:
		case REQ_TENSOR_VIEW:
			tr.handle = j->handle;
			tr.nbytes = j->nbytes;
			if (j->req->kind == REQ_TENSOR_CREATE) {
				r.body_case = TILEOPS__REPLY__BODY_TENSOR_CREATE;
				r.tensor_create = &tr;
			} else if (j->req->kind == REQ_TENSOR_VIEW) {
				r.body_case = TILEOPS__REPLY__BODY_TENSOR_VIEW;
				r.tensor_view = &tr;
			} else {
				r.body_case = TILEOPS__REPLY__BODY_TENSOR_IMPORT;
				r.tensor_import = &tr;
			}
			break;
		case REQ_TENSOR_EXPORT:
			er.ipc_handle.data = j->ipc;
			er.ipc_handle.len = sizeof(j->ipc);
			er.offset = j->ipc_offset;
			er.bytes = j->ipc_bytes;
			r.body_case = TILEOPS__REPLY__BODY_TENSOR_EXPORT;
			r.tensor_export = &er;
			break;
		case REQ_EVENT_RECORD:
			evr.ipc_event.data = j->ipc;
			evr.ipc_event.len = sizeof(j->ipc);
			r.body_case = TILEOPS__REPLY__BODY_EVENT_RECORD;
			r.event_record = &evr;
			break;
		case REQ_EVENT_EXPORT:
			evr.ipc_event.data = j->ipc;
			evr.ipc_event.len = sizeof(j->ipc);
			r.body_case = TILEOPS__REPLY__BODY_EVENT_EXPORT;
			r.event_export = &evr;
			break;
		case REQ_EVENT_REGISTER:
			egr.event = j->handle;
			r.body_case = TILEOPS__REPLY__BODY_EVENT_REGISTER;
			r.event_register = &egr;
			break;
		case REQ_PLAN_CREATE:
			pr.plan = j->handle;
			r.body_case = TILEOPS__REPLY__BODY_PLAN_CREATE;
			r.plan_create = &pr;
			break;
		case REQ_PLAN_OPEN:
			if (j->open && encode_plan_open(j->open, &por) == 0) {
				encoded_open = 1;
				r.body_case = TILEOPS__REPLY__BODY_PLAN_OPEN;
				r.plan_open = &por;
			} else {
				r.status = (Tileops__Status)TILEOPS_ERR_OUT_OF_MEMORY;
				r.message = (char *)"out of host memory";
			}
			break;
		default:
			break;
		}
	}
	reply_send(srv, j->w, &r);
	if (j->req && j->req->kind == REQ_OP_RUN) {
		/* The op's round trip in the daemon, received to answered. */
		double us = clock_now_us() - j->received_us;
		stats_op_latency(&srv->st, j->op_slot, us);
		stats_session_op(&j->s->op_stats, r.status != TILEOPS__STATUS__STATUS_OK, us);
	}
	if (encoded_open && por.n_tensors) {
		free(por.tensors[0]);
		free(por.tensors);
	}
	executor_free_reply(j);
	request_free(j->req);
	j->req = NULL;
}

/* A warm-up job came back: the first failure stops the start. */
static void warmup_done(server *srv, job *j)
{
	srv->warm_pending--;
	if (j->status != TILEOPS_OK && !srv->warm_error[0])
		snprintf(srv->warm_error, sizeof(srv->warm_error),
		         "warm-up plan '%.63s' (%.200s:%d): %.300s", j->warm->name, srv->cfg.warmup,
		         j->warm->line, j->msg);
}

void handle_job_done(server *srv, job *j)
{
	session *s = j->s;
	switch (j->kind) {
	case JOB_OPEN:
		open_done(srv, s, j);
		break;
	case JOB_REQUEST:
	case JOB_RESET:
		s->n_running--;
		request_done(srv, j);
		break;
	case JOB_CLOSE:
		arena_unmap(&s->arena);
		break;
	case JOB_WARMUP:
		warmup_done(srv, j);
		break;
	}
	if (s)
		session_unref(s);
	free(j);
}

/* ---- the stats socket ---------------------------------------------------- */

/* "sessions_detail":[...]: every client session that is open, its op
 * requests and their latency. */
static void write_sessions_json(server *srv, strbuf *sb)
{
	int first = 1;
	sb_printf(sb, "\"sessions_detail\":[");
	for (session *s = srv->sessions; s; s = s->next) {
		if (!s->opened)
			continue; /* its tenant is being joined on the executor */
		stats_hist lat = { 0 };
		stats_hist_merge(&lat, &s->op_stats.latency);
		sb_printf(sb, "%s{\"id\":%llu,\"name\":", first ? "" : ",",
		          (unsigned long long)s->id);
		sb_json_string(sb, s->name);
		sb_printf(sb, ",\"tenant\":");
		sb_json_string(sb, s->tenant ? s->tenant->name : "");
		sb_printf(
		        sb, ",\"ops\":%llu,\"errors\":%llu,\"latency_us\":",
		        (unsigned long long)__atomic_load_n(&s->op_stats.ops, __ATOMIC_RELAXED),
		        (unsigned long long)__atomic_load_n(&s->op_stats.errors, __ATOMIC_RELAXED));
		stats_write_hist_json(sb, &lat);
		sb_printf(sb, "}");
		first = 0;
	}
	sb_printf(sb, "]");
}

/* ,"devices":[{index, ordinal, name, memory_bytes, bytes_in_use, mps}, ...]:
 * what the sessions hold on each device, and whether its contexts are shared
 * through MPS (null where not known). */
static void write_devices_json(server *srv, strbuf *sb)
{
	sb_printf(sb, ",\"devices\":[");
	for (int d = 0; d < srv->be->n_devices; d++) {
		const backend_device *bd = &srv->be->devices[d];
		size_t bytes = 0;
		for (session *s = srv->sessions; s; s = s->next)
			bytes += __atomic_load_n(&s->device_bytes[d], __ATOMIC_RELAXED);
		sb_printf(sb, "%s{\"index\":%d,\"ordinal\":%d,\"name\":", d ? "," : "", d,
		          bd->ordinal);
		sb_json_string(sb, bd->name);
		sb_printf(sb, ",\"memory_bytes\":%llu,\"bytes_in_use\":%zu,\"mps\":%s}",
		          (unsigned long long)bd->memory_bytes, bytes,
		          bd->mps < 0 ? "null"
		          : bd->mps   ? "true"
		                      : "false");
	}
	sb_printf(sb, "]");
}

void handle_stats(server *srv, tp_worker *w)
{
	size_t tensors = 0, bytes = 0, held = 0;
	for (session *s = srv->sessions; s; s = s->next) {
		tensors += __atomic_load_n(&s->n_tensors, __ATOMIC_RELAXED);
		bytes += __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
		held += (size_t)s->n_held;
	}
	strbuf sb = { 0 };
	sb_printf(&sb, "{\"version\":");
	sb_json_string(&sb, TILEOPS_VERSION);
	sb_printf(&sb, ",\"uptime_s\":%.3f,\"backend\":", clock_now_s() - srv->started_at);
	sb_json_string(&sb, srv->be->name);
	sb_printf(&sb, ",\"device\":");
	sb_json_string(&sb, srv->be->device);
	write_devices_json(srv, &sb);
	uint64_t requests, errors;
	stats_requests(&srv->st, &requests, &errors);
	sb_printf(&sb,
	          ",\"ready\":%s,\"stopping\":%s,\"sessions\":%d,\"tensors\":%zu,"
	          "\"bytes_in_use\":%zu,\"requests\":%llu,\"errors\":%llu,"
	          "\"jobs_in_flight\":%zu,\"held_requests\":%zu,\"connections\":%d,"
	          "\"contexts\":%d,",
	          srv->ready && !srv->stopping ? "true" : "false", srv->stopping ? "true" : "false",
	          srv->n_sessions, tensors, bytes, (unsigned long long)requests,
	          (unsigned long long)errors, srv->jobs_in_flight, held,
	          srv->control ? transport_connections(srv->control) : 0,
	          srv->control ? transport_workers(srv->control) : 0);
	stats_write_ops_json(&srv->st, &sb);
	sb_printf(&sb, ",");
	write_sessions_json(srv, &sb);
	sb_printf(&sb, ",");
	stats_write_roofline_json(&srv->st, &sb);
	sb_printf(&sb, ",");
	executor_write_threads_json(srv->ex, &sb);
	sb_printf(&sb, ",");
	executor_write_tenants_json(srv->ex, &sb);
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
