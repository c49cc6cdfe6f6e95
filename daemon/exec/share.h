/*
 * share.h - each session's share of the device: the device time it has
 * queued there, and what the executor does once that reaches
 * `session_queue_us`.
 *
 * A launch returns before its kernel runs, so a client that submits long
 * ops back to back can queue seconds of device time, and a kernel that
 * fills the SMs makes every other session's kernels wait behind it. Each
 * launch is charged the device time its roofline counts give at the
 * device's rates (share_estimate_us); fences placed every quarter of the
 * limit tell when charged work has finished. A session with `limit` or
 * more queued is held: its ring entries wait in its ring (its client's
 * calls wait for their completions) until enough of its work is done, and
 * its stream runs at the device's low priority, so that the kernels of
 * sessions with little queued start first as SMs come free (CUDA schedules
 * the blocks of a higher-priority stream's kernels before a lower one's;
 * it does not preempt blocks already running).
 *
 * Holding alone lowers a session only once it has the limit queued, and
 * that work was launched at the normal priority: a session whose every op
 * is long (a quarter of the limit or more by its own estimate) would put
 * its first ops after each drain (each of its client's syncs) ahead of the
 * other sessions' kernels. So an op that long lowers its session before it
 * is launched (share_launch), and a lowered session gets the normal
 * priority back only before a short op, once its queue has drained below a
 * quarter of the limit: a client of long ops stays low across its syncs.
 *
 * The CPU backend queues work as a GPU does, at its own rates, so the same
 * holds there. Executor thread of the session only.
 */
#ifndef TILEOPSD_SHARE_H
#define TILEOPSD_SHARE_H

#include "backend.h"
#include "oplayer.h"

#define SHARE_FENCES 8

typedef struct share {
	double queued_us;   /* charged and not known finished */
	double unfenced_us; /* the part of it after the newest fence */
	struct {
		void *fence;
		double us; /* what finishes with it */
	} fences[SHARE_FENCES];
	int head, n;
	int held;             /* the last share_admit held it */
	int low;              /* its stream runs at low priority */
	double last_query_us; /* when the fences were last asked */
} share;

/* The device time an op of these counts takes at the backend's rates
 * (be->bytes_per_us, be->flops_per_us), at least SHARE_LAUNCH_US. */
#define SHARE_LAUNCH_US 2.0
double share_estimate_us(const backend *be, const op_cost *c);

/*
 * Charge `us` of device time just launched on `stream`. limit_us 0: the
 * limit is off and nothing is kept.
 */
void share_charge(backend *be, void *stream, share *sh, double limit_us, double us);

/*
 * Whether the session may launch now (1) or is held (0), at time now_us.
 * Retires the fences that passed; holding, it fences what was not yet and
 * lowers the stream's priority (*demoted set to 1 the first time). The
 * priority comes back in share_launch.
 */
int share_admit(backend *be, void *stream, share *sh, double limit_us, double now_us, int *demoted);

/*
 * Before launching work of `us` on `stream` (an op, a plan run): long work
 * (us >= SHARE_LONG * limit_us) lowers the stream first; short work raises
 * a lowered stream once less than SHARE_LONG of the limit is queued.
 * Returns 1 when it lowered the stream (a demotion). Nothing while the
 * limit is off or the backend has no priorities.
 */
#define SHARE_LONG 0.25
int share_launch(backend *be, void *stream, share *sh, double limit_us, double us);

/* Drop the fences (the session is closing; its stream is synchronized). */
void share_release(backend *be, share *sh);

#endif
