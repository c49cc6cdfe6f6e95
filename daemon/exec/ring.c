/* ring.c - the daemon's side of the shared-memory rings (see ring.h). */
#include "ring.h"

#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HDR(field) offsetof(tileops_ring_header, field)

void ring_break(ring *r, const char *why)
{
	if (r->broken)
		return;
	r->broken = 1;
	snprintf(r->why, sizeof(r->why), "%s", why);
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

int ring_setup(ring *r, const arena *a, char *err, size_t errlen)
{
	tileops_ring_header h;
	memset(r, 0, sizeof(*r));
	if (a->size < sizeof(h) || arena_copy_in(a, 0, &h, sizeof(h)) != 0) {
		snprintf(err, errlen, "the arena is too small for a ring header");
		return -1;
	}
	uint64_t size = a->size;
	uint64_t sq_bytes = (uint64_t)h.sq_entries * TILEOPS_SQE_BYTES;
	uint64_t cq_bytes = (uint64_t)h.cq_entries * TILEOPS_CQE_BYTES;
	const char *bad = NULL;
	if (h.magic != TILEOPS_RING_MAGIC)
		bad = "magic is not TOPR";
	else if (h.version != TILEOPS_RING_VERSION)
		bad = "version is not 1";
	else if (!is_pow2(h.sq_entries) || h.sq_entries < TILEOPS_RING_MIN_ENTRIES ||
	         h.sq_entries > TILEOPS_RING_MAX_ENTRIES)
		bad = "sq_entries is not a power of two in [8, 4096]";
	else if (h.cq_entries != h.sq_entries)
		bad = "cq_entries differs from sq_entries";
	else if (h.sq_offset < TILEOPS_RING_HEADER_BYTES || h.sq_offset % 64 ||
	         h.sq_offset > size || sq_bytes > size - h.sq_offset)
		bad = "sq_offset puts the submission ring outside the arena or over the header";
	else if (h.cq_offset < h.sq_offset + sq_bytes || h.cq_offset % 64 || h.cq_offset > size ||
	         cq_bytes > size - h.cq_offset)
		bad = "cq_offset puts the completion ring outside the arena or over the SQ";
	else if (h.data_offset < h.cq_offset + cq_bytes || h.data_offset % 4096 ||
	         h.data_offset > size)
		bad = "data_offset is not page-aligned past the rings and inside the arena";
	if (bad) {
		snprintf(err, errlen, "ring header: %s", bad);
		return -1;
	}
	r->entries = h.sq_entries;
	r->sq_off = h.sq_offset;
	r->cq_off = h.cq_offset;
	r->data_off = h.data_offset;
	r->holding = 0;
	r->published = 0;
	/* Start from zero whatever the client left there. */
	if (arena_store_u64(a, HDR(sq_head), 0) || arena_store_u64(a, HDR(cq_tail), 0) ||
	    arena_store_u32(a, HDR(daemon_sleeping), 0)) {
		snprintf(err, errlen, "the arena's ring header cannot be written");
		return -1;
	}
	r->enabled = 1;
	return 0;
}

uint64_t ring_available(ring *r, const arena *a)
{
	uint64_t tail;
	if (!r->enabled || r->broken)
		return 0;
	if (arena_load_u64(a, HDR(sq_tail), &tail) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return 0;
	}
	if (tail < r->sq_head || tail - r->sq_head > r->entries) {
		char why[160];
		snprintf(why, sizeof(why), "sq_tail %llu is outside [sq_head %llu, sq_head + %u]",
		         (unsigned long long)tail, (unsigned long long)r->sq_head, r->entries);
		ring_break(r, why);
		return 0;
	}
	return tail - r->sq_head;
}

uint32_t ring_cq_room(ring *r, const arena *a)
{
	uint64_t head;
	if (!r->enabled || r->broken)
		return 0;
	if (arena_load_u64(a, HDR(cq_head), &head) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return 0;
	}
	if (head > r->cq_tail || r->cq_tail - head > r->entries) {
		char why[160];
		snprintf(why, sizeof(why), "cq_head %llu is outside [cq_tail - %u, cq_tail %llu]",
		         (unsigned long long)head, r->entries, (unsigned long long)r->cq_tail);
		ring_break(r, why);
		return 0;
	}
	uint64_t used = r->cq_tail - head + r->promised;
	return used >= r->entries ? 0 : (uint32_t)(r->entries - used);
}

int ring_take(ring *r, const arena *a, tileops_sqe *out)
{
	size_t off = r->sq_off + (size_t)(r->sq_head & (r->entries - 1)) * TILEOPS_SQE_BYTES;
	size_t head = offsetof(tileops_sqe, payload);
	/* The header, then only the payload bytes it says are used (an op
	 * descriptor is a few hundred of the entry's 1024): each byte is still
	 * read once, and a length past the payload is the caller's to reject. */
	if (arena_copy_in(a, off, out, head) != 0) {
		ring_break(r, "the arena no longer backs the submission ring");
		return -1;
	}
	size_t len = out->length < sizeof(out->payload) ? out->length : sizeof(out->payload);
	if (len && arena_copy_in(a, off + head, out->payload, len) != 0) {
		ring_break(r, "the arena no longer backs the submission ring");
		return -1;
	}
	r->sq_head++;
	r->consumed = r->sq_head;
	r->promised++;
	if (arena_store_u64(a, HDR(sq_head), r->sq_head) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return -1;
	}
	/* The next entry is probably written already: start bringing its first
	 * lines over from the client's core while this one is launched. */
	size_t next = r->sq_off + (size_t)(r->sq_head & (r->entries - 1)) * TILEOPS_SQE_BYTES;
	if (arena_range_ok(a, next, 256))
		for (size_t l = 0; l < 256; l += 64)
			__builtin_prefetch((const char *)a->base + next + l, 0, 3);
	return 0;
}

uint64_t ring_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ring_post(ring *r, const arena *a, uint64_t tag, int status, double gpu_us, const char *message)
{
	return ring_post_trace(r, a, tag, status, gpu_us, message, NULL);
}

int ring_post_trace(ring *r, const arena *a, uint64_t tag, int status, double gpu_us,
                    const char *message, const tileops_ring_trace *trace)
{
	if (r->promised)
		r->promised--;
	if (r->broken)
		return -1;
	tileops_cqe c;
	memset(&c, 0, offsetof(tileops_cqe, message));
	c.tag = tag;
	c.status = status;
	c.flags = gpu_us >= 0 ? TILEOPS_CQE_F_TIMED : 0;
	c.gpu_us = gpu_us >= 0 ? gpu_us : 0;
	size_t n = message ? strlen(message) : 0;
	if (n >= sizeof(c.message))
		n = sizeof(c.message) - 1;
	memcpy(c.message, message ? message : "", n);
	c.message[n] = '\0';
	if (trace && status == 0) {
		tileops_ring_trace t = *trace;
		t.posted_ns = ring_now_ns();
		c.flags |= TILEOPS_CQE_F_TRACE;
		memcpy(c.message, &t, sizeof(t));
		n = sizeof(t) - 1; /* the copy below takes n + 1 bytes */
	}
	size_t off = r->cq_off + (size_t)(r->cq_tail & (r->entries - 1)) * TILEOPS_CQE_BYTES;
	if (arena_copy_out(a, off, &c, offsetof(tileops_cqe, message) + n + 1) != 0) {
		ring_break(r, "the arena no longer backs the completion ring");
		return -1;
	}
	r->cq_tail++;
	/* The next slot's line, for writing, while the next op is launched. */
	size_t next = r->cq_off + (size_t)(r->cq_tail & (r->entries - 1)) * TILEOPS_CQE_BYTES;
	if (arena_range_ok(a, next, 64))
		__builtin_prefetch((const char *)a->base + next, 1, 3);
	if (!r->holding)
		ring_publish(r, a);
	return r->broken ? -1 : 0;
}

void ring_hold(ring *r)
{
	r->holding = 1;
}

void ring_publish(ring *r, const arena *a)
{
	r->holding = 0;
	if (r->broken || r->published == r->cq_tail)
		return;
	uint32_t waiting = 0;
	/* The client adds itself to client_waiting, then looks at cq_tail; this
	 * side stores cq_tail, then looks at client_waiting. Without a full
	 * fence between the store and the load the CPU may do the load first
	 * (x86 keeps stores in a buffer), both sides miss the other, and the
	 * client sleeps until its 200 ms safety net. */
	if (arena_store_u64(a, HDR(cq_tail), r->cq_tail) != 0) {
		ring_break(r, "the arena no longer backs the completion ring");
		return;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (arena_load_u32(a, HDR(client_waiting), &waiting) != 0) {
		ring_break(r, "the arena no longer backs the completion ring");
		return;
	}
	r->published = r->cq_tail;
	if (waiting)
		r->wake_owed = 1;
}

void ring_advise_spin(ring *r, const arena *a, uint32_t advice)
{
	if (!r->enabled || r->broken || r->advised == advice)
		return;
	if (arena_store_u32(a, HDR(spin_advice), advice) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return;
	}
	r->advised = advice;
}

void ring_wake(ring *r, const arena *a)
{
	if (!r->wake_owed)
		return;
	r->wake_owed = 0;
	if (r->broken)
		return;
	if (arena_add_u32(a, HDR(cq_bell), 1) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return;
	}
	/* Every waiting thread: each may wait for a different completion. */
	syscall(SYS_futex, (uint32_t *)((char *)a->base + HDR(cq_bell)), FUTEX_WAKE, INT32_MAX,
	        NULL, NULL, 0);
}

int ring_set_sleeping(ring *r, const arena *a, uint32_t v)
{
	if (!r->enabled || r->broken)
		return -1;
	if (arena_store_u32(a, HDR(daemon_sleeping), v) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return -1;
	}
	return 0;
}

int ring_bell(ring *r, const arena *a, uint32_t **addr, uint32_t *val)
{
	if (!r->enabled || r->broken)
		return -1;
	if (arena_load_u32(a, HDR(sq_bell), val) != 0) {
		ring_break(r, "the arena no longer backs the ring header");
		return -1;
	}
	*addr = (uint32_t *)((char *)a->base + HDR(sq_bell));
	return 0;
}

int ring_data_range_ok(const ring *r, uint64_t off, uint64_t len)
{
	return !r->enabled || off >= r->data_off;
}
