"""tileops.pytorch.run's fast path over registered tensors (run_registered),
on the CPU backend. Only CUDA tensors are registered for real; here CPU
torch tensors stand in for them, mapped by hand to daemon tensors, so that
the lookup and the cached call are tested where no GPU is. Skipped without
torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402
from tileops.ops import _SLOW  # noqa: E402


def stand_in(client, t, value):
    """Register CPU tensor t as if it were a CUDA one, over a daemon tensor
    filled with `value`."""
    x = client.from_numpy(np.full(tuple(t.shape), value, np.float32))
    client._torch_bridge().registered[tp._key(t)] = x
    return x


def test_registered_tensors_are_found_by_address_dtype_shape_and_strides(client):
    b = client._torch_bridge()
    t = torch.zeros(4, 4)
    x = stand_in(client, t, 1.0)
    assert b.lookup(t) is x
    assert b.lookup(t.view(16)) is None            # same address, other shape
    assert b.lookup(t.t()) is None                 # same address and shape, other strides
    assert b.lookup(t.view(torch.int32)) is None   # other dtype
    assert b.lookup(t[1:]) is None                 # other address


def test_run_over_registered_tensors_uses_them_and_the_cache(client):
    ta, tb, ty = torch.zeros(2, 8), torch.zeros(2, 8), torch.zeros(2, 8)
    xa, xb, xy = stand_in(client, ta, 1.0), stand_in(client, tb, 2.0), stand_in(client, ty, 0.0)
    spec = tileops.ops.add.spec
    for _ in range(3):
        assert tp.run("add", ta, tb, out=ty, client=client, order=False) is ty
    # The daemon's tensors were used (a copy would have left them alone).
    np.testing.assert_array_equal(xy.numpy(), np.full((2, 8), 3.0, np.float32))
    assert (spec.cache.get(((xa.handle, xb.handle), (xy.handle,))) is not None)


def test_a_registered_call_still_raises_the_daemons_error(client):
    tx, tw, ty = torch.zeros(4, 64), torch.zeros(63), torch.zeros(4, 64)
    for t, v in ((tx, 1.0), (tw, 1.0), (ty, 0.0)):
        stand_in(client, t, v)
    for _ in range(2):  # the second call is a cache hit
        with pytest.raises(tileops.Error) as e:
            tp.run("rms_norm", tx, tw, eps=1e-5, out=ty, client=client, order=False)
        assert e.value.status_name == "SHAPE" and "weight has shape [63]" in e.value.message


def test_a_freed_or_unregistered_tensor_is_not_found_again(client):
    b = client._torch_bridge()
    t = torch.zeros(8)
    x = stand_in(client, t, 1.0)
    x.free()
    assert b.lookup(t) is None
    assert b.run_registered(tileops.ops.add.spec, (t, t), t, {}) is _SLOW
    # Registered again at the same address: the new tensor, not the old.
    x2 = stand_in(client, t, 5.0)
    assert b.lookup(t) is x2
    tp.unregister(t, client)
    assert b.lookup(t) is None and x2.handle == 0


def test_calls_the_fast_path_leaves_alone_go_the_general_way(client):
    # Not registered (CPU tensors, copied), None params, inputs by name.
    x, w = torch.randn(4, 64), torch.randn(64)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    y = torch.empty(4, 64)
    tp.run("rms_norm", x, w, eps=1e-5, out=y, client=client, order=False)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    y2 = tp.run("rms_norm", x=x, weight=w, eps=1e-5, client=client, order=False)
    torch.testing.assert_close(y2, ref, rtol=1e-5, atol=1e-5)
    c = tp.run("clamp", x, max_value=None, min_value=0.0, client=client, order=False)
    torch.testing.assert_close(c, x.clamp(min=0.0))


# ---- submit=True ---------------------------------------------------------------------------
def test_submit_over_registered_tensors_returns_at_once_and_runs_in_order(client):
    ta, tb, ty = torch.zeros(2, 8), torch.zeros(2, 8), torch.zeros(2, 8)
    xa, xb, xy = stand_in(client, ta, 1.0), stand_in(client, tb, 2.0), stand_in(client, ty, 0.0)
    for _ in range(3):
        assert tp.run("add", ta, tb, out=ty, client=client, order=False, submit=True) is ty
        assert tp.run("add", ty, tb, out=ta, client=client, order=False, submit=True) is ta
    client.sync()
    # a = 1; three times: y = a + 2, a = y + 2  ->  a = 13, y = 11
    np.testing.assert_array_equal(xa.numpy(), np.full((2, 8), 13.0, np.float32))
    np.testing.assert_array_equal(xy.numpy(), np.full((2, 8), 11.0, np.float32))


def test_a_submitted_registered_call_raises_the_daemons_error_at_sync(client):
    tx, tw, ty = torch.zeros(4, 64), torch.zeros(63), torch.zeros(4, 64)
    for t, v in ((tx, 1.0), (tw, 1.0), (ty, 0.0)):
        stand_in(client, t, v)
    tp.run("rms_norm", tx, tw, eps=1e-5, out=ty, client=client, order=False, submit=True)
    with pytest.raises(tileops.Error) as e:
        client.sync()
    assert e.value.status_name == "SHAPE" and "weight has shape [63]" in e.value.message
    client.sync()  # reported once


def test_submit_with_cpu_tensors_copies_the_result_back_and_defers_errors(client):
    a = torch.arange(8, dtype=torch.float32)
    y = tp.run("add", a, a, client=client, submit=True)
    assert torch.equal(y, 2 * a)  # the copy back read after the op
    tp.run("rms_norm", torch.zeros(4, 64), torch.zeros(63), eps=1e-5, client=client,
           submit=True)          # refused, but only the next sync says so
    with pytest.raises(tileops.Error) as e:
        client.sync()
    assert e.value.status_name == "SHAPE"
