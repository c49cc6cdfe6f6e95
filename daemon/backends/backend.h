/*
 * backend.h - where tensors live and kernels run: one small interface with
 * a CUDA implementation (the product) and a CPU one (the reference, and what
 * runs where there is no GPU). Both serve the whole protocol.
 *
 * Threading: every function except backend_open/backend_close is called on
 * an executor thread (executor.c); there may be several, each with its own
 * sessions and streams, so what a backend keeps per launch (timing events,
 * a capture in progress, a staging buffer) is per thread. The timing
 * callback runs on the executor thread that launched the op, never on a
 * thread of the backend's own. A backend may run work on threads of its
 * own (the CPU backend's pool of device threads, the CUDA backend's
 * release thread); they call into nothing of the executor's but the
 * thread_waker callback.
 *
 * A "stream" orders one session's work on one device. On both backends
 * launch, write, read, copy, free and graph_launch queue work on the
 * stream and return before it has run; a fence after it tells when it has,
 * and sync waits for it. Work on different streams may run at once;
 * stream_wait orders one after another.
 *
 * Devices: a backend serves the devices it was opened with (be->n_devices,
 * by index 0..n-1); a stream and an allocation belong to one of them, and
 * a kernel reads and writes memory of its stream's device only. The CPU
 * backend's devices are emulated (host memory, one pool of threads), so
 * that everything above the backend runs the same with one or several.
 * Errors: functions return a tileops_status and write a message.
 */
#ifndef TILEOPSD_BACKEND_H
#define TILEOPSD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "tileops_codes.h"
#include "tileops_kernels.h"

/* The most devices one daemon serves. */
#define BACKEND_MAX_DEVICES 16

/* Which backend a daemon runs (the config key `backend`). */
typedef enum backend_kind { BACKEND_AUTO = 0, BACKEND_CPU = 1, BACKEND_CUDA = 2 } backend_kind;

typedef struct backend backend;

/* The device's speed of light, for the stats' roofline share (stats.h):
 * memory bandwidth (reads plus writes) and dense peaks per dtype; 0 where
 * not known. */
typedef struct backend_ceilings {
	double bandwidth_gbs;
	double tflops_bf16, tflops_fp16, tflops_fp32, tflops_fp8;
	const char *source; /* "device" (from its properties) or "measured" (at start) */
} backend_ceilings;

/*
 * Collectives: one operation over memory on several devices of this
 * backend, one participant ("rank") per device, ranks numbered by their
 * place in parts[] (NCCL's semantics; every rank on a distinct device).
 * `count` is in elements of `dtype`:
 * - ALL_REDUCE: every rank's recv gets the reduction of all ranks' send
 *   (count elements each; send may equal recv).
 * - ALL_GATHER: rank r's send (count elements) lands at recv + r * count on
 *   every rank (recv holds n * count).
 * - REDUCE_SCATTER: every send holds n * count; rank r's recv gets the
 *   reduction of elements [r * count, (r + 1) * count) of all sends.
 * Each rank's part is queued on its stream (a stream of its device) after
 * the work queued there so far, and the stream's later work comes after
 * it; like a launch, it returns before it has run.
 */
typedef enum backend_coll_kind {
	BACKEND_ALL_REDUCE = 0,
	BACKEND_ALL_GATHER = 1,
	BACKEND_REDUCE_SCATTER = 2
} backend_coll_kind;

typedef enum backend_reduce { BACKEND_SUM = 0, BACKEND_MAX = 1, BACKEND_MIN = 2 } backend_reduce;

typedef struct backend_coll_part {
	void *stream; /* a stream of the rank's device */
	const void *send;
	void *recv;
} backend_coll_part;

typedef struct backend_coll {
	backend_coll_kind kind;
	backend_reduce reduce; /* not for ALL_GATHER */
	tk_dtype dtype;        /* f32, f16 or bf16 */
	size_t count;
	int n; /* ranks, 1..BACKEND_MAX_DEVICES */
	backend_coll_part parts[BACKEND_MAX_DEVICES];
} backend_coll;

typedef struct backend_ops {
	/* Called on each executor thread when it starts and before it exits;
	 * thread_fini waits for the work the thread queued. */
	tileops_status (*thread_init)(backend *be, char *err, size_t errlen);
	void (*thread_fini)(backend *be);
	/* How to wake the calling executor thread: a backend that finishes work
	 * on threads of its own (CPU) calls wake(arg), from any thread, each
	 * time work this thread queued has run, so the thread may sleep while
	 * it waits for fences and timings rather than poll them. NULL where
	 * the executor polls the device (CUDA). */
	void (*thread_waker)(backend *be, void (*wake)(void *arg), void *arg);
	void (*destroy)(backend *be);
	tileops_status (*stream_create)(backend *be, int device, void **stream, char *err,
	                                size_t errlen);
	void (*stream_destroy)(backend *be, void *stream);
	/* Run the stream's later work at the device's low priority (low 1) or
	 * at the normal one (0), in order after what it has queued. Not while
	 * capturing. Work queued before the call keeps its priority. NULL
	 * where there are no priorities. */
	void (*stream_priority)(backend *be, void *stream, int low);
	/* Make an arena usable as a copy source/target (CUDA: pin it). */
	void (*arena_attach)(backend *be, arena *a);
	void (*arena_detach)(backend *be, arena *a);
	tileops_status (*alloc)(backend *be, int device, size_t bytes, void **ptr, char *err,
	                        size_t errlen);
	void (*free)(backend *be, void *stream, void *ptr);
	/* Copy arena[aoff, aoff+len) to dst, or src to the arena, in stream order.
	 * The copy may still be running on return: it is done when a fence
	 * created after it has passed. */
	tileops_status (*write)(backend *be, void *stream, void *dst, const arena *a, size_t aoff,
	                        size_t len, char *err, size_t errlen);
	tileops_status (*read)(backend *be, void *stream, const void *src, const arena *a,
	                       size_t aoff, size_t len, char *err, size_t errlen);
	/* Queue one kernel; `call` is copied (the tensor memory it points at
	 * is freed only in stream order). When `timed`, its time is reported
	 * through be->timing_cb with `slot` and `arg`, on this thread, from
	 * collect_timings (or a fence_query) once the kernel has run (CUDA: two
	 * events around the launch, and timing costs launch throughput, so the
	 * executor times a sample of ops; CPU: every op, and the time of a
	 * kernel that failed is reported too). */
	tileops_status (*launch)(backend *be, void *stream, const tk_kernel_entry *k,
	                         const tk_call *call, int timed, int slot, void *arg, char *err,
	                         size_t errlen);
	tileops_status (*sync)(backend *be, void *stream, char *err, size_t errlen);
	/* The stream's later work waits (on the device, not on the host) for
	 * what `after` has queued so far; either may be of any device. */
	tileops_status (*stream_wait)(backend *be, void *stream, void *after, char *err,
	                              size_t errlen);
	/* Copy len bytes from src to dst in stream order; each is memory of a
	 * device of this backend (the same or another: a peer copy). The
	 * caller orders the stream after the work that src and dst wait for. */
	tileops_status (*copy)(backend *be, void *stream, void *dst, const void *src, size_t len,
	                       char *err, size_t errlen);
	/* A marker after the work queued on the stream so far. fence_query:
	 * TILEOPS_IN_PROGRESS until that work is done, then its status (a device
	 * fault is TILEOPS_ERR_BACKEND, at once, from every fence). fence_free
	 * releases it; a fence may outlive its stream. */
	tileops_status (*fence_create)(backend *be, void *stream, void **fence, char *err,
	                               size_t errlen);
	tileops_status (*fence_query)(backend *be, void *fence, char *err, size_t errlen);
	/* The executor passed the failure a fence reported on to its client.
	 * On the CPU a kernel fails after its launch returned, so its failure
	 * stays on the stream, and every fence after it reports it, until one
	 * of them has been answered; on a GPU such a launch fails at once and
	 * a failure on the device loses it (NULL). */
	void (*fence_answered)(backend *be, void *fence);
	void (*fence_free)(backend *be, void *fence);
	/* Plans. After capture_begin, launches on `stream` are recorded, not
	 * run, and not timed. capture_end turns them into a replayable graph:
	 * *graph, when not NULL, is an earlier graph of the same plan and
	 * bucket, updated in place where the device allows (else replaced).
	 * *bytes: device memory the graph holds, as far as it can be measured.
	 * capture_abort drops a capture after a failed launch. */
	tileops_status (*capture_begin)(backend *be, void *stream, char *err, size_t errlen);
	tileops_status (*capture_end)(backend *be, void *stream, void **graph, size_t *bytes,
	                              char *err, size_t errlen);
	void (*capture_abort)(backend *be, void *stream);
	tileops_status (*graph_launch)(backend *be, void *stream, void *graph, char *err,
	                               size_t errlen);
	void (*graph_destroy)(backend *be, void *graph);
	tileops_status (*ipc_export)(backend *be, void *ptr, unsigned char handle[64], char *err,
	                             size_t errlen);
	tileops_status (*ipc_import)(backend *be, const unsigned char handle[64], void **ptr,
	                             char *err, size_t errlen);
	void (*ipc_close)(backend *be, void *ptr);
	/* Report this thread's finished timings through be->timing_cb. */
	void (*collect_timings)(backend *be);
	/* The ceilings; called once at start, on the loop thread (it may take
	 * tens of milliseconds to measure). NULL: none known. */
	void (*ceilings)(backend *be, backend_ceilings *out);
	/* The device allocation ptr lies in: its base and its size (an IPC
	 * handle names a base; an import is bounded by the size). NULL where
	 * there is no IPC (CPU). */
	tileops_status (*mem_range)(backend *be, const void *ptr, void **base, size_t *size,
	                            char *err, size_t errlen);
	/* CUDA IPC events, in stream order, never waiting on the host.
	 * event_wait: the stream's later work waits for the event another
	 * process recorded (its cudaIpcEventHandle_t). event_record: record the
	 * stream's event (made on first use, one per stream, the same handle
	 * every time) after its work so far and write its handle. Neither while
	 * capturing. NULL where there are none (CPU). */
	tileops_status (*event_wait)(backend *be, void *stream, const unsigned char handle[64],
	                             char *err, size_t errlen);
	tileops_status (*event_record)(backend *be, void *stream, unsigned char handle[64],
	                               char *err, size_t errlen);
	/* Events opened once (exec/events.h), in stream order, never waiting on
	 * the host. event_open: open a client's interprocess event for good
	 * (*ev is the backend's); event_close frees it (waits queued on it stay
	 * queued). event_wait_opened: the stream's later work waits for ev's
	 * latest record. event_export: the handle of the stream's own event
	 * (event_record's), made and fetched once per stream. event_rerecord:
	 * record that event again after the stream's work so far. NULL where
	 * there are none (CPU). */
	tileops_status (*event_open)(backend *be, const unsigned char handle[64], void **ev,
	                             char *err, size_t errlen);
	void (*event_close)(backend *be, void *ev);
	tileops_status (*event_wait_opened)(backend *be, void *stream, void *ev, char *err,
	                                    size_t errlen);
	tileops_status (*event_export)(backend *be, void *stream, unsigned char handle[64],
	                               char *err, size_t errlen);
	tileops_status (*event_rerecord)(backend *be, void *stream, char *err, size_t errlen);
	/* Queue a collective (backend_coll above). Not while capturing: a
	 * plan queues its collectives at every run, between the graphs of the
	 * ops around them. The CUDA backend runs it through NCCL, loaded when
	 * first needed: TILEOPS_ERR_UNSUPPORTED, naming the library, where it
	 * cannot be loaded. */
	tileops_status (*collective)(backend *be, const backend_coll *c, char *err, size_t errlen);
} backend_ops;

/* Called with the time a launched op took (slot and arg as given at launch). */
typedef void (*backend_timing_fn)(void *ctx, int slot, void *arg, double elapsed_us);

/* One device a backend serves. */
typedef struct backend_device {
	int ordinal;           /* CUDA's device ordinal (CPU: the emulated device's number) */
	char name[160];        /* a description for Hello and stats */
	uint64_t memory_bytes; /* 0: not known */
	/* 1: the driver shares this device's contexts through an MPS server, so
	 * the kernels of client processes (torch's) and the daemon's run side by
	 * side; 0: each process has its own context and the GPU time-slices
	 * between them; -1: not known (the CPU backend, an older driver). */
	int mps;
} backend_device;

struct backend {
	const backend_ops *ops;
	const char *name; /* "cpu" or "cuda" */
	char device[160]; /* a description for Hello and stats: the first device's */
	backend_device devices[BACKEND_MAX_DEVICES];
	int n_devices;
	uint64_t capabilities; /* TILEOPS_CODE_CAP_* (proto/tileops_codes.h) */
	int is_gpu;
	/* The device's rates, for estimating how long an op's roofline counts
	 * take (exec/share.h): bytes and flops per microsecond (0: unknown). */
	double bytes_per_us, flops_per_us;
	backend_timing_fn timing_cb;
	void *timing_ctx;
	/* Executor threads with work right now (atomic; executor.c keeps it).
	 * The CUDA backend releases freed memory and closed sessions' pinned
	 * arenas in the background while it is 0 (arena_detach may take an
	 * arena's mapping over for that), since those calls stall every
	 * launching thread. */
	int active_threads;
	/* Threads of the backend's own that run work on the host's CPUs (the
	 * CPU backend's device threads; atomic, 0 on a GPU): the executor
	 * counts them when it advises clients how long to spin (exec/ring.h). */
	int work_threads;
	/* Set (atomically, once) when the device's state is lost: a sticky
	 * CUDA error (an illegal address, a trap, an uncorrectable ECC error)
	 * poisons the context, and every later call would fail the same way.
	 * The executor then fails all work of the device and the daemon exits
	 * so its service manager restarts it (docs/operations.md). */
	int lost;
	char lost_why[256];
	void *impl;
};

/* The CPUs this process may run on (its affinity: a container's cpuset),
 * at least 1. */
int backend_usable_cpus(void);

/* Mark the device lost with a reason (the first reason wins). Any thread. */
void backend_mark_lost(backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when the device is lost; why (when not NULL) gets the reason. Any thread. */
int backend_lost(backend *be, char *why, size_t len);

/*
 * How a backend is opened. queues (CUDA): the hardware work queues to ask
 * the driver for (CUDA_DEVICE_MAX_CONNECTIONS, unless the environment sets
 * it) and as many streams made at once on each device for sessions to take
 * turns on, so that concurrent sessions' streams sit on distinct queues
 * instead of sharing one and waiting behind each other's kernels. 0: the
 * driver's default and a new stream for each session.
 */
typedef struct backend_options {
	int devices[BACKEND_MAX_DEVICES]; /* ordinals, by index */
	int n_devices;                    /* at least 1 */
	int queues;
} backend_options;

/*
 * Open the backend `kind` selects (AUTO: CUDA when this build has it and a
 * GPU is present, else CPU). Returns NULL with a message on failure (for
 * example --backend cuda without a GPU).
 */
backend *backend_open(backend_kind kind, const backend_options *opt, char *err, size_t errlen);
void backend_close(backend *be);

/* The CPU backend with opt's devices emulated (opt NULL: one, numbered 0). */
backend *backend_cpu_open(const backend_options *opt, char *err, size_t errlen);
#ifdef TILEOPS_HAVE_CUDA
/* Returns 1 when a CUDA device is usable, 0 otherwise. */
int backend_cuda_available(void);
backend *backend_cuda_open(const backend_options *opt, char *err, size_t errlen);
#endif

#endif
