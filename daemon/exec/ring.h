/*
 * ring.h - the daemon's side of a session's shared-memory rings
 * (proto/tileops_ring.h has the layout and the protocol).
 *
 * Every access goes through the arena's guarded primitives, and the daemon
 * keeps its own copies of the layout and of the counters it owns, so the
 * client can change nothing but its own entries and the counters it writes,
 * and those are bounded before use. Executor thread only.
 */
#ifndef TILEOPSD_RING_H
#define TILEOPSD_RING_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "tileops_ring.h"

typedef struct ring {
	int enabled;
	int broken; /* the client broke its ring; see why */
	char why[160];
	uint32_t entries; /* SQ and CQ entries (a power of two) */
	uint64_t sq_off, cq_off, data_off;
	uint64_t sq_head;   /* the daemon's own count of consumed entries */
	uint64_t cq_tail;   /* the daemon's own count of posted completions */
	uint32_t promised;  /* consumed entries whose completion is not posted yet */
	uint64_t consumed;  /* total consumed, for ring_mark (== sq_head) */
	int wake_owed;      /* completions posted while the client sleeps */
	int holding;        /* ring_hold: cq_tail is published by ring_publish */
	uint64_t published; /* the cq_tail the client was last shown */
	uint32_t advised;   /* the spin_advice last written to the header */
} ring;

/*
 * Read and check the layout the client wrote at the start of its arena.
 * Returns 0, or -1 with a message naming the field that is wrong.
 */
int ring_setup(ring *r, const arena *a, char *err, size_t errlen);

/*
 * Entries submitted and not consumed yet (0 when none, or when the ring is
 * broken). A tail behind the head or more than `entries` ahead breaks it.
 */
uint64_t ring_available(ring *r, const arena *a);

/* Free completion slots, less those promised; 0 when broken. */
uint32_t ring_cq_room(ring *r, const arena *a);

/*
 * Copy out the next submission (once: the caller parses its copy) and mark
 * it consumed, promising one completion. Returns 0 or -1 (ring broken).
 */
int ring_take(ring *r, const arena *a, tileops_sqe *out);

/*
 * Post a completion that was promised. A client that sleeps is woken by
 * ring_wake, once for all the completions of a pass, not once for each.
 * Returns 0 or -1 (ring broken; the promise is dropped).
 */
int ring_post(ring *r, const arena *a, uint64_t tag, int status, double gpu_us,
              const char *message);
/* ring_post with a trace (TILEOPS_SQE_F_TRACE; NULL for none): on success
 * the completion carries it, its posted_ns stamped here. */
int ring_post_trace(ring *r, const arena *a, uint64_t tag, int status, double gpu_us,
                    const char *message, const tileops_ring_trace *trace);

/*
 * Between ring_hold and ring_publish, completions are written but cq_tail
 * is stored once, at the end: a batch costs the client's core one
 * cache-line transfer instead of one per entry. Otherwise each ring_post
 * publishes at once.
 */
void ring_hold(ring *r);
void ring_publish(ring *r, const arena *a);

/* Wake the client if completions were posted while it slept. */
void ring_wake(ring *r, const arena *a);

/* Write `advice` to the header's spin_advice (tileops_ring.h) unless it is
 * there already. */
void ring_advise_spin(ring *r, const arena *a, uint32_t advice);

/* Set or clear the header's daemon_sleeping flag; -1 if broken. */
int ring_set_sleeping(ring *r, const arena *a, uint32_t v);

/* Address of the sq_bell futex word and its current value; -1 if broken. */
int ring_bell(ring *r, const arena *a, uint32_t **addr, uint32_t *val);

/* CLOCK_MONOTONIC in nanoseconds, the clock of ring traces. */
uint64_t ring_now_ns(void);

/* Mark the ring broken with a reason (first reason wins). */
void ring_break(ring *r, const char *why);

/* 1 when [off, off+len) lies in the data area (past the rings). */
int ring_data_range_ok(const ring *r, uint64_t off, uint64_t len);

#endif
