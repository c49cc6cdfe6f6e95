/*
 * workload_inputs.h - values for the inputs of an op call that carry
 * structure random values would break: indices, lengths, offsets, slots
 * and page tables (a position past the cache, a page table naming pages
 * that do not exist), and a given quantization scale. tileops-bench and
 * the parity tests fill the inputs of a workload's call with them.
 *
 * An input is known by its name in the manifest and sized from the call's
 * other tensors, as the ops' docs and CPU references define them
 * (kernels/rope/rope.c, kernels/attention/, kernels/quantization/). The
 * rules (integer inputs, i32 or i64, unless said):
 *   positions     uniformly below the rows of cos_sin_cache, or below
 *                 131072 (Llama 3.1's context) when the angles are
 *                 computed;
 *   seq_lens      at most the cache's capacity per sequence
 *                 (k_cache.shape[1], times block_tables.shape[1] when
 *                 paged). Roofline: every sequence full, as the roofline
 *                 bytes assume. Varied: the first full, the others at
 *                 random between the new tokens (q.shape[1] when q has
 *                 rank 4, else 1) and the capacity. Without a k_cache
 *                 (decode_advance) the capacity is block_tables.shape[1]
 *                 times the param page_size; roofline: every row half
 *                 full; varied: every 8th row padding (0 or -2), every
 *                 8th past the table, every 8th on a page boundary;
 *   block_tables  pages of k_cache (k_cache.shape[0]) drawn at random
 *                 without repeats, row after row, shared between sequences
 *                 only once the table has used every page. Without a
 *                 k_cache (decode_advance): a permutation of as many pages
 *                 as entries, varied with every 16th entry -1;
 *   slot_mapping  distinct slots of the cache (k_cache.shape[0] *
 *                 k_cache.shape[1]). Roofline: token t at the end of the
 *                 t-th of T equal parts of the cache, as a batch of T
 *                 sequences each appending its next token. Varied:
 *                 scattered at random over the whole cache, every 16th
 *                 token (and every token past the cache's slots) a
 *                 padding token, -1, which the op skips;
 *   cu_seqlens_X  offsets of B = numel - 1 sequences packed along input X's
 *                 first dim, covering every token, none longer than the
 *                 param max_seqlen_X when the op has it and it is > 0.
 *                 Roofline: sequences of equal length (the roofline's
 *                 assumption). Varied: lengths moved at random between
 *                 sequences, so some are short or empty. A cu_seqlens_Y
 *                 before it among the inputs, already filled, whose input
 *                 Y has as many tokens: its offsets again (each query
 *                 then sees its own keys);
 *   input_scale   (f32, f16 or bf16) amax(x) / 448 times a factor drawn
 *                 from [0.5, 2]: some values saturate, most do not. Reads
 *                 the values of x, which must be filled first;
 *   ids, index    rows of the op's first input (embedding's table,
 *                 gather_rows's x). Roofline: spread over the rows.
 *                 Varied: random rows, every 8th out of range (-1 or one
 *                 past the last row), which must give zeros;
 *   tokens, history  (i64) random token ids below 128256 (Llama 3's
 *                 vocabulary): decode_advance's fed tokens and the ring
 *                 they are written into;
 *   top_ks, seeds, offsets, and (f32) temperatures, top_ps, min_ps:
 *                 sample's per-row settings, some rows with the filter off
 *                 (top_k 0, temperature 0, top_p 1, min_p 0), the others
 *                 in ranges that filter (top_k 1..64, temperature
 *                 0.1..2, top_p 0.05..1, min_p up to 0.3).
 *
 * Nothing here keeps state: the random state is the caller's.
 */
#ifndef TILEOPS_WORKLOAD_INPUTS_H
#define TILEOPS_WORKLOAD_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "tileops_kernels.h"

/* Which values a rule gives where it has a choice. */
typedef enum workload_fill {
	/* The load the op's roofline counts: what a bench times. */
	WORKLOAD_FILL_ROOFLINE,
	/* Valid values that reach the edges a kernel must handle: what a test checks. */
	WORKLOAD_FILL_VARIED
} workload_fill;

/* A call's tensors as the rules read them; the caller's, not copied. */
typedef struct workload_call {
	const manifest_op *op;
	/* op->n_in + op->n_out tensors by manifest index, with shapes, strides
	 * and dtypes (oplayer_workload_tensors makes them). data: where the
	 * rules write an input, and where they read one (x for input_scale, an
	 * earlier cu_seqlens); NULL elsewhere is fine. */
	tk_tensor *t;
	uint32_t given;         /* bit i: input i is part of the call */
	const tk_param *params; /* op->n_params values by manifest index, defaults in */
} workload_call;

/*
 * Write the values of input i of c (every logical element of c->t[i],
 * through its strides; nothing outside them) by the rule for its name and
 * dtype, `fill` choosing among valid values where the rule has a choice.
 * Fill a call's inputs in their order: a rule may read an earlier one.
 * rng: the caller's random state (never 0), advanced. how (may be NULL):
 * what the values are, for a reader ("every sequence full: 4096").
 *
 * Returns 1 when written; 0 when there is no rule for the input (nothing
 * written: its values are the caller's to choose, random floats say, or
 * its absence of a rule the caller's to report); -1 with a message in err
 * when there is a rule it cannot follow (a tensor the rule is made from is
 * not given, out of memory), the input then partly written or not at all.
 */
int workload_fill_input(const workload_call *c, int i, workload_fill fill, uint64_t *rng, char *how,
                        size_t howlen, char *err, size_t errlen);

#endif /* TILEOPS_WORKLOAD_INPUTS_H */
