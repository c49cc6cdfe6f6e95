"""Every op family through tileops.ops against numpy, on the CPU backend."""
import math

import numpy as np
import pytest

import tileops
from tileops import ops

rng = np.random.default_rng(29)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# family -> the test that covers it; test_every_family_is_tested holds this to the table.
FAMILIES = {}


def family(name):
    def mark(f):
        FAMILIES[name] = f.__name__
        return f
    return mark


def test_every_family_is_tested():
    assert set(ops.families()) == set(FAMILIES), "a manifest family with no test here"


@family("elementwise")
def test_elementwise_ops_match_numpy(client):
    a, b = rand(4, 8), rand(8)
    ta, tb = client.from_numpy(a), client.from_numpy(b)
    close(ops.add(ta, tb).numpy(), a + b)            # broadcast: out shape from the manifest
    close(ops.mul(ta, tb).numpy(), a * b)
    close(ops.relu(ta).numpy(), np.maximum(a, 0))
    close(ops.exp(ta).numpy(), np.exp(a), 1e-5)
    close(ops.clamp(ta, min_value=-0.5, max_value=0.25).numpy(), np.clip(a, -0.5, 0.25))
    x = rand(3, 16)
    s = ops.silu_and_mul(client.from_numpy(x))
    assert s.shape == (3, 8)
    g, u = x[:, :8], x[:, 8:]
    close(s.numpy(), g / (1 + np.exp(-g)) * u, 1e-5)


@family("normalization")
def test_normalization_ops_match_numpy(client):
    x, w, bias = rand(4, 64), rand(64), rand(64)
    tx, tw = client.from_numpy(x), client.from_numpy(w)
    y = client.tensor("f32", x.shape)
    assert ops.rms_norm(tx, tw, eps=1e-5, out=y) is y
    close(y.numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w, 1e-5)
    ln = ops.layer_norm(tx, tw, client.from_numpy(bias)).numpy()
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(ln, (x - mu) / np.sqrt(var + 1e-5) * w + bias, 1e-4)
    # fused_add_rms_norm writes the sum into its residual input.
    r = rand(4, 64)
    tr = client.from_numpy(r)
    out = ops.fused_add_rms_norm(tx, tr, tw, eps=1e-6)
    s = x + r
    close(tr.numpy(), s)
    close(out.numpy(), s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * w, 1e-5)


@family("gemm")
def test_gemm_ops_match_numpy(client):
    a, b, bias = rand(5, 16), rand(7, 16), rand(7)
    c = ops.gemm(client.from_numpy(a), client.from_numpy(b), client.from_numpy(bias),
                 trans_b=True, alpha=0.5)
    assert c.shape == (5, 7)
    close(c.numpy(), 0.5 * (a @ b.T) + bias, 1e-4)
    x, y = rand(2, 3, 4), rand(2, 4, 5)
    close(ops.bmm(client.from_numpy(x), client.from_numpy(y)).numpy(), x @ y, 1e-5)


@family("reduction")
def test_reduction_ops_match_numpy(client):
    x = rand(3, 5, 6)
    tx = client.from_numpy(x)
    close(ops.sum(tx, dim=1, keepdim=True).numpy(), x.sum(1, keepdims=True), 1e-5)
    am = ops.argmax(tx, dim=-1)
    assert am.dtype == "i64" and am.shape == (3, 5)  # dtype and shape from the manifest
    np.testing.assert_array_equal(am.numpy(), x.argmax(-1))
    e = np.exp(x - x.max(-1, keepdims=True))
    close(ops.softmax(tx).numpy(), e / e.sum(-1, keepdims=True), 1e-6)


@family("pool")
def test_pool_ops_match_numpy(client):
    x = rand(2, 3, 6, 8)
    y = ops.max_pool2d(client.from_numpy(x))
    assert y.shape == (2, 3, 3, 4)
    close(y.numpy(), x.reshape(2, 3, 3, 2, 4, 2).max(axis=(3, 5)))


def fp8_e4m3_to_f32(bits):
    bits = bits.astype(np.int32)
    s = np.where(bits & 0x80, -1.0, 1.0)
    e, m = (bits >> 3) & 0xF, bits & 0x7
    normal = s * np.ldexp(1 + m / 8.0, e - 7)
    sub = s * np.ldexp(m / 8.0, -6)
    v = np.where(e == 0, sub, normal)
    return np.where((e == 15) & (m == 7), np.nan, v).astype(np.float32)


@family("quantization")
def test_quantization_op_matches_numpy(client):
    x = rand(4, 32)
    q, scale = ops.quant_fp8_per_tensor(client.from_numpy(x))
    assert q.dtype == "fp8_e4m3" and scale.shape == (1,)
    s = scale.numpy()[0]
    close(s, np.abs(x).max() / 448, 1e-6)
    bits = np.frombuffer(q.numpy().tobytes(), dtype=np.uint8).reshape(x.shape)
    # e4m3 keeps 3 mantissa bits: within half a step (1/16 relative) of x / scale.
    np.testing.assert_allclose(fp8_e4m3_to_f32(bits), x / s, rtol=1 / 16, atol=2 ** -9)


def fp8_codes(*shape):
    """Random e4m3 bit patterns, never NaN (0x7f, 0xff) and never zero."""
    bits = rng.integers(0, 256, size=shape).astype(np.uint8)
    bits = np.where((bits & 0x7F) == 0x7F, bits ^ 0x01, bits)
    return np.where((bits & 0x7F) == 0, bits | 0x38, bits).astype(np.uint8)


def bf16_to_f32(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


@family("gemm_fp8")
def test_gemm_fp8_matches_the_blockwise_definition(client):
    m, n, k = 3, 130, 272  # a partial 128-block of N and of K
    kb, nb = -(-k // 128), -(-n // 128)
    a, b = fp8_codes(m, k), fp8_codes(n, k)
    fa, fb = fp8_e4m3_to_f32(a).astype(np.float64), fp8_e4m3_to_f32(b).astype(np.float64)
    ta, tb = client.from_numpy(a, dtype="fp8_e4m3"), client.from_numpy(b, dtype="fp8_e4m3")
    sa = rng.uniform(1e-3, 1e-2, (m, kb)).astype(np.float32)
    sb = rng.uniform(1e-3, 1e-2, (nb, kb)).astype(np.float32)
    c = client.tensor("bf16", (m, n))
    ops.gemm_fp8(ta, tb, client.from_numpy(sa), client.from_numpy(sb), scale_layout=2, out=c)
    want = np.zeros((m, n))
    for q in range(kb):
        blk = slice(q * 128, min(k, (q + 1) * 128))
        want += (fa[:, blk] @ fb[:, blk].T) * sa[:, q:q + 1] * np.repeat(sb[:, q], 128)[:n]
    got = bf16_to_f32(np.frombuffer(c.numpy().tobytes(), dtype=np.uint16).reshape(m, n))
    close(got, want, 1e-2)
    # rowwise scales with a bias, and bmm_fp8 with one scale per batch
    ra, rb = rng.uniform(0.5, 1, (m, 1)).astype(np.float32), rng.uniform(0.5, 1, (n, 1)).astype(np.float32)
    bias = client.from_numpy(np.ones(n, dtype=np.float32), dtype="bf16")
    c = client.tensor("bf16", (m, n))
    ops.gemm_fp8(ta, tb, client.from_numpy(ra), client.from_numpy(rb), bias, scale_layout=1, out=c)
    got = bf16_to_f32(np.frombuffer(c.numpy().tobytes(), dtype=np.uint16).reshape(m, n))
    close(got, (fa @ fb.T) * ra * rb.T + 1.0, 1e-2)
    x, y = fp8_codes(2, 4, 32), fp8_codes(2, 5, 32)
    s = np.array([0.5, 0.25], dtype=np.float32)
    c = client.tensor("f16", (2, 4, 5))
    ops.bmm_fp8(client.from_numpy(x, dtype="fp8_e4m3"), client.from_numpy(y, dtype="fp8_e4m3"),
                client.from_numpy(s), client.from_numpy(s[:1]), out=c)
    fx, fy = fp8_e4m3_to_f32(x).astype(np.float64), fp8_e4m3_to_f32(y).astype(np.float64)
    close(c.numpy(), (fx @ fy.transpose(0, 2, 1)) * s[:, None, None] * s[0], 2e-3)


def test_fp8_group_and_rms_norm_quantization_match_numpy(client):
    x = rand(4, 300)
    q, scale = ops.quant_fp8_per_token_group(client.from_numpy(x))
    assert scale.shape == (4, 3)
    s = scale.numpy()
    for g in range(3):
        blk = slice(g * 128, min(300, (g + 1) * 128))
        close(s[:, g], np.abs(x[:, blk]).max(-1) / 448, 1e-6)
        bits = np.frombuffer(q.numpy().tobytes(), dtype=np.uint8).reshape(x.shape)[:, blk]
        np.testing.assert_allclose(fp8_e4m3_to_f32(bits) * s[:, g:g + 1], x[:, blk],
                                   rtol=1 / 16, atol=s[:, g:g + 1].max() * 2 ** -9)
    w = rng.uniform(0.5, 1.5, 300).astype(np.float32)
    q, scale = ops.rms_norm_quant_fp8(client.from_numpy(x), client.from_numpy(w), eps=1e-6)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    close(scale.numpy(), np.abs(y).max(-1, keepdims=True) / 448, 1e-5)
    bits = np.frombuffer(q.numpy().tobytes(), dtype=np.uint8).reshape(x.shape)
    np.testing.assert_allclose(fp8_e4m3_to_f32(bits) * scale.numpy(), y, rtol=1 / 16,
                               atol=scale.numpy().max() * 2 ** -9)


@family("rope")
def test_rope_neox_matches_numpy(client):
    T, H, D = 3, 2, 8
    q, k = rand(T, H, D), rand(T, 1, D)
    pos = np.array([0, 1, 5], dtype=np.int64)
    tq, tk = client.from_numpy(q), client.from_numpy(k)
    assert ops.rope_neox(tq, tk, client.from_numpy(pos), rotary_dim=D, theta=10000.0) is None

    def ref(x):
        half = D // 2
        inv = 10000.0 ** (-np.arange(half) * 2 / D)
        ang = pos[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    close(tq.numpy(), ref(q), 1e-5)
    close(tk.numpy(), ref(k), 1e-5)


@family("attention")
def test_attention_decode_matches_numpy(client):
    B, S, Hq, Hkv, D = 2, 6, 4, 2, 16
    q = rand(B, Hq, D, dtype=np.float16)
    kc, vc = rand(B, S, Hkv, D, dtype=np.float16), rand(B, S, Hkv, D, dtype=np.float16)
    lens = np.array([6, 3], dtype=np.int32)
    out = ops.attention_decode(client.from_numpy(q), client.from_numpy(kc), client.from_numpy(vc),
                               client.from_numpy(lens)).numpy()
    assert out.dtype == np.float16
    scale = 1 / math.sqrt(D)
    for b in range(B):
        for h in range(Hq):
            kv = h // (Hq // Hkv)
            L = lens[b]
            sc = (kc[b, :L, kv].astype(np.float32) @ q[b, h].astype(np.float32)) * scale
            p = np.exp(sc - sc.max())
            p /= p.sum()
            ref = p @ vc[b, :L, kv].astype(np.float32)
            np.testing.assert_allclose(out[b, h].astype(np.float32), ref, rtol=1e-2, atol=1e-2)


def test_kv_cache_append_writes_the_slots(client):
    T, Hkv, D = 2, 1, 4
    k, v = rand(T, Hkv, D), rand(T, Hkv, D)
    kc, vc = client.tensor("f32", (2, 4, Hkv, D)), client.tensor("f32", (2, 4, Hkv, D))
    slots = client.from_numpy(np.array([5, -1], dtype=np.int32))  # -1: padding, skipped
    ops.kv_cache_append(client.from_numpy(k), client.from_numpy(v), slots, kc, vc)
    got = kc.numpy().reshape(8, Hkv, D)
    close(got[5], k[0])
    assert not got[np.arange(8) != 5].any()


@family("indexing")
def test_indexing_ops_match_numpy(client):
    table = rand(10, 8)
    ids = np.array([3, 0, 9, -1, 12], dtype=np.int32)  # out of range: a row of zeros
    got = ops.embedding(client.from_numpy(table), client.from_numpy(ids)).numpy()
    ok = (ids >= 0) & (ids < 10)
    np.testing.assert_array_equal(got, np.where(ok[:, None], table[np.clip(ids, 0, 9)], 0))
    x = rand(6, 4)
    idx = np.array([5, 0, 2], dtype=np.int32)
    np.testing.assert_array_equal(
        ops.gather_rows(client.from_numpy(x), client.from_numpy(idx)).numpy(), x[idx])
    # decode_advance, page 4: row 0 at length 5 (page 1, offset 1), row 1 padding.
    lens = client.from_numpy(np.array([5, 0], dtype=np.int32))
    hist = client.from_numpy(np.full((2, 4), -9, dtype=np.int64))
    pos, slots = ops.decode_advance(client.from_numpy(np.array([42, 7], dtype=np.int64)), lens,
                                    client.from_numpy(np.array([[3, 6], [0, 2]], dtype=np.int32)),
                                    hist, page_size=4)
    np.testing.assert_array_equal(pos.numpy(), [5, 0])
    np.testing.assert_array_equal(slots.numpy(), [6 * 4 + 1, -1])
    np.testing.assert_array_equal(lens.numpy(), [6, 0])
    np.testing.assert_array_equal(hist.numpy(), [[-9, 42, -9, -9], [-9, -9, -9, -9]])


@family("sampling")
def test_sample_is_greedy_at_temperature_0_and_seeded_otherwise(client):
    logits = rand(4, 50)
    tl = client.from_numpy(logits)

    def draw(**params):
        out = client.tensor("i32", (4,))
        ops.sample(tl, out=out, **params)
        return out.numpy()

    np.testing.assert_array_equal(draw(temperature=0.0), logits.argmax(-1))
    np.testing.assert_array_equal(draw(temperature=1.0, top_k=1, seed=3), logits.argmax(-1))
    a, b = draw(temperature=1.0, seed=11), draw(temperature=1.0, seed=11)
    np.testing.assert_array_equal(a, b)  # the same seed and offset: the same tokens
    assert ((a >= 0) & (a < 50)).all()
    top = np.argsort(-logits, axis=-1)[:, :5]
    for _ in range(3):
        t = draw(temperature=2.0, top_k=5, seed=int(rng.integers(1 << 30)))
        assert all(t[r] in top[r] for r in range(4)), "a token outside the top 5"


@family("moe")
def test_moe_block_matches_a_dense_per_expert_loop(client):
    T, H, I, E, K, BM = 5, 16, 8, 4, 2, 16
    x, w13, w2, logits = rand(T, H), rand(E, 2 * I, H), rand(E, H, I), rand(T, E)
    ids, wts = ops.moe_route(client.from_numpy(logits), top_k=K, renormalize=True)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want_ids = np.argsort(-logits, axis=-1, kind="stable")[:, :K]
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    sel = np.take_along_axis(p, want_ids, -1)
    close(wts.numpy(), sel / sel.sum(-1, keepdims=True), 1e-6)
    sorted_ids, expert_ids, npp, inv = ops.moe_align(ids, num_experts=E, block_m=BM)
    assert sorted_ids.shape == (T * K + E * (BM - 1),)
    assert npp.numpy()[0] % BM == 0
    h = ops.moe_gate_up(client.from_numpy(x), client.from_numpy(w13), sorted_ids, expert_ids, npp,
                        block_m=BM, top_k=K)
    y = ops.moe_grouped_gemm(h, client.from_numpy(w2), sorted_ids, expert_ids, npp, block_m=BM)
    out = ops.moe_unpermute(y, inv, wts).numpy()
    want = np.zeros((T, H), dtype=np.float64)
    for t in range(T):
        for j in range(K):
            e = want_ids[t, j]
            g, u = w13[e, :I] @ x[t], w13[e, I:] @ x[t]
            want[t] += wts.numpy()[t, j] * (w2[e] @ (g / (1 + np.exp(-g)) * u))
    close(out, want, 1e-4)


@family("diagnostic")
def test_diagnostic_spin_writes_x_plus_one(client):
    # The daemon of these tests serves the diagnostic ops (--diagnostic-ops).
    x = np.arange(4, dtype=np.float32)
    out = ops.spin(client.from_numpy(x), ns=1000, blocks=4)
    close(out.numpy(), x + 1)


def test_bf16_tensors_take_f32_arrays_and_round(client):
    x, w = rand(2, 32), rand(32)
    tx, tw = client.tensor("bf16", x.shape), client.tensor("bf16", w.shape)
    tx.write(x)  # rounded to bf16
    tw.write(w)
    y = ops.rms_norm(tx, tw, eps=1e-5)
    assert y.dtype == "bf16"
    xb = tileops.bf16_to_f32(tileops.f32_to_bf16(x))
    wb = tileops.bf16_to_f32(tileops.f32_to_bf16(w))
    ref = xb / np.sqrt((xb * xb).mean(-1, keepdims=True) + 1e-5) * wb
    got = tileops.bf16_to_f32(y.numpy()) if y.numpy().dtype == np.uint16 else y.numpy().astype(np.float32)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def test_functions_carry_the_manifests_signature_and_doc():
    import inspect
    sig = inspect.signature(ops.rms_norm)
    assert list(sig.parameters)[:3] == ["x", "weight", "eps"]
    assert sig.parameters["eps"].default == pytest.approx(1e-6)
    assert "sqrt" in ops.rms_norm.__doc__ and "Added to the mean square" in ops.rms_norm.__doc__
    assert inspect.signature(ops.clamp).parameters["max_value"].default == math.inf


@family("collective")
def test_collective_ops_on_one_device_leave_the_tensor_whole(client):
    # The default daemon serves one device: a one-rank collective is the
    # tensor itself (test_devices.py runs them over four).
    a = rand(6, 10)
    t = client.from_numpy(a)
    assert ops.all_reduce(t) is None
    close(t.numpy(), a)
    ops.all_gather(t)
    ops.reduce_scatter(t, reduce=1)
    close(t.numpy(), a)
