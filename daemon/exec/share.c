/* share.c - a session's share of the device (see share.h). */
#include "share.h"

/* While held, the fences are asked this often; otherwise less often, only
 * to keep the count near what is queued. */
#define QUERY_HELD_US 5.0
#define QUERY_IDLE_US 50.0

double share_estimate_us(const backend *be, const op_cost *c)
{
	double us = 0.0;
	if (be->bytes_per_us > 0.0 && c->bytes / be->bytes_per_us > us)
		us = c->bytes / be->bytes_per_us;
	if (be->flops_per_us > 0.0 && c->flops / be->flops_per_us > us)
		us = c->flops / be->flops_per_us;
	return us > SHARE_LAUNCH_US ? us : SHARE_LAUNCH_US;
}

/* Put a fence after the unfenced work. When none can be made (the pool of
 * fences is full, or the backend fails), the work stays unfenced and is
 * fenced with later work. */
static void fence_now(backend *be, void *stream, share *sh)
{
	char err[256];
	void *fence = NULL;
	if (sh->unfenced_us <= 0.0 || sh->n == SHARE_FENCES ||
	    be->ops->fence_create(be, stream, &fence, err, sizeof(err)) != TILEOPS_OK)
		return;
	int i = (sh->head + sh->n) % SHARE_FENCES;
	sh->fences[i].fence = fence;
	sh->fences[i].us = sh->unfenced_us;
	sh->n++;
	sh->unfenced_us = 0.0;
}

void share_charge(backend *be, void *stream, share *sh, double limit_us, double us)
{
	if (limit_us <= 0.0)
		return;
	sh->queued_us += us;
	sh->unfenced_us += us;
	if (sh->unfenced_us >= limit_us / 4)
		fence_now(be, stream, sh);
}

/* Retire the fences that passed, oldest first. A fence that reports a
 * device error has passed too: the error reaches the session elsewhere. */
static void retire(backend *be, share *sh)
{
	char err[256];
	while (sh->n > 0) {
		void *f = sh->fences[sh->head].fence;
		if (be->ops->fence_query(be, f, err, sizeof(err)) == TILEOPS_IN_PROGRESS)
			return;
		be->ops->fence_free(be, f);
		sh->queued_us -= sh->fences[sh->head].us;
		sh->head = (sh->head + 1) % SHARE_FENCES;
		sh->n--;
	}
	/* Everything fenced has finished: what is left is the unfenced part. */
	sh->queued_us = sh->unfenced_us;
}

/* Lower the stream unless it is low already; 1 when it was lowered. */
static int lower(backend *be, void *stream, share *sh)
{
	if (sh->low || !be->ops->stream_priority)
		return 0;
	be->ops->stream_priority(be, stream, 1);
	sh->low = 1;
	return 1;
}

int share_admit(backend *be, void *stream, share *sh, double limit_us, double now_us, int *demoted)
{
	if (limit_us <= 0.0)
		return 1;
	int held = sh->queued_us >= limit_us;
	if (sh->n > 0 && now_us - sh->last_query_us >= (held ? QUERY_HELD_US : QUERY_IDLE_US)) {
		retire(be, sh);
		sh->last_query_us = now_us;
		held = sh->queued_us >= limit_us;
	}
	sh->held = held;
	if (held) {
		fence_now(be, stream, sh); /* so that what is held on can finish */
		if (lower(be, stream, sh))
			*demoted = 1;
		return 0;
	}
	return 1;
}

int share_launch(backend *be, void *stream, share *sh, double limit_us, double us)
{
	if (limit_us <= 0.0 || !be->ops->stream_priority)
		return 0;
	double lng = limit_us * SHARE_LONG;
	if (us >= lng)
		return lower(be, stream, sh);
	/* Raised here, not as the queue drains: a session of long ops would be
	 * raised at each drain and run its next op at the normal priority. */
	if (sh->low && sh->queued_us < lng) {
		be->ops->stream_priority(be, stream, 0);
		sh->low = 0;
	}
	return 0;
}

void share_release(backend *be, share *sh)
{
	while (sh->n > 0) {
		be->ops->fence_free(be, sh->fences[sh->head].fence);
		sh->head = (sh->head + 1) % SHARE_FENCES;
		sh->n--;
	}
	sh->queued_us = sh->unfenced_us = 0.0;
}
