/*
 * arena.h - a client's shared-memory arena, mapped into the daemon.
 *
 * The client creates a POSIX shm object and names it in its Hello; the daemon
 * maps it and moves tensor bytes through it. The client can still resize or
 * rewrite the object at any time, so the daemon trusts nothing about it:
 * every offset and length is checked against the size it had when mapped,
 * and every CPU access goes through arena_copy_in/arena_copy_out, which turn
 * a SIGBUS (the client shrank the object) into an error instead of a crash.
 */
#ifndef TILEOPSD_ARENA_H
#define TILEOPSD_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct arena {
	void *base;
	size_t size;
	int pinned; /* registered with the device for DMA (CUDA backend) */
} arena;

/* Install the SIGBUS handler used by the guarded copies. Call once at start. */
int arena_global_init(void);

/*
 * Map the shm object `name`, which must look like "/tileops-...", be owned by
 * `owner_uid` (the connected client's uid) and hold exactly `size` bytes,
 * size <= max_size. Returns 0, or -1 with a message.
 */
int arena_map(arena *a, const char *name, uint64_t size, uint64_t max_size, uid_t owner_uid,
              char *err, size_t errlen);

/* Unmap. Safe on a zeroed or already unmapped arena. */
void arena_unmap(arena *a);

/* 1 when [off, off+len) lies inside the arena (overflow-safe), else 0. */
int arena_range_ok(const arena *a, uint64_t off, uint64_t len);

/*
 * Copy between the arena and daemon memory. The range must have passed
 * arena_range_ok. Returns 0, or -1 when the client's object no longer backs
 * the range (it was truncated).
 */
int arena_copy_in(const arena *a, size_t off, void *dst, size_t len);
int arena_copy_out(const arena *a, size_t off, const void *src, size_t len);

/*
 * Guarded atomic access to 8- or 4-byte words of the arena (ring counters
 * and futex words). `off` must be aligned and in range. Return 0, or -1 when
 * the shm object no longer backs the word.
 */
int arena_load_u64(const arena *a, size_t off, uint64_t *v); /* acquire */
int arena_store_u64(const arena *a, size_t off, uint64_t v); /* release */
int arena_load_u32(const arena *a, size_t off, uint32_t *v); /* acquire */
int arena_store_u32(const arena *a, size_t off, uint32_t v); /* seq_cst */
int arena_add_u32(const arena *a, size_t off, uint32_t v);   /* seq_cst */

#endif
