/*
 * parity.h - the parity harness: an op's CUDA launcher against its CPU
 * reference on the same fresh random inputs.
 *
 * A case is a request as a client would send it: the op, the shapes of the
 * inputs it gives, its params and the first input's dtype. Cases come from
 * the manifest's workloads (every implemented op of a family, every
 * workload, every dtype the workload lists), scaled down so that the CPU
 * reference runs in a fraction of a second, and from each family's own
 * special cases (odd widths, row strides, broadcasting, NaNs, empty
 * tensors). The op layer checks every case as it checks a request and
 * builds the kernel call (tk_call) from it; the output shapes come from
 * the op's own formulas.
 *
 * A run of a case: every buffer is filled with NaN bytes (0xff), padding
 * included; the inputs' logical elements get random values from a seed
 * (within the op's domain; indices, lengths, offsets, slots, block tables
 * and given scales valid but varied, tools/workload/workload_inputs.h);
 * the CPU reference and
 * the CUDA launcher (with the workspace the table entry declares, and
 * again without it) run on the same inputs; every tensor the op writes
 * (outputs, and inputs it updates in place) is compared under the
 * tolerance of its dtype (parity_tolerance) and must keep the bytes
 * outside its elements. A failure names the op, the case, the dtype, the
 * tensor, the error, the largest element error and where it is, the
 * tolerance and the seed; TILEOPS_TEST_SEED=<seed> reruns with it.
 */
#ifndef TILEOPS_TEST_PARITY_H
#define TILEOPS_TEST_PARITY_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "oplayer.h"
#include "tileops_kernels.h"

#define PARITY_MAX_T MANIFEST_MAX_TENSORS
#define PARITY_MAX_RANGES 4

typedef struct parity_run parity_run;

/* One case: a request, and how its buffers are laid out and filled. */
typedef struct parity_case {
	const manifest_op *op;
	char label[160];      /* the workload's label, or what the special case is */
	int workload;         /* index into op->workloads; -1 for a special case */
	manifest_workload w;  /* the inputs given (shapes) and params, as sent */
	manifest_workload w0; /* the workload before scaling */
	tk_dtype dt;          /* the first input's dtype; others follow their rules */
	/* By manifest index (inputs, then outputs); TK_DTYPE_INVALID: the rule's. */
	tk_dtype dtype[PARITY_MAX_T];
	/* Set after the op layer's checks: a dtype the kernel takes that the
	 * manifest does not offer (fp8 codes written as u8). */
	tk_dtype retype[PARITY_MAX_T];
	int64_t pad;       /* extra elements after every row of every tensor of rank >= 2 */
	uint32_t misalign; /* bit i: input i viewed one element past an aligned base */
	struct {
		int tensor; /* manifest index; -1: every float input */
		double lo, hi;
	} range[PARITY_MAX_RANGES];
	int n_range;
	double rel_tol; /* > 0: this tolerance for float outputs instead of the rules' */
	int exact;      /* every written tensor bit for bit (NaNs as NaNs) */
	/* After the inputs are generated: plants values the case is about (NaNs,
	 * masks, positions outside a cache); arg is the case's own. */
	void (*plant)(parity_run *r, uint64_t *rng);
	/* After the CPU reference ran: checks of what the case is about (that a
	 * planted NaN reached the output); asserts itself. */
	void (*verify)(const parity_run *r);
	double arg;
	char scaling[512]; /* how the workload was scaled, for the test output */
} parity_case;

/* A prepared case: host tensors laid out and filled, the call built. */
struct parity_run {
	const parity_case *c;
	const tk_kernel_entry *entry;
	tk_call call;                   /* the host call, as the op layer built it */
	tk_tensor t[PARITY_MAX_T];      /* by manifest index; data NULL when not given */
	tk_param params[TK_MAX_PARAMS]; /* by manifest index: the case's, else the defaults */
	void *base[PARITY_MAX_T];       /* the allocations (misaligned views start past them) */
	size_t alloc[PARITY_MAX_T];
	size_t offset[PARITY_MAX_T]; /* bytes from base to data */
	int given[PARITY_MAX_T];
	int written[PARITY_MAX_T]; /* manifest indices: outputs, then inputs updated in place */
	int n_written;
	unsigned char *before[PARITY_MAX_T]; /* by written index: the bytes before a run */
	uint64_t seed;
};

/* How a written tensor must match: bit for bit, or within an error. */
typedef struct parity_tol {
	int exact;
	double rel; /* norm-wise ||got - want|| / ||want|| at most this */
	double abs; /* > 0: instead, every element within this of the reference */
} parity_tol;

/* Per-op knowledge the generic parts cannot have (parity_rules.c). */
typedef struct parity_rule {
	const char *op;
	/* Why the op has no parity to check (it fails on purpose); NULL for all others. */
	const char *skip;
	/* Bring a workload within the CPU budget; NULL: parity_scale_generic. */
	int (*scale)(parity_case *c, char *err, size_t errlen);
	double lo, hi; /* float inputs' range (the op's domain); lo == hi: [-3, 3] */
	void (*range)(int input, double *lo, double *hi);   /* when inputs differ */
	int exact;                                          /* every written tensor bit for bit */
	parity_tol (*tol)(const parity_run *r, int tensor); /* NULL: by dtype */
} parity_rule;

/* ---- the manifest and cases ------------------------------------------------------ */

/* The manifest ($TILEOPS_MANIFEST, else the source tree's), loaded once per process. */
const manifest *parity_manifest(void);

/* A zeroed case of `op` (which must be in the manifest) for a special case. */
void parity_special(parity_case *c, const char *op, tk_dtype dt, const char *what);
/* Give input `name` the shape dims[0..ndim). */
void parity_shape(parity_case *c, const char *name, int ndim, const int64_t *dims);
void parity_param_int(parity_case *c, const char *name, int64_t v);
void parity_param_float(parity_case *c, const char *name, double v);
void parity_param_bool(parity_case *c, const char *name, int v);
/* Draw tensor `name`'s values (NULL: every float input's) from [lo, hi]. */
void parity_range(parity_case *c, const char *name, double lo, double hi);
/* Tensor `name` gets dtype dt (before the op layer's checks). */
void parity_dtype(parity_case *c, const char *name, tk_dtype dt);
/* Output or input `name` gets dtype dt after the op layer's checks. */
void parity_retype(parity_case *c, const char *name, tk_dtype dt);
/* Manifest index of tensor `name` of c's op, or -1. */
int parity_tensor_index(const parity_case *c, const char *name);

/* Make and check one special case of a row-reading op: x [rows, width], rows padded by pad. */
typedef void (*parity_row_fn)(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                              int variant);
/*
 * The row shapes every row-reading op runs on, through one(), in f32, f16
 * and bf16 and each variant below `variants`: 7 rows of widths 1, 3, 17,
 * 1000, 4097 and 8192, and 5 of each padded by 3; one row of 4096 (decode)
 * and of 4095; 3000 narrow rows; 40 aligned padded rows of 7168; 1100 rows
 * of 4096 (the shapes for many rows); 3 of 16384 (the widest rows held in
 * registers); 2 of 20000 (past them: the streaming kernels); 2 of 262144
 * (the widest supported row).
 */
void parity_row_cases(const char *op, int variants, parity_row_fn one);

/*
 * Workload `wi` of op at dtype dt, scaled within the CPU budget (the op's
 * rule, or parity_scale_generic). Returns 0, or -1 with a message.
 */
int parity_from_workload(parity_case *c, const manifest_op *op, int wi, tk_dtype dt, char *err,
                         size_t errlen);

/* ---- scaling helpers (parity_scale.c) -------------------------------------------- */

/* Most elements of one tensor and flops (the op's roofline) of a scaled workload. */
#define PARITY_MAX_ELEMS ((int64_t)1 << 20)
#define PARITY_MAX_FLOPS ((double)(1 << 27))

/*
 * Halve the workload's sizes until every tensor holds at most max_elems
 * elements and the op's roofline counts at most max_flops: the largest
 * size first (of the inputs over the element budget, when the flops are
 * within theirs), one size at a time, every dim that has that size in the
 * manifest together, and only dims the op layer still accepts halved
 * (a step that breaks a rule is not taken). Last dims of tensors of rank
 * 2 or more are kept: they are the row length, head dim or hidden size
 * the kernels are shaped for. Returns 0, or -1 when the budget cannot be
 * met that way (the op then needs a scale rule of its own).
 */
int parity_scale_generic(parity_case *c, int64_t max_elems, double max_flops, char *err,
                         size_t errlen);
/* Dim d of input `name` (negative counts from the end), or -1 when not given. */
int64_t parity_dim(const parity_case *c, const char *name, int d);
void parity_set_dim(parity_case *c, const char *name, int d, int64_t v);
/* A param's value as given, or its default (0 if it has neither). */
double parity_param_num(const parity_case *c, const char *name);
/* Flops of the case by the op's roofline, or -1 when the op layer refuses it. */
double parity_flops(const parity_case *c, char *err, size_t errlen);
/* Elements of the largest tensor (inputs and outputs), or -1 when refused. */
int64_t parity_max_elems(const parity_case *c, char *err, size_t errlen);
/* Elements of every tensor, by manifest index (0 when not given); 0 or -1. */
int parity_elems(const parity_case *c, int64_t *elems, char *err, size_t errlen);

/* ---- running ------------------------------------------------------------------------ */

/* The rule of `op` (a default one when the op needs nothing special). */
const parity_rule *parity_rule_of(const char *op);
/* The tolerance written tensor `tensor` (manifest index) is held to. */
parity_tol parity_tolerance(const parity_run *r, int tensor);
/* Float input `input`'s range. */
void parity_input_range(const parity_case *c, int input, double *lo, double *hi);

/* A seed: $TILEOPS_TEST_SEED when set, else a fresh one from the clock. */
uint64_t parity_seed(void);

/*
 * Check c with the op layer (for the CUDA backend when cuda), lay out and
 * fill its tensors from seed, and snapshot what the op writes. Returns
 * TILEOPS_OK, TILEOPS_ERR_UNSUPPORTED when the backend has no kernel that
 * accepts the case (the message says which conditions), or another error.
 */
tileops_status parity_prepare(parity_run *r, const parity_case *c, int cuda, uint64_t seed,
                              char *err, size_t errlen);
void parity_free(parity_run *r);

/* Tensor `name` of r's op, or NULL when the case does not give it. */
tk_tensor *parity_tensor(parity_run *r, const char *name);

/*
 * Compare written tensor k of r (the reference, after the CPU ran) with
 * `got`, bytes laid out as the reference's. Returns 1 when it matches
 * under its tolerance; writes a one-line report either way ("out bf16:
 * rel 0.0031, max |err| 0.02 at [3, 17] (got .., want ..); tolerance rel
 * 0.016", and for a mismatch of NaNs or infinities where the first is).
 */
int parity_compare(const parity_run *r, int k, const unsigned char *got, char *msg, size_t msglen);
/* 1 when every byte of written tensor k outside its elements equals before. */
int parity_padding_kept(const parity_run *r, int k, const unsigned char *got);

/* "silu 'llama3.1-8b mlp decode' bf16"; a special case adds its shapes and pad. */
void parity_name(const parity_case *c, char *buf, size_t len);
/* Append a line to $TILEOPS_TEST_LOG when it is set. */
void parity_log(const char *line);

/*
 * The whole check of one case: the CPU reference against the CUDA launcher
 * (parity_gpu.c, GPU binaries only), every failure an expectation that
 * names the case. Returns 0 when no CUDA kernel accepts the case (the
 * manifest's conditions; a special case then fails), else 1.
 * parity_check_cpu: the CPU reference alone, its outputs checked finite
 * (the smoke self-check, parity_selfcheck.c).
 */
int parity_check(parity_case *c);
int parity_check_cpu(parity_case *c);

/* ---- the manifest's workloads as parameterized tests -------------------------------- */

/* One (op, workload, dtype) of a family. */
typedef struct parity_param {
	char op[64];
	int workload;
	int dtype;
	char error[256]; /* set when the cases could not be listed */
} parity_param;

/* Every implemented op's workloads and dtypes in `family` (NULL: every family). */
struct criterion_test_params parity_params(const char *family);
/*
 * Run one of them with `check` (parity_check, or parity_check_cpu); a case
 * no CUDA kernel accepts is skipped, saying why.
 */
void parity_param_run(const parity_param *p, int (*check)(parity_case *c));

/*
 * The workload test of a family's parity binary: one parameterized test,
 * one instance per (op, workload, dtype), each naming them in its output.
 */
#define PARITY_WORKLOAD_TESTS(family)                                           \
	ParameterizedTestParameters(parity_##family, manifest_workloads)        \
	{                                                                       \
		return parity_params(#family);                                  \
	}                                                                       \
	ParameterizedTest(parity_param *p, parity_##family, manifest_workloads) \
	{                                                                       \
		parity_param_run(p, parity_check);                              \
	}

#endif /* TILEOPS_TEST_PARITY_H */
