"""The per-call fast path of tileops.ops and Client.run: op structs cached by
handles and params, reused across calls. What is cached must never change
what a call means: the daemon still validates every request, params that
compare equal but differ (0.0 and -0.0) are not confused, clients and freed
handles share nothing wrongly, and every call shape the fast path leaves to
the general path still works."""
import numpy as np
import pytest

import tileops
from tileops import _client, ops


def f32(c, a):
    return c.from_numpy(np.asarray(a, np.float32))


def test_a_cached_call_still_raises_the_daemons_error(client):
    x = f32(client, np.ones((4, 64)))
    bad, y = client.tensor("f32", (63,)), client.tensor("f32", (4, 64))
    for submit in (False, False, True, True):  # the second of each is a cache hit
        if submit:
            ops.rms_norm(x, bad, eps=1e-5, out=y, submit=True)
            with pytest.raises(tileops.Error) as e:
                client.sync()
        else:
            with pytest.raises(tileops.Error) as e:
                ops.rms_norm(x, bad, eps=1e-5, out=y)
        assert e.value.status_name == "SHAPE"
        assert "rms_norm: weight has shape [63], expected [64]" in e.value.message
    # The same handles with a param the daemon refuses: another struct, refused.
    w = f32(client, np.ones(64))
    ops.rms_norm(x, w, eps=1e-5, out=y)
    with pytest.raises(tileops.Error) as e:
        ops.rms_norm(x, w, eps=2.0, out=y)
    assert e.value.status_name == "PARAM" and "eps" in e.value.message


def test_repeated_calls_reuse_one_struct_and_compute_each_time(client):
    a, one = f32(client, np.zeros(8)), f32(client, np.ones(8))
    ops.add(a, one, out=a)
    n = len(ops.add.spec.cache.entries)
    for _ in range(9):
        ops.add(a, one, out=a, submit=True)
    client.sync()
    assert len(ops.add.spec.cache.entries) == n
    np.testing.assert_array_equal(a.numpy(), np.full(8, 10, np.float32))


def test_params_equal_in_value_but_not_in_bits_are_not_confused(client):
    x, y = f32(client, np.full(4, 0.5)), client.tensor("f32", (4,))
    ops.clamp(x, max_value=0.0, out=y)
    assert not np.signbit(y.numpy()).any()
    ops.clamp(x, max_value=-0.0, out=y)
    assert np.signbit(y.numpy()).all()
    ops.clamp(x, max_value=0.0, out=y)
    assert not np.signbit(y.numpy()).any()


def test_a_param_that_is_not_a_plain_number_still_works(client):
    x, y = f32(client, np.full(4, 3.0)), client.tensor("f32", (4,))
    ops.clamp(x, max_value=np.float32(1.5), out=y)
    np.testing.assert_array_equal(y.numpy(), np.full(4, 1.5, np.float32))
    with pytest.raises(TypeError, match="param 'approximate' is an int"):
        ops.gelu(x, approximate=0.5, out=y)


def test_client_run_keys_params_by_type_as_well_as_value(client):
    # 2 and 2.0 (and True and 1) are equal in Python but go to the daemon as
    # different kinds: a cached struct for one must not serve the other.
    a, b = f32(client, np.ones((2, 4))), f32(client, np.ones((4, 3)))
    c = client.tensor("f32", (2, 3))
    client.run("gemm", [a, b], [c], {"alpha": 2.0})
    np.testing.assert_array_equal(c.numpy(), np.full((2, 3), 8, np.float32))
    try:
        client.run("gemm", [a, b], [c], {"alpha": 3})
        sent_int = None
    except tileops.Error as e:
        sent_int = e
    if sent_int is not None:
        assert sent_int.status_name == "PARAM" and "alpha" in sent_int.message
    else:
        np.testing.assert_array_equal(c.numpy(), np.full((2, 3), 12, np.float32))
    keys = [k for k in _client._RUN_CACHE.entries if k[0] == "gemm" and k[3]]
    kinds = {k[3][0][1] for k in keys if k[3][0][0] == "alpha"}
    assert {float, int} <= kinds


def test_two_clients_with_the_same_handle_numbers_keep_their_own_results(daemon):
    with tileops.connect(daemon.address, name="a") as c1, \
            tileops.connect(daemon.address, name="b") as c2:
        t1 = [f32(c1, np.full(4, 1.0)), f32(c1, np.full(4, 2.0)), c1.tensor("f32", (4,))]
        t2 = [f32(c2, np.full(4, 10.0)), f32(c2, np.full(4, 20.0)), c2.tensor("f32", (4,))]
        for _ in range(2):
            ops.add(t1[0], t1[1], out=t1[2])
            ops.add(t2[0], t2[1], out=t2[2], submit=True)
        c2.sync()
        np.testing.assert_array_equal(t1[2].numpy(), np.full(4, 3.0, np.float32))
        np.testing.assert_array_equal(t2[2].numpy(), np.full(4, 30.0, np.float32))
        # A struct holds handle numbers only; the client is the call's own.
        c1.close()
        with pytest.raises(tileops.Error):
            ops.add(t1[0], t1[1], out=t1[2])
        ops.add(t2[0], t2[1], out=t2[2])


def test_a_freed_tensor_is_refused_and_its_successor_is_used(client):
    a, b = f32(client, np.ones(4)), f32(client, np.full(4, 2.0))
    y = client.tensor("f32", (4,))
    ops.add(a, b, out=y)
    y.free()
    with pytest.raises(tileops.Error):
        ops.add(a, b, out=y)  # handle 0: no output
    y2 = client.tensor("f32", (4,))
    ops.add(a, b, out=y2)
    np.testing.assert_array_equal(y2.numpy(), np.full(4, 3.0, np.float32))


def test_calls_the_fast_path_leaves_to_the_general_one_still_work(client):
    a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.ones((4, 3), np.float32)
    ta, tb = client.from_numpy(a), client.from_numpy(b)
    res = f32(client, np.full((2, 3), 100.0))
    out = client.tensor("f32", (2, 3))
    # An optional input left out between given ones (None in the middle).
    ops.gemm(ta, tb, None, res, out=out)
    np.testing.assert_allclose(out.numpy(), a @ b + 100)
    # Inputs by name, no out= (allocated), out= as a tuple.
    np.testing.assert_allclose(ops.gemm(a=ta, b=tb).numpy(), a @ b)
    ops.gemm(ta, tb, out=(out,))
    np.testing.assert_allclose(out.numpy(), a @ b)
    # Two outputs given as a tuple.
    x = f32(client, np.linspace(-2, 2, 4 * 128).reshape(4, 128))
    q, s = client.tensor("fp8_e4m3", (4, 128)), client.tensor("f32", (4, 1))
    assert ops.quant_fp8_per_token(x, out=(q, s)) == (q, s)
    assert (s.numpy() > 0).all()
    # Wrong calls still explain themselves.
    with pytest.raises(TypeError, match="missing input 'b'"):
        ops.gemm(ta, out=out)
    with pytest.raises(TypeError, match="not a tileops.Tensor"):
        ops.gemm(ta, a, out=out)
    with pytest.raises(TypeError, match="no input or param named 'alfa'"):
        ops.gemm(ta, tb, alfa=1.0, out=out)
    with pytest.raises(TypeError, match="takes 4 input tensors"):
        ops.gemm(ta, tb, None, None, ta, out=out)


def test_the_cache_is_bounded(client):
    x, y = f32(client, np.ones(4)), client.tensor("f32", (4,))
    spec = ops.leaky_relu.spec
    for i in range(spec.cache.limit + 10):
        ops.leaky_relu(x, negative_slope=0.001 * (i + 1), out=y)
    assert len(spec.cache.entries) <= spec.cache.limit
    np.testing.assert_allclose(y.numpy(), np.ones(4, np.float32))


@pytest.mark.skipif(not tileops._lib.lib().has("event_wait"), reason="libtileops has no IPC events")
def test_an_event_waited_on_again_is_refused_again_on_the_cpu_backend(client):
    # The handle's struct is kept for the next wait on the same event; the
    # daemon still answers every call (UNSUPPORTED here, as before).
    for h in (bytes(64), bytes(64), b"\1" * 64):
        with pytest.raises(tileops.Error) as e:
            client.event_wait(h)
        assert e.value.status_name == "UNSUPPORTED"
    with pytest.raises(ValueError, match="64 bytes, not 63"):
        client.event_wait(bytes(63))
