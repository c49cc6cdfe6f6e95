/* session.c - sessions, their tensor tables and request order (see session.h). */
#include "session.h"

#include <stdlib.h>

session *session_new(uint64_t id, uint32_t pipe)
{
	session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->n_buckets = 64;
	s->buckets = calloc(s->n_buckets, sizeof(*s->buckets));
	if (!s->buckets) {
		free(s);
		return NULL;
	}
	s->id = id;
	s->pipe = pipe;
	s->next_seq = 1;
	s->refs = 1;
	s->worker = -1; /* none until executor_pick_worker */
	return s;
}

void session_ref(session *s)
{
	__atomic_fetch_add(&s->refs, 1, __ATOMIC_RELAXED);
}

void session_unref(session *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; i < s->n_buckets; i++) {
		tensor *t = s->buckets[i];
		while (t) {
			tensor *n = t->next;
			if (t->mem && --t->mem->refs == 0)
				free(t->mem);
			free(t);
			t = n;
		}
	}
	free(s->buckets);
	free(s->ops);
	free(s);
}

static size_t bucket_of(uint64_t handle, size_t n)
{
	/* Handles are sequential; mix them so the chains stay short. */
	uint64_t h = handle * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 32) & (n - 1);
}

tensor *session_tensor_find(const session *s, uint64_t handle)
{
	for (tensor *t = s->buckets[bucket_of(handle, s->n_buckets)]; t; t = t->next)
		if (t->handle == handle)
			return t;
	return NULL;
}

static int grow(session *s)
{
	size_t n = s->n_buckets * 2;
	tensor **b = calloc(n, sizeof(*b));
	if (!b)
		return -1;
	for (size_t i = 0; i < s->n_buckets; i++) {
		tensor *t = s->buckets[i];
		while (t) {
			tensor *next = t->next;
			size_t k = bucket_of(t->handle, n);
			t->next = b[k];
			b[k] = t;
			t = next;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->n_buckets = n;
	return 0;
}

int session_tensor_insert(session *s, tensor *t)
{
	if (s->n_tensors + 1 > s->n_buckets && grow(s) != 0)
		return -1;
	size_t k = bucket_of(t->handle, s->n_buckets);
	t->next = s->buckets[k];
	s->buckets[k] = t;
	__atomic_store_n(&s->n_tensors, s->n_tensors + 1, __ATOMIC_RELAXED);
	return 0;
}

void session_count_bytes(session *s, long long delta)
{
	__atomic_store_n(&s->bytes, s->bytes + (size_t)delta, __ATOMIC_RELAXED);
}

tensor *session_tensor_remove(session *s, uint64_t handle)
{
	for (tensor **pp = &s->buckets[bucket_of(handle, s->n_buckets)]; *pp; pp = &(*pp)->next) {
		tensor *t = *pp;
		if (t->handle != handle)
			continue;
		*pp = t->next;
		t->next = NULL;
		__atomic_store_n(&s->n_tensors, s->n_tensors - 1, __ATOMIC_RELAXED);
		return t;
	}
	return NULL;
}

int session_in_group(const session *s, int64_t gid)
{
	if (gid < 0)
		return 0;
	if (s->gid == gid)
		return 1;
	for (int i = 0; i < s->n_groups; i++)
		if (s->groups[i] == gid)
			return 1;
	return 0;
}
