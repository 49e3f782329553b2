"""``dlforge infer`` as a user runs it: an exported float model, calibration and inputs as
.npy files, logits out, checked against the golden model in the same run."""

import json

import numpy as np
import pytest
import torch

from dlforge.gen.cli import main
from dlforge.host.conv.compile import export_model
from dlforge.host.conv.digits import top1, train_digits_cnn, write_digit_jpegs
from dlforge.rtl.jpeg.syntax import Marker


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


@pytest.fixture(scope="module")
def image_files(files):
    """Held-out digits as JPEG files, one broken; training digits as a calibration folder."""
    path, *_ = files
    model, (x_train, y_train, x_test, y_test) = train_digits_cnn()
    write_digit_jpegs(path / "images", x_test[:9], y_test[:9], size=16)
    (path / "images" / "0004-x.jpg").write_bytes(Marker.SOI.bytes + b" truncated")
    write_digit_jpegs(path / "calib", x_train[:64], y_train[:64], size=16)
    return path


def _image_args(path, device, calibrate="calib"):
    return ["infer", "--device", device, "--model", str(path / "digits.pt2"),
            "--calibrate", str(path / calibrate), "--images", str(path / "images"),
            "--out", str(path / f"images-{device}.npy"), "--json"]


def test_images_on_the_cpu_one_row_per_file(image_files, capsys):
    path = image_files
    assert main(_image_args(path, "cpu")) == 1           # (a file failed: said, not fatal)
    captured = capsys.readouterr()
    info = json.loads(captured.out)
    assert "0004-x.jpg" in captured.err and info["bit_exact"]
    logits = np.load(path / "images-cpu.npy")
    names = sorted(p.name for p in (path / "images").iterdir())
    assert logits.shape == (len(names), 10)
    assert [bool(np.isnan(row).all()) for row in logits] == [n == "0004-x.jpg" for n in names]
    assert [f["status"] for f in info["files"]].count("error") == 1


def test_images_options_are_checked(image_files, capsys):
    path = image_files
    args = _args(path, "cpu") + ["--resize", "12"]
    assert main(args) == 2
    assert "--resize and --batch apply to --images" in capsys.readouterr().err
    assert main(_image_args(path, "cpu", "nowhere.npy")) == 2
    assert "cannot read calibration data" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.xdist_group("sim_board")
def test_images_on_the_board_equal_the_cpu(image_files, capsys):
    path = image_files
    assert main(_image_args(path, "cpu")) == 1
    capsys.readouterr()
    assert main(_image_args(path, "sim") + ["--batch", "3", "--clock", "44.3"]) == 1
    info = json.loads(capsys.readouterr().out)
    assert info["bit_exact"] and info["run"]["batches"] == 3
    assert info["run"]["decode"]["resized"]["device"] == 9
    sim, cpu = np.load(path / "images-sim.npy"), np.load(path / "images-cpu.npy")
    assert np.array_equal(np.isnan(sim), np.isnan(cpu))
    assert np.array_equal(sim[~np.isnan(sim)], cpu[~np.isnan(cpu)])
