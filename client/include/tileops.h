/*
 * tileops.h - the TileOPs client library (libtileops).
 *
 * A process links libtileops to run LLM operators on tensors that live in a
 * running tileopsd: it connects, creates tensors, writes host bytes into
 * them, runs ops over them and reads results back. The daemon owns the GPU;
 * this library only talks to it.
 *
 * Conventions
 *  - Every function returns a tileops_status (TILEOPS_OK on success) and
 *    writes results through out-parameters, which are left untouched on
 *    failure unless said otherwise.
 *  - When a call fails, tileops_last_error() returns a message for the
 *    calling thread that says what was wrong, usually the daemon's own
 *    words ("rms_norm: weight has shape [4095], expected [4096]").
 *  - Thread safety: a tileops_client may be used from several threads at
 *    once. Requests from one client are executed by the daemon in the order
 *    this library sent them; calls made concurrently from different threads
 *    are ordered by whichever was submitted first.
 *  - Freeing NULL (or handle 0) is a no-op.
 */
#ifndef TILEOPS_H
#define TILEOPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILEOPS_VERSION_MAJOR 0
#define TILEOPS_VERSION_MINOR 1
#define TILEOPS_VERSION_PATCH 0
#define TILEOPS_VERSION_STRING "0.1.0"

/* Maximum tensor rank. */
#define TILEOPS_MAX_DIMS 8

/*
 * Status codes. The same values travel on the wire (docs/protocol.md).
 */
#ifndef TILEOPS_STATUS_DEFINED /* proto/tileops_codes.h has the same enum */
#define TILEOPS_STATUS_DEFINED
typedef enum tileops_status {
	TILEOPS_OK = 0,
	TILEOPS_ERR_INVALID_ARGUMENT = 1, /* a bad argument to a library call */
	TILEOPS_ERR_CONNECT = 2,          /* tileopsd could not be reached */
	TILEOPS_ERR_PROTOCOL = 3,         /* a malformed or out-of-order message */
	TILEOPS_ERR_VERSION = 4,          /* protocol versions do not match */
	TILEOPS_ERR_PERMISSION = 5,       /* the daemon refused this peer */
	TILEOPS_ERR_NO_SESSION = 6,       /* no session on this connection */
	TILEOPS_ERR_UNKNOWN_OP = 7,       /* no op of that name */
	TILEOPS_ERR_UNKNOWN_HANDLE = 8,   /* not a tensor of this session */
	TILEOPS_ERR_DTYPE = 9,            /* a dtype rule failed */
	TILEOPS_ERR_SHAPE = 10,           /* a rank or shape rule failed */
	TILEOPS_ERR_PARAM = 11,           /* a param is missing, unknown or out of range */
	TILEOPS_ERR_RANGE = 12,           /* an arena offset or length is out of range */
	TILEOPS_ERR_TOO_LARGE = 13,       /* a message over the daemon's size cap */
	TILEOPS_ERR_OUT_OF_MEMORY = 14,   /* device or host memory ran out */
	TILEOPS_ERR_QUOTA = 15,           /* the session's memory quota is used up */
	TILEOPS_ERR_BUSY = 16,            /* too many requests in flight */
	TILEOPS_ERR_UNSUPPORTED = 17,     /* not available on this backend */
	TILEOPS_ERR_BACKEND = 18,         /* the device failed (launch, copy) */
	TILEOPS_ERR_SHUTDOWN = 19,        /* the daemon is stopping */
	TILEOPS_ERR_TIMEOUT = 20,         /* no answer within the timeout */
	TILEOPS_ERR_CLOSED = 21,          /* the connection was lost or closed */
	TILEOPS_ERR_INTERNAL = 22,        /* a bug: please report it */
	TILEOPS_IN_PROGRESS = 23          /* not an error: the work is not done yet */
} tileops_status;
#endif

/* A short, static description of a status code. Never NULL. */
const char *tileops_strerror(int status);

/*
 * The message of the last call that failed on this thread (a thread-local
 * buffer, valid until the thread's next failing call). "" if none.
 */
const char *tileops_last_error(void);

/* Element types. */
typedef enum tileops_dtype {
	TILEOPS_F32 = 1,
	TILEOPS_F16 = 2,
	TILEOPS_BF16 = 3,
	TILEOPS_I32 = 4,
	TILEOPS_I64 = 5,
	TILEOPS_U8 = 6,
	TILEOPS_FP8_E4M3 = 7
} tileops_dtype;

/* Size of one element in bytes; 0 for an unknown dtype. */
size_t tileops_dtype_size(tileops_dtype dtype);
/* "f32", "bf16", ...; "invalid" for an unknown dtype. */
const char *tileops_dtype_name(tileops_dtype dtype);

/* A connection to tileopsd, with its session. Opaque. */
typedef struct tileops_client tileops_client;

/*
 * A tensor, named by a handle the daemon gave this client's session. 0 is
 * never a valid handle. Handles of one client mean nothing to another.
 */
typedef uint64_t tileops_tensor;

/* Options for tileops_connect_opts. Zero-initialise, then set what you need. */
typedef struct tileops_connect_options {
	/* nng address of the daemon, e.g. "ipc:///run/tileopsd/tileopsd.sock".
	 * NULL: $TILEOPS_ADDRESS, else the default path (see tileops_default_address). */
	const char *address;
	/* Bytes of the shared-memory arena used for tensor reads and writes.
	 * 0: 64 MiB. Larger transfers are split into arena-sized pieces. The
	 * arena is a file in $TILEOPS_ARENA_DIR when set, else in the folder
	 * `arenas` beside an ipc:// socket when it exists (a daemon with
	 * arena_dir makes it: clients in other containers), else POSIX shm. */
	size_t arena_bytes;
	/* Milliseconds to wait for each reply; 0 waits without limit. For the
	 * connect itself, the whole of it: a Hello left unanswered for 5 s
	 * (then 10, then 20 s a try) is said again on a new connection
	 * (an ipc connection made just as another one closes can stay
	 * unanswered), until timeout_ms has passed (0: tries without limit). */
	int timeout_ms;
	/* A name for this client, shown in the daemon's logs and stats. */
	const char *name;
	/* The tenant whose graph-cache quota this session's plans use: a name
	 * configured in the daemon (who may join it is configured there too).
	 * NULL: a tenant of the session's own. */
	const char *tenant;
} tileops_connect_options;

/*
 * The default daemon address: ipc://$XDG_RUNTIME_DIR/tileopsd/tileopsd.sock
 * when XDG_RUNTIME_DIR is set and that socket exists (a user's own daemon),
 * else ipc:///run/tileopsd/tileopsd.sock (the system daemon).
 * Writes at most `len` bytes including the terminating NUL.
 */
tileops_status tileops_default_address(char *buf, size_t len);

/*
 * Connect to tileopsd and open a session. On success *out owns the
 * connection; release it with tileops_close. On failure *out is NULL.
 */
tileops_status tileops_connect(const char *address, tileops_client **out);
tileops_status tileops_connect_opts(const tileops_connect_options *opts, tileops_client **out);

/*
 * Close the session and the connection. The daemon frees every tensor the
 * session still holds. Outstanding completions fail with TILEOPS_ERR_CLOSED
 * but must still be freed. Must not race with other calls on `c`.
 */
void tileops_close(tileops_client *c);

/* What the daemon said about itself at connect time. Strings live as long as c. */
typedef struct tileops_server_info {
	uint32_t protocol_version;
	const char *daemon_version;
	const char *backend;   /* "cuda" or "cpu" */
	const char *device;    /* e.g. "NVIDIA H200 (sm_90, 132 SMs)" */
	uint64_t capabilities; /* TILEOPS_CAP_* bits */
	uint64_t max_message_bytes;
	uint64_t session_id;
} tileops_server_info;

#define TILEOPS_CAP_CUDA_IPC (1u << 0) /* tensor import/export work */
#define TILEOPS_CAP_GPU (1u << 1)      /* tensors live on a GPU */
/* Every device of the daemon has its contexts shared through an MPS server:
 * a client process's own kernels (torch's) run beside the daemon's instead
 * of the GPU time-slicing between their contexts (docs/python.md). */
#define TILEOPS_CAP_MPS (1u << 2)

tileops_status tileops_server_info_get(tileops_client *c, tileops_server_info *out);

/* ---- devices ---------------------------------------------------------- */

/*
 * A daemon may serve several devices (its `devices` setting; on the CPU
 * backend emulated ones). Each tensor lives on one of them, chosen when it
 * is created; an op runs on the device of its tensors. The list is what the
 * daemon said at connect time and does not change during the session. A
 * daemon that does not report devices serves one: index 0, named as
 * tileops_server_info.device.
 */

/* One device the daemon serves (its `devices` setting); strings live as long as c. */
typedef struct tileops_device_info {
	uint32_t index;        /* what tileops_tensor_create_on names: 0 .. count - 1 */
	int32_t ordinal;       /* the CUDA device ordinal (CPU: the emulated device's number) */
	const char *name;      /* e.g. "NVIDIA H200 (sm_90, 132 SMs)" */
	uint64_t memory_bytes; /* its memory; 0 where not known (CPU) */
} tileops_device_info;

/* How many devices the daemon serves (at least 1); 0 when c is NULL. */
int tileops_device_count(tileops_client *c);

/* Device `index`; TILEOPS_ERR_INVALID_ARGUMENT naming the count when out of range. */
tileops_status tileops_device_info_get(tileops_client *c, int index, tileops_device_info *out);

/* ---- tensors ---------------------------------------------------------- */

/*
 * Create a tensor of `dtype` and `shape` (ndim 0..TILEOPS_MAX_DIMS, every
 * extent >= 0), packed row-major, filled with zero bytes (memory another
 * session freed never shows through), on device 0.
 */
tileops_status tileops_tensor_create(tileops_client *c, tileops_dtype dtype, int ndim,
                                     const int64_t *shape, tileops_tensor *out);

/*
 * tileops_tensor_create on the device of index `device` (0 ..
 * tileops_device_count - 1; tileops_tensor_create is device 0). Ops run on
 * the device of their tensors: every tensor of one op on the same device
 * (the daemon refuses an op, or a plan with such an op at tileops_plan_end,
 * whose tensors are on two with TILEOPS_ERR_INVALID_ARGUMENT, naming the
 * devices); the ops of one plan may be on different devices. A bad index is
 * refused by the client (message naming the count) before anything is sent.
 * A view lives on its base's device.
 */
tileops_status tileops_tensor_create_on(tileops_client *c, int device, tileops_dtype dtype,
                                        int ndim, const int64_t *shape, tileops_tensor *out);

/*
 * Copy every byte of src into dst, on one device or between two (a peer
 * copy): both packed row-major with the same byte size (the daemon refuses
 * other pairs with TILEOPS_ERR_INVALID_ARGUMENT, naming both sizes, or a
 * view with gaps between its rows). Ordered after the session's earlier
 * work on both tensors, and later work on either waits for it. Returns once
 * the daemon has queued it (like tileops_op_run): use tileops_sync or a
 * read to wait for it.
 */
tileops_status tileops_tensor_copy(tileops_client *c, tileops_tensor dst, tileops_tensor src);

/* Free a tensor. Ops already submitted that use it complete first. */
tileops_status tileops_tensor_free(tileops_client *c, tileops_tensor t);

/*
 * Copy `len` bytes from host memory `src` into the tensor at byte `offset`.
 * Ordered after every op submitted before it; returns when the bytes are in
 * the tensor.
 */
tileops_status tileops_tensor_write(tileops_client *c, tileops_tensor t, size_t offset,
                                    const void *src, size_t len);

/*
 * Copy `len` bytes of the tensor from byte `offset` into host memory `dst`.
 * Waits for every op submitted before it that writes the tensor.
 */
tileops_status tileops_tensor_read(tileops_client *c, tileops_tensor t, size_t offset, void *dst,
                                   size_t len);

/*
 * A view: part of base's memory as a tensor of its own, without a copy (a
 * reshape, a slice of rows, the q, k and v columns of one fused projection,
 * the last token of each sequence).
 *
 * byte_offset counts from base's first element and must be a multiple of
 * dtype's size (dtype may differ from base's). strides are in elements, one
 * per dim, each >= 0; NULL means packed row-major. Every element of the
 * view must lie inside base: the daemon checks that against base's bytes
 * (for a view base, from its first element to one past its last) and a
 * refusal (TILEOPS_ERR_RANGE) names the bound that was crossed.
 *
 * A view of a view is a view of the same memory (its offset counts from
 * the base view's first element). The memory stays alive while any view of
 * it exists: freeing base frees base's handle only, and the bytes go when
 * the last of base and its views is freed (or the session closes). A
 * session's memory counts the allocation once, however many views it has.
 * Free a view with tileops_tensor_free. tileops_tensor_read and
 * tileops_tensor_write take packed views (their bytes are the view's); a
 * view with gaps between its rows is refused there (its gaps are other
 * tensors' bytes): copy through its base instead.
 *
 * A view is a tensor like any other: an op input or output, a plan's tensor,
 * a binding's. The ops take packed views everywhere; some tensors of some
 * ops also take rows spaced further apart than packed (docs/ops.md, "row
 * strides"); any other layout is refused with TILEOPS_ERR_SHAPE, naming the
 * op and the tensor.
 */
tileops_status tileops_tensor_view(tileops_client *c, tileops_tensor base, size_t byte_offset,
                                   tileops_dtype dtype, int ndim, const int64_t *shape,
                                   const int64_t *strides, tileops_tensor *out);

/* An opaque CUDA IPC memory handle (cudaIpcMemHandle_t is 64 bytes). */
typedef struct tileops_ipc_handle {
	unsigned char bytes[64];
} tileops_ipc_handle;

/*
 * Export a tensor's device memory so a process with its own CUDA context can
 * open it (cudaIpcOpenMemHandle). A handle names a whole device allocation,
 * which may hold more than this tensor (a view, or memory the daemon
 * sub-allocates): the tensor's bytes are [*offset, *offset + *bytes) of the
 * pointer cudaIpcOpenMemHandle gives. offset and bytes may be NULL. The
 * memory stays valid until the tensor (and every view of its memory) is
 * freed. An imported tensor cannot be exported again. TILEOPS_ERR_UNSUPPORTED
 * on the CPU backend.
 */
tileops_status tileops_tensor_export(tileops_client *c, tileops_tensor t, tileops_ipc_handle *out,
                                     size_t *offset, size_t *bytes);

/*
 * Wrap device memory another process exported (cudaIpcGetMemHandle of an
 * allocation's base) as a tensor of this session, without copying: the
 * tensor starts `offset` bytes into the allocation and may touch `bytes`
 * bytes from there (a framework's tensor inside a block of its caching
 * allocator: the block's handle, the tensor's offset in it, its size).
 * The daemon reads the allocation's size back and refuses, with
 * TILEOPS_ERR_RANGE, an offset + bytes beyond it; dtype x shape must fit in
 * bytes (TILEOPS_ERR_INVALID_ARGUMENT here otherwise). offset must be a
 * multiple of the dtype's size. The daemon opens each handle once (later
 * imports of it share the mapping). Freeing the tensor closes it; the
 * memory stays the exporter's. TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_tensor_import(tileops_client *c, const tileops_ipc_handle *h, size_t offset,
                                     size_t bytes, tileops_dtype dtype, int ndim,
                                     const int64_t *shape, tileops_tensor *out);

/* A CUDA IPC event handle (cudaIpcEventHandle_t is 64 bytes). */
typedef struct tileops_ipc_event {
	unsigned char bytes[64];
} tileops_ipc_event;

/*
 * Order the session's later work after the client's own CUDA work, on the
 * device, without a host sync: the client records an event it made with
 * cudaEventInterprocess | cudaEventDisableTiming on its stream, passes its
 * cudaIpcGetEventHandle here, and every op, plan run and copy this client
 * submits after the call (on either plane) waits for that record. Returns
 * once the wait is queued. TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_event_wait(tileops_client *c, const tileops_ipc_event *ev);

/*
 * The other way: the daemon records an event after everything this client
 * submitted before the call and writes its handle to *out; the client
 * opens it (cudaIpcOpenEventHandle) and waits on it (cudaStreamWaitEvent
 * or cudaEventSynchronize). A session records the same event each time, so
 * every call returns the same handle: open it once, and wait after each
 * call for the work before that call. Returns once the record is queued,
 * not when the work is done. TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_event_record(tileops_client *c, tileops_ipc_event *out);

/*
 * Events opened once: the per-step way to order with the client's CUDA
 * work (tileops_event_wait and tileops_event_record open, query or wait
 * over the control plane on every call; these go through the session's
 * shared-memory rings, like ops, so they pipeline with the ops around them).
 *
 * A registered event names a client's interprocess event (made with
 * cudaEventInterprocess | cudaEventDisableTiming) that the daemon opened
 * once. 0 is never a valid one.
 *
 * A client that orders its own kernels with the daemon's wants both
 * processes under one MPS server (TILEOPS_CAP_MPS in the server info): on
 * a GPU without it each hand-off waits for the GPU to switch between the
 * two processes' contexts, 0.2 to 0.4 ms on an H200 (docs/python.md,
 * "Running beside torch: MPS").
 */
typedef uint64_t tileops_event;

/* A pending asynchronous request (see tileops_op_submit). */
typedef struct tileops_completion tileops_completion;

/*
 * Register the client's interprocess event: the daemon opens its handle
 * (cudaIpcOpenEventHandle) once and keeps it open until
 * tileops_event_release or the session's end; *out gets its id. The client
 * promises that the event outlives the registration: CUDA requires of an
 * opened IPC event that the process that made it does not destroy it while
 * another has it open. Keeping it alive is what makes waiting on it again
 * safe: the daemon's opened event always names the same event, never a
 * later one that happens to reuse its handle's bytes. Record it again as
 * often as you like; each wait waits for its latest record before the
 * wait was submitted. A session holds at most 64 (TILEOPS_ERR_QUOTA).
 * A round trip to the daemon: call it once, not every step.
 * TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_event_register(tileops_client *c, const tileops_ipc_event *ev,
                                      tileops_event *out);

/*
 * Close a registered event in the daemon, in order after what the client
 * submitted before (waits already queued on it stay queued). After it
 * returns the client may destroy its event. TILEOPS_ERR_UNKNOWN_HANDLE for
 * an id this session does not hold.
 */
tileops_status tileops_event_release(tileops_client *c, tileops_event e);

/*
 * Every op, plan run and copy this client submits after the call waits, on
 * the device, for the latest record of registered event e (the client
 * records it on its stream before this call). Submitted like
 * tileops_op_submit: *out is a completion that reports TILEOPS_OK once the
 * wait is queued, or the refusal (TILEOPS_ERR_UNKNOWN_HANDLE for an id this
 * session does not hold, TILEOPS_ERR_UNSUPPORTED on the CPU backend). No
 * round trip when the session has rings: wait for the completion whenever
 * convenient (a later one finishing means this one has too).
 */
tileops_status tileops_event_wait_submit(tileops_client *c, tileops_event e,
                                         tileops_completion **out);

/*
 * The handle of the session's own interprocess event, made once per
 * session (the event tileops_event_record records): the client opens it
 * once (cudaIpcOpenEventHandle) and keeps it for the session's life. A
 * round trip: call it once. Every call returns the same handle.
 * TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_event_export(tileops_client *c, tileops_ipc_event *out);

/*
 * Record the session's own event again, after everything this client
 * submitted before the call. Submitted like tileops_op_submit (through the
 * rings when the session has them: no round trip); the completion finishes
 * once the daemon has queued the record on the device. Only then may the
 * client wait on the event (cudaStreamWaitEvent): waiting before it would
 * wait for the previous record. So: submit, wait for the completion (a spin
 * on shared memory that ends as soon as the daemon has launched the work
 * before it), then cudaStreamWaitEvent. tileops_event_export must have been
 * called once before (TILEOPS_ERR_INVALID_ARGUMENT otherwise).
 * TILEOPS_ERR_UNSUPPORTED on the CPU backend.
 */
tileops_status tileops_event_record_submit(tileops_client *c, tileops_completion **out);

/* ---- ops -------------------------------------------------------------- */

typedef enum tileops_param_kind {
	TILEOPS_PARAM_INT = 1,
	TILEOPS_PARAM_FLOAT = 2,
	TILEOPS_PARAM_BOOL = 3
} tileops_param_kind;

/* A named op param. The name is copied; it need not outlive the call. */
typedef struct tileops_param {
	const char *name;
	tileops_param_kind kind;
	union {
		int64_t i;
		double f;
		int b;
	} v;
} tileops_param;

static inline tileops_param tileops_param_int(const char *name, int64_t v)
{
	tileops_param p;
	p.name = name;
	p.kind = TILEOPS_PARAM_INT;
	p.v.i = v;
	return p;
}

static inline tileops_param tileops_param_float(const char *name, double v)
{
	tileops_param p;
	p.name = name;
	p.kind = TILEOPS_PARAM_FLOAT;
	p.v.f = v;
	return p;
}

static inline tileops_param tileops_param_bool(const char *name, int v)
{
	tileops_param p;
	p.name = name;
	p.kind = TILEOPS_PARAM_BOOL;
	p.v.b = v ? 1 : 0;
	return p;
}

/*
 * Everything one op invocation names. Arrays need only outlive the call.
 * Inputs and outputs are in the order the op declares them (docs/ops.md).
 * Trailing optional tensors may be omitted (a shorter array); an optional
 * tensor followed by one that is given is left out with the handle 0 (gemm
 * with a residual but no bias: inputs {a, b, 0, residual}).
 */
typedef struct tileops_op {
	const char *name; /* e.g. "rms_norm" (docs/ops.md lists them) */
	const tileops_tensor *inputs;
	size_t n_inputs;
	const tileops_tensor *outputs;
	size_t n_outputs;
	const tileops_param *params;
	size_t n_params;
} tileops_op;

/*
 * Run an op. Returns once the daemon has validated the request and
 * launched it in this session's order: queued on the device behind the
 * session's earlier work, not run, on every backend (the CPU backend
 * queues it for its own threads as a GPU does). A validation failure, or
 * a launch the device refuses, is returned here with its message; a
 * kernel that fails once it runs (on the CPU backend, every kernel
 * failure) is reported by the next tileops_sync, tensor read or tensor
 * write. Use tileops_sync or a read to wait for the result.
 */
tileops_status tileops_op_run(tileops_client *c, const tileops_op *op);

/* tileops_completion (declared above): free with tileops_completion_free. */

/*
 * Submit an op without waiting for the daemon's answer. On success *out is
 * a completion that reports the op's status (what tileops_op_run would have
 * returned). If submission fails, *out is NULL and nothing was sent.
 * At most 256 completions may be outstanding per client; beyond that this
 * call waits for the oldest to finish.
 */
tileops_status tileops_op_submit(tileops_client *c, const tileops_op *op, tileops_completion **out);

/*
 * Like tileops_op_submit, and also measure the op's time on the device.
 * The completion then finishes when the op has finished on the device (not
 * merely been launched), so waiting for it also waits for the op; read the
 * time with tileops_completion_gpu_us. Measuring costs a little device and
 * host time per op: use it for profiling, not on every op. Ops that cannot
 * go through the session's shared-memory rings (see docs/protocol.md) run
 * as with tileops_op_submit and report no time.
 */
tileops_status tileops_op_submit_timed(tileops_client *c, const tileops_op *op,
                                       tileops_completion **out);

/*
 * The device time, in microseconds, of an op submitted with
 * tileops_op_submit_timed, from the start to the end of its kernels as the
 * device measured them (CPU time on the CPU backend). Never waits:
 * TILEOPS_IN_PROGRESS while the op is pending; the op's own status if it
 * failed; TILEOPS_ERR_UNSUPPORTED if no time was measured (not submitted
 * timed, or it went over nng). *us is written only on TILEOPS_OK.
 */
tileops_status tileops_completion_gpu_us(tileops_completion *cp, double *us);

/*
 * Wait for a completion. timeout_ms < 0 waits without limit; on time-out
 * TILEOPS_IN_PROGRESS is returned and the completion is still pending.
 * Otherwise returns the request's status, and tileops_last_error() its
 * message on failure. May be called again; it returns the same status.
 */
tileops_status tileops_completion_wait(tileops_completion *cp, int timeout_ms);

/* tileops_completion_wait with a zero timeout. */
tileops_status tileops_completion_poll(tileops_completion *cp);

/* Free a completion, waiting for it first if it is still pending. */
void tileops_completion_free(tileops_completion *cp);

/*
 * Wait until every request this client submitted before the call has
 * finished on the device. Reports the first device error since the last
 * sync, if any (a kernel that failed after its launch returned): the sync
 * after that one does not report it again.
 */
tileops_status tileops_sync(tileops_client *c);

/* ---- profiling: where a request's time goes ---------------------------- */

/* What a traced request was. */
typedef enum tileops_trace_kind {
	TILEOPS_TRACE_OP = 1,   /* tileops_op_run or tileops_op_submit(_timed) */
	TILEOPS_TRACE_PLAN = 2, /* tileops_plan_run or tileops_plan_submit */
	TILEOPS_TRACE_SYNC = 3  /* tileops_sync */
} tileops_trace_kind;

/*
 * One request's trip, in CLOCK_MONOTONIC nanoseconds (one clock for every
 * process of the host). In order: this library published it; the
 * daemon's executor thread took it; its launch returned (a sync: its fence
 * was placed); the daemon posted its completion (for a sync or a timed
 * op, once the device had finished); this library read that completion
 * (after waking, if the waiter slept). The daemon's three are 0 when the
 * request failed (its status is in `status`).
 */
typedef struct tileops_trace {
	tileops_trace_kind kind;
	tileops_status status;
	int executor; /* the daemon's executor thread; -1 when not known */
	int64_t submit_ns, taken_ns, launched_ns, posted_ns, woke_ns;
} tileops_trace;

/*
 * Start tracing this client's requests: from now on every op run, plan
 * run and sync that goes through the session's shared-memory rings (see
 * docs/protocol.md) asks the daemon for its stamps, and its trace is kept,
 * up to `capacity` traces (later ones are dropped until some are read).
 * Tracing costs a few clock reads per request on each side. capacity 0
 * stops tracing and drops what was kept. Calling it again starts afresh.
 * TILEOPS_ERR_UNSUPPORTED when the session has no rings. Any thread.
 */
tileops_status tileops_trace_start(tileops_client *c, size_t capacity);

/*
 * Move up to `max` kept traces, oldest first, into out; *n gets how many.
 * Traces appear once their completion has been read (by a wait, a sync, or
 * the library making room). Any thread.
 */
tileops_status tileops_trace_read(tileops_client *c, tileops_trace *out, size_t max, size_t *n);

/* ---- plans ------------------------------------------------------------ */

/*
 * A plan is a sequence of ops over tensors of this client that the daemon
 * checks once, captures once per shape bucket (a CUDA graph on the GPU, a
 * recorded op list on the CPU) and replays in one request. Captured graphs
 * live in the tenant's graph cache (tileops_connect_options.tenant): when
 * the cache is full the tenant's least recently used graph is dropped and
 * captured again when needed; another tenant's graphs are never touched.
 *
 * A plan's ops may be on several devices, and it may hold collectives (a
 * tensor-parallel layer in one plan): each device's ops between two
 * collectives are captured as one graph on that device, the collectives
 * are queued at every run in their place, and each device's ops keep their
 * order (docs/plans.md, "Plans over several devices").
 */
typedef struct tileops_plan tileops_plan;

typedef struct tileops_plan_options {
	/* Shape buckets over dim 0 of the `bucketed` tensors, ascending, e.g.
	 * 1 2 4 8 16 32 64 128. Those tensors have dim 0 equal to the largest
	 * bucket. A run of size n replays the smallest bucket >= n, which sees
	 * dim 0 of each bucketed tensor as that bucket (rows past n are computed
	 * on whatever they hold: use buckets with ops that treat rows apart). */
	const int64_t *buckets;
	size_t n_buckets;
	const tileops_tensor *bucketed;
	size_t n_bucketed;
	/* Shown in the daemon's logs and stats. */
	const char *name;
} tileops_plan_options;

/*
 * Start a plan (opts may be NULL: no buckets). Nothing is sent until
 * tileops_plan_end. On success *out owns the plan; free it with
 * tileops_plan_free.
 */
tileops_status tileops_plan_begin(tileops_client *c, const tileops_plan_options *opts,
                                  tileops_plan **out);

/* Append an op (copied; its arrays need only outlive the call). */
tileops_status tileops_plan_add(tileops_plan *p, const tileops_op *op);

/*
 * Send the plan. The daemon checks every op, for every bucket, as
 * tileops_op_run would; a failure names the op's index and the bucket, and
 * the plan stays unsent (it may be freed).
 */
tileops_status tileops_plan_end(tileops_plan *p);

/* Use `tensor` wherever the plan names `plan_tensor` (same dtype, shape and
 * device: a tensor on another device is refused with
 * TILEOPS_ERR_INVALID_ARGUMENT, naming both). */
typedef struct tileops_binding {
	tileops_tensor plan_tensor;
	tileops_tensor tensor;
} tileops_binding;

/*
 * Replay the plan for `size` rows along the bucketed dim (0: the largest
 * bucket). Bindings, when given, replace the plan's tensors for this run and
 * later ones; the daemon updates the captured graph rather than capturing
 * again. Returns once launched, like tileops_op_run; ordered with every
 * other request of the client.
 */
tileops_status tileops_plan_run(tileops_plan *p, int64_t size, const tileops_binding *bindings,
                                size_t n_bindings);

/* tileops_plan_run without waiting for the answer (see tileops_op_submit). */
tileops_status tileops_plan_submit(tileops_plan *p, int64_t size, const tileops_binding *bindings,
                                   size_t n_bindings, tileops_completion **out);

/*
 * Open a plan the daemon captured at start from its warm-up file, by name.
 * Only sessions of the plan's tenant may open it. The plan's tensors belong
 * to the daemon: find them with tileops_plan_tensor and bind your own tensors
 * in their place on every run (bindings of a warm-up plan last one run).
 * Free it with tileops_plan_free, which frees only the local handle.
 */
tileops_status tileops_plan_open(tileops_client *c, const char *name, tileops_plan **out);

/*
 * A warm-up plan's tensor by the name its warm-up file gives it: its handle
 * (to name in a tileops_binding), dtype and shape (shape: TILEOPS_MAX_DIMS
 * entries; any out-parameter may be NULL). TILEOPS_ERR_INVALID_ARGUMENT for
 * an unknown name or a plan not opened with tileops_plan_open.
 */
tileops_status tileops_plan_tensor(const tileops_plan *p, const char *name, tileops_tensor *handle,
                                   tileops_dtype *dtype, int *ndim, int64_t *shape);

/* Free the plan and its graphs in the daemon. NULL is a no-op. */
void tileops_plan_free(tileops_plan *p);

/*
 * Drop every tenant's cached graphs in the daemon (plans stay and are
 * captured again when run). For test isolation; allowed to the daemon's
 * own uid, root and the configured admin_group (TILEOPS_ERR_PERMISSION
 * otherwise).
 */
tileops_status tileops_admin_reset(tileops_client *c);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_H */
