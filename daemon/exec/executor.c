/*
 * executor.c - the device-owning threads: their queues, their polling of
 * their sessions' rings and of pending completions, and how they sleep (see
 * executor.h). Running each request is dispatch.c.
 *
 * Sessions are shared out among the threads when they open; everything of a
 * session then runs on its thread, in order. What the threads share (the
 * manifest, the graph cache, the stats, the handle counter) has a lock or
 * is atomic.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "completion.h"
#include "dispatch.h"
#include "log.h"
#include "manifest.h"
#include "plan.h"
#include "worker.h"

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

uint64_t exec_next_handle(executor *ex)
{
	return __atomic_fetch_add(&ex->next_handle, 1, __ATOMIC_RELAXED);
}

static void count(uint64_t *c)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Doubles written by one thread and read by the stats: whole 8-byte
 * stores and loads, torn by neither. */
static void add_us(double *sum, double us)
{
	double v;
	__atomic_load(sum, &v, __ATOMIC_RELAXED);
	v += us;
	__atomic_store(sum, &v, __ATOMIC_RELAXED);
}

static double load_us(const double *sum)
{
	double v;
	__atomic_load(sum, &v, __ATOMIC_RELAXED);
	return v;
}

void executor_count_reuse(worker *w)
{
	count(&w->ex->pace[w->index].reused);
}

void executor_count_launch(worker *w, double us)
{
	pace_slot *me = &w->ex->pace[w->index];
	add_us(&me->launch_us, us);
	count(&me->launches_timed);
	if (us >= SLOW_OP_US)
		count(&me->slow_launches);
}

/* ---- pacing ------------------------------------------------------------- */

/*
 * Every thread launches into the one device context, which does not serve
 * launching threads evenly: under load one thread can get far fewer
 * launches than the others for a while, and its sessions fall behind
 * everyone else's (on an H200 with 8 busy clients, 5 of 14 runs were
 * balanced without pacing and the stream pool, 17 of 22 with them;
 * docs/perf.md, "What the many-process figure rests on"). Pacing
 * makes such runs rarer, not impossible. A thread with ring work publishes its
 * launch count, and every PACE_EVERY entries looks at the other threads
 * with work: while it is more than `pace` launches ahead of one of them, it
 * waits (at most PACE_WAIT_US), leaving the lock to the one behind. A
 * thread that starts having work joins `pace` behind the leader, so time
 * spent idle is no debt the others pay back.
 */
#define PACE_EVERY 8
#define PACE_WAIT_US 20.0

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void pace_join(worker *w)
{
	executor *ex = w->ex;
	pace_slot *me = &ex->pace[w->index];
	uint64_t lead = 0, pace = (uint64_t)ex->cfg.pace;
	if (!pace || w->pacing || ex->n_workers < 2)
		return;
	for (int i = 0; i < ex->n_workers; i++) {
		pace_slot *o = &ex->pace[i];
		uint64_t n = __atomic_load_n(&o->launched, __ATOMIC_RELAXED);
		if (i != w->index && __atomic_load_n(&o->busy, __ATOMIC_RELAXED) && n > lead)
			lead = n;
	}
	uint64_t mine = __atomic_load_n(&me->launched, __ATOMIC_RELAXED);
	if (lead > pace && mine < lead - pace)
		__atomic_store_n(&me->launched, lead - pace, __ATOMIC_RELAXED);
	__atomic_store_n(&me->busy, 1, __ATOMIC_RELAXED);
	w->pacing = 1;
	w->since_pace = 0;
}

static void pace_leave(worker *w)
{
	if (!w->pacing)
		return;
	__atomic_store_n(&w->ex->pace[w->index].busy, 0, __ATOMIC_RELAXED);
	w->pacing = 0;
}

/* Count one launch; every PACE_EVERY, wait for a busy thread far behind. */
static void pace_step(worker *w)
{
	executor *ex = w->ex;
	pace_slot *me = &ex->pace[w->index];
	count(&me->ring_ops);
	if (!w->pacing)
		return;
	uint64_t mine = __atomic_load_n(&me->launched, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&me->launched, mine, __ATOMIC_RELAXED);
	if (++w->since_pace < PACE_EVERY)
		return;
	w->since_pace = 0;
	uint64_t pace = (uint64_t)ex->cfg.pace;
	double deadline = 0.0;
	for (int i = 0; i < ex->n_workers; i++) {
		pace_slot *o = &ex->pace[i];
		if (i == w->index)
			continue;
		while (__atomic_load_n(&o->busy, __ATOMIC_RELAXED) &&
		       __atomic_load_n(&o->launched, __ATOMIC_RELAXED) + pace < mine) {
			double now = clock_now_us();
			if (deadline == 0.0) {
				deadline = now + PACE_WAIT_US;
				count(&me->waits);
			} else if (now >= deadline) {
				return;
			}
			for (int k = 0; k < 32; k++)
				cpu_relax();
		}
	}
}

/* ---- the rings ---------------------------------------------------------- */

/* Whether s may launch at `now`, or is held at session_queue_us (share.h). */
static int admit(worker *w, session *s, double now)
{
	executor *ex = w->ex;
	int demoted = 0, was_held = s->share.held;
	if (share_admit(ex->be, s->stream, &s->share, ex->cfg.queue_us, now, &demoted))
		return 1;
	w->holding++;
	if (!was_held)
		count(&ex->pace[w->index].holds);
	if (demoted)
		count(&ex->pace[w->index].demotions);
	return 0;
}

/*
 * One pass over the ring sessions, round robin, a batch from each. The
 * thread counts as busy for the pacing from its first entry taken until a
 * pass finds none it can take: an entry waiting with a completion entry free
 * for it (a client that stops reaping has no work here, so its thread never
 * holds the others back).
 */
static int poll_rings(worker *w)
{
	executor *ex = w->ex;
	int worked = 0;
	session *start = w->rr_next ? w->rr_next : w->rings;
	session *s = start;
	/* Counted afresh each pass: a held session that has since closed holds
	 * nothing (left counted, the thread would poll for it forever, never
	 * sleeping and never stopping). */
	w->holding = 0;
	if (!s) {
		pace_leave(w);
		return 0;
	}
	do {
		uint64_t avail = ring_available(&s->ring, &s->arena);
		uint32_t room = avail ? ring_cq_room(&s->ring, &s->arena) : 0;
		uint64_t n = avail < room ? avail : room;
		if (n > (uint64_t)ex->cfg.ring_batch)
			n = (uint64_t)ex->cfg.ring_batch;
		/* One clock read per entry: each entry's time runs to the next's start. */
		double t0 = n > 0 ? clock_now_us() : 0.0;
		if (n > 0 && ex->cfg.queue_us > 0 && !admit(w, s, t0))
			n = 0;
		if (n > 0) {
			pace_join(w);
			ring_hold(&s->ring);
		}
		for (uint64_t i = 0; i < n; i++) {
			tileops_sqe e;
			/* Each entry admitted, not each batch: a batch of long ops
			 * taken at once would queue past the limit by the batch. */
			if (i > 0 && ex->cfg.queue_us > 0 && !admit(w, s, t0))
				break;
			if (ring_take(&s->ring, &s->arena, &e) != 0)
				break;
			w->entry_us = t0;
			dispatch_sqe(w, s, &e);
			double t1 = clock_now_us(), us = t1 - t0;
			t0 = t1;
			add_us(&ex->pace[w->index].op_us, us);
			if (us >= SLOW_OP_US)
				count(&ex->pace[w->index].slow_ops);
			pace_step(w);
			worked = 1;
		}
		if (n > 0) {
			ring_publish(&s->ring, &s->arena);
			completion_latency_published(w, s);
		}
		s = s->ring_next ? s->ring_next : w->rings;
	} while (s != start);
	w->rr_next = start->ring_next;
	if (!worked)
		pace_leave(w);
	return worked;
}

/* ---- sleeping ----------------------------------------------------------- */

static int queue_empty(worker *w)
{
	pthread_mutex_lock(&w->mu);
	int empty = !w->head && !w->stopping;
	pthread_mutex_unlock(&w->mu);
	return empty;
}

static void set_sleeping(worker *w, uint32_t v)
{
	__atomic_store_n(&w->sleeping, (int)v, __ATOMIC_SEQ_CST);
	for (session *s = w->rings; s; s = s->ring_next)
		ring_set_sleeping(&s->ring, &s->arena, v);
}

/*
 * Answer what is owed and can be now: the backend may have finished it
 * after the pass looked, and woke nobody, since the thread was not asleep
 * yet. 1 when anything was answered.
 */
static int owed_progress(worker *w)
{
	executor *ex = w->ex;
	int owed = w->timed_owed, done = 0;
	if (ex->be->ops->collect_timings)
		ex->be->ops->collect_timings(ex->be);
	if (w->pend)
		done = completion_poll(w);
	return done || w->timed_owed != owed;
}

/*
 * Sleep until a job is queued or a client rings (or, with a backend that
 * wakes the thread, until work it owes completions for has run). Flags first, then a last
 * look at every queue, then the wait: a submitter that published before the
 * look is seen by it, and one after it sees the flag and rings the bell.
 */
static void worker_sleep(worker *w)
{
	struct waitv wv[WAITV_MAX];
	int n = 0;
	uint32_t own = __atomic_load_n(&w->bell, __ATOMIC_SEQ_CST);
	wv[n++] = (struct waitv){ own, (uint64_t)(uintptr_t)&w->bell,
		                  FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, 0 };
	pace_leave(w);
	set_sleeping(w, 1);
	int overflow = 0;
	for (session *s = w->rings; s; s = s->ring_next) {
		uint32_t *addr, val;
		if (ring_bell(&s->ring, &s->arena, &addr, &val) != 0)
			continue;
		if (n == WAITV_MAX) {
			overflow = 1;
			continue;
		}
		wv[n++] = (struct waitv){ val, (uint64_t)(uintptr_t)addr, FUTEX2_SIZE_U32, 0 };
	}
	int busy = !queue_empty(w);
	for (session *s = w->rings; s && !busy; s = s->ring_next)
		busy = ring_available(&s->ring, &s->arena) > 0;
	if (!busy && (w->pend || w->timed_owed > 0))
		busy = owed_progress(w);
	if (!busy) {
		count(&w->ex->pace[w->index].sleeps);
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
			struct timespec rel = { 0, 1000000L };
			syscall(SYS_futex, &w->bell, FUTEX_WAIT_PRIVATE, own, &rel, NULL, 0);
		}
	}
	set_sleeping(w, 0);
}

/* ---- the threads --------------------------------------------------------- */

static job *take_jobs(worker *w, int *stopping)
{
	pthread_mutex_lock(&w->mu);
	job *j = w->head;
	w->head = w->tail = NULL;
	*stopping = w->stopping;
	pthread_mutex_unlock(&w->mu);
	return j;
}

/* Device queries at most every this many microseconds (see worker). */
#define COLLECT_EVERY_US 20.0
#define FENCE_EVERY_US 2.0

/* One pass: queued jobs, then the rings, then completions owed. */
static int worker_pass(worker *w, int *stopping)
{
	executor *ex = w->ex;
	job *j = take_jobs(w, stopping);
	int worked = j != NULL;
	pthread_rwlock_rdlock(&ex->mf_lock);
	while (j) {
		job *next = j->next;
		j->next = NULL;
		dispatch_job(w, j);
		j = next;
	}
	worked |= poll_rings(w);
	double now = clock_now_us();
	/* A ring op waiting for its device time is answered as soon as it has one. */
	if (ex->be->ops->collect_timings && (w->timed_owed > 0 || now >= w->next_collect_us)) {
		ex->be->ops->collect_timings(ex->be);
		w->next_collect_us = now + COLLECT_EVERY_US;
	}
	/* A lost device fails every fence at once: answer them before the loop
	 * hears of the loss and stops (a device thread may lose it between
	 * passes, unlike a GPU, whose loss is seen at a fence). */
	int lost = backend_lost(ex->be, NULL, 0);
	if (w->pend && (now >= w->next_fence_us || lost)) {
		worked |= completion_poll(w);
		w->next_fence_us = now + FENCE_EVERY_US;
	}
	pthread_rwlock_unlock(&ex->mf_lock);
	if (lost && !__atomic_exchange_n(&ex->lost_reported, 1, __ATOMIC_ACQ_REL) &&
	    ex->cfg.device_lost)
		ex->cfg.device_lost(ex->cfg.ctx);
	/* One wake-up per client per pass, for all the completions it got;
	 * and the spin advice, where it changed. */
	uint32_t advice = executor_spin_advice(ex);
	for (session *s = w->rings; s; s = s->ring_next) {
		ring_advise_spin(&s->ring, &s->arena, advice);
		ring_wake(&s->ring, &s->arena);
	}
	return worked;
}

_Thread_local worker *exec_worker;

static void wake(worker *w);

/* The backend's wake-up for a thread waiting for its work (any thread). */
static void wake_cb(void *arg)
{
	wake(arg);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	executor *ex = w->ex;
	exec_worker = w;
	stats_set_thread_shard(w->index);
	char name[16];
	snprintf(name, sizeof(name), "tileops-exec%d", w->index);
	pthread_setname_np(pthread_self(), name);
	tileops_status st = TILEOPS_OK;
	if (ex->cfg.n_cpus > 0) {
		/* Its own CPU, so client processes and the other threads do not
		 * take turns with it (docs/threading.md). */
		int cpu = ex->cfg.cpus[w->index % ex->cfg.n_cpus];
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		int e = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (e != 0) {
			snprintf(w->init_msg, sizeof(w->init_msg),
			         "executor_cpus: cannot run executor thread %d on CPU %d: %s",
			         w->index, cpu, strerror(e));
			st = TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	if (st == TILEOPS_OK)
		st = ex->be->ops->thread_init(ex->be, w->init_msg, sizeof(w->init_msg));
	pthread_mutex_lock(&ex->start_mu);
	w->init_status = st;
	w->started = 1;
	pthread_cond_broadcast(&ex->started_cv);
	pthread_mutex_unlock(&ex->start_mu);
	if (st != TILEOPS_OK)
		return NULL;
	w->lat_owed = calloc((size_t)ex->cfg.ring_batch, sizeof(*w->lat_owed));
	w->cap_lat_owed = w->lat_owed ? ex->cfg.ring_batch : 0;
	if (ex->be->ops->thread_waker) {
		ex->be->ops->thread_waker(ex->be, wake_cb, w);
		w->backend_wakes = 1;
	}
	double last_work = clock_now_us();
	__atomic_store(&ex->pace[w->index].alive_us, &last_work, __ATOMIC_RELAXED);
	for (;;) {
		int stopping;
		int worked = worker_pass(w, &stopping);
		double now = clock_now_us();
		/* Alive: it got something done, or nothing is owed (an idle thread
		 * passes at least every 100 ms, worker_sleep's time-out). Not
		 * while completions wait on a device that finishes none of them. */
		if (worked || !(w->pend || w->timed_owed > 0 || w->holding > 0))
			__atomic_store(&ex->pace[w->index].alive_us, &now, __ATOMIC_RELAXED);
		/* The backend releases what stalls launches while no thread has
		 * work (backend.h). */
		if (worked != w->active) {
			w->active = worked;
			__atomic_add_fetch(&ex->be->active_threads, worked ? 1 : -1,
			                   __ATOMIC_RELAXED);
		}
		if (worked) {
			last_work = now;
			continue;
		}
		int owed = w->pend || w->timed_owed > 0 || w->holding > 0;
		if (stopping && !owed)
			break;
		/* Completions owed are polled, unless the backend wakes the thread
		 * when its work has run (held sessions' fences are polled
		 * always); otherwise spin a little, then sleep. */
		int poll = owed && (!w->backend_wakes || w->holding > 0);
		if (poll || now - last_work < (double)ex->cfg.spin_us)
			continue;
		worker_sleep(w);
		last_work = clock_now_us();
	}
	if (ex->be->ops->thread_fini)
		ex->be->ops->thread_fini(ex->be);
	free(w->lat_owed);
	w->lat_owed = NULL;
	w->cap_lat_owed = 0;
	return NULL;
}

static void wake(worker *w)
{
	if (!__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST))
		return;
	__atomic_fetch_add(&w->bell, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &w->bell, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void stop_workers(executor *ex, int n)
{
	for (int i = 0; i < n; i++) {
		worker *w = &ex->workers[i];
		pthread_mutex_lock(&w->mu);
		w->stopping = 1;
		pthread_mutex_unlock(&w->mu);
		__atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
		wake(w);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(ex->workers[i].thread, NULL);
		pthread_mutex_destroy(&ex->workers[i].mu);
	}
}

static void executor_free(executor *ex)
{
	while (ex->tenants) {
		tenant *t = ex->tenants;
		ex->tenants = t->next;
		free(t);
	}
	pthread_mutex_destroy(&ex->cache_mu);
	pthread_rwlock_destroy(&ex->mf_lock);
	pthread_mutex_destroy(&ex->start_mu);
	pthread_cond_destroy(&ex->started_cv);
	free(ex->pace);
	free(ex->workers);
	free(ex);
}

uint32_t executor_spin_advice(executor *ex)
{
	/* The configured thread count: n_workers is written while threads run. */
	int threads = ex->cfg.threads > 0 ? ex->cfg.threads : 1;
	int spinners = __atomic_load_n(&ex->ring_sessions, __ATOMIC_RELAXED) + threads +
	               __atomic_load_n(&ex->be->work_threads, __ATOMIC_RELAXED);
	return spinners > ex->host_cpus ? 1u : 0u;
}

executor *executor_start(const executor_config *cfg, char *err, size_t errlen)
{
	executor *ex = calloc(1, sizeof(*ex));
	int n = cfg->threads > 0 ? cfg->threads : 1;
	if (ex) {
		ex->workers = calloc((size_t)n, sizeof(worker));
		ex->pace = aligned_alloc(64, (size_t)n * sizeof(pace_slot));
	}
	if (!ex || !ex->workers || !ex->pace) {
		if (ex) {
			free(ex->workers);
			free(ex->pace);
		}
		free(ex);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(ex->pace, 0, (size_t)n * sizeof(pace_slot));
	ex->cfg = *cfg;
	ex->be = cfg->be;
	ex->mf = cfg->mf;
	ex->next_handle = 1;
	ex->host_cpus = backend_usable_cpus();
	ex->be->timing_cb = completion_timed;
	ex->be->timing_ctx = ex;
	pthread_mutex_init(&ex->start_mu, NULL);
	pthread_cond_init(&ex->started_cv, NULL);
	pthread_rwlock_init(&ex->mf_lock, NULL);
	pthread_mutex_init(&ex->cache_mu, NULL);
	int made = 0;
	for (; made < n; made++) {
		worker *w = &ex->workers[made];
		w->ex = ex;
		w->index = made;
		pthread_mutex_init(&w->mu, NULL);
		if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
			pthread_mutex_destroy(&w->mu);
			snprintf(err, errlen, "cannot start executor thread %d", made);
			break;
		}
	}
	ex->n_workers = made;
	pthread_mutex_lock(&ex->start_mu);
	for (int i = 0; i < made; i++)
		while (!ex->workers[i].started)
			pthread_cond_wait(&ex->started_cv, &ex->start_mu);
	pthread_mutex_unlock(&ex->start_mu);
	int failed = made < n;
	for (int i = 0; i < made && !failed; i++) {
		if (ex->workers[i].init_status != TILEOPS_OK) {
			snprintf(err, errlen, "%s", ex->workers[i].init_msg);
			failed = 1;
		}
	}
	if (failed) {
		stop_workers(ex, made);
		executor_free(ex);
		return NULL;
	}
	return ex;
}

int executor_pick_worker(executor *ex, uint64_t session_id)
{
	int n = ex->n_workers, first = (int)(session_id % (uint64_t)n), best = first;
	for (int k = 1; k < n; k++) {
		int i = (first + k) % n;
		if (ex->workers[i].n_sessions < ex->workers[best].n_sessions)
			best = i;
	}
	ex->workers[best].n_sessions++;
	return best;
}

void executor_release_worker(executor *ex, int index)
{
	if (index >= 0 && index < ex->n_workers && ex->workers[index].n_sessions > 0)
		ex->workers[index].n_sessions--;
}

void executor_submit(executor *ex, job *j)
{
	int i = j->s ? j->s->worker : 0;
	worker *w = &ex->workers[i >= 0 && i < ex->n_workers ? i : 0];
	j->next = NULL;
	pthread_mutex_lock(&w->mu);
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	pthread_mutex_unlock(&w->mu);
	wake(w);
}

manifest *executor_swap_manifest(executor *ex, manifest *m)
{
	pthread_rwlock_wrlock(&ex->mf_lock);
	manifest *old = ex->mf;
	ex->mf = m;
	ex->mf_gen++;
	pthread_rwlock_unlock(&ex->mf_lock);
	return old;
}

void executor_write_threads_json(executor *ex, strbuf *sb)
{
	sb_printf(sb, "\"executor\":{");
	for (int i = 0; i < ex->n_workers; i++) {
		const pace_slot *p = &ex->pace[i];
		sb_printf(sb,
		          "%s\"%d\":{\"sessions\":%d,\"ring_ops\":%llu,\"pace_waits\":%llu,"
		          "\"slow_ops\":%llu,\"slow_launches\":%llu,\"sleeps\":%llu,"
		          "\"reused_ops\":%llu,\"ring_op_us\":%.0f,\"launch_us\":%.0f,"
		          "\"launches_timed\":%llu,\"queue_holds\":%llu,\"demotions\":%llu}",
		          i ? "," : "", i, ex->workers[i].n_sessions,
		          (unsigned long long)__atomic_load_n(&p->ring_ops, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->waits, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->slow_ops, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->slow_launches, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->sleeps, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->reused, __ATOMIC_RELAXED),
		          load_us(&p->op_us), load_us(&p->launch_us),
		          (unsigned long long)__atomic_load_n(&p->launches_timed, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->holds, __ATOMIC_RELAXED),
		          (unsigned long long)__atomic_load_n(&p->demotions, __ATOMIC_RELAXED));
	}
	sb_printf(sb, "}");
}

double executor_stalled_us(executor *ex, int *thread)
{
	double now = clock_now_us(), worst = 0.0;
	for (int i = 0; i < ex->n_workers; i++) {
		double t;
		__atomic_load(&ex->pace[i].alive_us, &t, __ATOMIC_RELAXED);
		if (now - t > worst) {
			worst = now - t;
			if (thread)
				*thread = i;
		}
	}
	return worst;
}

void executor_write_tenants_json(executor *ex, strbuf *sb)
{
	plan_write_tenants_json(ex, sb);
}

void executor_free_reply(job *j)
{
	plan_open_result_free(j->open);
	j->open = NULL;
}

void executor_stop(executor *ex)
{
	if (!ex)
		return;
	stop_workers(ex, ex->n_workers);
	manifest_free(ex->mf);
	executor_free(ex);
}
