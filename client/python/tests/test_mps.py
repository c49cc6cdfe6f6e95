"""The torch bridge's MPS check (tileops._mps): which side it names when the
daemon's or this process's contexts are not shared through MPS, silence when
both are or where there are no GPU tensors, and the driver queries it makes
(through a stand-in for libcuda, so that it runs without a GPU). A client of
the CPU-backend daemon says it has no MPS."""
import warnings

import pytest

import tileops
from tileops import _mps


class FakeClient:
    def __init__(self, ipc, mps):
        self.has_cuda_ipc, self.has_mps = ipc, mps


class FakeDriver:
    """cuDeviceGet and cuDeviceGetAttribute as libcuda answers them."""

    def __init__(self, mps=1, status=0):
        self.mps, self.status, self.calls = mps, status, []

    def cuDeviceGet(self, dev, ordinal):
        self.calls.append(("cuDeviceGet", ordinal))
        dev._obj.value = 40 + ordinal
        return self.status

    def cuDeviceGetAttribute(self, value, attribute, dev):
        self.calls.append(("cuDeviceGetAttribute", attribute, dev.value))
        value._obj.value = self.mps
        return 0


def test_process_mps_asks_the_driver_for_the_device_given():
    d = FakeDriver(mps=1)
    assert _mps.process_mps(2, d) is True
    assert d.calls == [("cuDeviceGet", 2), ("cuDeviceGetAttribute", 133, 42)]
    assert _mps.process_mps(0, FakeDriver(mps=0)) is False


def test_process_mps_is_unknown_when_the_driver_refuses():
    assert _mps.process_mps(0, FakeDriver(status=3)) is None  # CUDA_ERROR_NOT_INITIALIZED


def test_both_under_mps_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _mps.check(FakeClient(True, True), 0, FakeDriver(mps=1)) is None


def test_no_gpu_tensors_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _mps.check(FakeClient(False, False), 0, FakeDriver(mps=0)) is None


@pytest.mark.parametrize("daemon_mps, here, names", [
    (False, 1, ["tileopsd's CUDA context is"]),
    (True, 0, ["this process's CUDA context is"]),
    (False, 0, ["tileopsd's and this process's CUDA contexts are"]),
])
def test_the_warning_names_the_side_without_mps(daemon_mps, here, names):
    with pytest.warns(tileops.TimeSlicingWarning) as got:
        text = _mps.check(FakeClient(True, daemon_mps), 0, FakeDriver(mps=here))
    assert len(got) == 1 and str(got[0].message) == text
    for n in names:
        assert n in text
    assert "MPS" in text and "docs/python.md" in text


def test_an_unknown_process_side_blames_only_the_daemon():
    with pytest.warns(tileops.TimeSlicingWarning) as got:
        _mps.check(FakeClient(True, False), 0, FakeDriver(status=100))
    assert "this process" not in str(got[0].message)


def test_the_cpu_daemon_has_no_mps(client):
    if client.has_cuda_ipc:
        pytest.skip("the module's daemon runs the CUDA backend")
    assert client.has_mps is False

