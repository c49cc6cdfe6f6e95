/*
 * tune.h - what the parts of tileops-tune share: one job (a shape class of
 * one tunable op to measure), the run's options, and the two ways a job is
 * measured: the GEMM's (tune_gemm.c, tk_gemm_tune_sets over rotated input
 * sets) and every other family's, through the choice API (tune_choices.c).
 */
#ifndef TILEOPS_TUNE_H
#define TILEOPS_TUNE_H

#include <stdio.h>

#include "tileops_kernels.h"
#include "tuning.h"

typedef struct tune_job {
	const tk_kernel_entry *entry; /* the op's kernel, with its tuning interface */
	char cls[TK_TUNING_TEXT_MAX];
	char label[128];
	/* The call's shapes and params; data is set on the device (for gemm and
	 * bmm also described by the fields below). */
	tk_call call;
	tk_dtype dt;
	int trans_b;
	int64_t batch, m, n, k; /* gemm and bmm */
} tune_job;

typedef struct tune_options {
	const char *manifest, *out, *op, *trace;
	double budget_ms, time_limit_s;
	int list, pdl;
} tune_options;

/* What measuring a job gives: the winner and its median time per call. */
typedef struct tune_result {
	tk_choice best;
	double us;
	int candidates; /* how many were timed */
	int sets;       /* input sets the calls rotated over */
} tune_result;

/*
 * Measure one job on stream s. 0 and *r; 1 when the job could not be
 * measured (err says why); -1 when the device is unusable. Every
 * candidate's time goes to trace when it is not NULL ("family | class |
 * choice | us", or "refused").
 */
int tune_gemm_job(const tune_job *j, const tune_options *o, void *stream, FILE *trace,
                  tune_result *r, char *err, size_t errlen);
int tune_choices_job(const tune_job *j, const tune_options *o, void *stream, FILE *trace,
                     tune_result *r, char *err, size_t errlen);

/* One trace line: "family | class | choice | us" (us <= 0: "refused"). trace may be NULL. */
void tune_trace_line(FILE *trace, const tune_job *j, const tk_choice *c, double us);

#endif
