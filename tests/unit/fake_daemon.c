/*
 * fake_daemon.c - a scripted stand-in for tileopsd (see fake_daemon.h).
 */
#include "fake_daemon.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>

/* The ring thread sleeps this long unless a client rings sq_bell: a client
 * that forgets to wake it makes its test slow enough to notice. */
#define FAKE_SLEEP_NS (5 * 1000000000LL)
#define FAKE_SPIN_NS (200 * 1000LL)
#define FAKE_REVERSE_BATCH 4

struct fake fake;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fake_log_add(struct fake *f, const struct fake_req *r)
{
	if (f->n_log < FAKE_LOG_MAX)
		f->log[f->n_log++] = *r;
}

/* Record an nng request. Called with f->mu held. */
static void fake_record(struct fake *f, const Tileops__Request *req)
{
	struct fake_req r;

	memset(&r, 0, sizeof(r));
	r.plane = FAKE_NNG;
	r.seq = req->seq;
	r.ring_mark = req->ring_mark;
	r.ring_consumed = f->sq_head;
	r.body = (int)req->body_case;
	if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_WRITE) {
		r.handle = req->tensor_write->handle;
		r.tensor_offset = req->tensor_write->tensor_offset;
		r.arena_offset = req->tensor_write->arena_offset;
		r.length = req->tensor_write->length;
	} else if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_READ) {
		r.handle = req->tensor_read->handle;
		r.tensor_offset = req->tensor_read->tensor_offset;
		r.arena_offset = req->tensor_read->arena_offset;
		r.length = req->tensor_read->length;
	} else if (req->body_case == TILEOPS__REQUEST__BODY_OP_RUN) {
		snprintf(r.op, sizeof(r.op), "%s", req->op_run->op);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_CREATE) {
		r.device = req->tensor_create->device;
	} else if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_COPY) {
		r.handle = req->tensor_copy->dst;
		r.src = req->tensor_copy->src;
	}
	fake_log_add(f, &r);
	pthread_cond_broadcast(&f->cv);
}

/* ---- the rings ------------------------------------------------------------ */

static void futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void cq_post(struct fake *f, const tileops_cqe *e)
{
	tileops_ring_header *h = f->hdr;
	tileops_cqe *cq = (tileops_cqe *)(f->arena + h->cq_offset);

	cq[f->cq_tail & (f->entries - 1)] = *e;
	f->cq_tail++;
	__atomic_store_n(&h->cq_tail, f->cq_tail, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->client_waiting, __ATOMIC_RELAXED) != 0) {
		__atomic_fetch_add(&h->cq_bell, 1, __ATOMIC_SEQ_CST);
		futex_wake_all(&h->cq_bell);
	}
}

/* The op's ("t", "i") params must come in increasing i per t. Under f->mu. */
static void order_check(struct fake *f, const Tileops__OpRun *op)
{
	int64_t t = -1, i = -1;
	size_t k;

	for (k = 0; k < op->n_params; k++) {
		if (strcmp(op->params[k]->name, "t") == 0)
			t = op->params[k]->i;
		else if (strcmp(op->params[k]->name, "i") == 0)
			i = op->params[k]->i;
	}
	if (t < 0 || t >= FAKE_MAX_THREADS || i < 0)
		return;
	if (i != f->last_i[t] + 1)
		f->order_errors++;
	f->last_i[t] = i;
}

/* An op descriptor (TILEOPS_SQE_OP) seen as the OpRun it stands for. */
struct fake_desc {
	Tileops__Request req;
	Tileops__OpRun run;
	char op[TILEOPS_SQE_OP_NAME_BYTES];
	char names[TILEOPS_SQE_OP_MAX_PARAMS][TILEOPS_SQE_PARAM_NAME_BYTES];
	Tileops__Param params[TILEOPS_SQE_OP_MAX_PARAMS];
	Tileops__Param *ptrs[TILEOPS_SQE_OP_MAX_PARAMS];
};

/* Decode an op descriptor; NULL when it is malformed (the fake only needs
 * the name and the params; lengths and counts are still checked). */
static Tileops__Request *desc_decode(const tileops_sqe *s, struct fake_desc *d)
{
	tileops_sqe_op head;
	size_t off;

	if (s->kind != TILEOPS_SQE_OP || s->length < sizeof(head))
		return NULL;
	memcpy(&head, s->payload, sizeof(head));
	if (head.n_inputs > TILEOPS_SQE_OP_MAX_INPUTS ||
	    head.n_outputs > TILEOPS_SQE_OP_MAX_OUTPUTS ||
	    head.n_params > TILEOPS_SQE_OP_MAX_PARAMS ||
	    memchr(head.op, 0, sizeof(head.op)) == NULL)
		return NULL;
	off = sizeof(head) + 8 * (head.n_inputs + head.n_outputs);
	if (s->length != off + sizeof(tileops_sqe_param) * head.n_params)
		return NULL;
	tileops__request__init(&d->req);
	tileops__op_run__init(&d->run);
	memcpy(d->op, head.op, sizeof(d->op));
	for (uint32_t k = 0; k < head.n_params; k++) {
		tileops_sqe_param p;

		memcpy(&p, s->payload + off + sizeof(p) * k, sizeof(p));
		memcpy(d->names[k], p.name, sizeof(p.name));
		d->names[k][sizeof(p.name) - 1] = '\0';
		tileops__param__init(&d->params[k]);
		d->params[k].name = d->names[k];
		d->params[k].value_case = TILEOPS__PARAM__VALUE_I;
		d->params[k].i = p.value.i;
		d->ptrs[k] = &d->params[k];
	}
	d->run.op = d->op;
	d->run.n_params = head.n_params;
	d->run.params = d->ptrs;
	d->req.body_case = TILEOPS__REQUEST__BODY_OP_RUN;
	d->req.op_run = &d->run;
	return &d->req;
}

/* Act on one entry (already copied out); fill its completion. */
static void ring_run(struct fake *f, const tileops_sqe *s, tileops_cqe *e, int *jump)
{
	Tileops__Request *req = NULL, *packed = NULL;
	struct fake_desc desc;
	struct fake_req r;
	const char *msg = "";
	int status = TILEOPS_OK;

	memset(e, 0, sizeof(*e));
	memset(&r, 0, sizeof(r));
	r.plane = FAKE_RING;
	e->tag = s->tag;
	if (s->kind == TILEOPS_SQE_REQUEST && s->length <= sizeof(s->payload))
		req = packed = tileops__request__unpack(NULL, s->length, s->payload);
	else
		req = desc_decode(s, &desc);
	pthread_mutex_lock(&f->mu);
	if (s->flags & TILEOPS_SQE_F_TIMING)
		f->timed_seen++;
	if (req != NULL && req->body_case == TILEOPS__REQUEST__BODY_OP_RUN) {
		f->ring_ops++;
		order_check(f, req->op_run);
		r.body = TILEOPS__REQUEST__BODY_OP_RUN;
		snprintf(r.op, sizeof(r.op), "%s", req->op_run->op);
		fake_log_add(f, &r);
		status = f->op_status;
		msg = f->op_message != NULL ? f->op_message : "";
		if (f->ring_bogus_op != NULL && strcmp(f->ring_bogus_op, r.op) == 0)
			e->tag ^= 0x5aa5ull << 40;
		if (f->ring_jump_op != NULL && strcmp(f->ring_jump_op, r.op) == 0)
			*jump = 1;
	} else if (req != NULL && req->body_case == TILEOPS__REQUEST__BODY_SYNC) {
		f->ring_syncs++;
		r.body = TILEOPS__REQUEST__BODY_SYNC;
		fake_log_add(f, &r);
	} else {
		f->ring_bad++;
		status = TILEOPS_ERR_PROTOCOL;
		msg = "fake: the entry is not an OpRun or Sync request";
	}
	pthread_mutex_unlock(&f->mu);
	e->status = status;
	snprintf(e->message, sizeof(e->message), "%s", status != TILEOPS_OK ? msg : "");
	if (s->flags & TILEOPS_SQE_F_TIMING) {
		e->flags = TILEOPS_CQE_F_TIMED;
		e->gpu_us = f->ring_gpu_us;
	}
	if (packed != NULL)
		tileops__request__free_unpacked(packed, NULL);
}

/* Sleep on sq_bell until a client rings it (or the long time-out). */
static void ring_idle(struct fake *f)
{
	tileops_ring_header *h = f->hdr;
	uint32_t seen = __atomic_load_n(&h->sq_bell, __ATOMIC_SEQ_CST);
	struct timespec ts = { FAKE_SLEEP_NS / 1000000000LL, FAKE_SLEEP_NS % 1000000000LL };

	__atomic_store_n(&h->daemon_sleeping, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&h->sq_tail, __ATOMIC_SEQ_CST) == f->sq_head &&
	    !__atomic_load_n(&f->ring_stop, __ATOMIC_SEQ_CST)) {
		syscall(SYS_futex, &h->sq_bell, FUTEX_WAIT, seen, &ts, NULL, 0);
		f->daemon_sleeps++;
		if (__atomic_load_n(&h->sq_bell, __ATOMIC_SEQ_CST) != seen)
			f->daemon_wakes++;
	}
	__atomic_store_n(&h->daemon_sleeping, 0, __ATOMIC_SEQ_CST);
}

static void *ring_main(void *arg)
{
	struct fake *f = arg;
	tileops_ring_header *h = f->hdr;
	tileops_sqe *sq = (tileops_sqe *)(f->arena + h->sq_offset);
	tileops_cqe held[FAKE_REVERSE_BATCH];
	int n_held = 0;
	int64_t idle_since = now_ns();

	while (!__atomic_load_n(&f->ring_stop, __ATOMIC_ACQUIRE)) {
		uint64_t tail = __atomic_load_n(&h->sq_tail, __ATOMIC_ACQUIRE);
		uint64_t head = __atomic_load_n(&h->cq_head, __ATOMIC_ACQUIRE);
		tileops_sqe s;
		tileops_cqe e;
		int jump = 0;

		if (__atomic_load_n(&f->ring_hold, __ATOMIC_ACQUIRE) || tail == f->sq_head) {
			while (n_held > 0)
				cq_post(f, &held[--n_held]);
			if (!f->ring_hold && now_ns() - idle_since > FAKE_SPIN_NS)
				ring_idle(f);
			else
				usleep(f->ring_hold ? 1000 : 0);
			continue;
		}
		if (f->cq_tail + (uint64_t)n_held - head >= f->entries) {
			while (n_held > 0)
				cq_post(f, &held[--n_held]);
			usleep(50);
			continue; /* the client must reap first */
		}
		memcpy(&s, &sq[f->sq_head & (f->entries - 1)], sizeof(s));
		ring_run(f, &s, &e, &jump);
		if ((s.flags & TILEOPS_SQE_F_TIMING) && f->ring_reverse_timed) {
			held[n_held++] = e;
			if (n_held == FAKE_REVERSE_BATCH)
				while (n_held > 0)
					cq_post(f, &held[--n_held]);
		} else {
			cq_post(f, &e);
		}
		/* Counted as consumed once its completion is out (or held), so an
		 * nng request after it sees it finished. */
		pthread_mutex_lock(&f->mu);
		if (tail - head > f->max_unreaped)
			f->max_unreaped = tail - head;
		f->sq_head++;
		__atomic_store_n(&h->sq_head, f->sq_head, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		if (jump) {
			/* Broken for good: nng requests stop waiting for the ring. */
			pthread_mutex_lock(&f->mu);
			f->ring_jumped = 1;
			pthread_cond_broadcast(&f->cv);
			pthread_mutex_unlock(&f->mu);
			f->cq_tail += 1000;
			__atomic_store_n(&h->cq_tail, f->cq_tail, __ATOMIC_RELEASE);
			__atomic_fetch_add(&h->cq_bell, 1, __ATOMIC_SEQ_CST);
			futex_wake_all(&h->cq_bell);
		}
		idle_since = now_ns();
	}
	return NULL;
}

/* The layout the client wrote must be what tileopsd accepts. */
static int ring_layout_ok(const struct fake *f)
{
	const tileops_ring_header *h = (const tileops_ring_header *)f->arena;
	uint32_t n = h->sq_entries;

	return f->arena_bytes >= TILEOPS_RING_HEADER_BYTES && h->magic == TILEOPS_RING_MAGIC &&
	       h->version == TILEOPS_RING_VERSION && n == h->cq_entries &&
	       n >= TILEOPS_RING_MIN_ENTRIES && n <= TILEOPS_RING_MAX_ENTRIES &&
	       (n & (n - 1)) == 0 && h->sq_offset >= TILEOPS_RING_HEADER_BYTES &&
	       h->cq_offset >= h->sq_offset + (uint64_t)n * TILEOPS_SQE_BYTES &&
	       h->data_offset >= h->cq_offset + (uint64_t)n * TILEOPS_CQE_BYTES &&
	       h->data_offset % 4096 == 0 && h->data_offset <= f->arena_bytes && h->sq_tail == 0 &&
	       h->cq_tail == 0 && h->sq_head == 0 && h->cq_head == 0;
}

static int ring_start(struct fake *f)
{
	if (!ring_layout_ok(f))
		return 0;
	f->hdr = (tileops_ring_header *)f->arena;
	f->entries = f->hdr->sq_entries;
	f->ring_running = 1;
	pthread_create(&f->ring_thread, NULL, ring_main, f);
	return 1;
}

/* ---- the control plane ---------------------------------------------------- */

static void fake_hello(struct fake *f, const Tileops__Hello *h, Tileops__Reply *rep,
                       Tileops__HelloReply *hr)
{
	int fd = shm_open(h->arena_name, O_RDWR, 0);

	snprintf(f->arena_name, sizeof(f->arena_name), "%s", h->arena_name);
	f->arena_existed_at_hello = fd >= 0;
	f->hello_rings = h->rings;
	if (fd >= 0) {
		f->arena_bytes = h->arena_bytes;
		f->arena = mmap(NULL, h->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	}
	hr->protocol_version = 1;
	hr->daemon_version = "0.1.0-fake";
	hr->backend = "cpu";
	hr->device = "fake device";
	hr->session_id = 42;
	hr->max_message_bytes = f->max_message_bytes;
	hr->rings = f->serve_rings && h->rings && f->arena != NULL && ring_start(f);
	for (int i = 0; i < f->n_devices && i < FAKE_MAX_DEVICES; i++) {
		Tileops__DeviceInfo *d = &f->devices[i];

		tileops__device_info__init(d);
		snprintf(f->device_names[i], sizeof(f->device_names[i]), "fake device %d", i);
		d->index = (uint32_t)i + f->device_index_skew;
		d->ordinal = 10 + i;
		d->name = f->device_names[i];
		d->memory_bytes = (uint64_t)i << 30;
		f->device_ptrs[i] = d;
	}
	hr->n_devices = f->n_devices < FAKE_MAX_DEVICES ? (size_t)f->n_devices : FAKE_MAX_DEVICES;
	hr->devices = f->device_ptrs;
	rep->body_case = TILEOPS__REPLY__BODY_HELLO;
	rep->hello = hr;
}

/* Act on one request; returns 0 when no reply should be sent. */
static int fake_answer(struct fake *f, const Tileops__Request *req, Tileops__Reply *rep,
                       Tileops__HelloReply *hr, Tileops__TensorCreateReply *cr)
{
	size_t i;

	rep->seq = req->seq;
	switch (req->body_case) {
	case TILEOPS__REQUEST__BODY_HELLO:
		fake_hello(f, req->hello, rep, hr);
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_CREATE:
		cr->handle = 7;
		rep->body_case = TILEOPS__REPLY__BODY_TENSOR_CREATE;
		rep->tensor_create = cr;
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_WRITE: {
		const Tileops__TensorWrite *w = req->tensor_write;

		if (f->written != NULL && w->tensor_offset + w->length <= f->written_cap)
			memcpy(f->written + w->tensor_offset, f->arena + w->arena_offset,
			       w->length);
		break;
	}
	case TILEOPS__REQUEST__BODY_TENSOR_READ: {
		const Tileops__TensorRead *r = req->tensor_read;

		for (i = 0; i < r->length; i++)
			f->arena[r->arena_offset + i] =
			        (unsigned char)(f->read_fill + r->tensor_offset + i);
		break;
	}
	case TILEOPS__REQUEST__BODY_OP_RUN:
		if (f->op_delay_ms > 0)
			usleep((useconds_t)f->op_delay_ms * 1000);
		rep->status = (Tileops__Status)f->op_status;
		rep->message = (char *)(f->op_message != NULL ? f->op_message : "");
		return !f->hang_ops;
	default:
		break;
	}
	return 1;
}

/* As tileopsd does: consume the ring up to the request's ring_mark first. */
static void fake_wait_mark(struct fake *f, uint64_t mark)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&f->mu);
	/* A stalled ring (ring_hold) answers at once, so tests can close. */
	while (f->ring_running && f->sq_head < mark && !f->ring_hold && !f->ring_jumped)
		if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->mu);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	nng_msg *msg;

	while (nng_recvmsg(f->sock, &msg, 0) == 0) {
		Tileops__Request *req =
		        tileops__request__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
		Tileops__Reply rep = TILEOPS__REPLY__INIT;
		Tileops__HelloReply hr = TILEOPS__HELLO_REPLY__INIT;
		Tileops__TensorCreateReply cr = TILEOPS__TENSOR_CREATE_REPLY__INIT;
		nng_msg *out;
		int answer, silent = 0;
		uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));

		nng_msg_free(msg);
		if (req == NULL)
			continue;
		if (req->body_case == TILEOPS__REQUEST__BODY_HELLO) {
			pthread_mutex_lock(&f->mu);
			if (f->n_hellos < 8)
				f->hello_pipe[f->n_hellos] = pipe;
			f->n_hellos++;
			if (f->hello_silent > 0) {
				f->hello_silent--;
				silent = 1;
			}
			pthread_mutex_unlock(&f->mu);
		}
		if (silent) {
			tileops__request__free_unpacked(req, NULL);
			continue;
		}
		fake_wait_mark(f, req->ring_mark);
		answer = fake_answer(f, req, &rep, &hr, &cr);
		nng_msg_alloc(&out, tileops__reply__get_packed_size(&rep));
		tileops__reply__pack(&rep, nng_msg_body(out));
		pthread_mutex_lock(&f->mu);
		if (!answer) {
			if (f->held != NULL)
				nng_msg_free(f->held);
			f->held = out;
			out = NULL;
		}
		/* Recorded once the arena holds what the request asked for. */
		fake_record(f, req);
		pthread_mutex_unlock(&f->mu);
		if (out != NULL && nng_sendmsg(f->sock, out, 0) != 0)
			nng_msg_free(out);
		tileops__request__free_unpacked(req, NULL);
	}
	return NULL;
}

void fake_start(void)
{
	memset(&fake, 0, sizeof(fake));
	pthread_mutex_init(&fake.mu, NULL);
	pthread_cond_init(&fake.cv, NULL);
	fake.max_message_bytes = 1 << 20;
	for (int i = 0; i < FAKE_MAX_THREADS; i++)
		fake.last_i[i] = -1;
	snprintf(fake.address, sizeof(fake.address), "ipc:///tmp/tileops-test-fake-%ld.sock",
	         (long)getpid());
	cr_assert_eq(nng_rep0_open(&fake.sock), 0);
	cr_assert_eq(nng_listen(fake.sock, fake.address, NULL, 0), 0);
	pthread_create(&fake.thread, NULL, fake_main, &fake);
}

void fake_stop(void)
{
	nng_close(fake.sock);
	pthread_join(fake.thread, NULL);
	if (fake.ring_running) {
		__atomic_store_n(&fake.ring_stop, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&fake.hdr->sq_bell, 1, __ATOMIC_SEQ_CST);
		futex_wake_all(&fake.hdr->sq_bell);
		pthread_join(fake.ring_thread, NULL);
	}
	if (fake.arena != NULL)
		munmap(fake.arena, fake.arena_bytes);
	free(fake.written);
	if (fake.held != NULL)
		nng_msg_free(fake.held);
}

void fake_release(void)
{
	nng_msg *m;

	pthread_mutex_lock(&fake.mu);
	m = fake.held;
	fake.held = NULL;
	pthread_mutex_unlock(&fake.mu);
	cr_assert_not_null(m);
	cr_assert_eq(nng_sendmsg(fake.sock, m, 0), 0);
}

void fake_wait_for(int n)
{
	pthread_mutex_lock(&fake.mu);
	while (fake.n_log < n)
		pthread_cond_wait(&fake.cv, &fake.mu);
	pthread_mutex_unlock(&fake.mu);
}

int fake_count(void)
{
	int n;

	pthread_mutex_lock(&fake.mu);
	n = fake.n_log;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

int fake_wait_consumed(uint64_t n, int timeout_ms)
{
	struct timespec ts;
	int ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fake.mu);
	while (fake.sq_head < n)
		if (pthread_cond_timedwait(&fake.cv, &fake.mu, &ts) == ETIMEDOUT)
			break;
	ok = fake.sq_head >= n;
	pthread_mutex_unlock(&fake.mu);
	return ok;
}

tileops_client *fake_connect(size_t arena_bytes, int timeout_ms)
{
	tileops_connect_options o;
	tileops_client *c = NULL;

	memset(&o, 0, sizeof(o));
	o.address = fake.address;
	o.arena_bytes = arena_bytes;
	o.timeout_ms = timeout_ms;
	o.name = "unit-test";
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_OK, "connect: %s", tileops_last_error());
	return c;
}
