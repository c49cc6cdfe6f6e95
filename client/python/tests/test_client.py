"""The client side: errors, submit and sync, plans, two clients, stats,
tensor lifetime, the library lookup and the functions a library may lack."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tileops
from tileops import _lib, ops


def test_a_bad_shape_raises_error_with_the_daemons_message(client):
    x = client.from_numpy(np.ones((4, 64), np.float32))
    w = client.tensor("f32", (63,))
    with pytest.raises(tileops.Error) as e:
        ops.rms_norm(x, w, out=client.tensor("f32", (4, 64)))
    assert e.value.status_name == "SHAPE" and e.value.status == 10
    assert "rms_norm: weight has shape [63], expected [64]" in e.value.message


def test_a_bad_dtype_or_param_is_refused_by_the_daemon(client):
    x = client.from_numpy(np.ones((2, 8), np.float32))
    with pytest.raises(tileops.Error) as e:
        ops.rms_norm(x, client.tensor("f16", (8,)))
    assert e.value.status_name == "DTYPE" and "weight has dtype f16" in e.value.message
    with pytest.raises(tileops.Error) as e:
        ops.rms_norm(x, client.tensor("f32", (8,)), eps=2.0)
    assert e.value.status_name == "PARAM" and "eps" in e.value.message


def test_wrong_arguments_are_caught_before_sending(client):
    x = client.tensor("f32", (2, 8))
    with pytest.raises(TypeError, match="no input or param named 'epsilon'"):
        ops.rms_norm(x, x, epsilon=1e-5)
    with pytest.raises(TypeError, match="missing input 'weight'"):
        ops.rms_norm(x)
    with pytest.raises(TypeError, match="not a tileops.Tensor"):
        ops.rms_norm(x, np.ones(8, np.float32))


def test_an_unknown_op_through_run_is_unknown_op(client):
    x = client.tensor("f32", (2,))
    with pytest.raises(tileops.Error) as e:
        client.run("no_such_op", [x], [x])
    assert e.value.status_name == "UNKNOWN_OP"


def test_submitted_ops_pipeline_and_sync_raises_their_error(client):
    a = client.from_numpy(np.zeros(16, np.float32))
    one = client.from_numpy(np.ones(16, np.float32))
    for _ in range(300):  # beyond the library's 256 outstanding completions
        ops.add(a, one, out=a, submit=True)
    client.sync()
    np.testing.assert_array_equal(a.numpy(), np.full(16, 300, np.float32))
    ops.rms_norm(a,
                 client.tensor("f32", (15,)), out=client.tensor("f32", (16,)), submit=True)
    with pytest.raises(tileops.Error) as e:
        client.sync()
    assert e.value.status_name == "SHAPE"
    client.sync()  # the error was reported once


def test_a_timed_op_reports_its_device_time(client):
    x = client.from_numpy(np.ones((64, 64), np.float32))
    cp = client.run("relu", [x], [client.tensor("f32", (64, 64))], timed=True)
    assert cp.gpu_us() >= 0
    cp.free()


def test_a_plan_with_buckets_and_bindings_replays(client):
    rows, d = 8, 32
    x = client.tensor("f32", (rows, d))
    w = client.from_numpy(np.full(d, 2.0, np.float32))
    y = client.tensor("f32", (rows, d))
    with client.plan(buckets=[1, 2, 4, 8], bucketed=[x, y], name="pytest-plan") as p:
        ops.rms_norm(x, w, eps=1e-6, out=y, plan=p)
        ops.add(y, y, out=y, plan=p)
    xa = np.random.default_rng(1).standard_normal((rows, d)).astype(np.float32)
    x.write(xa)

    def ref(v):
        return 2 * (v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * 2.0)

    p.run(3)  # bucket 4: rows 0..3 computed, 4..7 untouched
    got = y.numpy()
    np.testing.assert_allclose(got[:4], ref(xa[:4]), rtol=1e-5)
    assert not got[4:].any()
    # A tensor bound in x's place is read on this run and the later ones.
    x2 = client.from_numpy(xa[::-1].copy())
    p.run(bindings={x: x2})
    np.testing.assert_allclose(y.numpy(), ref(xa[::-1]), rtol=1e-5)
    p.run()
    np.testing.assert_allclose(y.numpy(), ref(xa[::-1]), rtol=1e-5)
    p.free()


def test_a_plan_with_a_bad_op_is_refused_at_end(client):
    x = client.tensor("f32", (4, 8))
    with pytest.raises(tileops.Error) as e:
        with client.plan() as p:
            ops.rms_norm(x, client.tensor("f32", (7,)), out=x, plan=p)
    assert e.value.status_name == "SHAPE" and "weight" in e.value.message


def test_two_clients_at_once_keep_their_own_tensors(daemon):
    with tileops.connect(daemon.address, name="one") as c1, \
            tileops.connect(daemon.address, name="two") as c2:
        assert c1.session_id != c2.session_id
        results = {}

        def work(c, k):
            a = c.from_numpy(np.full(1024, k, np.float32))
            for _ in range(50):
                ops.add(a, a, out=a, submit=True)
                ops.mul(a, c.from_numpy(np.full(1024, 0.5, np.float32)), out=a, submit=True)
            c.sync()
            results[k] = a.numpy()

        ts = [threading.Thread(target=work, args=(c, k)) for c, k in ((c1, 1.0), (c2, 3.0))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        np.testing.assert_array_equal(results[1.0], np.full(1024, 1.0, np.float32))
        np.testing.assert_array_equal(results[3.0], np.full(1024, 3.0, np.float32))
        # A handle of one session means nothing in the other.
        t1 = c1.tensor("f32", (4,))
        foreign = tileops.Tensor(c2, t1.handle, "f32", (4,), owned=False)
        with pytest.raises(tileops.Error) as e:
            foreign.numpy()
        assert e.value.status_name == "UNKNOWN_HANDLE"


def test_stats_count_the_sessions_tensors(client):
    before = client.stats()["tensors"]
    t = client.tensor("f32", (16,))
    assert client.stats()["tensors"] == before + 1
    del t  # garbage collection frees the daemon's tensor
    assert client.stats()["tensors"] == before
    assert client.stats()["sessions"] >= 1


def test_closing_the_client_ends_its_tensors(client):
    t = client.tensor("f32", (4,))
    client.close()
    with pytest.raises(ValueError, match="closed"):
        t.numpy()
    client.close()  # idempotent


def test_server_info_says_cpu_backend(client):
    assert client.backend == "cpu" and not client.has_cuda_ipc
    assert client.daemon_version


def test_functions_the_library_lacks_raise_not_implemented(client):
    lib = _lib.lib()
    x = client.tensor("f32", (4, 8))
    if not lib.has("tensor_view"):
        with pytest.raises(NotImplementedError, match="tileops_tensor_view"):
            x.view((8, 4))
    if not lib.has("event_wait"):
        with pytest.raises(NotImplementedError, match="tileops_event_wait"):
            client.event_wait(bytes(64))
        with pytest.raises(NotImplementedError):
            x.export_ipc()


@pytest.mark.skipif(not _lib.lib().has("tensor_view"), reason="libtileops has no tensor_view")
def test_a_view_at_an_offset_is_written_by_an_op(client):
    base = client.from_numpy(np.zeros((4, 8), np.float32))
    row2 = base.view((8,), offset=2 * 8 * 4)
    ops.add(client.from_numpy(np.ones(8, np.float32)), client.from_numpy(np.ones(8, np.float32)),
            out=row2)
    want = np.zeros((4, 8), np.float32)
    want[2] = 2
    np.testing.assert_array_equal(base.numpy(), want)
    q = base.reshape(2, 16)
    assert q.shape == (2, 16)
    np.testing.assert_array_equal(q.numpy(), want.reshape(2, 16))


@pytest.mark.skipif(not _lib.lib().has("event_wait"), reason="libtileops has no IPC events")
def test_imports_and_events_are_unsupported_on_the_cpu_backend(client):
    x = client.tensor("f32", (4,))
    for call in (lambda: x.export_ipc(), lambda: client.event_record(),
                 lambda: client.event_wait(bytes(64)),
                 lambda: client.import_ipc(bytes(64), 0, 16, "f32", (4,))):
        with pytest.raises(tileops.Error) as e:
            call()
        assert e.value.status_name == "UNSUPPORTED"


def test_the_library_is_found_without_settings_from_the_build_tree():
    # The build tree's package names its libtileops in _config.py.
    env = {k: v for k, v in os.environ.items() if k != "TILEOPS_LIBRARY"}
    out = subprocess.run([sys.executable, "-c", "import tileops; print(tileops.library_path())"],
                         env=env, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    assert os.path.exists(out) and "libtileops.so" in out
    env["TILEOPS_LIBRARY"] = "/nonexistent/libtileops.so"
    r = subprocess.run([sys.executable, "-c", "import tileops; tileops.library_path()"],
                       env=env, stderr=subprocess.PIPE, text=True)
    assert r.returncode != 0 and "TILEOPS_LIBRARY" in r.stderr


def test_torchs_versioned_ipc_handles_are_unwrapped_and_expandable_segments_refused():
    from tileops import _ipc
    h = bytes(range(64))
    assert _ipc.torch_mem_handle(h) == h
    assert _ipc.torch_mem_handle(b"\x02c" + h) == h
    assert _ipc.torch_mem_handle(b"\x03c" + h) == h
    with pytest.raises(ValueError, match="expandable_segments:False"):
        _ipc.torch_mem_handle(b"\x02e" + b"\x00" * 40)
    with pytest.raises(ValueError, match="of 10 bytes"):
        _ipc.torch_mem_handle(b"\x00" * 10)
