/*
 * tileops_kernels.h - the L1 kernel interface.
 *
 * This is the one boundary between the daemon's op layer (L2) and the
 * kernels. L1 owns arithmetic on already-validated arguments: it never sees
 * the wire, sessions or the manifest. Every op has a plain-C CPU reference
 * (always built) and, when the build has CUDA, a CUDA launcher that enqueues
 * on a caller-given stream. Both take the same tk_call.
 *
 * Ownership: tensors' memory belongs to the caller. Kernels never allocate
 * device memory that outlives a call and never synchronize the stream.
 *
 * Thread safety: every function here may be called from any thread; the CUDA
 * launchers must be called on a thread where the intended device is current.
 */
#ifndef TILEOPS_KERNELS_H
#define TILEOPS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "tileops_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_MAX_DIMS 8
#define TK_MAX_INPUTS 8
#define TK_MAX_OUTPUTS 4
#define TK_MAX_PARAMS 16

/* Element types: the values of proto/tileops_codes.h (the wire's too). */
typedef enum tk_dtype {
	TK_DTYPE_INVALID = 0,
#define TK_DTYPE_ENUM(name, value, text, bytes) TK_##name = value,
	TILEOPS_DTYPE_LIST(TK_DTYPE_ENUM)
#undef TK_DTYPE_ENUM
	        TK_DTYPE_COUNT = TILEOPS_DTYPE_END
} tk_dtype;

/* Size in bytes of one element, 0 for an invalid dtype. */
size_t tk_dtype_size(tk_dtype dt);
/* Lower-case name ("f32", "bf16", ...), "invalid" for anything else. */
const char *tk_dtype_name(tk_dtype dt);
/* Parse a name as printed by tk_dtype_name; TK_DTYPE_INVALID if unknown. */
tk_dtype tk_dtype_parse(const char *name);

/*
 * A view of a tensor. Strides are in elements. The kernels in this project
 * require a contiguous last dimension (stride[ndim-1] == 1); outer strides
 * may be larger than the packed size (row strides). A 0-dimensional tensor
 * has ndim == 0 and one element.
 */
typedef struct tk_tensor {
	void *data;
	tk_dtype dtype;
	int ndim;
	int64_t shape[TK_MAX_DIMS];
	int64_t stride[TK_MAX_DIMS];
} tk_tensor;

/* Number of elements (product of shape; 1 for ndim == 0). */
int64_t tk_numel(const tk_tensor *t);
/* Fill stride[] for a packed row-major layout. */
void tk_set_contiguous(tk_tensor *t);
/* 1 when the tensor is packed row-major, else 0. */
int tk_is_contiguous(const tk_tensor *t);

typedef enum tk_param_kind {
	TK_PARAM_NONE = 0,
	TK_PARAM_INT = 1,
	TK_PARAM_FLOAT = 2,
	TK_PARAM_BOOL = 3
} tk_param_kind;

typedef struct tk_param {
	tk_param_kind kind;
	union {
		int64_t i;
		double f;
		int b;
	} v;
} tk_param;

/*
 * Device scratch a CUDA kernel may use to go faster (split-K partial sums,
 * split-KV partial outputs). Kernels whose table entry declares workspace
 * get up to this many bytes; every kernel still works without it.
 */
#define TK_WORKSPACE_BYTES ((size_t)32 << 20)

/*
 * One op invocation. Inputs, outputs and params are in the order the op
 * declares them (tk_kernel_entry.params names the params in order); the
 * op layer fills in defaults, so every declared param is present.
 *
 * An optional input the caller left out has data == NULL (and ndim 0);
 * inputs after it may still be present. n_in counts up to the last one
 * given.
 *
 * workspace, when not NULL, is workspace_bytes of device memory the kernel
 * owns for the duration of the launch (stream order): the caller never
 * hands the same workspace to two launches that may run at once.
 */
typedef struct tk_call {
	int n_in;
	int n_out;
	int n_params;
	tk_tensor in[TK_MAX_INPUTS];
	tk_tensor out[TK_MAX_OUTPUTS];
	tk_param params[TK_MAX_PARAMS];
	void *workspace;
	size_t workspace_bytes;
} tk_call;

/* 1 when input i was given (present and not left out). */
static inline int tk_has_input(const tk_call *call, int i)
{
	return i < call->n_in && call->in[i].data != NULL;
}

/*
 * Kernel status codes: a subset of the daemon's status codes, with their
 * values (proto/tileops_codes.h), so the op layer passes them on as they are.
 */
typedef enum tk_status {
	TK_OK = TILEOPS_CODE_OK,
	TK_ERR_UNSUPPORTED =
	        TILEOPS_CODE_ERR_UNSUPPORTED,         /* this kernel cannot serve these arguments */
	TK_ERR_LAUNCH = TILEOPS_CODE_ERR_BACKEND,     /* the device refused the launch */
	TK_ERR_NOMEM = TILEOPS_CODE_ERR_OUT_OF_MEMORY /* scratch memory could not be had */
} tk_status;

/*
 * A CPU reference. Runs to completion before it returns.
 */
typedef tk_status (*tk_cpu_fn)(const tk_call *call);

/*
 * A CUDA launcher. Enqueues on `stream` (a cudaStream_t) and returns without
 * waiting. Checks the launch error before it returns.
 */
typedef tk_status (*tk_cuda_fn)(const tk_call *call, void *stream);

/*
 * The central dispatch table entry. `params` is a NULL-terminated list of
 * the param names in the order the kernels read them from tk_call.params.
 */
typedef struct tk_kernel_entry {
	const char *op;
	int n_in;
	int n_out;
	const char *const *params;
	tk_cpu_fn cpu;
	tk_cuda_fn cuda;  /* NULL when the build has no CUDA kernel for it */
	size_t workspace; /* bytes of tk_call.workspace the CUDA kernel can use */
} tk_kernel_entry;

/* The table, and its length. Entries are sorted by op name. */
const tk_kernel_entry *tk_kernels(size_t *count);
/* The entry for `op`, or NULL. */
const tk_kernel_entry *tk_kernel_find(const char *op);
/* 1 when the CUDA kernels were compiled into this build. */
int tk_have_cuda(void);

/*
 * Programmatic dependent launch of the memory-bound CUDA kernels (the
 * elementwise, row, reduction, rope, pooling and fp8 kernels): each is
 * launched so that the kernel after it in a stream or graph starts while it
 * runs and waits on the device for its results, which hides a launch's
 * latency between dependent small kernels. On unless the environment holds
 * TILEOPS_PDL=0 when the first kernel is launched. tk_cuda_set_pdl sets it
 * for the launches that follow and returns the previous setting. Both are
 * 0 and do nothing in a build without CUDA.
 */
int tk_cuda_pdl(void);
int tk_cuda_set_pdl(int on);

/* Conversions used by the CPU references and tests (round to nearest even). */
float tk_f16_to_f32(uint16_t h);
uint16_t tk_f32_to_f16(float f);
float tk_bf16_to_f32(uint16_t h);
uint16_t tk_f32_to_bf16(float f);
float tk_fp8e4m3_to_f32(uint8_t v);
uint8_t tk_f32_to_fp8e4m3(float f);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_KERNELS_H */
