"""``dlforge infer`` as a user runs it: an exported float model, calibration and inputs as
.npy files, logits out, checked against the golden model in the same run."""

import json

import numpy as np
import pytest
import torch

from dlforge.gen.cli import main
from dlforge.host.conv.compile import export_model
from dlforge.host.conv.digits import top1, train_digits_cnn


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = tmp_path_factory.mktemp("infer")
    model, (x_train, _, x_test, y_test) = train_digits_cnn()
    torch.export.save(export_model(model, torch.as_tensor(x_train[:1])), path / "digits.pt2")
    np.save(path / "cal.npy", x_train[:256])
    np.save(path / "x.npy", x_test)
    np.save(path / "img.npy", (x_test[:8] * 255).round().astype(np.uint8))
    with torch.no_grad():
        float_top1 = top1(model(torch.as_tensor(x_test)), y_test)
    return path, y_test, float_top1


def _args(path, device, x="x.npy"):
    return ["infer", "--device", device, "--model", str(path / "digits.pt2"),
            "--calibrate", str(path / "cal.npy"), "--input", str(path / x),
            "--out", str(path / f"{device}.npy")]


def test_cpu_logits_and_accuracy(files, capsys):
    path, y_test, float_top1 = files
    assert main(_args(path, "cpu") + ["--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bit_exact"] and info["engine_layers"] == 4 and info["host_ops"] == []
    logits = np.load(path / "cpu.npy")
    assert logits.shape == (len(y_test), 10) and logits.dtype == np.float32
    assert top1(logits, y_test) >= float_top1 - 0.01


@pytest.mark.slow
@pytest.mark.xdist_group("sim_board")
def test_sim_matches_cpu_and_compares_the_naive_way(files, capsys):
    path, *_ = files
    assert main(_args(path, "cpu", "img.npy")) == 0
    capsys.readouterr()
    assert main(_args(path, "sim", "img.npy") + ["--json", "--clock", "100"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert np.array_equal(np.load(path / "sim.npy"), np.load(path / "cpu.npy"))
    assert info["bit_exact"] and set(info["runs"]) == {"pipelined", "naive"}
    layers = info["runs"]["pipelined"]["layers"]
    assert len(layers) == 4 and all(r["device_cycles"] > 0 for r in layers)
    (clock,) = info["runs"]["pipelined"]["at_clock"]
    assert clock["clock_mhz"] == 100 and clock["images_per_second"] > 0
    assert info["pipelined_vs_naive"][0]["speedup"] > 1


def test_bad_files_are_clear_errors(files, tmp_path, capsys):
    path, *_ = files
    (tmp_path / "bad.pt2").write_bytes(b"not a model")
    args = _args(path, "cpu")
    args[args.index("--model") + 1] = str(tmp_path / "bad.pt2")
    assert main(args) == 2
    assert "cannot load the exported model" in capsys.readouterr().err
    np.save(tmp_path / "wrong.npy", np.zeros((2, 3, 8, 8), np.float32))
    args = _args(path, "cpu")
    args[args.index("--input") + 1] = str(tmp_path / "wrong.npy")
    assert main(args) == 2
    assert "does not match the model's (N, 1, 8, 8)" in capsys.readouterr().err
