"""On a GPU (ctest -L gpu): torch CUDA tensors inside the caching allocator
imported at their offsets and written by ops, outputs against torch's, and
ordering with torch's stream by IPC events with no host sync. A CUDA-backend
tileopsd of the module's own."""
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA device", allow_module_level=True)

import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402
from conftest import Daemon  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def gpu_daemon():
    d = Daemon(backend="cuda")
    yield d
    d.stop()


@pytest.fixture
def gclient(gpu_daemon):
    with tileops.connect(gpu_daemon.address, name="pytest-gpu") as c:
        assert c.has_cuda_ipc, "the daemon runs the %s backend" % c.backend
        tp.set_client(c)
        yield c
        tp.set_client(None)


def test_tensors_at_offsets_in_torchs_blocks_are_imported_and_written(gclient):
    # Small tensors share one block of the caching allocator, and slices of
    # one tensor sit at offsets in its storage: both offsets must be honoured.
    pad = torch.full((1000,), 7.0, device="cuda")
    big = torch.full((1 << 16,), -1.0, device="cuda")
    x = big[1024:1024 + 4 * 256].view(4, 256)
    y = big[8192:8192 + 4 * 256].view(4, 256)
    w = torch.randn(256, device="cuda")
    x.copy_(torch.randn(4, 256, device="cuda"))
    assert x.storage_offset() > 0 and y.storage_offset() > 0
    tp.run("rms_norm", x, w, eps=1e-5, out=y)
    torch.cuda.synchronize()
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    # Nothing around y was touched.
    assert (big[:1024] == -1).all() and (big[8192 + 1024:] == -1).all()
    assert (big[1024 + 1024:8192] == -1).all() and (pad == 7).all()


@pytest.mark.parametrize("dt,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2), (torch.float16, 1e-2)])
def test_outputs_equal_torchs_within_tolerance(gclient, dt, tol):
    a, b = torch.randn(64, 128, device="cuda", dtype=dt), torch.randn(96, 128, device="cuda", dtype=dt)
    torch.testing.assert_close(tp.run("gemm", a, b, trans_b=True).float(), (a.float() @ b.float().T),
                               rtol=tol, atol=tol * 16)
    g = torch.randn(8, 512, device="cuda", dtype=dt)
    want = (torch.nn.functional.silu(g[:, :256].float()) * g[:, 256:].float())
    torch.testing.assert_close(tp.run("silu_and_mul", g).float(), want, rtol=tol, atol=tol)
    torch.testing.assert_close(tp.run("softmax", g).float(), g.float().softmax(-1), rtol=tol, atol=tol)


def test_an_op_reads_what_a_torch_kernel_wrote_just_before_without_a_host_sync(gclient):
    x = torch.zeros(1 << 20, device="cuda")
    y = torch.zeros(1 << 20, device="cuda")
    tp.register(x)
    tp.register(y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(int(4e8))   # about 0.2 s of device time on torch's stream
    x.fill_(3.0)                  # queued behind it
    tp.run("add", x, x, out=y)    # the daemon waits for the fill on the device
    host_s = time.perf_counter() - t0
    got = y[:8].cpu()             # torch's stream waited for the daemon's add
    assert host_s < 0.1, "the call waited %.3f s on the host" % host_s
    assert (got == 6.0).all(), got
    tp.unregister(x)
    tp.unregister(y)


def test_a_daemon_tensor_is_seen_by_torch_without_a_copy(gclient):
    import numpy as np
    t = gclient.from_numpy(np.arange(16, dtype=np.float32))
    v = t.to_torch()
    assert v.is_cuda and torch.equal(v.cpu(), torch.arange(16, dtype=torch.float32))
    tileops.ops.add(t, t, out=t)
    tp.torch_waits(gclient)
    assert torch.equal(v.cpu(), 2 * torch.arange(16, dtype=torch.float32))


def test_the_decode_layer_example_matches_pytorch_on_cuda(gpu_daemon):
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "llama_decode_layer.py"),
                        "--address", gpu_daemon.address, "--device", "cuda",
                        "--batch", "8", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
                        "--inter", "14336", "--ctx", "1024", "--steps", "20"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout


def test_submitted_ops_between_registered_event_waits_order_with_torch_every_step(gclient):
    """wait_for_torch / torch_waits with events registered once (the client's
    per stream, the daemon's exported once) and ops submitted without waiting
    for answers: every step reads torch's latest write and torch reads the
    daemon's, with no host sync, and the events are not made again."""
    x = torch.zeros(1 << 16, device="cuda")
    y = torch.zeros(1 << 16, device="cuda")
    tp.register(x)
    tp.register(y)
    b = gclient._torch_bridge()
    assert b.fast_events, "the library lacks tileops_event_register"
    tp.wait_for_torch(gclient)
    tp.torch_waits(gclient)
    events, daemon_event = dict(b.stream_events), b.daemon_event
    for i in range(200):
        if i % 50 == 3:
            torch.cuda._sleep(int(1e8))   # a missed wait reads the old x
        x.fill_(float(i))
        tp.wait_for_torch(gclient)
        tp.run("add", x, x, out=y, client=gclient, order=False, submit=True)
        tp.run("add", y, x, out=y, client=gclient, order=False, submit=True)
        tp.torch_waits(gclient)
        assert y[:4].sum().item() == 12.0 * i, "step %d" % i  # torch read after the daemon
    assert {k: v[1] for k, v in b.stream_events.items()} == {k: v[1] for k, v in events.items()}
    assert b.daemon_event is daemon_event
    # A refused submitted op is raised by the next torch_waits.
    x2, y2, w7 = x.view(16, -1), y.view(16, -1), torch.zeros(7, device="cuda")
    for t in (x2, y2, w7):
        tp.register(t)
    tp.wait_for_torch(gclient)
    tp.run("rms_norm", x2, w7, eps=1e-5, out=y2, client=gclient, submit=True, order=False)
    with pytest.raises(tileops.Error) as e:
        tp.torch_waits(gclient)
    assert e.value.status_name == "SHAPE"
    for t in (x, y, x2, y2, w7):
        tp.unregister(t)
