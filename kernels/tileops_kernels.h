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
 * device memory that outlives a call and never synchronize the stream
 * (the one exception is named: a tunable family's measure function, which
 * is not a launcher). They read no files and no environment: what is
 * policy (which configuration a call gets, PDL on or off) comes from the
 * caller, through tk_call.choice and tk_cuda_set_pdl.
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
 * A choice among the ways a tunable kernel can run one call (its tile
 * sizes, schedule, split count: what each field means is the family's, see
 * its tk_tuning). An empty choice (mode TK_CHOICE_NONE, as a zeroed tk_call
 * has) leaves the pick to the kernel's built-in rule; every kernel that is
 * not tunable ignores it.
 *
 *   TK_CHOICE_PREFER  run the choice where it can serve the call, else the
 *                     built-in rule (what the daemon's tuning table gives:
 *                     an entry measured on one call of a shape class may
 *                     not fit another of the class)
 *   TK_CHOICE_EXACT   run exactly the choice, or refuse with
 *                     TK_ERR_UNSUPPORTED (what a tuner, a bench or a test
 *                     asks when it times or checks one candidate)
 */
#define TK_CHOICE_FIELDS 7

typedef enum tk_choice_mode {
	TK_CHOICE_NONE = 0,
	TK_CHOICE_PREFER = 1,
	TK_CHOICE_EXACT = 2
} tk_choice_mode;

typedef struct tk_choice {
	int32_t mode; /* a tk_choice_mode */
	int32_t v[TK_CHOICE_FIELDS];
} tk_choice;

/* 1 when a and b name the same choice (their fields; the mode is not compared). */
static inline int tk_choice_same(const tk_choice *a, const tk_choice *b)
{
	for (int i = 0; i < TK_CHOICE_FIELDS; i++)
		if (a->v[i] != b->v[i])
			return 0;
	return 1;
}

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
 *
 * choice: how a tunable kernel runs this call (see tk_choice); a caller
 * that fills a tk_call field by field sets it (mode TK_CHOICE_NONE for the
 * built-in rule).
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
	tk_choice choice;
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
	        TILEOPS_CODE_ERR_UNSUPPORTED,     /* this kernel cannot serve these arguments */
	TK_ERR_LAUNCH = TILEOPS_CODE_ERR_BACKEND, /* the device refused the launch */
	TK_ERR_NOMEM = TILEOPS_CODE_ERR_OUT_OF_MEMORY, /* scratch memory could not be had */
	/* The device's state is lost: nothing more can run on it (a CPU
	 * reference standing for a device fault says so). Not a wire code:
	 * backends report TILEOPS_ERR_BACKEND and mark the device lost. */
	TK_ERR_FAULT = 1000
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
 * The tuning interface of a tunable kernel family (gemm and bmm, attention
 * prefill, attention decode). Policy is not the kernels': which choice a
 * call gets is decided above them (the daemon's tuning table, keyed by
 * family and shape class; docs/tuning.md). This says what there is to
 * choose from.
 *
 * family: the table's key for the ops that share it ("gemm" for gemm and
 * bmm). class_syntax and choice_syntax describe the two texts for messages.
 *
 * shape_class: the class of call (the table's key) into buf, as in
 * "bf16 nt m128 n2112 k7168"; 0, or -1 when the kernel cannot serve the
 * call, so nothing is to be chosen. Arithmetic on the call's shapes and
 * params only (never its data), so it may run anywhere.
 *
 * parse_class: check a class as written in a file and write it in the
 * form shape_class writes; 0, or -1 with what is wrong in why.
 *
 * format_choice / parse_choice: a choice as text ("sm90 m128 n256 k64 s4
 * c1 sk1", "turns", "splits 16") and back; parse_choice returns 0 or -1
 * and sets the mode to TK_CHOICE_PREFER.
 *
 * candidates: the choices that can serve call exactly (mode
 * TK_CHOICE_EXACT), distinct in what runs; writes up to max of them and
 * returns how many there are in all. NULL in a build without CUDA (they
 * depend on the device).
 *
 * measure: NULL unless the family has one (gemm). Times every candidate on
 * call's inputs, writing scratch outputs only (call's outputs, and an
 * input that aliases one, keep their bytes), and puts the fastest whose
 * output matches the family's reference kernel in *best (mode
 * TK_CHOICE_PREFER) with its median time per call in *us. stream (a
 * cudaStream_t; NULL: the legacy default stream, whose earlier work it
 * waits for, then times on a private stream) must not be capturing.
 * Without a workspace in call it allocates one of TK_WORKSPACE_BYTES, as a
 * launch gets. It waits for the device (it synchronizes the streams it
 * runs on) and takes tens of milliseconds to seconds: a caller's explicit
 * decision, never part of a launch.
 * budget_ms caps each candidate's timing (0: the family's default). err
 * says why it failed.
 */
typedef struct tk_tuning {
	const char *family;
	const char *class_syntax;
	const char *choice_syntax;
	int (*shape_class)(const tk_call *call, char *buf, size_t len);
	int (*parse_class)(const char *text, char *buf, size_t len, char *why, size_t whylen);
	int (*format_choice)(const tk_choice *c, char *buf, size_t len);
	int (*parse_choice)(const char *text, tk_choice *c);
	int (*candidates)(const tk_call *call, tk_choice *out, int max);
	tk_status (*measure)(const tk_call *call, void *stream, double budget_ms, tk_choice *best,
	                     double *us, char *err, size_t errlen);
} tk_tuning;

/* Longest shape class or choice text any family writes, with its NUL. */
#define TK_TUNING_TEXT_MAX 96

/*
 * The central dispatch table entry. `params` is a NULL-terminated list of
 * the param names in the order the kernels read them from tk_call.params.
 * tuning is NULL unless the op's cuda kernel is tunable (the manifest's
 * `tuning: true`); CPU-only builds have it too, without candidates.
 */
typedef struct tk_kernel_entry {
	const char *op;
	int n_in;
	int n_out;
	const char *const *params;
	tk_cpu_fn cpu;
	tk_cuda_fn cuda;  /* NULL when the build has no CUDA kernel for it */
	size_t workspace; /* bytes of tk_call.workspace the CUDA kernel can use */
	const tk_tuning *tuning;
} tk_kernel_entry;

/* The table, and its length. Entries are sorted by op name. */
const tk_kernel_entry *tk_kernels(size_t *count);
/* The entry for `op`, or NULL. */
const tk_kernel_entry *tk_kernel_find(const char *op);
/* 1 when the CUDA kernels were compiled into this build. */
int tk_have_cuda(void);

/*
 * Programmatic dependent launch of the memory-bound CUDA kernels (the
 * elementwise, row, reduction, rope, pooling and fp8 kernels), the GEMMs
 * and attention decode: each is launched so that the kernel after it in a
 * stream or graph starts while it runs and waits on the device for its
 * results, which hides a launch's latency between dependent small kernels.
 * On until tk_cuda_set_pdl(0); the setting is the process's (the daemon
 * sets it once at start from its config, `pdl`), read at every launch.
 * tk_cuda_set_pdl returns the previous setting. Both are 0 and do nothing
 * in a build without CUDA.
 */
int tk_cuda_pdl(void);
int tk_cuda_set_pdl(int on);

/*
 * The GPU `device` as the tuning table's header names it: "NVIDIA H200
 * sm=90" (its name as CUDA reports it and its compute capability).
 * TK_ERR_UNSUPPORTED, with "none" in buf, in a build without CUDA;
 * TK_ERR_LAUNCH when the device cannot be queried.
 */
tk_status tk_cuda_device_id(int device, char *buf, size_t len);

/* Conversions used by the CPU references and tests (round to nearest even). */
float tk_f16_to_f32(uint16_t h);
uint16_t tk_f32_to_f16(float f);
float tk_bf16_to_f32(uint16_t h);
uint16_t tk_f32_to_bf16(float f);
float tk_fp8e4m3_to_f32(uint8_t v);
uint8_t tk_f32_to_fp8e4m3(float f);

/* Element i of an f32, f16 or bf16 array as a float, and a float stored
 * there rounded to the dtype (any other dtype is read and written as f32). */
static inline float tk_load_float(const void *base, tk_dtype dt, int64_t i)
{
	switch (dt) {
	case TK_F16:
		return tk_f16_to_f32(((const uint16_t *)base)[i]);
	case TK_BF16:
		return tk_bf16_to_f32(((const uint16_t *)base)[i]);
	default:
		return ((const float *)base)[i];
	}
}

static inline void tk_store_float(void *base, tk_dtype dt, int64_t i, float v)
{
	switch (dt) {
	case TK_F16:
		((uint16_t *)base)[i] = tk_f32_to_f16(v);
		break;
	case TK_BF16:
		((uint16_t *)base)[i] = tk_f32_to_bf16(v);
		break;
	default:
		((float *)base)[i] = v;
		break;
	}
}

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_KERNELS_H */
