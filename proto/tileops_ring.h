/*
 * tileops_ring.h - the shared-memory rings in a session's arena (the data
 * plane). Included by libtileops and tileopsd; not a public header.
 *
 * The client's arena (a POSIX shm object, see docs/protocol.md) starts with
 * a ring header, then the submission ring (SQ), then the completion ring
 * (CQ), then the data area that tensor reads and writes use:
 *
 *   0                 ring header (TILEOPS_RING_HEADER_BYTES)
 *   sq_offset         sq_entries x TILEOPS_SQE_BYTES
 *   cq_offset         cq_entries x TILEOPS_CQE_BYTES
 *   data_offset       data area, to the end of the arena
 *
 * The client fills the header's layout fields before its Hello. The daemon
 * reads them once, checks them and keeps its own copy: nothing the client
 * writes later into the layout fields changes what the daemon uses.
 *
 * Counters are free-running 64-bit sequence numbers; an entry's slot is its
 * number modulo the ring's entry count (a power of two). Each counter has
 * one writer and sits on its own cache line:
 *   sq_tail  client  entries [sq_head, sq_tail) are submitted
 *   sq_head  daemon  entries below it have been consumed (copied out)
 *   cq_tail  daemon  completions [cq_head, cq_tail) are posted
 *   cq_head  client  completions below it have been read
 * Writers publish with a release store after writing the entry; readers load
 * with acquire. The daemon copies each entry out once, before parsing it, and
 * bounds every length, so a client that scribbles on its rings corrupts only
 * its own session.
 *
 * Waking: the daemon polls the SQs of its sessions, spins for a short budget
 * when idle, then sets `daemon_sleeping` and sleeps on every session's
 * `sq_bell` at once (futex_waitv). A client that finds `daemon_sleeping` set
 * after publishing sq_tail increments sq_bell and wakes it (FUTEX_WAKE, not
 * private). Likewise the client sets `client_waiting` before sleeping on
 * `cq_bell`, and the daemon wakes it after posting completions.
 */
#ifndef TILEOPS_RING_H
#define TILEOPS_RING_H

#include <stdint.h>

#define TILEOPS_RING_MAGIC 0x52504f54u /* "TOPR" little-endian */
#define TILEOPS_RING_VERSION 1u
#define TILEOPS_RING_HEADER_BYTES 4096u
#define TILEOPS_SQE_BYTES 1024u
#define TILEOPS_CQE_BYTES 256u
#define TILEOPS_RING_MIN_ENTRIES 8u
#define TILEOPS_RING_MAX_ENTRIES 4096u

/*
 * Kinds of submission entries. A kind names one payload layout: a changed
 * layout gets a new kind, never a changed meaning for an old one, so the
 * kind is the descriptor's version. The daemon accepts every kind below.
 */
#define TILEOPS_SQE_REQUEST 1u      /* payload: a packed tileops.Request (OpRun, Sync, PlanRun) */
#define TILEOPS_SQE_OP 2u           /* payload: a tileops_sqe_op descriptor (one op run) */
#define TILEOPS_SQE_PLAN_RUN 3u     /* payload: a tileops_sqe_plan_run descriptor */
#define TILEOPS_SQE_EVENT_WAIT 4u   /* payload: a tileops_sqe_event (a registered event's id) */
#define TILEOPS_SQE_EVENT_RECORD 5u /* payload: a tileops_sqe_event (id 0: the session's event) */

/* Submission flags. The daemon refuses an entry with any other bit set
 * (TILEOPS_ERR_PROTOCOL, naming the flags): a client asking for something
 * this daemon does not do is told so, never silently ignored. */
#define TILEOPS_SQE_F_TIMING 1u /* post the completion when the device finished, with its time */
#define TILEOPS_SQE_F_TRACE 2u  /* put a tileops_ring_trace in a successful completion */
#define TILEOPS_SQE_F_KNOWN (TILEOPS_SQE_F_TIMING | TILEOPS_SQE_F_TRACE)

/* Completion flags. */
#define TILEOPS_CQE_F_TIMED 1u /* gpu_us holds the op's device time */
#define TILEOPS_CQE_F_TRACE 2u /* message holds a tileops_ring_trace, not text */

typedef struct tileops_ring_header {
	/* Layout, written by the client before Hello, read once by the daemon. */
	uint32_t magic;
	uint32_t version;
	uint32_t sq_entries;
	uint32_t cq_entries;
	uint64_t sq_offset;
	uint64_t cq_offset;
	uint64_t data_offset;
	/* Written by the daemon at any time: how long a waiting client should
	 * spin before it sleeps on cq_bell. 0: no advice (the client's own
	 * TILEOPS_SPIN_US or default); else 1 + microseconds, 1 meaning sleep
	 * at once. The daemon advises that while more threads would spin than
	 * it has CPUs: the executor threads, the backend's own and one per
	 * session with rings (docs/threading.md). TILEOPS_SPIN_US, when set,
	 * wins over the advice. */
	uint32_t spin_advice;
	uint8_t pad0[64 - 44];
	/* One cache line per counter or flag group. */
	uint64_t sq_tail;
	uint8_t pad1[56];
	uint64_t sq_head;
	uint8_t pad2[56];
	uint64_t cq_tail;
	uint8_t pad3[56];
	uint64_t cq_head;
	uint8_t pad4[56];
	uint32_t sq_bell;         /* futex word the daemon sleeps on */
	uint32_t daemon_sleeping; /* set by the daemon before it sleeps */
	uint8_t pad5[56];
	uint32_t cq_bell;        /* futex word the client sleeps on */
	uint32_t client_waiting; /* set by the client before it sleeps */
	uint8_t pad6[56];
} tileops_ring_header;

typedef struct tileops_sqe {
	uint64_t tag;    /* echoed in the completion */
	uint32_t kind;   /* TILEOPS_SQE_* */
	uint32_t flags;  /* TILEOPS_SQE_F_* */
	uint32_t length; /* payload bytes used */
	uint32_t reserved;
	uint8_t payload[TILEOPS_SQE_BYTES - 24];
} tileops_sqe;

typedef struct tileops_cqe {
	uint64_t tag;
	int32_t status; /* tileops_status */
	uint32_t flags; /* TILEOPS_CQE_F_* */
	double gpu_us;
	char message[TILEOPS_CQE_BYTES - 24]; /* NUL-terminated; "" on success */
} tileops_cqe;

/*
 * Where one entry's time went, for profiling (TILEOPS_SQE_F_TRACE): the
 * daemon's CLOCK_MONOTONIC in nanoseconds, which on one host is the
 * client's clock too. On success with TILEOPS_SQE_F_TRACE the completion
 * carries TILEOPS_CQE_F_TRACE and this struct at the start of `message`
 * (which is then not text); a failed entry's completion carries its
 * message as always, and no trace. A client that never sets the flag never
 * sees either: the completion layout is unchanged for it.
 *
 *   taken_ns     the executor copied the entry out of the submission ring
 *   launched_ns  its launch returned (an op, a plan replay), or its fence
 *                was placed (a sync)
 *   posted_ns    the completion entry was written, just before cq_tail is
 *                published (for a sync or a timed op: once the device had
 *                finished)
 *   executor     the executor thread that ran it
 */
typedef struct tileops_ring_trace {
	uint64_t taken_ns;
	uint64_t launched_ns;
	uint64_t posted_ns;
	uint32_t executor;
	uint32_t reserved; /* 0 */
} tileops_ring_trace;

/*
 * The op descriptor (TILEOPS_SQE_OP): a fixed binary form of an OpRun that
 * the daemon reads without unpacking or allocating. All integers are
 * little-endian (the host's: both ends share one machine). The payload is
 *
 *   0    tileops_sqe_op       op name, NUL-padded; the three counts
 *   80   u64 x n_inputs       input handles (0 leaves an optional one out)
 *   ..   u64 x n_outputs      output handles
 *   ..   tileops_sqe_param x n_params
 *
 * and `length` is exactly 80 + 8 * (n_inputs + n_outputs) + 48 * n_params.
 * Counts are at most 8 inputs, 4 outputs and 16 params (936 bytes at most,
 * so every count fits); the op name is at most 63 bytes and a param name at
 * most 31, each NUL-terminated within its field. An op whose names are
 * longer goes as TILEOPS_SQE_REQUEST instead. The daemon copies the entry
 * out before reading it and refuses, with an error completion naming the
 * field, a length that differs, a count over its limit, a name without its
 * NUL, a param kind it does not know, or reserved bytes that are not zero.
 */
#define TILEOPS_SQE_OP_NAME_BYTES 64u
#define TILEOPS_SQE_PARAM_NAME_BYTES 32u
#define TILEOPS_SQE_OP_MAX_INPUTS 8u
#define TILEOPS_SQE_OP_MAX_OUTPUTS 4u
#define TILEOPS_SQE_OP_MAX_PARAMS 16u

/* Kinds of param values in a tileops_sqe_param. */
#define TILEOPS_SQE_PARAM_INT 1u   /* value.i */
#define TILEOPS_SQE_PARAM_FLOAT 2u /* value.f */
#define TILEOPS_SQE_PARAM_BOOL 3u  /* value.i, 0 or 1 */

typedef struct tileops_sqe_op {
	char op[TILEOPS_SQE_OP_NAME_BYTES];
	uint32_t n_inputs;
	uint32_t n_outputs;
	uint32_t n_params;
	uint32_t reserved; /* 0 */
} tileops_sqe_op;

typedef struct tileops_sqe_param {
	char name[TILEOPS_SQE_PARAM_NAME_BYTES];
	uint32_t kind;     /* TILEOPS_SQE_PARAM_* */
	uint32_t reserved; /* 0 */
	union {
		int64_t i;
		double f;
	} value;
} tileops_sqe_param;

/*
 * The plan-run descriptor (TILEOPS_SQE_PLAN_RUN): a PlanRun in fixed form.
 *
 *   0    tileops_sqe_plan_run       plan handle, bucket size, binding count
 *   24   tileops_sqe_binding x n_bindings
 *
 * `length` is exactly 24 + 16 * n_bindings, n_bindings at most 61 (what
 * fits the payload); a run with more bindings goes as TILEOPS_SQE_REQUEST.
 */
#define TILEOPS_SQE_PLAN_MAX_BINDINGS 61u

typedef struct tileops_sqe_plan_run {
	uint64_t plan;
	int64_t size; /* 0: the largest bucket */
	uint32_t n_bindings;
	uint32_t reserved; /* 0 */
} tileops_sqe_plan_run;

typedef struct tileops_sqe_binding {
	uint64_t plan_tensor;
	uint64_t tensor;
} tileops_sqe_binding;

/*
 * The event descriptor (TILEOPS_SQE_EVENT_WAIT, TILEOPS_SQE_EVENT_RECORD):
 * `length` is exactly 16 and `reserved` 0.
 *   EVENT_WAIT    the session's later work waits on the device for the
 *                 client's interprocess event registered as `event` (the id
 *                 EventRegister answered); an id the session does not hold
 *                 fails with TILEOPS_ERR_UNKNOWN_HANDLE.
 *   EVENT_RECORD  the daemon re-records the session's exported event (the
 *                 one EventExport answered the handle of) after the work
 *                 before the entry; `event` must be 0. Its completion is
 *                 posted once the record is queued on the device: only then
 *                 may the client wait on the event (cudaStreamWaitEvent),
 *                 else it would wait on the record before.
 * Both are refused with TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
typedef struct tileops_sqe_event {
	uint64_t event;
	uint64_t reserved; /* 0 */
} tileops_sqe_event;

_Static_assert(sizeof(tileops_sqe_event) == 16, "event descriptor layout");
_Static_assert(sizeof(tileops_ring_header) == 448, "ring header layout");
_Static_assert(sizeof(tileops_sqe_op) == 80, "op descriptor layout");
_Static_assert(sizeof(tileops_sqe_param) == 48, "op descriptor param layout");
_Static_assert(sizeof(tileops_sqe_op) +
                               8 * (TILEOPS_SQE_OP_MAX_INPUTS + TILEOPS_SQE_OP_MAX_OUTPUTS) +
                               sizeof(tileops_sqe_param) * TILEOPS_SQE_OP_MAX_PARAMS <=
                       TILEOPS_SQE_BYTES - 24,
               "the largest op descriptor fits an entry");
_Static_assert(sizeof(tileops_sqe_plan_run) == 24, "plan-run descriptor layout");
_Static_assert(sizeof(tileops_sqe_binding) == 16, "plan-run binding layout");
_Static_assert(sizeof(tileops_sqe_plan_run) +
                               sizeof(tileops_sqe_binding) * TILEOPS_SQE_PLAN_MAX_BINDINGS <=
                       TILEOPS_SQE_BYTES - 24,
               "the largest plan-run descriptor fits an entry");
_Static_assert(sizeof(tileops_ring_trace) == 32, "trace layout");
_Static_assert(sizeof(tileops_ring_trace) <= TILEOPS_CQE_BYTES - 24, "a trace fits a message");
_Static_assert(sizeof(tileops_sqe) == TILEOPS_SQE_BYTES, "sqe layout");
_Static_assert(sizeof(tileops_cqe) == TILEOPS_CQE_BYTES, "cqe layout");

#endif /* TILEOPS_RING_H */
