/* opcache.c - a session's recently prepared ring ops (opcache.h). */
#include "opcache.h"

#include <stdlib.h>
#include <string.h>

#define OPCACHE_WAYS 16 /* entries per session, direct-mapped by the key's hash */

typedef struct opcache_entry {
	int used;
	uint32_t len;
	uint64_t hash, gen;
	int n_handles;
	uint64_t handles[TK_MAX_INPUTS + TK_MAX_OUTPUTS];
	uint8_t key[sizeof(((tileops_sqe *)0)->payload)];
	prepared_op op;
} opcache_entry;

struct opcache {
	opcache_entry e[OPCACHE_WAYS];
};

/* A hash of the descriptor's bytes, a word at a time (multiply and fold). */
static uint64_t key_hash(const uint8_t *p, uint32_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	uint32_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

static int key_fits(const tileops_sqe *e)
{
	return e->length > 0 && e->length <= sizeof(e->payload);
}

const prepared_op *opcache_find(session *s, const tileops_sqe *e, uint64_t gen, uint64_t *hash)
{
	*hash = 0;
	if (!key_fits(e))
		return NULL;
	uint64_t h = *hash = key_hash(e->payload, e->length);
	if (!s->ops)
		return NULL;
	const opcache_entry *x = &s->ops->e[h % OPCACHE_WAYS];
	if (!x->used || x->hash != h || x->len != e->length || x->gen != gen ||
	    memcmp(x->key, e->payload, e->length) != 0)
		return NULL;
	return &x->op;
}

void opcache_put(session *s, const tileops_sqe *e, uint64_t h, uint64_t gen, const prepared_op *p,
                 const uint64_t *handles, int n_handles)
{
	if (!key_fits(e) || n_handles > TK_MAX_INPUTS + TK_MAX_OUTPUTS)
		return;
	if (!s->ops && !(s->ops = calloc(1, sizeof(*s->ops))))
		return; /* no memory: ops are just checked every time */
	opcache_entry *x = &s->ops->e[h % OPCACHE_WAYS];
	x->used = 1;
	x->len = e->length;
	x->hash = h;
	x->gen = gen;
	x->n_handles = n_handles;
	memcpy(x->handles, handles, sizeof(handles[0]) * (size_t)n_handles);
	memcpy(x->key, e->payload, e->length);
	x->op = *p;
}

void opcache_forget(session *s, uint64_t handle)
{
	if (!s->ops)
		return;
	for (int i = 0; i < OPCACHE_WAYS; i++) {
		opcache_entry *x = &s->ops->e[i];
		for (int k = 0; x->used && k < x->n_handles; k++)
			if (x->handles[k] == handle)
				x->used = 0;
	}
}

void opcache_free(session *s)
{
	free(s->ops);
	s->ops = NULL;
}
