/*
 * opcache.h - a session's recently prepared ring ops.
 *
 * Checking an op against the manifest (resolving its handles, its dtype and
 * shape rules, its params, its cost formulas) is most of what the daemon
 * itself spends on an op, and a serving loop submits the same ops on the
 * same tensors step after step. So a ring op descriptor that checked out is
 * kept, with the call it produced, in a small table per session keyed by
 * the descriptor's bytes; the same bytes again launch that call without
 * checking. A tensor's dtype, shape and memory never change while its
 * handle lives and handles are never reused, so an entry stays right until
 * one of its tensors is freed (opcache_forget) or the manifest is replaced
 * (the generation it was made under). Executor thread of the session only.
 */
#ifndef TILEOPSD_OPCACHE_H
#define TILEOPSD_OPCACHE_H

#include <stdint.h>

#include "launch.h"
#include "tileops_ring.h"

/*
 * The prepared op for descriptor e, made under manifest generation `gen`;
 * NULL if none. *hash gets the descriptor's hash, for opcache_put.
 */
const prepared_op *opcache_find(session *s, const tileops_sqe *e, uint64_t gen, uint64_t *hash);
/* Remember p as what descriptor e (hash from opcache_find; it names `handles`) prepares to. */
void opcache_put(session *s, const tileops_sqe *e, uint64_t hash, uint64_t gen,
                 const prepared_op *p, const uint64_t *handles, int n_handles);
/* Forget every entry that names tensor `handle` (it is being freed). */
void opcache_forget(session *s, uint64_t handle);
/* Free the table (session end). */
void opcache_free(session *s);

#endif
