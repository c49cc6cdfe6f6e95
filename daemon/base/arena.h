/*
 * arena.h - a client's shared-memory arena, mapped into the daemon.
 *
 * The client creates a POSIX shm object, or a file in the daemon's arena
 * folder (arena_dir: for clients in another IPC namespace, such as another
 * container), and names it in its Hello; the daemon maps it and moves tensor
 * bytes through it. The client can still resize or
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

/*
 * The same for the file `name` of the folder `dir` (arena_dir): a bare file
 * name ("tileops-..."; no '/' or ".."), opened relative to the folder without
 * following a symbolic link, a regular file with one link, owned by
 * `owner_uid`, of exactly `size` bytes. The name is removed once mapped.
 * An empty `dir` refuses every name (the daemon has no arena folder).
 */
int arena_map_in_dir(arena *a, const char *dir, const char *name, uint64_t size, uint64_t max_size,
                     uid_t owner_uid, char *err, size_t errlen);

/*
 * At start: make the arena folder when missing (mode 01770, group `gid`
 * unless (gid_t)-1), remove the arenas clients left there before their
 * Hello, and set `note` to a line worth logging (empty if none): the folder
 * is not on a tmpfs, or stale arenas were removed. Returns 0, or -1 with a
 * message when the folder cannot be made or opened.
 */
int arena_dir_prepare(const char *dir, gid_t gid, char *note, size_t notelen, char *err,
                      size_t errlen);

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
