"""Several devices from Python: client.devices, device= on the calls that
make tensors, client.copy within and between devices, outputs allocated on
their inputs' device, the refusal of an op whose tensors are on two
devices, the collectives over tensors on several, and a plan over two
devices with a collective in it. Most tests run against a daemon with
`devices = 0-3` (emulated devices on the CPU backend); the last ones against
the module's default daemon, which serves one."""
import numpy as np
import pytest

import tileops
from tileops import ops


@pytest.fixture
def mclient(multi_daemon):
    with tileops.connect(multi_daemon.address, name="pytest-devices") as c:
        yield c


def _names_devices(message, a, b):
    words = message.replace(",", " ").replace(")", " ").replace("(", " ").split()
    return "device" in message.lower() and str(a) in words and str(b) in words


def test_devices_lists_four_by_index_ordinal_and_name(mclient):
    devs = mclient.devices
    assert len(devs) == 4
    for i, d in enumerate(devs):
        assert isinstance(d, tileops.Device)
        assert d.index == i and d.ordinal == i
        assert isinstance(d.name, str) and d.name
        assert d.memory_bytes == 0  # emulated devices report no memory of their own


def test_device_keyword_creates_tensors_on_that_device(mclient):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    ts = [mclient.from_numpy(a + 100 * d, device=d) for d in range(4)]
    assert [t.device for t in ts] == [0, 1, 2, 3]
    for d, t in enumerate(ts):
        np.testing.assert_array_equal(t.numpy(), a + 100 * d)
    z = mclient.tensor("bf16", (3,), device=mclient.devices[3])
    assert z.device == 3 and "on device 3" in repr(z)
    assert z.view((3,)).device == 3  # a view lives on its base's device


def test_a_device_past_the_count_is_refused_naming_it(mclient):
    with pytest.raises(tileops.Error) as e:
        mclient.tensor("f32", (4,), device=4)
    assert e.value.status_name == "INVALID_ARGUMENT"
    assert "serves 4 devices" in e.value.message


def test_copy_between_devices_and_within_one_moves_every_byte(mclient):
    a = np.random.default_rng(3).standard_normal((8, 17)).astype(np.float32)
    src = mclient.from_numpy(a, device=2)
    dst = mclient.tensor("f32", a.shape, device=0)
    mclient.copy(dst, src)
    np.testing.assert_array_equal(dst.numpy(), a)
    again = mclient.tensor("f32", a.shape, device=0)
    mclient.copy(again, dst)
    mclient.sync()
    np.testing.assert_array_equal(again.numpy(), a)


def test_copy_of_unequal_sizes_raises_naming_both(mclient):
    dst = mclient.from_numpy(np.ones(5, np.float32), device=1)
    src = mclient.tensor("f32", (7,), device=1)
    with pytest.raises(tileops.Error) as e:
        mclient.copy(dst, src)
    assert e.value.status_name == "INVALID_ARGUMENT"
    assert "20" in e.value.message and "28" in e.value.message
    np.testing.assert_array_equal(dst.numpy(), np.ones(5, np.float32))


def test_an_op_over_two_devices_raises_naming_them(mclient):
    x = mclient.from_numpy(np.ones(16, np.float32), device=0)
    y = mclient.from_numpy(np.ones(16, np.float32), device=1)
    with pytest.raises(tileops.Error) as e:
        ops.add(x, y, out=mclient.tensor("f32", (16,), device=0))
    assert e.value.status_name == "INVALID_ARGUMENT"
    assert _names_devices(e.value.message, 0, 1), e.value.message


def test_outputs_are_allocated_on_their_inputs_device(mclient):
    a = np.linspace(-1, 1, 32, dtype=np.float32)
    x = mclient.from_numpy(a, device=2)
    y = mclient.from_numpy(2 * a, device=2)
    out = ops.add(x, y)
    assert out.device == 2
    np.testing.assert_array_equal(out.numpy(), 3 * a)
    # Submitted (through the rings) and with a plan, on device 2 as well.
    ops.add(out, y, out=out, submit=True)
    mclient.sync()
    np.testing.assert_allclose(out.numpy(), 5 * a, rtol=1e-6)
    z = mclient.tensor("f32", (32,), device=2)
    with mclient.plan() as p:
        ops.mul(x, y, out=z, plan=p)
    p.run()
    np.testing.assert_array_equal(z.numpy(), 2 * a * a)


def test_all_reduce_over_four_devices_sums_in_place(mclient):
    rng = np.random.default_rng(11)
    parts = [rng.integers(-8, 8, (4, 32)).astype(np.float32) for _ in range(4)]
    ts = [mclient.from_numpy(p, device=d) for d, p in enumerate(parts)]
    assert ops.all_reduce(*ts) is None  # in place: no outputs
    for t in ts:
        np.testing.assert_array_equal(t.numpy(), sum(parts))
    ops.all_reduce(*ts[:2], reduce=2)  # min of equal tensors: unchanged
    np.testing.assert_array_equal(ts[1].numpy(), sum(parts))


def test_a_plan_over_two_devices_with_an_all_reduce_runs_right_twice(mclient):
    # Per device x_d * w_d, the all_reduce of the two, then + b_d: one plan,
    # run twice with new inputs (a capture, then a replay).
    rng = np.random.default_rng(5)
    shape = (4, 16)
    x = [mclient.tensor("f32", shape, device=d) for d in (1, 3)]
    w = [mclient.from_numpy(np.full(shape, d + 1.5, np.float32), device=d) for d in (1, 3)]
    b = [mclient.from_numpy(np.full(shape, -d, np.float32), device=d) for d in (1, 3)]
    y = [mclient.tensor("f32", shape, device=d) for d in (1, 3)]
    z = [mclient.tensor("f32", shape, device=d) for d in (1, 3)]
    with mclient.plan() as p:
        for r in range(2):
            ops.mul(x[r], w[r], out=y[r], plan=p)
        ops.all_reduce(*y, plan=p)
        for r in range(2):
            ops.add(y[r], b[r], out=z[r], plan=p)
    for _ in range(2):
        xs = [rng.integers(-8, 8, shape).astype(np.float32) for _ in range(2)]
        for t, a in zip(x, xs):
            t.write(a)
        p.run()
        total = xs[0] * 2.5 + xs[1] * 4.5
        for r, d in enumerate((1, 3)):
            np.testing.assert_array_equal(y[r].numpy(), total)
            np.testing.assert_array_equal(z[r].numpy(), total - d)


def test_all_gather_and_reduce_scatter_follow_the_rank_order_given(mclient):
    devs = [2, 0, 3]
    whole = np.zeros((3, 5), np.float32)
    ts = []
    for r, d in enumerate(devs):
        mine = np.full((3, 5), -1.0, np.float32)
        mine[r] = np.arange(5) + 10 * r  # rank r's own part
        whole[r] = mine[r]
        ts.append(mclient.from_numpy(mine, device=d))
    ops.all_gather(*ts)
    for t in ts:
        np.testing.assert_array_equal(t.numpy(), whole)
    ops.reduce_scatter(*ts, reduce=1)  # max of equal parts: each part as it was
    for t in ts:
        np.testing.assert_array_equal(t.numpy(), whole)


def test_a_collective_with_two_ranks_on_one_device_raises_naming_it(mclient):
    a = mclient.from_numpy(np.ones(8, np.float32), device=1)
    b = mclient.from_numpy(np.ones(8, np.float32), device=1)
    with pytest.raises(tileops.Error) as e:
        ops.all_reduce(a, b)
    assert e.value.status_name == "INVALID_ARGUMENT"
    assert "both on device 1" in e.value.message


def test_copy_refuses_what_is_not_a_tensor_of_this_client(mclient, multi_daemon):
    t = mclient.tensor("f32", (4,))
    with pytest.raises(TypeError, match="src is a ndarray"):
        mclient.copy(t, np.zeros(4, np.float32))
    with tileops.connect(multi_daemon.address, name="pytest-devices-other") as other:
        with pytest.raises(ValueError, match="dst is a tensor of another client"):
            mclient.copy(other.tensor("f32", (4,)), t)


# ---- the default daemon: one device ------------------------------------------------------


def test_a_default_daemon_serves_one_device(client):
    assert len(client.devices) == 1
    d = client.devices[0]
    assert d.index == 0 and d.name
    t = client.tensor("f32", (4,))
    assert t.device == 0 and "device" not in repr(t)
    with pytest.raises(tileops.Error) as e:
        client.tensor("f32", (4,), device=1)
    assert e.value.status_name == "INVALID_ARGUMENT" and "serves 1 device" in e.value.message


def test_device_takes_an_index_or_a_device_and_nothing_else(client):
    assert client.tensor("f32", (2,), device=client.devices[0]).device == 0
    assert client.tensor("f32", (2,), device=np.int64(0)).device == 0
    with pytest.raises(TypeError, match="got str"):
        client.tensor("f32", (2,), device="cuda:0")
    with pytest.raises(TypeError, match="got bool"):
        client.tensor("f32", (2,), device=False)
