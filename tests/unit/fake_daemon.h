/*
 * fake_daemon.h - a scripted stand-in for tileopsd, in the test process.
 *
 * An nng REP socket on a private ipc path that records every request and
 * answers as the test tells it, and, when asked to, serves the session's
 * shared-memory rings from a thread of its own the way tileopsd promises
 * to (proto/tileops_ring.h): it consumes entries in order, posts one
 * completion per entry, sleeps on sq_bell when idle and wakes the client
 * on cq_bell. Tests set the behaviour fields before the client acts.
 *
 * Every function fails the current Criterion test when something goes wrong.
 */
#ifndef TILEOPS_FAKE_DAEMON_H
#define TILEOPS_FAKE_DAEMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "tileops.h"
#include "tileops.pb-c.h"
#include "tileops_ring.h"

#define FAKE_LOG_MAX 64
#define FAKE_MAX_THREADS 16
#define FAKE_MAX_DEVICES 8

enum fake_plane { FAKE_NNG = 0, FAKE_RING = 1 };

struct fake_req {
	int plane; /* enum fake_plane */
	uint64_t seq;
	uint64_t ring_mark;     /* of an nng request */
	uint64_t ring_consumed; /* ring entries consumed when the nng request ran */
	int body;               /* TILEOPS__REQUEST__BODY_* */
	uint64_t handle;
	uint64_t tensor_offset, arena_offset, length;
	uint32_t device; /* TensorCreate.device */
	uint64_t src;    /* TensorCopy.src (handle: its dst) */
	char op[32];
};

struct fake {
	nng_socket sock;
	char address[128];
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fake_req log[FAKE_LOG_MAX]; /* both planes, in the order they ran */
	int n_log;
	/* Behaviour, set by the test before the client acts. */
	uint64_t max_message_bytes;
	int op_status;          /* status for OpRun (both planes) */
	const char *op_message; /* message for OpRun */
	int hang_ops;           /* hold the nng answer to OpRun until fake_release */
	nng_msg *held;          /* that answer */
	int op_delay_ms;        /* answer an nng OpRun only after this long */
	int hello_silent;       /* leave this many Hellos without an answer */
	int n_hellos;           /* Hellos received */
	uint32_t hello_pipe[8]; /* the nng pipe each of the first Hellos came on */
	/* The client's arena, mapped at Hello. */
	unsigned char *arena;
	size_t arena_bytes;
	int arena_existed_at_hello;
	char arena_name[64];
	int hello_rings; /* the Hello asked for rings */
	/* HelloReply.devices: this many, named "fake device N" with ordinal 10 + N
	 * and N GiB; 0 sends none (a daemon older than the field). */
	int n_devices;
	uint32_t device_index_skew; /* added to every device's index */
	Tileops__DeviceInfo devices[FAKE_MAX_DEVICES];
	Tileops__DeviceInfo *device_ptrs[FAKE_MAX_DEVICES];
	char device_names[FAKE_MAX_DEVICES][32];
	unsigned char read_fill; /* byte pattern base for TensorRead pieces */
	unsigned char *written;  /* bytes received by TensorWrite, in tensor order */
	size_t written_cap;

	/* ---- the rings ---- */
	int serve_rings;           /* answer HelloReply.rings = true and serve them */
	int ring_hold;             /* atomic: consume nothing while set */
	int ring_reverse_timed;    /* post completions of timed entries in reverse, in batches */
	const char *ring_bogus_op; /* this op's completion carries a tag nobody sent */
	const char *ring_jump_op;  /* after this op, cq_tail jumps far ahead */
	int ring_jumped;           /* it did: the fake's ring is broken */
	double ring_gpu_us;        /* reported for timed entries */
	pthread_t ring_thread;
	int ring_running;
	int ring_stop; /* atomic */
	tileops_ring_header *hdr;
	uint32_t entries;
	uint64_t sq_head; /* consumed entries; under mu for readers */
	uint64_t cq_tail;
	/* What the ring thread saw. */
	uint64_t ring_ops;     /* OpRun entries consumed */
	uint64_t ring_syncs;   /* Sync entries consumed */
	uint64_t ring_bad;     /* entries that did not decode */
	uint64_t order_errors; /* an op's ("t", "i") params out of order */
	int64_t last_i[FAKE_MAX_THREADS];
	uint64_t max_unreaped;  /* most sq_tail - cq_head seen */
	uint64_t daemon_sleeps; /* times the ring thread slept on sq_bell */
	uint64_t daemon_wakes;  /* times it was woken by a bell */
	uint64_t timed_seen;    /* entries with TILEOPS_SQE_F_TIMING */
};

extern struct fake fake;

void fake_start(void);
void fake_stop(void);
/* Send the answer held back by hang_ops. */
void fake_release(void);
/* Wait until the fake has logged `n` requests (both planes). */
void fake_wait_for(int n);
int fake_count(void);
/* Wait until the ring thread consumed `n` entries; 0 on time-out (ms). */
int fake_wait_consumed(uint64_t n, int timeout_ms);
/* Connect to the fake; fails the test unless it works. */
tileops_client *fake_connect(size_t arena_bytes, int timeout_ms);

#endif /* TILEOPS_FAKE_DAEMON_H */
