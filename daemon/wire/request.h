/*
 * request.h - a client's request as the executor runs it, whichever plane
 * it came by.
 *
 * The transport decodes a control-plane message (wire_decode, a protobuf
 * tileops.Request) and the executor a ring entry (wire_decode_sqe_op and
 * wire_decode_sqe_plan_run, the binary descriptors of proto/tileops_ring.h)
 * into these structs, so everything below this layer sees one form of an
 * op, a plan and a run, with every count and name length already bounded,
 * and never a wire type.
 *
 * Ownership: a request owns what it points to (a plan_def); request_free
 * releases it. An op_desc holds its strings itself, so it can live on the
 * stack and be copied.
 */
#ifndef TILEOPSD_REQUEST_H
#define TILEOPSD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "tileops_codes.h"
#include "tileops_kernels.h"

/* Longest names, with their NUL (the ring descriptors' sizes). */
#define OP_NAME_BYTES 64
#define PARAM_NAME_BYTES 32

/* One op: its name, tensor handles (0 leaves an optional tensor out) and
 * params, as the client sent them; nothing checked against the manifest. */
typedef struct op_desc {
	char op[OP_NAME_BYTES];
	int n_in, n_out, n_params;
	uint64_t in[TK_MAX_INPUTS];
	uint64_t out[TK_MAX_OUTPUTS];
	char param_names[TK_MAX_PARAMS][PARAM_NAME_BYTES];
	tk_param params[TK_MAX_PARAMS];
} op_desc;

#define PLAN_MAX_OPS 4096
#define PLAN_MAX_BUCKETS 32
#define PLAN_MAX_BUCKETED 65536
#define PLAN_MAX_BINDINGS 64

/* A plan's definition: its ops and its shape buckets. */
typedef struct plan_def {
	char name[64];
	int n_ops;
	op_desc *ops; /* n_ops, owned */
	int n_buckets;
	int64_t buckets[PLAN_MAX_BUCKETS];
	int n_bucketed;     /* tensors whose dim 0 follows the bucket */
	uint64_t *bucketed; /* n_bucketed, owned */
} plan_def;

typedef struct plan_binding {
	uint64_t plan_tensor; /* a tensor the plan names */
	uint64_t tensor;      /* the tensor to use in its place */
} plan_binding;

/* One run of a plan. */
typedef struct plan_run_desc {
	uint64_t plan;
	int64_t size; /* picks the smallest bucket that holds it; 0: the largest */
	int n_bindings;
	plan_binding bindings[PLAN_MAX_BINDINGS];
} plan_run_desc;

typedef enum request_kind {
	REQ_TENSOR_CREATE,
	REQ_TENSOR_IMPORT,
	REQ_TENSOR_FREE,
	REQ_TENSOR_WRITE,
	REQ_TENSOR_READ,
	REQ_TENSOR_EXPORT,
	REQ_OP_RUN,
	REQ_SYNC,
	REQ_PLAN_CREATE,
	REQ_PLAN_RUN,
	REQ_PLAN_FREE,
	REQ_PLAN_OPEN,
	REQ_TENSOR_VIEW,
	REQ_EVENT_WAIT,
	REQ_EVENT_RECORD,
	REQ_EVENT_REGISTER,      /* u.event: the client's handle */
	REQ_EVENT_RELEASE,       /* u.handle: the registered event's id */
	REQ_EVENT_WAIT_ID,       /* u.handle: the registered event's id */
	REQ_EVENT_EXPORT,        /* the session's event's handle */
	REQ_EVENT_RECORD_EXPORT, /* record the session's event again */
	REQ_TENSOR_COPY          /* u.pair: dst <- src */
} request_kind;

/* A tensor's dtype and shape as the client asked for them (unchecked). */
typedef struct tensor_spec {
	int dtype;
	int ndim;
	int64_t shape[TK_MAX_DIMS];
} tensor_spec;

typedef struct request {
	request_kind kind;
	uint64_t seq;
	uint64_t ring_mark; /* run after the session's ring entries up to here */
	union {
		struct { /* TENSOR_CREATE, TENSOR_IMPORT */
			tensor_spec spec;
			uint32_t device;       /* CREATE: the device's index (unchecked) */
			unsigned char ipc[64]; /* IMPORT: the exporter's handle */
			uint64_t offset; /* IMPORT: where the tensor starts in the allocation */
			uint64_t bytes;  /* IMPORT: what it may touch from there (0: its size) */
		} tensor;
		struct { /* TENSOR_VIEW */
			tensor_spec spec;
			uint64_t base;
			uint64_t byte_offset;
			int has_strides; /* else packed row-major */
			int64_t strides[TK_MAX_DIMS];
		} view;
		unsigned char event
		        [64]; /* EVENT_WAIT, EVENT_REGISTER: the client's cudaIpcEventHandle_t */
		struct {      /* TENSOR_WRITE, TENSOR_READ */
			uint64_t handle, tensor_offset, arena_offset, length;
		} copy;
		uint64_t
		        handle; /* TENSOR_FREE, TENSOR_EXPORT, PLAN_FREE, EVENT_RELEASE, EVENT_WAIT_ID */
		struct {        /* TENSOR_COPY */
			uint64_t dst, src;
		} pair;
		op_desc op;        /* OP_RUN */
		plan_def *plan;    /* PLAN_CREATE (owned) */
		plan_run_desc run; /* PLAN_RUN */
		char name[64];     /* PLAN_OPEN */
	} u;
} request;

/* Free what r owns (not r itself). NULL is a no-op. */
void request_clear(request *r);
/* request_clear, then free(r). */
void request_free(request *r);
/* Free a plan_def and its ops. NULL is a no-op. */
void plan_def_free(plan_def *d);

/* The name of a request kind, for messages ("tensor_create", ...). */
const char *request_kind_name(request_kind k);

#endif /* TILEOPSD_REQUEST_H */
