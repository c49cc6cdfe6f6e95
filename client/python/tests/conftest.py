"""Fixtures: a tileopsd of the test's own, started from the build tree.

TILEOPSD names the daemon (ctest sets it; by hand it defaults to
build/daemon/tileopsd of the source tree), TILEOPS_MANIFEST the manifest.
Each test module gets a daemon in a fresh folder under /tmp (ipc:// paths
must fit in 108 bytes), started with --ready-file and stopped with SIGTERM,
which must end it with status 0.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU, a CUDA tileopsd and torch with CUDA")
    config.addinivalue_line("markers", "install: installs the package (pip, cmake --install)")


def _daemon_binary():
    path = os.environ.get("TILEOPSD") or os.path.join(SRC, "build", "daemon", "tileopsd")
    if not os.path.exists(path):
        pytest.skip("no tileopsd at %s (set TILEOPSD)" % path)
    return path


class Daemon:
    """A tileopsd of the test's own; `config`, when given, is the text of its
    config file (tileopsd --config)."""

    def __init__(self, backend="cpu", extra=(), config=None):
        self.dir = tempfile.mkdtemp(prefix="tileops-py-", dir="/tmp")
        self.address = "ipc://%s/d.sock" % self.dir
        self.stats_address = "ipc://%s/stats.sock" % self.dir
        self.log_path = os.path.join(self.dir, "tileopsd.log")
        ready = os.path.join(self.dir, "ready")
        manifest = os.environ.get("TILEOPS_MANIFEST") or os.path.join(SRC, "manifest")
        extra = list(extra)
        if config is not None:
            conf = os.path.join(self.dir, "tileopsd.conf")
            with open(conf, "w") as f:
                f.write(config)
            extra += ["--config", conf]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [_daemon_binary(), "--backend", backend, "--listen", self.address,
             "--stats", self.stats_address, "--manifest", manifest, "--ready-file", ready,
             "--log-level", "info"] + extra,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(ready) and os.path.getsize(ready) > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("tileopsd did not start:\n" + self.log_tail())
            time.sleep(0.05)

    def log_tail(self):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-40:])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            st = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            st = "no exit within 20 s"
        self.log.close()
        if st != 0:
            raise AssertionError("tileopsd exited with %s:\n%s" % (st, self.log_tail()))
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(extra=["--diagnostic-ops"])
    yield d
    d.stop()


@pytest.fixture(scope="module")
def multi_daemon():
    """A daemon serving four devices (emulated ones on the CPU backend)."""
    d = Daemon(config="devices = 0-3\n")
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    import tileops
    with tileops.connect(daemon.address, name="pytest") as c:
        yield c
