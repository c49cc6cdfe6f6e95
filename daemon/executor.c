/*
 * executor.c - the device-owning thread: its queue, its polling of the
 * sessions' rings and of pending completions, and how it sleeps (see
 * executor.h). Running each request is exec.c.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "executor_int.h"
#include "log.h"
#include "manifest.h"

/* futex_waitv (Linux 5.16) lets the executor sleep on every ring's bell and
 * its own at once. Older kernels: sleep on its own bell with a short
 * timeout, so rings are still polled about a thousand times a second. */
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE 128
#endif
#define WAITV_MAX 128

struct waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

static double mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void executor_hand_back(executor *ex, job *j)
{
	ex->cfg.done(ex->cfg.ctx, j);
}

/* ---- pending completions ------------------------------------------------ */

int executor_poll_pending(executor *ex)
{
	int progressed = 0;
	pending **pp = &ex->pend;
	ex->pend_tail = NULL;
	while (*pp) {
		pending *p = *pp;
		char msg[256] = "";
		tileops_status st = ex->be->ops->fence_query(ex->be, p->fence, msg, sizeof(msg));
		if (st == TILEOPS_IN_PROGRESS) {
			ex->pend_tail = p;
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		ex->be->ops->fence_free(ex->be, p->fence);
		if (p->job) {
			if (st != TILEOPS_OK && p->job->status == TILEOPS_OK) {
				p->job->status = st;
				snprintf(p->job->msg, sizeof(p->job->msg), "%s", msg);
			}
			executor_hand_back(ex, p->job);
		} else {
			exec_post(ex, p->s, p->tag, st, -1.0, msg);
			session_unref(p->s);
		}
		free(p);
		progressed = 1;
	}
	return progressed;
}

/* ---- the rings ---------------------------------------------------------- */

/* One pass over the ring sessions, round robin, a batch from each. */
static int poll_rings(executor *ex)
{
	int worked = 0;
	session *start = ex->rr_next ? ex->rr_next : ex->rings;
	session *s = start;
	if (!s)
		return 0;
	do {
		uint64_t avail = ring_available(&s->ring, &s->arena);
		uint32_t room = avail ? ring_cq_room(&s->ring, &s->arena) : 0;
		uint64_t n = avail < room ? avail : room;
		if (n > (uint64_t)ex->cfg.ring_batch)
			n = (uint64_t)ex->cfg.ring_batch;
		for (uint64_t i = 0; i < n; i++) {
			tileops_sqe e;
			if (ring_take(&s->ring, &s->arena, &e) != 0)
				break;
			exec_sqe(ex, s, &e);
			worked = 1;
		}
		s = s->ring_next ? s->ring_next : ex->rings;
	} while (s != start);
	ex->rr_next = start->ring_next;
	return worked;
}

/* ---- sleeping ----------------------------------------------------------- */

static int queue_empty(executor *ex)
{
	pthread_mutex_lock(&ex->mu);
	int empty = !ex->head && !ex->stopping;
	pthread_mutex_unlock(&ex->mu);
	return empty;
}

static void set_sleeping(executor *ex, uint32_t v)
{
	__atomic_store_n(&ex->sleeping, (int)v, __ATOMIC_SEQ_CST);
	for (session *s = ex->rings; s; s = s->ring_next)
		ring_set_sleeping(&s->ring, &s->arena, v);
}

/*
 * Sleep until a job is queued or a client rings. Flags first, then a last
 * look at every queue, then the wait: a submitter that published before the
 * look is seen by it, and one after it sees the flag and rings the bell.
 */
static void executor_sleep(executor *ex)
{
	struct waitv wv[WAITV_MAX];
	int n = 0;
	uint32_t own = __atomic_load_n(&ex->bell, __ATOMIC_SEQ_CST);
	wv[n++] = (struct waitv){own, (uint64_t)(uintptr_t)&ex->bell,
	                         FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, 0};
	set_sleeping(ex, 1);
	int overflow = 0;
	for (session *s = ex->rings; s; s = s->ring_next) {
		uint32_t *addr, val;
		if (ring_bell(&s->ring, &s->arena, &addr, &val) != 0)
			continue;
		if (n == WAITV_MAX) {
			overflow = 1;
			continue;
		}
		wv[n++] = (struct waitv){val, (uint64_t)(uintptr_t)addr, FUTEX2_SIZE_U32, 0};
	}
	int busy = !queue_empty(ex);
	for (session *s = ex->rings; s && !busy; s = s->ring_next)
		busy = ring_available(&s->ring, &s->arena) > 0;
	if (!busy) {
		/* The timeout bounds what a client that clears its flag or breaks its
		 * bell can cost others; with more rings than one wait can watch, it
		 * is the polling rate. */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long add_ns = overflow ? 1000000L : 100000000L;
		ts.tv_nsec += add_ns;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		long rc = syscall(SYS_futex_waitv, wv, n, 0, &ts, CLOCK_MONOTONIC);
		if (rc < 0 && errno == ENOSYS) {
			struct timespec rel = {0, 1000000L};
			syscall(SYS_futex, &ex->bell, FUTEX_WAIT_PRIVATE, own, &rel, NULL, 0);
		}
	}
	set_sleeping(ex, 0);
}

/* ---- the thread --------------------------------------------------------- */

static job *take_jobs(executor *ex, int *stopping)
{
	pthread_mutex_lock(&ex->mu);
	job *j = ex->head;
	ex->head = ex->tail = NULL;
	*stopping = ex->stopping;
	pthread_mutex_unlock(&ex->mu);
	return j;
}

static void *executor_main(void *arg)
{
	executor *ex = arg;
	tileops_status st = ex->be->ops->thread_init(ex->be, ex->init_msg, sizeof(ex->init_msg));
	pthread_mutex_lock(&ex->mu);
	ex->init_status = st;
	ex->started = 1;
	pthread_cond_broadcast(&ex->started_cv);
	pthread_mutex_unlock(&ex->mu);
	if (st != TILEOPS_OK)
		return NULL;
	double last_work = mono_us();
	for (;;) {
		int stopping;
		job *j = take_jobs(ex, &stopping);
		int worked = j != NULL;
		while (j) {
			job *next = j->next;
			j->next = NULL;
			exec_job(ex, j);
			j = next;
		}
		worked |= poll_rings(ex);
		if (ex->be->ops->collect_timings)
			ex->be->ops->collect_timings(ex->be);
		worked |= executor_poll_pending(ex);
		double now = mono_us();
		if (worked) {
			last_work = now;
			continue;
		}
		if (stopping && !ex->pend)
			break;
		/* Device work in flight is polled; otherwise spin a little, then sleep. */
		if (ex->pend || now - last_work < (double)ex->cfg.spin_us)
			continue;
		executor_sleep(ex);
		last_work = mono_us();
	}
	return NULL;
}

executor *executor_start(const executor_config *cfg, char *err, size_t errlen)
{
	executor *ex = calloc(1, sizeof(*ex));
	if (!ex) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ex->cfg = *cfg;
	ex->be = cfg->be;
	ex->mf = cfg->mf;
	ex->next_handle = 1;
	ex->be->timing_cb = exec_timed;
	ex->be->timing_ctx = ex;
	pthread_mutex_init(&ex->mu, NULL);
	pthread_mutex_init(&ex->tenants_mu, NULL);
	pthread_cond_init(&ex->started_cv, NULL);
	if (pthread_create(&ex->thread, NULL, executor_main, ex) != 0) {
		snprintf(err, errlen, "cannot start the executor thread");
		free(ex);
		return NULL;
	}
	pthread_mutex_lock(&ex->mu);
	while (!ex->started)
		pthread_cond_wait(&ex->started_cv, &ex->mu);
	pthread_mutex_unlock(&ex->mu);
	if (ex->init_status != TILEOPS_OK) {
		snprintf(err, errlen, "%s", ex->init_msg);
		pthread_join(ex->thread, NULL);
		free(ex);
		return NULL;
	}
	return ex;
}

void executor_free_reply(job *j)
{
	plan_open_reply_free(j->open_reply);
	j->open_reply = NULL;
}

void executor_write_tenants_json(executor *ex, strbuf *sb)
{
	plan_write_tenants_json(ex, sb);
}

static void wake(executor *ex)
{
	if (!__atomic_load_n(&ex->sleeping, __ATOMIC_SEQ_CST))
		return;
	__atomic_fetch_add(&ex->bell, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &ex->bell, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void executor_submit(executor *ex, job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&ex->mu);
	if (ex->tail)
		ex->tail->next = j;
	else
		ex->head = j;
	ex->tail = j;
	pthread_mutex_unlock(&ex->mu);
	wake(ex);
}

void executor_stop(executor *ex)
{
	if (!ex)
		return;
	pthread_mutex_lock(&ex->mu);
	ex->stopping = 1;
	pthread_mutex_unlock(&ex->mu);
	__atomic_store_n(&ex->sleeping, 1, __ATOMIC_SEQ_CST);
	wake(ex);
	pthread_join(ex->thread, NULL);
	manifest_free(ex->mf);
	while (ex->tenants) {
		tenant *t = ex->tenants;
		ex->tenants = t->next;
		free(t);
	}
	pthread_mutex_destroy(&ex->tenants_mu);
	pthread_mutex_destroy(&ex->mu);
	pthread_cond_destroy(&ex->started_cv);
	free(ex);
}
