/*
 * attention_schedule.h - the choices of the attention kernels' tuning
 * interfaces, shared by the launchers (attention_prefill.cu,
 * attention_decode.cu) and the interfaces themselves (prefill_tuning.c,
 * decode_tuning.c). Plain C.
 *
 * Prefill: a choice's v[0] is a schedule. Each won on some shape on the
 * H200 (docs/kernel-notes.md, "Attention prefill", where they are the
 * variants 0, 1, 3 and 4; the lean loop alone, variant 2, won nowhere and
 * is in git history):
 *
 *   0 plain       the consumers run free
 *   1 turns       they take turns at the tensor cores, with the lean loop
 *   2 turns-wide  turns with wide key tiles (non-causal d128: 176 keys,
 *                 d256: 80) and, causal, longest first across groups of
 *                 TK_PREFILL_HEAD_GROUP heads
 *   3 lean-wide   the lean loop alone, wide as 2
 *
 * Decode: a choice's v[0] is a split count (attention_decode.cu).
 */
#ifndef TILEOPS_ATTENTION_SCHEDULE_H
#define TILEOPS_ATTENTION_SCHEDULE_H

#include "tileops_kernels.h"

#ifdef __cplusplus
#define TK_SCHED_CONSTEXPR constexpr
extern "C" {
#else
#define TK_SCHED_CONSTEXPR
#endif

#define TK_PREFILL_SCHEDULES 4
#define TK_PREFILL_HEAD_GROUP 8

typedef struct tk_prefill_sched {
	const char *name;
	int turns, lean, wide;
} tk_prefill_sched;

static inline tk_prefill_sched tk_prefill_schedule_of(int s)
{
	static const tk_prefill_sched all[TK_PREFILL_SCHEDULES] = {
		{ "plain", 0, 0, 0 },
		{ "turns", 1, 1, 0 },
		{ "turns-wide", 1, 1, 1 },
		{ "lean-wide", 0, 1, 1 },
	};
	return all[s >= 0 && s < TK_PREFILL_SCHEDULES ? s : 0];
}

/* Keys per tile: the default, and the wide schedules' (non-causal only). */
static inline TK_SCHED_CONSTEXPR int tk_prefill_default_bn(int d)
{
	return d == 256 ? 64 : 128;
}

static inline TK_SCHED_CONSTEXPR int tk_prefill_wide_bn(int d)
{
	return d == 256 ? 80 : (d == 128 ? 176 : 128);
}

/* The built-in rule (attention_prefill.cu, prefill_schedule). */
static inline int tk_prefill_builtin(int causal, int d)
{
	if (causal || d == 64)
		return 1;
	return d == 256 ? 3 : 0;
}

/* The split counts worth timing for a decode call (attention_decode.cu); CUDA builds. */
int tk_attention_decode_candidates(const tk_call *call, int paged, tk_choice *out, int max);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_ATTENTION_SCHEDULE_H */
