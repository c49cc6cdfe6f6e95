"""The PyTorch path on the CPU backend (copies through the arena): torch
tensors in and out, torch.ops.tileops.* inside a module's forward, the
decode-layer example. Skipped without torch."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def tclient(client):
    tp.set_client(client)
    yield client
    tp.set_client(None)


def test_torch_tensors_round_trip_through_the_daemon(tclient):
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
        t = (torch.randn(3, 5) * 10).to(dt)
        back = tclient.from_torch(t).to_torch()
        assert back.dtype == dt and torch.equal(back, t)


def test_run_takes_torch_tensors_and_allocates_outputs(tclient):
    x, w = torch.randn(4, 64), torch.randn(64)
    y = tp.run("rms_norm", x, w, eps=1e-5)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    out = torch.empty(4, 8)
    a, b = torch.randn(4, 64), torch.randn(8, 64)
    assert tp.run("gemm", a, b, trans_b=True, out=out) is out
    torch.testing.assert_close(out, a @ b.T, rtol=1e-4, atol=1e-4)


def test_ops_that_write_their_inputs_write_the_torch_tensors(tclient):
    r, x, w = torch.randn(2, 16), torch.randn(2, 16), torch.ones(16)
    s = r + x
    y = torch.ops.tileops.fused_add_rms_norm(x, r, w, 1e-6)
    torch.testing.assert_close(r, s)  # the residual input now holds the sum
    torch.testing.assert_close(y, s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_custom_ops_run_inside_a_modules_forward_and_trace(tclient):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(32), requires_grad=False)
            self.lin = torch.nn.Linear(32, 64, bias=False)

        def forward(self, x):
            h = torch.ops.tileops.rms_norm(x, self.w, 1e-5)
            g = torch.ops.tileops.gemm(h, self.lin.weight.detach(), None, None, 1.0, True)
            return torch.ops.tileops.silu_and_mul(g)

    m = Block()
    x = torch.randn(3, 32)
    with torch.no_grad():
        got = m(x)
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * m.w
        g = h @ m.lin.weight.T
        ref = torch.nn.functional.silu(g[:, :32]) * g[:, 32:]
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
        graph = str(torch.jit.trace(m, x).graph)
    assert "tileops::rms_norm" in graph and "tileops::silu_and_mul" in graph


def test_every_manifest_op_is_a_torch_op():
    for name in tileops.ops.specs:
        assert hasattr(torch.ops.tileops, name), name
    s = str(torch.ops.tileops.clamp.default._schema)
    assert "float? max_value=None" in s  # an infinite default


def test_the_decode_layer_example_matches_pytorch(daemon):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "llama_decode_layer.py"),
                        "--address", daemon.address, "--device", "cpu", "--steps", "1"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout
