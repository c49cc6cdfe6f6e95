/*
 * cpu_collective.c - collectives between the CPU backend's emulated devices.
 *
 * Every device's memory is host memory, so a collective is one item: it
 * runs on rank 0's stream once that stream has waited for every other
 * rank's work so far, and every other rank's later work waits for it, as
 * the ranks of an NCCL collective meet and part. Sums are taken in f32 in
 * rank order and rounded once to the tensor's dtype.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_pool.h"

static float combine(backend_reduce op, float acc, float v)
{
	switch (op) {
	case BACKEND_MAX:
		return v > acc ? v : acc;
	case BACKEND_MIN:
		return v < acc ? v : acc;
	default:
		return acc + v;
	}
}

/* Element `i` of every rank's send reduced (`from` elements into each). */
static float reduce_at(const backend_coll *c, size_t from, size_t i)
{
	float acc = tk_load_float(c->parts[0].send, c->dtype, (int64_t)(from + i));
	for (int r = 1; r < c->n; r++)
		acc = combine(c->reduce, acc,
		              tk_load_float(c->parts[r].send, c->dtype, (int64_t)(from + i)));
	return acc;
}

void cpu_collective_run(const backend_coll *c)
{
	size_t esize = tk_dtype_size(c->dtype), part = c->count * esize;
	switch (c->kind) {
	case BACKEND_ALL_REDUCE:
		/* Element by element, so that a send that is its recv is read
		 * before it is written. */
		for (size_t i = 0; i < c->count; i++) {
			float v = reduce_at(c, 0, i);
			for (int r = 0; r < c->n; r++)
				tk_store_float(c->parts[r].recv, c->dtype, (int64_t)i, v);
		}
		break;
	case BACKEND_ALL_GATHER:
		for (int r = 0; r < c->n; r++)
			for (int q = 0; q < c->n; q++) {
				char *dst = (char *)c->parts[q].recv + (size_t)r * part;
				if (dst != c->parts[r].send)
					memmove(dst, c->parts[r].send, part);
			}
		break;
	case BACKEND_REDUCE_SCATTER:
		/* Rank r's result reads only part r of each send; in place, its
		 * recv is its own send's part r, read at i before written at i. */
		for (int r = 0; r < c->n; r++)
			for (size_t i = 0; i < c->count; i++)
				tk_store_float(c->parts[r].recv, c->dtype, (int64_t)i,
				               reduce_at(c, (size_t)r * c->count, i));
		break;
	}
}

tileops_status cpu_collective(backend *be, const backend_coll *c, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	if (c->n < 1 || c->n > BACKEND_MAX_DEVICES) {
		snprintf(err, errlen, "collective: %d ranks (1 to %d)", c->n, BACKEND_MAX_DEVICES);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	if (c->dtype != TK_F32 && c->dtype != TK_F16 && c->dtype != TK_BF16) {
		snprintf(err, errlen, "collective: dtype %s (f32, f16 or bf16)",
		         tk_dtype_name(c->dtype));
		return TILEOPS_ERR_DTYPE;
	}
	for (int r = 0; r < c->n; r++)
		for (int q = 0; q < r; q++)
			if (c->parts[q].stream == c->parts[r].stream) {
				snprintf(
				        err, errlen,
				        "collective: ranks %d and %d share a stream; each rank has "
				        "its own device",
				        q, r);
				return TILEOPS_ERR_INVALID_ARGUMENT;
			}
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	cpu_item *it = cpu_item_new(ITEM_COLL, err, errlen);
	backend_coll *copy = it ? malloc(sizeof(*copy)) : NULL;
	if (!copy) {
		free(it);
		snprintf(err, errlen, "collective: out of host memory queueing it");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	*copy = *c;
	it->u.coll = copy;
	cpu_stream *s0 = c->parts[0].stream;
	tileops_status st = TILEOPS_OK;
	int queued = 0;
	pthread_mutex_lock(&im->mu);
	for (int r = 1; r < c->n && st == TILEOPS_OK; r++)
		st = cpu_wait_locked(im, s0, c->parts[r].stream, err, errlen);
	if (st == TILEOPS_OK) {
		cpu_enqueue_locked(im, s0, it);
		queued = 1;
	}
	for (int r = 1; r < c->n && st == TILEOPS_OK; r++)
		st = cpu_wait_locked(im, c->parts[r].stream, s0, err, errlen);
	pthread_mutex_unlock(&im->mu);
	if (!queued) {
		/* The waits before it ran out of memory: nothing of it runs. */
		free(copy);
		free(it);
	}
	return st;
}
