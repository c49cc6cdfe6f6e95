/*
 * ring.c - op submission and completion through the shared-memory rings of
 * the session's arena (the data plane; proto/tileops_ring.h has the layout).
 * Op runs and plan runs travel as fixed binary descriptors (TILEOPS_SQE_OP,
 * TILEOPS_SQE_PLAN_RUN) that the daemon reads without unpacking; syncs, and
 * runs whose names or bindings do not fit a descriptor, as a packed Request
 * (TILEOPS_SQE_REQUEST) when that fits an entry, over nng otherwise (op.c
 * and plan.c decide what to send, this file how it is written).
 *
 * How the threads of one client share the rings
 *
 * Producers. Any thread may submit. Publishing an entry happens under
 * client->mu, the same lock under which nng requests take their seq and
 * record ring_mark (the submission count they come after): so the daemon
 * sees one program order across both planes. An entry is written into the
 * slot at sq_tail, then sq_tail is stored with release semantics, then,
 * after a full fence, the daemon is woken (sq_bell, FUTEX_WAKE) only if it
 * said it sleeps. If an nng request of this client is still in flight, a
 * new op goes over nng too: the daemon could otherwise run the ring entry
 * before that earlier request.
 *
 * Space. Each entry in flight holds one of `entries` completion slots from
 * submission until its completion entry is reaped, so at most `entries`
 * submissions are ever unreaped: the daemon always has a free completion
 * entry for the next submission, and the submission ring never overruns.
 * A producer that finds no free slot reaps, spins briefly, then sleeps on
 * cq_bell like a waiter (below) until a slot frees: nothing is dropped.
 *
 * Completions. Whoever needs progress reaps: under cq_mu it reads cq_tail
 * (acquire), copies each completion entry out once, matches its tag to a
 * slot, finishes that completion (status, message, GPU time, then the done
 * flag with release semantics), frees the slot and publishes cq_head. A
 * tag that names no pending slot is ignored. A cq_tail that moves backwards
 * or beyond what was submitted means the session's shared memory cannot be
 * trusted any more: every pending ring completion fails with
 * TILEOPS_ERR_PROTOCOL and later ops go over nng.
 *
 * Waiting. A waiter checks its done flag and reaps, spinning for
 * TILEOPS_SPIN_US microseconds when set, else as long as the daemon's
 * spin_advice says (no spin while the host's CPUs are oversubscribed), else
 * 20; then it sleeps: it reads
 * cq_bell, adds itself to client_waiting (a count of this client's
 * sleeping threads), fences, reaps once more and sleeps on cq_bell only if
 * still nothing happened. Whoever finishes completions (the daemon after
 * posting, or another thread of this client after reaping) bumps cq_bell
 * and wakes it when client_waiting is not zero, so no wake-up is lost.
 * Sleeps are also bounded (200 ms) as a safety net. Polling never sleeps.
 *
 * Time-outs. With a connect timeout, a ring completion that has not come
 * within it finishes with TILEOPS_ERR_TIMEOUT; its slot stays taken until
 * the daemon's completion entry for it arrives (it is then dropped).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define RING_SLEEP_MAX_NS (200 * 1000000LL)
#define RING_SPIN_MAX_US 100000

struct ring_slot {
	uint64_t tag; /* of the entry holding the slot */
	int busy;
	struct tileops_completion *r; /* NULL once the completion gave up (time-out) */
};

struct tci_ring {
	tileops_ring_header *hdr;
	tileops_sqe *sq;
	tileops_cqe *cq;
	uint32_t entries;
	uint32_t mask;
	long spin_ns;
	int spin_fixed; /* TILEOPS_SPIN_US set: the daemon's spin_advice is ignored */

	/* Producer side, under client->mu. Read atomically by the reaper. */
	uint64_t sq_tail;

	/* Completion side, under cq_mu. */
	pthread_mutex_t cq_mu;
	uint64_t cq_head;
	uint32_t generation;
	struct ring_slot *slots;
	uint32_t *free_slots;
	uint32_t n_free;
	int stopped; /* atomic: broken or closed; the rings are not used any more */
	tileops_status stop_status;
	char stop_why[200];

	/* Profiling (tileops_trace_start), under cq_mu; `tracing` is read
	 * atomically by submitters. */
	int tracing;
	tileops_trace *traces;
	size_t n_traces, trace_cap;
};

/* ---- layout and set-up -------------------------------------------------- */

static size_t page_round(size_t n)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t p = page > 0 ? (size_t)page : 4096;

	return (n + p - 1) / p * p;
}

size_t tci_ring_region_bytes(uint32_t entries)
{
	return page_round(TILEOPS_RING_HEADER_BYTES + (size_t)entries * TILEOPS_SQE_BYTES +
	                  (size_t)entries * TILEOPS_CQE_BYTES);
}

static long env_long(const char *name, long dflt, int *bad)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (v == NULL || v[0] == '\0')
		return dflt;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0')
		*bad = 1;
	return n;
}

tileops_status tci_ring_config(uint32_t *entries)
{
	int bad = 0;
	long on = env_long("TILEOPS_RINGS", 1, &bad);
	long n;

	if (bad || (on != 0 && on != 1))
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "connect: TILEOPS_RINGS is '%s', expected 0 (ops over nng) or 1",
		                 getenv("TILEOPS_RINGS"));
	if (on == 0) {
		*entries = 0;
		return TILEOPS_OK;
	}
	n = env_long("TILEOPS_RING_ENTRIES", TCI_RING_DEFAULT_ENTRIES, &bad);
	if (bad || n < (long)TILEOPS_RING_MIN_ENTRIES || n > (long)TILEOPS_RING_MAX_ENTRIES ||
	    (n & (n - 1)) != 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "connect: TILEOPS_RING_ENTRIES is '%s', expected a power of two "
		                 "from %u to %u",
		                 getenv("TILEOPS_RING_ENTRIES"), TILEOPS_RING_MIN_ENTRIES,
		                 TILEOPS_RING_MAX_ENTRIES);
	*entries = (uint32_t)n;
	return TILEOPS_OK;
}

void tci_ring_layout(void *arena, uint32_t entries)
{
	tileops_ring_header *h = arena;

	memset(h, 0, TILEOPS_RING_HEADER_BYTES);
	h->magic = TILEOPS_RING_MAGIC;
	h->version = TILEOPS_RING_VERSION;
	h->sq_entries = entries;
	h->cq_entries = entries;
	h->sq_offset = TILEOPS_RING_HEADER_BYTES;
	h->cq_offset = h->sq_offset + (uint64_t)entries * TILEOPS_SQE_BYTES;
	h->data_offset = tci_ring_region_bytes(entries);
}

tileops_status tci_ring_attach(struct tileops_client *c, uint32_t entries)
{
	struct tci_ring *ring = calloc(1, sizeof(*ring));
	tileops_ring_header *h = c->arena;
	int bad = 0;
	long spin_us = env_long("TILEOPS_SPIN_US", TCI_SPIN_DEFAULT_US, &bad);
	uint32_t i;

	const char *given = getenv("TILEOPS_SPIN_US");
	int spin_given = given != NULL && given[0] != '\0';

	if (bad || spin_us < 0 || spin_us > RING_SPIN_MAX_US) {
		spin_us = TCI_SPIN_DEFAULT_US;
		spin_given = 0;
	}
	if (ring == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "connect: out of memory for the rings");
	ring->slots = calloc(entries, sizeof(*ring->slots));
	ring->free_slots = calloc(entries, sizeof(*ring->free_slots));
	if (ring->slots == NULL || ring->free_slots == NULL) {
		free(ring->slots);
		free(ring->free_slots);
		free(ring);
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "connect: out of memory for the rings");
	}
	for (i = 0; i < entries; i++)
		ring->free_slots[i] = entries - 1 - i;
	ring->n_free = entries;
	ring->hdr = h;
	ring->sq = (tileops_sqe *)((unsigned char *)c->arena + h->sq_offset);
	ring->cq = (tileops_cqe *)((unsigned char *)c->arena + h->cq_offset);
	ring->entries = entries;
	ring->mask = entries - 1;
	ring->spin_ns = spin_us * 1000;
	ring->spin_fixed = spin_given;
	pthread_mutex_init(&ring->cq_mu, NULL);
	c->ring = ring;
	return TILEOPS_OK;
}

void tci_ring_destroy(struct tileops_client *c)
{
	struct tci_ring *ring = c->ring;

	if (ring == NULL)
		return;
	pthread_mutex_destroy(&ring->cq_mu);
	free(ring->traces);
	free(ring->slots);
	free(ring->free_slots);
	free(ring);
	c->ring = NULL;
}

uint64_t tci_ring_mark(const struct tileops_client *c)
{
	return c->ring != NULL ? c->ring->sq_tail : 0;
}

/* ---- small tools -------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Shared futexes: the daemon sleeps and wakes on the same words. */
static void futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(uint32_t *word, uint32_t seen, int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL) };

	syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Wake this client's sleeping threads, if any. */
static void ring_wake_waiters(struct tci_ring *ring)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ring->hdr->client_waiting, __ATOMIC_RELAXED) != 0) {
		__atomic_fetch_add(&ring->hdr->cq_bell, 1, __ATOMIC_SEQ_CST);
		futex_wake_all(&ring->hdr->cq_bell);
	}
}

static void ring_wake_daemon(struct tci_ring *ring)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ring->hdr->daemon_sleeping, __ATOMIC_RELAXED) != 0) {
		__atomic_fetch_add(&ring->hdr->sq_bell, 1, __ATOMIC_SEQ_CST);
		futex_wake_all(&ring->hdr->sq_bell);
	}
}

static int completion_done(const struct tileops_completion *r)
{
	return __atomic_load_n(&r->ring_done, __ATOMIC_ACQUIRE);
}

/* Make r final. Called with cq_mu held (or before r is published). */
static void completion_finish(struct tileops_completion *r, tileops_status st, const char *msg)
{
	r->status = st;
	if (st != TILEOPS_OK)
		r->message = strdup(msg != NULL && msg[0] != '\0' ? msg : tileops_strerror(st));
	__atomic_store_n(&r->ring_done, 1, __ATOMIC_RELEASE);
}

/* ---- the completion side ------------------------------------------------ */

static void slot_release(struct tci_ring *ring, uint32_t idx)
{
	ring->slots[idx].busy = 0;
	ring->slots[idx].r = NULL;
	ring->free_slots[ring->n_free++] = idx;
}

/* Stop using the rings: fail what is pending. Called with cq_mu held. */
static void ring_stop_locked(struct tci_ring *ring, tileops_status st, const char *why)
{
	uint32_t i;

	if (!ring->stopped) {
		ring->stop_status = st;
		snprintf(ring->stop_why, sizeof(ring->stop_why), "%s", why);
		__atomic_store_n(&ring->stopped, 1, __ATOMIC_RELEASE);
	}
	for (i = 0; i < ring->entries; i++) {
		struct ring_slot *s = &ring->slots[i];

		if (s->busy && s->r != NULL) {
			completion_finish(s->r, st, why);
			s->r = NULL;
		}
	}
	/* Whoever sleeps on cq_bell must see the news. */
	__atomic_fetch_add(&ring->hdr->cq_bell, 1, __ATOMIC_SEQ_CST);
	futex_wake_all(&ring->hdr->cq_bell);
}

/* Keep the trace of a traced request whose completion just came. Called
 * with cq_mu held. */
static void ring_trace_keep(struct tci_ring *ring, const struct tileops_completion *r,
                            const tileops_cqe *e)
{
	tileops_trace *t;
	tileops_ring_trace d;

	if (ring->n_traces == ring->trace_cap)
		return; /* full until read */
	t = &ring->traces[ring->n_traces++];
	memset(t, 0, sizeof(*t));
	t->kind = (tileops_trace_kind)r->trace_kind;
	t->status = tci_status_valid(e->status) ? (tileops_status)e->status : TILEOPS_ERR_PROTOCOL;
	t->executor = -1;
	t->submit_ns = r->submit_ns;
	t->woke_ns = now_ns();
	if (e->status == TILEOPS_OK && (e->flags & TILEOPS_CQE_F_TRACE)) {
		memcpy(&d, e->message, sizeof(d));
		t->taken_ns = (int64_t)d.taken_ns;
		t->launched_ns = (int64_t)d.launched_ns;
		t->posted_ns = (int64_t)d.posted_ns;
		t->executor = (int)d.executor;
	}
}

/* One completion entry, already copied out of shared memory. */
static void ring_complete(struct tci_ring *ring, tileops_cqe *e)
{
	uint32_t idx = (uint32_t)(e->tag & 0xffffffffu);
	struct tileops_completion *r;
	struct ring_slot *s;
	char msg[sizeof(e->message) + 64];

	if (idx >= ring->entries)
		return;
	s = &ring->slots[idx];
	if (!s->busy || s->tag != e->tag)
		return; /* names nothing pending: ignore it */
	r = s->r;
	slot_release(ring, idx);
	if (r == NULL)
		return; /* it timed out already */
	e->message[sizeof(e->message) - 1] = '\0';
	if (!tci_status_valid(e->status)) {
		snprintf(msg, sizeof(msg), "tileopsd posted a completion with unknown status %d",
		         (int)e->status);
		completion_finish(r, TILEOPS_ERR_PROTOCOL, msg);
		return;
	}
	if (r->timed && (e->flags & TILEOPS_CQE_F_TIMED) && e->gpu_us >= 0 && e->gpu_us < 1e12) {
		r->gpu_us = e->gpu_us;
		r->has_gpu_us = 1;
	}
	if (r->traced)
		ring_trace_keep(ring, r, e);
	if (e->status == TILEOPS_OK && (e->flags & TILEOPS_CQE_F_TRACE))
		msg[0] = '\0'; /* the message holds the trace, not text */
	else if (e->status != TILEOPS_OK && e->message[0] == '\0')
		snprintf(msg, sizeof(msg), "tileopsd: %s", tileops_strerror(e->status));
	else
		snprintf(msg, sizeof(msg), "%s", e->message);
	completion_finish(r, (tileops_status)e->status, msg);
}

/*
 * Take every posted completion. Returns how many entries were taken, or -1
 * when the rings are stopped. Called with cq_mu held.
 */
static int ring_reap_locked(struct tci_ring *ring)
{
	uint64_t tail, submitted;
	char why[200];
	int n = 0;

	if (__atomic_load_n(&ring->stopped, __ATOMIC_ACQUIRE))
		return -1;
	tail = __atomic_load_n(&ring->hdr->cq_tail, __ATOMIC_ACQUIRE);
	submitted = __atomic_load_n(&ring->sq_tail, __ATOMIC_RELAXED);
	if (tail < ring->cq_head || tail > submitted) {
		snprintf(why, sizeof(why),
		         "tileopsd's completion ring is corrupt: cq_tail is %llu, expected "
		         "%llu to %llu (entries read and submitted)",
		         (unsigned long long)tail, (unsigned long long)ring->cq_head,
		         (unsigned long long)submitted);
		ring_stop_locked(ring, TILEOPS_ERR_PROTOCOL, why);
		return -1;
	}
	while (ring->cq_head < tail) {
		tileops_cqe e;

		memcpy(&e, &ring->cq[ring->cq_head & ring->mask], sizeof(e));
		ring->cq_head++;
		ring_complete(ring, &e);
		n++;
	}
	if (n > 0) {
		__atomic_store_n(&ring->hdr->cq_head, ring->cq_head, __ATOMIC_RELEASE);
		ring_wake_waiters(ring);
	}
	return n;
}

static int ring_reap(struct tci_ring *ring)
{
	int n;

	pthread_mutex_lock(&ring->cq_mu);
	n = ring_reap_locked(ring);
	pthread_mutex_unlock(&ring->cq_mu);
	return n;
}

/*
 * The client's half of the sleep handshake (the daemon's is ring_publish in
 * daemon/exec/ring.c). The seq_cst read-modify-write of client_waiting is a
 * full fence (a locked instruction on x86), so the reap's load of cq_tail
 * cannot pass it: either this reap sees the completion, or the daemon,
 * which fences between storing cq_tail and loading client_waiting, sees the
 * waiter and wakes the bell read here.
 */
int tci_ring_sleep_begin(struct tci_ring *ring, uint32_t *seen)
{
	*seen = __atomic_load_n(&ring->hdr->cq_bell, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&ring->hdr->client_waiting, 1, __ATOMIC_SEQ_CST);
	return ring_reap(ring);
}

void tci_ring_sleep_end(struct tci_ring *ring)
{
	__atomic_fetch_sub(&ring->hdr->client_waiting, 1, __ATOMIC_SEQ_CST);
}

/*
 * Sleep on cq_bell for at most `ns` unless something happens first: a
 * completion of ours is posted, or another thread finishes one.
 * `done` (may be NULL) is checked after announcing the sleep.
 */
static void ring_sleep(struct tci_ring *ring, const struct tileops_completion *done, int64_t ns)
{
	uint32_t seen;

	if (ns > RING_SLEEP_MAX_NS)
		ns = RING_SLEEP_MAX_NS;
	if (tci_ring_sleep_begin(ring, &seen) == 0 && (done == NULL || !completion_done(done)) &&
	    ns > 0)
		futex_wait(&ring->hdr->cq_bell, seen, ns);
	tci_ring_sleep_end(ring);
}

/* Give up on r after its time-out: it finishes now, its slot stays taken. */
static void ring_expire(struct tci_ring *ring, struct tileops_completion *r, int timeout_ms)
{
	char msg[160];
	uint32_t idx = (uint32_t)(r->tag & 0xffffffffu);

	pthread_mutex_lock(&ring->cq_mu);
	if (!completion_done(r)) {
		if (idx < ring->entries && ring->slots[idx].r == r)
			ring->slots[idx].r = NULL;
		snprintf(msg, sizeof(msg),
		         "no completion from tileopsd within %d ms (ring entry %llu)", timeout_ms,
		         (unsigned long long)(r->tag >> 32));
		completion_finish(r, TILEOPS_ERR_TIMEOUT, msg);
	}
	pthread_mutex_unlock(&ring->cq_mu);
}

/* How long a waiter spins before it sleeps: TILEOPS_SPIN_US when given,
 * else the daemon's advice when it gives one, else the default. */
static int64_t ring_spin_ns(const struct tci_ring *ring)
{
	uint32_t advice;

	if (ring->spin_fixed)
		return ring->spin_ns;
	advice = __atomic_load_n(&ring->hdr->spin_advice, __ATOMIC_RELAXED);
	if (advice == 0 || advice - 1 > RING_SPIN_MAX_US)
		return ring->spin_ns;
	return (int64_t)(advice - 1) * 1000;
}

tileops_status tci_ring_wait(struct tileops_completion *r, int timeout_ms)
{
	struct tileops_client *c = r->client;
	struct tci_ring *ring = c->ring;
	int64_t start = now_ns();
	int64_t until = timeout_ms > 0 ? start + (int64_t)timeout_ms * 1000000LL : INT64_MAX;
	int64_t spin = ring_spin_ns(ring);
	tileops_status st;

	while (!completion_done(r)) {
		int64_t t;

		ring_reap(ring);
		if (completion_done(r))
			break;
		t = now_ns();
		if (r->deadline_ns != 0 && t >= r->deadline_ns) {
			ring_expire(ring, r, c->timeout_ms);
			break;
		}
		if (timeout_ms == 0 || t >= until)
			return TILEOPS_IN_PROGRESS;
		if (t - start < spin) {
			cpu_relax();
			continue;
		}
		if (r->deadline_ns != 0 && r->deadline_ns < until)
			until = r->deadline_ns;
		ring_sleep(ring, r, until - t);
	}
	st = r->status;
	if (st != TILEOPS_OK)
		tci_error_set_text(r->message != NULL ? r->message : tileops_strerror(st));
	return st;
}

void tci_ring_free(struct tileops_completion *r)
{
	struct tileops_client *c = r->client;

	if (!completion_done(r)) {
		char saved[1024];

		/* Waiting must not replace the caller's last error. */
		snprintf(saved, sizeof(saved), "%s", tileops_last_error());
		(void)tci_ring_wait(r, -1);
		tci_error_set_text(saved);
	}
	free(r->message);
	free(r);
	tci_client_release(c);
}

void tci_ring_fail_all(struct tileops_client *c, tileops_status st, const char *why)
{
	struct tci_ring *ring = c->ring;

	if (ring == NULL)
		return;
	pthread_mutex_lock(&ring->cq_mu);
	/* What the daemon finished already keeps its own status. */
	(void)ring_reap_locked(ring);
	ring_stop_locked(ring, st, why);
	pthread_mutex_unlock(&ring->cq_mu);
}

/* ---- the submission side ------------------------------------------------ */

/* A free slot and its tag, or -1. Called with cq_mu held. */
static int slot_take(struct tci_ring *ring, struct tileops_completion *r)
{
	uint32_t idx;

	if (ring->n_free == 0)
		return -1;
	idx = ring->free_slots[--ring->n_free];
	ring->generation++;
	r->tag = ((uint64_t)ring->generation << 32) | idx;
	ring->slots[idx].tag = r->tag;
	ring->slots[idx].busy = 1;
	ring->slots[idx].r = r;
	return (int)idx;
}

/* ---- encoding ------------------------------------------------------------ */

/* Copy a name into a NUL-padded field; 0 when it does not fit. */
static int name_put(char *field, size_t bytes, const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n >= bytes)
		return 0;
	memset(field, 0, bytes);
	memcpy(field, name, n);
	return 1;
}

/* An OpRun as an op descriptor; the payload length, or 0 when it does not fit. */
static size_t encode_op(const Tileops__OpRun *m, uint8_t *payload)
{
	tileops_sqe_op head;
	size_t off = sizeof(head);
	size_t i;

	if (m->n_inputs > TILEOPS_SQE_OP_MAX_INPUTS || m->n_outputs > TILEOPS_SQE_OP_MAX_OUTPUTS ||
	    m->n_params > TILEOPS_SQE_OP_MAX_PARAMS || !name_put(head.op, sizeof(head.op), m->op))
		return 0;
	head.n_inputs = (uint32_t)m->n_inputs;
	head.n_outputs = (uint32_t)m->n_outputs;
	head.n_params = (uint32_t)m->n_params;
	head.reserved = 0;
	memcpy(payload, &head, sizeof(head));
	if (m->n_inputs > 0)
		memcpy(payload + off, m->inputs, m->n_inputs * sizeof(uint64_t));
	off += m->n_inputs * sizeof(uint64_t);
	if (m->n_outputs > 0)
		memcpy(payload + off, m->outputs, m->n_outputs * sizeof(uint64_t));
	off += m->n_outputs * sizeof(uint64_t);
	for (i = 0; i < m->n_params; i++) {
		const Tileops__Param *p = m->params[i];
		tileops_sqe_param d;

		if (!name_put(d.name, sizeof(d.name), p->name))
			return 0;
		d.reserved = 0;
		switch (p->value_case) {
		case TILEOPS__PARAM__VALUE_I:
			d.kind = TILEOPS_SQE_PARAM_INT;
			d.value.i = p->i;
			break;
		case TILEOPS__PARAM__VALUE_F:
			d.kind = TILEOPS_SQE_PARAM_FLOAT;
			d.value.f = p->f;
			break;
		case TILEOPS__PARAM__VALUE_B:
			d.kind = TILEOPS_SQE_PARAM_BOOL;
			d.value.i = p->b ? 1 : 0;
			break;
		default:
			return 0; /* valueless: the packed Request gets the answer */
		}
		memcpy(payload + off, &d, sizeof(d));
		off += sizeof(d);
	}
	return off;
}

/* A PlanRun as a plan-run descriptor; the payload length, or 0 when it does not fit. */
static size_t encode_plan_run(const Tileops__PlanRun *m, uint8_t *payload)
{
	tileops_sqe_plan_run head = { m->plan, m->size, (uint32_t)m->n_bindings, 0 };
	size_t off = sizeof(head);
	size_t i;

	if (m->n_bindings > TILEOPS_SQE_PLAN_MAX_BINDINGS)
		return 0;
	memcpy(payload, &head, sizeof(head));
	for (i = 0; i < m->n_bindings; i++) {
		tileops_sqe_binding b = { m->bindings[i]->plan_tensor, m->bindings[i]->tensor };

		memcpy(payload + off, &b, sizeof(b));
		off += sizeof(b);
	}
	return off;
}

/*
 * The entry for a request: a descriptor for op and plan runs that fit one,
 * a packed Request otherwise. Returns the payload length, or 0 when the
 * request does not fit an entry at all (it goes over nng).
 */
static size_t encode_request(const Tileops__Request *req, uint8_t *payload, size_t cap,
                             uint32_t *kind)
{
	size_t len = 0;

	if (req->body_case == TILEOPS__REQUEST__BODY_OP_RUN) {
		*kind = TILEOPS_SQE_OP;
		len = encode_op(req->op_run, payload);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_PLAN_RUN) {
		*kind = TILEOPS_SQE_PLAN_RUN;
		len = encode_plan_run(req->plan_run, payload);
	} else if (req->body_case == TILEOPS__REQUEST__BODY_EVENT_WAIT_REGISTERED ||
	           req->body_case == TILEOPS__REQUEST__BODY_EVENT_RECORD_EXPORTED) {
		tileops_sqe_event d = { 0, 0 };
		int wait = req->body_case == TILEOPS__REQUEST__BODY_EVENT_WAIT_REGISTERED;
		*kind = wait ? TILEOPS_SQE_EVENT_WAIT : TILEOPS_SQE_EVENT_RECORD;
		d.event = wait ? req->event_wait_registered->event : 0;
		memcpy(payload, &d, sizeof(d));
		return sizeof(d);
	}
	if (len > 0)
		return len;
	*kind = TILEOPS_SQE_REQUEST;
	len = tileops__request__get_packed_size(req);
	if (len > cap)
		return 0;
	return tileops__request__pack(req, payload);
}

/* ---- publishing ---------------------------------------------------------- */

/* Write one entry and publish it. Called with c->mu held. */
static void sq_publish(struct tci_ring *ring, struct tileops_completion *r, uint32_t kind,
                       const uint8_t *payload, size_t len)
{
	tileops_sqe *e = &ring->sq[ring->sq_tail & ring->mask];

	e->tag = r->tag;
	e->kind = kind;
	e->flags = (r->timed ? TILEOPS_SQE_F_TIMING : 0) | (r->traced ? TILEOPS_SQE_F_TRACE : 0);
	e->length = (uint32_t)len;
	e->reserved = 0;
	memcpy(e->payload, payload, len);
	if (r->traced)
		r->submit_ns = now_ns();
	__atomic_store_n(&ring->sq_tail, ring->sq_tail + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&ring->hdr->sq_tail, ring->sq_tail, __ATOMIC_RELEASE);
}

enum try_result { TRY_DONE, TRY_NNG, TRY_FULL, TRY_FAILED };

/* One attempt to publish; under c->mu, and cq_mu for the slot. */
static enum try_result ring_try_publish(struct tileops_client *c, struct tileops_completion *r,
                                        uint32_t kind, const uint8_t *payload, size_t len,
                                        tileops_status *st)
{
	struct tci_ring *ring = c->ring;
	enum try_result res;
	int idx;

	pthread_mutex_lock(&c->mu);
	if (c->dead) {
		pthread_mutex_unlock(&c->mu);
		*st = tci_error(TILEOPS_ERR_CLOSED, "%s",
		                c->closed ? "the client was closed (tileops_close)"
		                          : "connection to tileopsd lost");
		return TRY_FAILED;
	}
	if (c->n_inflight > 0) {
		/* An nng request is still on its way: keep program order. */
		pthread_mutex_unlock(&c->mu);
		return TRY_NNG;
	}
	pthread_mutex_lock(&ring->cq_mu);
	if (ring->stopped) {
		res = TRY_NNG;
	} else if ((idx = slot_take(ring, r)) < 0) {
		res = TRY_FULL;
	} else {
		sq_publish(ring, r, kind, payload, len);
		c->refs++;
		res = TRY_DONE;
	}
	pthread_mutex_unlock(&ring->cq_mu);
	pthread_mutex_unlock(&c->mu);
	return res;
}

/* Wait until a slot may be free; TILEOPS_ERR_TIMEOUT past the deadline. */
static tileops_status ring_wait_space(struct tci_ring *ring, int64_t spin_until, int64_t deadline,
                                      int timeout_ms)
{
	int64_t t = now_ns();
	int n = ring_reap(ring);

	if (n != 0)
		return TILEOPS_OK; /* progress, or stopped: try again */
	if (deadline != 0 && t >= deadline)
		return tci_error(TILEOPS_ERR_TIMEOUT,
		                 "the submission ring stayed full for %d ms: tileopsd completes "
		                 "nothing",
		                 timeout_ms);
	if (t < spin_until) {
		cpu_relax();
		return TILEOPS_OK;
	}
	ring_sleep(ring, NULL, deadline != 0 ? deadline - t : RING_SLEEP_MAX_NS);
	return TILEOPS_OK;
}

tileops_status tci_ring_submit(struct tileops_client *c, const Tileops__Request *req, int timed,
                               struct tileops_completion **out)
{
	struct tci_ring *ring = c->ring;
	uint8_t payload[sizeof(((tileops_sqe *)0)->payload)];
	struct tileops_completion *r;
	uint32_t kind = TILEOPS_SQE_REQUEST;
	size_t len;
	int64_t start = now_ns();
	tileops_status st = TILEOPS_OK;

	*out = NULL;
	if (ring == NULL || __atomic_load_n(&ring->stopped, __ATOMIC_ACQUIRE))
		return TILEOPS_OK; /* over nng */
	if ((len = encode_request(req, payload, sizeof(payload), &kind)) == 0)
		return TILEOPS_OK; /* too big for an entry: over nng */
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "out of memory for a completion");
	r->client = c;
	r->on_ring = 1;
	r->timed = timed;
	r->traced = __atomic_load_n(&ring->tracing, __ATOMIC_RELAXED);
	r->trace_kind = req->body_case == TILEOPS__REQUEST__BODY_PLAN_RUN ? TILEOPS_TRACE_PLAN
	                : req->body_case == TILEOPS__REQUEST__BODY_SYNC   ? TILEOPS_TRACE_SYNC
	                                                                  : TILEOPS_TRACE_OP;
	if (c->timeout_ms > 0)
		r->deadline_ns = start + (int64_t)c->timeout_ms * 1000000LL;
	for (;;) {
		switch (ring_try_publish(c, r, kind, payload, len, &st)) {
		case TRY_DONE:
			ring_wake_daemon(ring);
			*out = r;
			return TILEOPS_OK;
		case TRY_NNG:
			free(r);
			return TILEOPS_OK;
		case TRY_FAILED:
			free(r);
			return st;
		case TRY_FULL:
			st = ring_wait_space(ring, start + ring_spin_ns(ring), r->deadline_ns,
			                     c->timeout_ms);
			if (st != TILEOPS_OK) {
				free(r);
				return st;
			}
			break;
		}
	}
}

/* ---- profiling ------------------------------------------------------------ */

TILEOPS_API tileops_status tileops_trace_start(tileops_client *c, size_t capacity)
{
	struct tci_ring *ring;
	tileops_trace *buf = NULL;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "trace_start: client is NULL");
	if ((ring = c->ring) == NULL)
		return tci_error(
		        TILEOPS_ERR_UNSUPPORTED,
		        "trace_start: this session has no shared-memory rings (TILEOPS_RINGS=0, "
		        "or the daemon does not serve them): only ring requests are traced");
	if (capacity > ((size_t)1 << 26))
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "trace_start: capacity %zu is over 2^26 traces", capacity);
	if (capacity > 0 && (buf = calloc(capacity, sizeof(*buf))) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "trace_start: no memory for %zu traces",
		                 capacity);
	pthread_mutex_lock(&ring->cq_mu);
	free(ring->traces);
	ring->traces = buf;
	ring->trace_cap = capacity;
	ring->n_traces = 0;
	__atomic_store_n(&ring->tracing, capacity > 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ring->cq_mu);
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_trace_read(tileops_client *c, tileops_trace *out, size_t max,
                                              size_t *n)
{
	struct tci_ring *ring;
	size_t k;

	if (c == NULL || n == NULL || (out == NULL && max > 0))
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "trace_read: %s is NULL",
		                 c == NULL   ? "client"
		                 : n == NULL ? "n"
		                             : "out");
	*n = 0;
	if ((ring = c->ring) == NULL)
		return TILEOPS_OK;
	pthread_mutex_lock(&ring->cq_mu);
	k = ring->n_traces < max ? ring->n_traces : max;
	if (k > 0) {
		memcpy(out, ring->traces, k * sizeof(*out));
		memmove(ring->traces, ring->traces + k, (ring->n_traces - k) * sizeof(*out));
		ring->n_traces -= k;
	}
	pthread_mutex_unlock(&ring->cq_mu);
	*n = k;
	return TILEOPS_OK;
}
