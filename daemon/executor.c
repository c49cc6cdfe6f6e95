/* executor.c - the device-owning thread (see executor.h). */
#include "executor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

struct executor {
	backend *be;
	executor_done_fn done;
	void *ctx;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	job *head, *tail;
	size_t pending;
	int stopping;
	/* Start-up handshake. */
	int started;
	tileops_status init_status;
	char init_msg[256];
};

static void run_close(backend *be, job *j)
{
	session *s = j->s;
	for (size_t i = 0; i < j->n_buffers; i++) {
		if (j->buffers[i].imported)
			be->ops->ipc_close(be, j->buffers[i].ptr);
		else
			be->ops->free(be, s->stream, j->buffers[i].ptr);
	}
	if (s->stream) {
		be->ops->stream_destroy(be, s->stream);
		s->stream = NULL;
	}
	if (s->arena.base)
		be->ops->arena_detach(be, &s->arena);
	j->status = TILEOPS_OK;
}

static void run_job(backend *be, job *j)
{
	session *s = j->s;
	char *m = j->msg;
	size_t ml = sizeof(j->msg);
	switch (j->kind) {
	case JOB_OPEN:
		j->status = be->ops->stream_create(be, &s->stream, m, ml);
		if (j->status == TILEOPS_OK)
			be->ops->arena_attach(be, &s->arena);
		break;
	case JOB_CLOSE:
		run_close(be, j);
		break;
	case JOB_ALLOC:
		j->status = be->ops->alloc(be, j->bytes, &j->ptr, m, ml);
		break;
	case JOB_FREE:
		if (j->imported)
			be->ops->ipc_close(be, j->ptr);
		else
			be->ops->free(be, s->stream, j->ptr);
		j->status = TILEOPS_OK;
		break;
	case JOB_WRITE:
		j->status = be->ops->write(be, s->stream, (char *)j->ptr + j->toff, &s->arena, j->aoff,
		                           j->bytes, m, ml);
		break;
	case JOB_READ:
		j->status = be->ops->read(be, s->stream, (char *)j->ptr + j->toff, &s->arena, j->aoff,
		                          j->bytes, m, ml);
		break;
	case JOB_OP:
		j->status = be->ops->launch(be, s->stream, j->kernel, &j->call, j->op_slot, m, ml);
		break;
	case JOB_SYNC:
		j->status = be->ops->sync(be, s->stream, m, ml);
		break;
	case JOB_EXPORT:
		j->status = be->ops->ipc_export(be, j->ptr, j->ipc, m, ml);
		break;
	case JOB_IMPORT:
		j->status = be->ops->ipc_import(be, j->ipc, &j->ptr, m, ml);
		break;
	}
}

static void *executor_main(void *arg)
{
	executor *ex = arg;
	tileops_status st = ex->be->ops->thread_init(ex->be, ex->init_msg, sizeof(ex->init_msg));
	pthread_mutex_lock(&ex->mu);
	ex->init_status = st;
	ex->started = 1;
	pthread_cond_broadcast(&ex->cv);
	pthread_mutex_unlock(&ex->mu);
	if (st != TILEOPS_OK)
		return NULL;
	for (;;) {
		pthread_mutex_lock(&ex->mu);
		while (!ex->head && !ex->stopping)
			pthread_cond_wait(&ex->cv, &ex->mu);
		job *j = ex->head;
		if (!j) {
			pthread_mutex_unlock(&ex->mu);
			break;
		}
		ex->head = j->next;
		if (!ex->head)
			ex->tail = NULL;
		pthread_mutex_unlock(&ex->mu);

		j->next = NULL;
		j->msg[0] = '\0';
		run_job(ex->be, j);
		if (ex->be->ops->collect_timings)
			ex->be->ops->collect_timings(ex->be);
		ex->done(ex->ctx, j);

		pthread_mutex_lock(&ex->mu);
		ex->pending--;
		pthread_mutex_unlock(&ex->mu);
	}
	return NULL;
}

executor *executor_start(backend *be, executor_done_fn done, void *ctx, char *err,
                         size_t errlen)
{
	executor *ex = calloc(1, sizeof(*ex));
	if (!ex) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ex->be = be;
	ex->done = done;
	ex->ctx = ctx;
	pthread_mutex_init(&ex->mu, NULL);
	pthread_cond_init(&ex->cv, NULL);
	if (pthread_create(&ex->thread, NULL, executor_main, ex) != 0) {
		snprintf(err, errlen, "cannot start the executor thread");
		free(ex);
		return NULL;
	}
	pthread_mutex_lock(&ex->mu);
	while (!ex->started)
		pthread_cond_wait(&ex->cv, &ex->mu);
	pthread_mutex_unlock(&ex->mu);
	if (ex->init_status != TILEOPS_OK) {
		snprintf(err, errlen, "%s", ex->init_msg);
		pthread_join(ex->thread, NULL);
		free(ex);
		return NULL;
	}
	return ex;
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
	ex->pending++;
	pthread_cond_signal(&ex->cv);
	pthread_mutex_unlock(&ex->mu);
}

size_t executor_pending(executor *ex)
{
	pthread_mutex_lock(&ex->mu);
	size_t n = ex->pending;
	pthread_mutex_unlock(&ex->mu);
	return n;
}

void executor_stop(executor *ex)
{
	if (!ex)
		return;
	pthread_mutex_lock(&ex->mu);
	ex->stopping = 1;
	pthread_cond_broadcast(&ex->cv);
	pthread_mutex_unlock(&ex->mu);
	pthread_join(ex->thread, NULL);
	pthread_mutex_destroy(&ex->mu);
	pthread_cond_destroy(&ex->cv);
	free(ex);
}
