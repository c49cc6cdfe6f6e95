/*
 * elementwise.cuh - the elementwise kernels behind the unary, binary and
 * gated ops. Each op supplies a functor (float -> float, or float, float ->
 * float) and the launchers here walk the operands.
 *
 * The fast kernel, ew_rows, sees the call as rows of `width` elements with
 * one row stride per operand (a plan of at most 2 dims after merging, which
 * covers packed tensors, padded rows and a broadcast bias row or column):
 * the output's last dim is packed and every input is either packed along
 * it or constant along it (stride 0). Work is counted in units: 16-byte
 * vectors when every row start is aligned, else single elements. Each
 * thread takes a few units a block-width apart and issues all their loads
 * before any arithmetic; the grid covers the tensor once,
 * so the hardware refills each SM as blocks finish instead of one wave of
 * persistent blocks ending unevenly. A unit's row is one 32-bit division
 * away (none for packed tensors, which are a single row).
 *
 * Tensors that are all packed with the output's shape (the usual case) take
 * ew_flat instead: one vector a thread and no walk at all; rows of at
 * least kEw2dMinUnits vectors take ew_rows2d, a 2-d grid of the same.
 *
 * Functors provide `template <int FAST> float f(x[, y])`: FAST is the math
 * grade of the output type, non-zero (fast) for bf16 and f16 (see m_exp and
 * friends in cuda_common.cuh).
 *
 * ew_general covers what is left (deeper broadcasting, an output whose
 * innermost merged dim is strided, more than 2^32 units): one element per
 * thread per step, offsets from the plan.
 */
#ifndef TILEOPS_ELEMENTWISE_CUH
#define TILEOPS_ELEMENTWISE_CUH

#include <type_traits>

#include "cuda_common.cuh"

namespace tkc
{

constexpr int kEwThreads = 256;
/*
 * 16-byte units a thread has in flight per input. Two for 16-bit types: at
 * four, the binary and the erf/tanh-based functors spill under the 64
 * registers that keep 1024 threads resident (measured on an H200: binary
 * ops fell from 84% to 43% of copy), and the unary ones gained nothing
 * (abs at 79% either way). f32 units hold 4 elements, so 4 fit. One unit a
 * thread measured no better in this kernel (abs 70b 80.5%), though a bare
 * one-vector copy-like kernel reached 94% of copy where two reached 91%:
 * the gap is in the kernel's own instructions (see docs/kernel-notes.md).
 */
template <typename T> constexpr int ew_unroll()
{
	return sizeof(T) == 4 ? 4 : 2;
}

/* The math grade for an output type (cuda_common.cuh: kGradeExact and the fast ones). */
template <typename T> constexpr int ew_fast()
{
	return sizeof(T) == 4                   ? kGradeExact
	       : std::is_same<T, __half>::value ? kGradeF16
	                                        : kGradeBf16;
}

/* The walk of ew_rows: NOPS operands, operand 0 the output. */
template <int NOPS> struct RowWalk {
	int64_t rows, width;   /* rows of `width` elements */
	int64_t upr;           /* units per row */
	int64_t units;         /* rows * upr */
	int vec;               /* units are 16-byte vectors */
	int64_t rstride[NOPS]; /* row strides of a simple plan */
	int inner[NOPS];       /* 1: packed along the row, 0: constant along it */
};

/*
 * Offsets of unit u for every operand, in elements. The launcher sends
 * only walks whose unit count fits 32 bits and whose plan has at most one
 * outer dim here, so this is one 32-bit division and a multiply-add per
 * operand (a 64-bit division is a called routine that would spill).
 */
template <int NOPS, int N>
__device__ __forceinline__ void walk_unit(const RowWalk<NOPS> &w, int64_t u, int64_t *off)
{
	uint32_t col = (uint32_t)u, row = 0;

	if (w.rows > 1) {
		row = (uint32_t)u / (uint32_t)w.upr;
		col = (uint32_t)u - row * (uint32_t)w.upr;
	}
#pragma unroll
	for (int op = 0; op < NOPS; op++)
		off[op] = (int64_t)row * w.rstride[op] + (w.inner[op] ? (int64_t)col * N : 0);
}

template <int NIN, int FAST, typename Op>
__device__ __forceinline__ float ew_apply(const Op &op, float a, float b)
{
	if constexpr (NIN == 1)
		return op.template f<FAST>(a);
	else
		return op.template f<FAST>(a, b);
}

/* The functor over a vector of each input, element by element. */
template <typename T, int NIN, typename Op>
__device__ __forceinline__ Vec<T> ew_vec_apply(const Op &op, const Vec<T> &va, const Vec<T> &vb)
{
	Vec<T> r;

#pragma unroll
	for (int e = 0; e < Vec<T>::N; e++) {
		float y = 0.0f;
		if constexpr (NIN == 2)
			y = to_f32(vb.v[e]);
		r.v[e] = from_f32<T>(ew_apply<NIN, ew_fast<T>()>(op, to_f32(va.v[e]), y));
	}
	return r;
}

/* Load operand `op`'s unit: a vector, or one value splat when constant along the row. */
template <typename T>
__device__ __forceinline__ void load_unit(Vec<T> &v, const T *base, int64_t off, int inner)
{
	if (inner) {
		v = *reinterpret_cast<const Vec<T> *>(base + off);
		return;
	}
	T s = base[off];
#pragma unroll
	for (int k = 0; k < Vec<T>::N; k++)
		v.v[k] = s;
}

template <typename T, int NIN, typename Op>
__device__ __forceinline__ void ew_rows_vec(const RowWalk<NIN + 1> &w, T *out, const T *a,
                                            const T *b, const Op &op)
{
	constexpr int N = Vec<T>::N, U = ew_unroll<T>();
	const int64_t tile = (int64_t)kEwThreads * U;

	for (int64_t base = (int64_t)blockIdx.x * tile; base < w.units;
	     base += (int64_t)gridDim.x * tile) {
		Vec<T> va[U], vb[U];
		int64_t oo[U];
#pragma unroll
		for (int k = 0; k < U; k++) {
			int64_t u = base + k * kEwThreads + threadIdx.x, off[NIN + 1];
			if (u >= w.units)
				continue;
			walk_unit<NIN + 1, N>(w, u, off);
			oo[k] = off[0];
			load_unit(va[k], a, off[1], w.inner[1]);
			if constexpr (NIN == 2)
				load_unit(vb[k], b, off[2], w.inner[2]);
		}
#pragma unroll
		for (int k = 0; k < U; k++) {
			int64_t u = base + k * kEwThreads + threadIdx.x;
			if (u >= w.units)
				continue;
			*reinterpret_cast<Vec<T> *>(out + oo[k]) =
			        ew_vec_apply<T, NIN>(op, va[k], vb[k]);
		}
	}
}

template <typename T, int NIN, typename Op>
__device__ __forceinline__ void ew_rows_scalar(const RowWalk<NIN + 1> &w, T *out, const T *a,
                                               const T *b, const Op &op)
{
	constexpr int U = 8;
	const int64_t tile = (int64_t)kEwThreads * U;

	for (int64_t base = (int64_t)blockIdx.x * tile; base < w.units;
	     base += (int64_t)gridDim.x * tile) {
		float xa[U], xb[U];
		int64_t oo[U];
#pragma unroll
		for (int k = 0; k < U; k++) {
			int64_t u = base + k * kEwThreads + threadIdx.x, off[NIN + 1];
			if (u >= w.units)
				continue;
			walk_unit<NIN + 1, 1>(w, u, off);
			oo[k] = off[0];
			xa[k] = to_f32(a[off[1]]);
			xb[k] = 0.0f;
			if constexpr (NIN == 2)
				xb[k] = to_f32(b[off[2]]);
		}
#pragma unroll
		for (int k = 0; k < U; k++) {
			int64_t u = base + k * kEwThreads + threadIdx.x;
			if (u < w.units)
				out[oo[k]] =
				        from_f32<T>(ew_apply<NIN, ew_fast<T>()>(op, xa[k], xb[k]));
		}
	}
}

template <typename T, int NIN, typename Op>
__global__ void __launch_bounds__(kEwThreads, 4)
        ew_rows(const __grid_constant__ RowWalk<NIN + 1> w, T *out, const T *a, const T *b, Op op)
{
	pdl_enter();
	if (w.vec)
		ew_rows_vec<T, NIN>(w, out, a, b, op);
	else
		ew_rows_scalar<T, NIN>(w, out, a, b, op);
}

/*
 * ew_flat: every operand packed with the output's shape (one row), 16-byte
 * aligned, a whole number of vectors. One vector a thread, a grid covering
 * the tensor once, 32-bit indices: the shape of the fastest copy-like
 * kernel measured on an H200 (94% of copy where ew_rows reached 80 to 83%
 * on the same abs, docs/kernel-notes.md).
 */
template <typename T, int NIN, typename Op>
__global__ void __launch_bounds__(kEwThreads)
        ew_flat(T *out, const T *a, const T *b, uint32_t nvec, uint32_t wave, Op op)
{
	const uint32_t base = blockIdx.x * kEwThreads, u = base + threadIdx.x;

	/* The first wave's inputs, asked of the L2 before the wait (l2_prefetch). */
	if (blockIdx.x < wave && threadIdx.x < NIN) {
		const uint32_t n = nvec - base < kEwThreads ? nvec - base : kEwThreads;
		l2_prefetch(reinterpret_cast<const Vec<T> *>(threadIdx.x == 0 ? a : b) + base,
		            n * 16);
	}
	pdl_enter();

	if (u >= nvec)
		return;
	const Vec<T> va = reinterpret_cast<const Vec<T> *>(a)[u];
	Vec<T> vb;
	if constexpr (NIN == 2)
		vb = reinterpret_cast<const Vec<T> *>(b)[u];
	reinterpret_cast<Vec<T> *>(out)[u] = ew_vec_apply<T, NIN>(op, va, vb);
}

/*
 * ew_rows2d: rows of vectors with a row stride per operand (padded rows, a
 * broadcast bias row, a broadcast column) and at least kEw2dMinUnits
 * vectors a row. Blocks tile a row (x) and rows (y, looping past
 * kEw2dMaxRows), one vector a thread: no division, as ew_flat.
 */
constexpr int64_t kEw2dMinUnits = 128;
/* Rows of blocks at most; each block then takes every kEw2dMaxRows-th row. */
constexpr int64_t kEw2dMaxRows = 8192;

template <typename T, int NIN, typename Op>
__global__ void __launch_bounds__(kEwThreads)
        ew_rows2d(const __grid_constant__ RowWalk<NIN + 1> w, T *out, const T *a, const T *b,
                  uint32_t wave, Op op)
{
	constexpr int N = Vec<T>::N;
	const int64_t col0 = (int64_t)blockIdx.x * blockDim.x, col = col0 + threadIdx.x;

	/* The first wave's first row of each input that has one (l2_prefetch). */
	if (blockIdx.y * gridDim.x + blockIdx.x < wave && threadIdx.x < NIN &&
	    w.inner[threadIdx.x + 1]) {
		const int op = threadIdx.x + 1;
		const int64_t left = w.upr - col0;
		const uint32_t n = (uint32_t)(left < blockDim.x ? left : blockDim.x);
		l2_prefetch((op == 1 ? a : b) + blockIdx.y * w.rstride[op] + col0 * N, n * 16);
	}
	pdl_enter();

	if (col >= w.upr)
		return;
	for (int64_t r = blockIdx.y; r < w.rows; r += gridDim.y) {
		Vec<T> va, vb;
		load_unit(va, a, r * w.rstride[1] + (w.inner[1] ? col * N : 0), w.inner[1]);
		if constexpr (NIN == 2)
			load_unit(vb, b, r * w.rstride[2] + (w.inner[2] ? col * N : 0), w.inner[2]);
		*reinterpret_cast<Vec<T> *>(out + r * w.rstride[0] + col * N) =
		        ew_vec_apply<T, NIN>(op, va, vb);
	}
}

/* Whether walk w can take ew_flat: one packed row of vectors in every operand. */
template <int NOPS> static inline bool ew_flat_fits(const RowWalk<NOPS> &w)
{
	if (!w.vec || w.rows != 1 || w.units > (int64_t)UINT32_MAX - kEwThreads)
		return false;
	for (int op = 0; op < NOPS; op++) {
		if (!w.inner[op])
			return false;
	}
	return true;
}

/* Launch ew_flat over walk w (ew_flat_fits). */
template <typename T, int NIN, typename Op>
static inline void ew_flat_launch(const RowWalk<NIN + 1> &w, T *out, const T *a, const T *b,
                                  cudaStream_t stream, Op op)
{
	unsigned g = (unsigned)((w.units + kEwThreads - 1) / kEwThreads);

	launch_pdl(ew_flat<T, NIN, Op>, g, kEwThreads, 0, stream, out, a, b, (uint32_t)w.units,
	           first_wave(kEwThreads), op);
}

template <typename T, int NIN, typename Op>
__global__ void ew_general(T *out, const T *a, const T *b, int64_t n, Plan p, Op op)
{
	pdl_enter();
	int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = tid; i < n; i += step) {
		int64_t off[NIN + 1];
		plan_offsets<NIN + 1>(p, i, off);
		float y = 0.0f;
		if constexpr (NIN == 2)
			y = to_f32(b[off[NIN]]);
		out[off[0]] = from_f32<T>(ew_apply<NIN, ew_fast<T>()>(op, to_f32(a[off[1]]), y));
	}
}

/*
 * Fill a RowWalk from a plan whose innermost dim is the row. Returns false
 * when the plan does not have that form (ew_general's case).
 */
template <int NOPS>
static inline bool row_walk_of(const tk_iter &it, size_t elem, const void *const *ptrs,
                               RowWalk<NOPS> *w)
{
	int last = it.ndim - 1;

	if (it.stride[0][last] != 1)
		return false;
	for (int op = 1; op < NOPS; op++) {
		if (it.stride[op][last] != 0 && it.stride[op][last] != 1)
			return false;
	}
	w->width = it.shape[last];
	w->rows = it.numel / (w->width > 0 ? w->width : 1);
	if (it.ndim > 2)
		return false;
	for (int op = 0; op < NOPS; op++) {
		w->inner[op] = it.stride[op][last] == 1;
		w->rstride[op] = it.ndim == 2 ? it.stride[op][0] : 0;
	}
	/*
	 * Vectors need whole vectors per row and 16-byte aligned row starts in
	 * every operand that is packed along the row; a broadcast column is
	 * read as one scalar per unit and needs neither.
	 */
	w->vec = w->width % (int64_t)(16 / elem) == 0;
	for (int op = 0; op < NOPS; op++) {
		if (!w->inner[op])
			continue;
		if (!aligned16(ptrs[op]))
			w->vec = 0;
		for (int d = 0; d < last; d++) {
			if (it.shape[d] > 1 && (it.stride[op][d] * (int64_t)elem) % 16 != 0)
				w->vec = 0;
		}
	}
	w->upr = w->vec ? w->width / (int64_t)(16 / elem) : w->width;
	w->units = w->rows * w->upr;
	return w->units < ((int64_t)1 << 32);
}

/* Blocks to cover the walk once (units < 2^32, so this fits a grid). */
template <typename T, int NOPS> static inline unsigned ew_grid(const RowWalk<NOPS> &w)
{
	int64_t per_block = (int64_t)kEwThreads * (w.vec ? ew_unroll<T>() : 8);

	return (unsigned)((w.units + per_block - 1) / per_block);
}

/* Launch the kernel for a row walk: ew_rows2d for rows of many vectors, else ew_rows. */
template <typename T, int NIN, typename Op>
static inline void ew_walk_launch(const RowWalk<NIN + 1> &w, T *out, const T *a, const T *b,
                                  cudaStream_t stream, Op op)
{
	if (w.vec && w.upr >= kEw2dMinUnits) {
		unsigned tb = w.upr >= kEwThreads ? kEwThreads : 128;
		dim3 g((unsigned)((w.upr + tb - 1) / tb),
		       (unsigned)(w.rows < kEw2dMaxRows ? w.rows : kEw2dMaxRows));
		launch_pdl(ew_rows2d<T, NIN, Op>, g, tb, 0, stream, w, out, a, b,
		           first_wave((int)tb), op);
	} else {
		launch_pdl(ew_rows<T, NIN, Op>, ew_grid<T>(w), kEwThreads, 0, stream, w, out, a, b,
		           op);
	}
}

template <typename T, int NIN, typename Op>
static tk_status ew_run(const tk_call *call, const tk_iter &it, cudaStream_t stream, Op op)
{
	T *out = static_cast<T *>(call->out[0].data);
	const T *a = static_cast<const T *>(call->in[0].data);
	const T *b = NIN == 2 ? static_cast<const T *>(call->in[1].data) : a;
	const void *ptrs[3] = { out, a, b };
	RowWalk<NIN + 1> w;

	launch_begin();
	bool rows = row_walk_of<NIN + 1>(it, sizeof(T), ptrs, &w);
	if (rows && ew_flat_fits(w)) {
		ew_flat_launch<T, NIN>(w, out, a, b, stream, op);
	} else if (rows) {
		ew_walk_launch<T, NIN>(w, out, a, b, stream, op);
	} else {
		unsigned g = grid_for(it.numel, kEwThreads);
		launch_pdl(ew_general<T, NIN, Op>, g, kEwThreads, 0, stream, out, a, b, it.numel,
		           plan_of(it), op);
	}
	return launch_status();
}

/* Check the call like the CPU reference does, then launch for its dtype. */
template <int NIN, typename Op> static tk_status ew_launch(const tk_call *call, void *stream, Op op)
{
	const tk_tensor *ins[2] = { &call->in[0], &call->in[1] };
	const tk_tensor *ts[3] = { &call->out[0], &call->in[0], &call->in[1] };
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	tk_iter it;

	if (call->n_in < NIN || call->n_out < 1 || !tk_same_float_dtype(ts, NIN + 1))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_broadcast(&it, &call->out[0], ins, NIN) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0)
		return TK_OK;
	switch (call->out[0].dtype) {
	case TK_F32:
		return ew_run<float, NIN>(call, it, s, op);
	case TK_F16:
		return ew_run<__half, NIN>(call, it, s, op);
	default:
		return ew_run<__nv_bfloat16, NIN>(call, it, s, op);
	}
}

} /* namespace tkc */

#endif /* TILEOPS_ELEMENTWISE_CUH */
