/*
 * tuning.h - the tuning table: which choice (tk_choice) each shape class of
 * each tunable kernel family gets, its file, and first-use tuning.
 *
 * The kernels say what can be chosen (tk_tuning in tileops_kernels.h); this
 * table says what was measured best on this GPU. The executor fills a
 * call's choice from it when it prepares an op (tuning_apply), and with
 * first-use tuning on, measures a class the table lacks the first time an
 * op of that class runs outside a capture (tuning_claim, tuning_measure).
 * docs/tuning.md is the manual: the file format, the families, first use.
 *
 * Entries are keyed by (family, shape class): "gemm" serves gemm and bmm,
 * "attention_prefill" both prefill ops, "attention_decode" both decode ops.
 * A placeholder entry (a class whose first-use tuning is under way or
 * failed) gives the built-in choice and is never saved.
 *
 * Thread safety: every function may be called from any thread at once,
 * except tuning_free (nothing else may use the table then) and
 * tuning_first_use (before the executor threads start).
 */
#ifndef TILEOPSD_TUNING_H
#define TILEOPSD_TUNING_H

#include <stddef.h>

#include "tileops_codes.h"
#include "tileops_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tuning tuning;

/* Longest family name, with its NUL. */
#define TUNING_FAMILY_MAX 32

/*
 * A new empty table for the GPU named `gpu` (as tk_cuda_device_id writes
 * it); NULL takes the entries of any file it loads and names no GPU when
 * saving unless a loaded file did. NULL when out of memory.
 */
tuning *tuning_new(const char *gpu);
/* NULL is a no-op. */
void tuning_free(tuning *t);

/*
 * Replace the entries with those of the file at path (docs/tuning.md: the
 * format written by tuning_save, or the GEMM-only format 1 of earlier
 * releases). A missing file leaves the table empty and is not an error.
 * Every line is checked, also in a file made on another GPU, whose entries
 * are then not taken. On success note holds "" or why the file's entries
 * were not taken; a malformed file fails with TILEOPS_ERR_INVALID_ARGUMENT
 * and "FILE:LINE: what is wrong" in note, leaving the table as it was.
 */
tileops_status tuning_load(tuning *t, const char *path, char *note, size_t len);

/* Read and check path as tuning_load would, without a table (--check). */
tileops_status tuning_check(const char *path, char *err, size_t errlen);

/*
 * Write the table to path atomically (a temporary file beside it renamed
 * over it), placeholders left out. Saves are serialized.
 */
tileops_status tuning_save(tuning *t, const char *path, char *err, size_t errlen);

/*
 * The entry for (family, cls): 1 with *c (mode TK_CHOICE_PREFER, or
 * TK_CHOICE_NONE for a placeholder) and *us (either may be NULL), else 0.
 */
int tuning_get(tuning *t, const char *family, const char *cls, tk_choice *c, double *us);

/*
 * Add or replace the entry for (family, cls); us <= 0 or a choice of mode
 * TK_CHOICE_NONE makes a placeholder. TILEOPS_ERR_INVALID_ARGUMENT when a
 * text is too long, TILEOPS_ERR_OUT_OF_MEMORY.
 */
tileops_status tuning_put(tuning *t, const char *family, const char *cls, const tk_choice *c,
                          double us);

/* Entries, placeholders included. */
int tuning_count(tuning *t);
/* Entry i in (family, class) order: 0 and its fields, -1 past the end. */
int tuning_entry(tuning *t, int i, char *family, size_t flen, char *cls, size_t clen, tk_choice *c,
                 double *us);
/* Drop every entry. */
void tuning_clear(tuning *t);
/* The GPU the table is for ("" when none). */
void tuning_gpu(tuning *t, char *buf, size_t len);

/*
 * The tuning interface of `family` in this build's kernel table, or NULL
 * (the first entry whose tuning names the family: its texts are the
 * family's).
 */
const tk_tuning *tuning_family(const char *family);

/* ---- what the executor does ------------------------------------------------ */

/*
 * Set call->choice for kernel k from the table: the entry of the call's
 * shape class when there is one, else empty (the kernel's built-in rule).
 * t NULL, a kernel without a tuning interface or a call without a class:
 * empty. No device work, no I/O: a lookup under a read lock.
 */
void tuning_apply(tuning *t, const tk_kernel_entry *k, tk_call *call);

/*
 * First-use tuning (the daemon's gemm_tune = first_use): on (1) or off,
 * and the file each measured entry is saved to ("" or NULL: none).
 */
void tuning_first_use(tuning *t, int on, const char *save_path);

/*
 * Whether the caller should measure call now: 1 when first-use tuning is
 * on, k's family has a measuring function, and the call's class (into cls)
 * has no entry; the class then gets a placeholder, so that one caller
 * measures it while the others use the built-in choice. 0 otherwise.
 */
int tuning_claim(tuning *t, const tk_kernel_entry *k, const tk_call *call, char *cls, size_t len);

/*
 * Measure a claimed class on call's inputs (k->tuning->measure: scratch
 * outputs; it waits for the device, so the caller makes sure the call's
 * inputs are ready and no capture is under way), record the winner and
 * save the table. On failure the placeholder stays (the class keeps the
 * built-in choice for the daemon's lifetime, and is not retried) and err
 * says why. Logs what it measured.
 */
tileops_status tuning_measure(tuning *t, const tk_kernel_entry *k, const tk_call *call,
                              const char *cls, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
