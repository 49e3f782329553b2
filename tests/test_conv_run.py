"""One layer on a device: the simulated engine equals the golden model for a batch, and what
the engine cannot run is refused with the reason."""

import socket

import numpy as np
import pytest

from dlforge.host.conv.plan import PlanError
from dlforge.host.conv.run import run_conv
from dlforge.host.link.errors import DeviceUnreachable
from dlforge.rtl.conv.config import EngineConfig

# Every simulated board here is the default one (device="sim", config=None): the Verilator
# build the whole suite shares.  Another engine would cost a build of minutes.
pytestmark = [pytest.mark.xdist_group("sim_board"), pytest.mark.slow]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tensors(rng, n=2, c=6, h=9, w=8, oc=10, k=3):
    return (rng.integers(-128, 128, (n, c, h, w)).astype(np.int8),
            rng.integers(-128, 128, (oc, c, k, k)).astype(np.int8),
            rng.integers(-5000, 5000, oc).astype(np.int32),
            rng.integers(1 << 19, 1 << 21, oc), np.full(oc, 30))


def test_sim_equals_cpu_on_a_batch_with_every_post_operation():
    rng = np.random.default_rng(3)
    x, w, b, m, s = _tensors(rng)
    residual = rng.integers(-128, 128, (2, 10, 9, 8)).astype(np.int8)
    kwargs = dict(padding=1, relu=True, pool=True, residual=residual)
    y_sim, info = run_conv(x, w, b, m, s, device="sim", **kwargs)
    y_cpu, _ = run_conv(x, w, b, m, s, device="cpu", **kwargs)
    assert y_sim.shape == (2, 10, 4, 4) and np.array_equal(y_sim, y_cpu)
    assert len(np.unique(y_sim)) > 20                      # not a saturated, trivial output
    assert info["config"] == EngineConfig().as_dict() and info["tiles"] > 0
    # On the board the engine's counter also runs while it waits for words from the byte
    # link, so it is at least the engine's own prediction (not close to it, as in the
    # engine's testbench, where words arrive a clock apart).
    assert info["predicted_cycles"] > 0 and info["cycles"] >= 0.9 * info["predicted_cycles"]
    assert 0 < info["utilization"] <= 1
    # the device's span (first word in to last result out) holds every clock the engine
    # worked, and is what the interface figures use
    assert info["cycles"] < info["device_cycles"]
    assert 0 < info["device_utilization"] < info["utilization"]


def test_refusals_are_clear():
    rng = np.random.default_rng(4)
    x, w, b, m, s = _tensors(rng)
    with pytest.raises(ValueError, match="multiplier and a shift"):
        run_conv(x, w, b, device="sim")
    with pytest.raises(TypeError, match="int8"):
        run_conv(x.astype(np.int16), w, b, m, s, device="sim")
    with pytest.raises(TypeError, match="bias must be int32"):
        run_conv(x, w, b.astype(np.int64), m, s, device="sim")
    with pytest.raises(PlanError, match="kernel"):
        run_conv(rng.integers(-128, 128, (1, 2, 12, 12)).astype(np.int8),
                 rng.integers(-128, 128, (3, 2, 9, 9)).astype(np.int8), None, m[:3], s[:3],
                 device="sim")
    with pytest.raises(ValueError, match="device"):
        run_conv(x, w, device="gpu")
    # an engine configuration is only for a simulated board built for the run
    with pytest.raises(ValueError, match="the cpu device has no engine"):
        run_conv(x, w, b, m, s, device="cpu", config=EngineConfig())
    with pytest.raises(ValueError, match="tcp:127.0.0.1:9 reports its own engine"):
        run_conv(x, w, b, m, s, device="tcp:127.0.0.1:9", config=EngineConfig())
    with pytest.raises(DeviceUnreachable, match="no device at tcp:127.0.0.1:"):
        run_conv(x, w, b, m, s, device=f"tcp:127.0.0.1:{_free_port()}")
    acc, info = run_conv(x, w, b, device="cpu")            # no requantisation on the CPU
    assert acc.dtype == np.int64 and info == {"device": "cpu"}
