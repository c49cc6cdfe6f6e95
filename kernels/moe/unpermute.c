/*
 * unpermute.c - the CPU reference of moe_unpermute: each token's expert
 * outputs weighted and summed in f32 in order of its slots, plus the shared
 * expert's output when given (manifest/moe.yaml).
 */
#include "cpu_util.h"
#include "moe.h"

tk_status tk_cpu_moe_unpermute(const tk_call *call)
{
	tk_moe_unpermute u;
	tk_status st = tk_moe_unpermute_parse(call, &u);

	if (st != TK_OK)
		return st;
	for (int64_t t = 0; t < u.t; t++)
		for (int64_t h = 0; h < u.h; h++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < u.k; j++) {
				int32_t p = u.inv[t * u.k + j];
				if (p >= 0 && p < u.p)
					acc += u.weights[t * u.k + j] *
					       cpu_load(u.y, u.dtype, p * u.h + h);
			}
			if (u.shared)
				acc += cpu_load(u.shared, u.dtype, t * u.h + h);
			cpu_store(u.out, u.dtype, t * u.h + h, acc);
		}
	return TK_OK;
}
