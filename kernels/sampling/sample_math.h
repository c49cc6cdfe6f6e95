/*
 * sample_math.h - the arithmetic of the sample op that both backends must
 * do alike, written once: the CPU reference (sample.c) and the CUDA kernel
 * (sample.cu) include this file, so a seed, an offset and the same logits
 * give the same token on either.
 *
 * What makes that hold:
 *  - Every float operation is a single IEEE-754 operation rounded to
 *    nearest: on the device the _rn intrinsics (which nvcc never fuses
 *    into an FMA), on the host plain operators (the build is ISO C, where
 *    GCC does not contract a * b + c) and fmaf, correctly rounded on both.
 *  - No libm transcendental is used: 2^x is a fixed polynomial.
 *  - A token's weight is an integer (q, below), and every sum over a row
 *    is an integer sum: the order in which a backend adds cannot change it.
 *  - The random bits come from Philox 4x32-10, integer arithmetic only.
 *
 * Definitions (docs/sampling.md says the same in prose):
 *   z_i     the logit as f32; NaN counts as -inf, -0 as +0
 *   m       the largest z_i; i_first the lowest index with z_i == m
 *   c       (1 / T) * log2(e), each step rounded to f32
 *   q_i     2^40 when z_i == m; else, with x = (z_i - m) * c: 0 when x < -40
 *           (or NaN), else floor(p(x - rint(x)) * 2^(rint(x) + 40)) with p
 *           the degree-7 Taylor polynomial of 2^f (|f| <= 1/2)
 *   order   (z descending, index ascending): the order top-k and top-p keep
 *           a prefix of
 */
#ifndef TILEOPS_SAMPLE_MATH_H
#define TILEOPS_SAMPLE_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TKS_FN __host__ __device__ static inline
#else
#include <math.h>
#define TKS_FN static inline
#endif

/* The weight of the largest logit: q is a fixed-point fraction of 40 bits. */
#define TKS_Q_ONE ((uint64_t)1 << 40)
/* top_p is taken to this many bits. */
#define TKS_P_BITS 24

#if defined(__CUDA_ARCH__)
#define TKS_FMUL(a, b) __fmul_rn((a), (b))
#define TKS_FSUB(a, b) __fsub_rn((a), (b))
#define TKS_FDIV(a, b) __fdiv_rn((a), (b))
#define TKS_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define TKS_FMUL(a, b) ((a) * (b))
#define TKS_FSUB(a, b) ((a) - (b))
#define TKS_FDIV(a, b) ((a) / (b))
#define TKS_FMA(a, b, c) fmaf((a), (b), (c))
#endif

TKS_FN uint32_t tks_float_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

TKS_FN float tks_bits_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* The logit as the op sees it: NaN as -inf, -0 as +0. */
TKS_FN float tks_canon(float z)
{
	if (z != z)
		return tks_bits_float(0xff800000u); /* -inf */
	return z == 0.0f ? 0.0f : z;
}

/* An unsigned key that orders canonical floats as their values do. */
TKS_FN uint32_t tks_ord(float z)
{
	uint32_t u = tks_float_bits(z);

	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* tks_ord of -inf: a row whose largest key is this has no finite logit. */
#define TKS_ORD_NEG_INF 0x007fffffu

/* c = (1 / T) * log2(e) for a temperature T > 0. */
TKS_FN float tks_scale(float t)
{
	return TKS_FMUL(TKS_FDIV(1.0f, t), 0x1.715476p+0f);
}

/* q_i of a canonical logit z, the row's maximum m and scale c (see the top). */
TKS_FN uint64_t tks_weight(float z, float m, float c)
{
	if (z == m)
		return TKS_Q_ONE;
	float x = TKS_FMUL(TKS_FSUB(z, m), c);
	if (!(x >= -40.0f))
		return 0;
	float n = rintf(x);        /* in [-40, 0] */
	float f = TKS_FSUB(x, n);  /* exact, in [-1/2, 1/2] */
	float p = 0x1.ffcbfcp-17f; /* ln(2)^k / k!, k = 7 down to 0 */
	p = TKS_FMA(p, f, 0x1.430912p-13f);
	p = TKS_FMA(p, f, 0x1.5d87fep-10f);
	p = TKS_FMA(p, f, 0x1.3b2ab6p-7f);
	p = TKS_FMA(p, f, 0x1.c6b08ep-5f);
	p = TKS_FMA(p, f, 0x1.ebfbe0p-3f);
	p = TKS_FMA(p, f, 0x1.62e430p-1f);
	p = TKS_FMA(p, f, 1.0f);
	/* 2^(n + 40) is exact, and so is the product: a power of two. */
	float scale = tks_bits_float((uint32_t)((int32_t)n + 40 + 127) << 23);
	return (uint64_t)TKS_FMUL(p, scale);
}

/* The least weight min-p keeps: ceil(2^40 min_p); 0 (keep all) when off. */
TKS_FN uint64_t tks_min_q(float min_p)
{
	if (!(min_p > 0.0f))
		return 0;
	if (min_p > 1.0f)
		min_p = 1.0f;
	return (uint64_t)ceilf(TKS_FMUL(min_p, 0x1p40f));
}

/* top_p in 24 bits: floor(2^24 top_p); 2^24 (off) for >= 1 or NaN, 0 for <= 0. */
TKS_FN uint64_t tks_p24(float top_p)
{
	if (!(top_p < 1.0f))
		return (uint64_t)1 << TKS_P_BITS;
	if (!(top_p > 0.0f))
		return 0;
	return (uint64_t)TKS_FMUL(top_p, 0x1p24f);
}

/* floor(total * p24 / 2^24) without overflow (total < 2^63). */
TKS_FN uint64_t tks_mass_target(uint64_t total, uint64_t p24)
{
	const uint64_t lo_mask = ((uint64_t)1 << TKS_P_BITS) - 1;

	return (total >> TKS_P_BITS) * p24 + (((total & lo_mask) * p24) >> TKS_P_BITS);
}

/* The high 64 bits of a * b. */
TKS_FN uint64_t tks_mulhi64(uint64_t a, uint64_t b)
{
	uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
	uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
	uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);

	return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/*
 * Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1,
 * 2, 3", SC 2011): 64 bits from the first two words of the block at
 * counter (offset low, offset high, stream, 0) under key (seed low, seed
 * high).
 */
TKS_FN uint64_t tks_philox(uint64_t seed, uint64_t offset, uint32_t stream)
{
	uint32_t c0 = (uint32_t)offset, c1 = (uint32_t)(offset >> 32), c2 = stream, c3 = 0;
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);

	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
		uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
		c0 = n0;
		c1 = n1;
		c2 = n2;
		c3 = n3;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	return (uint64_t)c0 | ((uint64_t)c1 << 32);
}

/* The settings of one row, after the per-row tensors and the params. */
typedef struct tks_row {
	int greedy;     /* temperature <= 0 or NaN */
	float c;        /* tks_scale(T) when not greedy */
	int64_t top_k;  /* 0: off */
	uint64_t min_q; /* tks_min_q */
	uint64_t p24;   /* tks_p24; 2^24: off */
	uint64_t seed, offset;
	uint32_t stream; /* the row, or 0 with per-row seeds */
} tks_row;

TKS_FN void tks_row_settings(tks_row *s, float t, int64_t top_k, float top_p, float min_p,
                             uint64_t seed, uint64_t offset, uint32_t stream)
{
	s->greedy = !(t > 0.0f);
	s->c = s->greedy ? 0.0f : tks_scale(t);
	s->top_k = top_k > 0 ? top_k : 0;
	s->min_q = tks_min_q(min_p);
	s->p24 = tks_p24(top_p);
	s->seed = seed;
	s->offset = offset;
	s->stream = stream;
}

#endif /* TILEOPS_SAMPLE_MATH_H */
