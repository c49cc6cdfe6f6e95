"""Events opened once (Client.event_register, event_wait_registered,
event_export, event_record_now) on the CPU backend: refused with UNSUPPORTED,
the pipelined wait's refusal raised by the next sync or record, bad
arguments refused before anything is sent. No torch needed."""
import numpy as np
import pytest

import tileops


def test_register_and_export_are_unsupported_on_the_cpu_backend(client):
    with pytest.raises(tileops.Error) as e:
        client.event_register(b"\x5a" * 64)
    assert e.value.status_name == "UNSUPPORTED" and "CUDA backend" in e.value.message
    with pytest.raises(tileops.Error) as e:
        client.event_export()
    assert e.value.status_name == "UNSUPPORTED" and "event_export" in e.value.message
    with pytest.raises(ValueError):
        client.event_register(b"\x00" * 63)


def test_a_pipelined_wait_is_refused_at_the_next_sync(client):
    client.event_wait_registered(5)       # returns at once: no round trip
    x = client.from_numpy(np.ones(4, np.float32))
    tileops.ops.add(x, x, out=x, submit=True)
    with pytest.raises(tileops.Error) as e:
        client.sync()
    assert e.value.status_name == "UNSUPPORTED" and "event_wait_submit" in e.value.message
    client.sync()                          # reported once
    np.testing.assert_array_equal(x.numpy(), np.full(4, 2.0, np.float32))


def test_a_record_raises_its_own_refusal_and_the_work_before_it(client):
    with pytest.raises(tileops.Error) as e:
        client.event_record_now()
    assert e.value.status_name == "UNSUPPORTED" and "event_record_submit" in e.value.message
    x = client.from_numpy(np.ones(4, np.float32))
    w = client.from_numpy(np.ones(3, np.float32))
    tileops.ops.rms_norm(x, w, out=x, submit=True)  # refused: weight shape
    with pytest.raises(tileops.Error) as e:
        client.event_record_now()
    assert e.value.status_name == "SHAPE"   # the earlier refusal comes first
    client.sync()


def test_event_id_zero_is_refused_before_sending(client):
    with pytest.raises(tileops.Error) as e:
        client.event_wait_registered(0)
    assert e.value.status_name == "INVALID_ARGUMENT"
    with pytest.raises(tileops.Error) as e:
        client.event_release(0)
    assert e.value.status_name == "INVALID_ARGUMENT"
