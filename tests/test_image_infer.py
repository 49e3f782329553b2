"""Decode -> infer: JPEG files written by a real encoder through the decoder, the resampler and
the network, on the cpu device and on the simulated board; the results checked against the
host's own decode and the golden network model, bad files named and the rest still run."""

import io

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image

from dlforge.host.conv.compile import compile_module
from dlforge.host.conv.digits import digit_label, top1, train_digits_cnn, write_digit_jpegs
from dlforge.host.conv.image_infer import (check_images, image_pixels, image_request,
                                           infer_images, input_table, jpeg_files,
                                           reference_images)
from dlforge.host.conv.program import quantize_input
from dlforge.host.conv.quantize import quantize
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.network_model import run_network


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The digits CNN quantised, and a folder of held-out digits as JPEG files with a broken
    file and a progressive one (the host's fallback) among them."""
    folder = tmp_path_factory.mktemp("digits")
    model, (x_train, _, x_test, y_test) = train_digits_cnn()
    program = quantize(compile_module(model, torch.as_tensor(x_train[:1])), x_train[:256])
    write_digit_jpegs(folder, x_test[:10], y_test[:10], size=16)
    broken = Marker.SOI.bytes + Marker.DQT.bytes + b"\x00\x43 not a JPEG"
    (folder / "0003-x.jpg").write_bytes(broken)
    progressive = Image.open(folder / "0004-" f"{y_test[4]}.jpg")
    progressive.save(folder / "0005-p.jpg", progressive=True, quality=90)
    (folder / "notes.txt").write_text("not an image")
    return program, model, folder


def test_files_are_the_folders_jpegs_sorted(digits, tmp_path):
    _, _, folder = digits
    files = jpeg_files(folder)
    assert [f.name for f in files] == sorted(f.name for f in folder.glob("*.jpg"))
    with pytest.raises(ValueError, match="no JPEG files"):
        jpeg_files(tmp_path)
    with pytest.raises(ValueError, match="is not a directory"):
        jpeg_files(tmp_path / "missing")


def test_requests_follow_torchvision_eval_or_stretch():
    square = image_request((3, 224, 224), 256)(0, "a", 640, 427)
    assert square.size == (383, 256) and square.window == (80, 16, 304, 240)
    assert image_request((3, 8, 8))(0, "a", 32, 16).size == (16, 8)
    assert image_request((1, 6, 10))(0, "a", 50, 40).size == (10, 6)
    with pytest.raises(ValueError, match="square input"):
        image_request((3, 6, 10), 12)
    with pytest.raises(ValueError, match="smaller than the input"):
        image_request((3, 224, 224), 200)


def test_luma_is_pillows_and_the_table_is_the_quantiser():
    rgb = skimage.data.astronaut()[:64, :48]
    want = np.array(Image.fromarray(rgb).convert("L"))
    assert np.array_equal(image_pixels(rgb, 1)[0], want)
    assert np.array_equal(image_pixels(rgb, 3), rgb.transpose(2, 0, 1))
    for scale in (1 / 127, 0.0051, 0.013):
        pixels = np.arange(256, dtype=np.uint8)
        want = quantize_input(pixels.astype(np.float32) / np.float32(255), scale)
        assert np.array_equal(input_table(scale), want)


def test_on_the_cpu_bad_files_are_named_and_the_rest_run(digits):
    program, model, folder = digits
    files = jpeg_files(folder)
    run = infer_images(program, files, "cpu", batch=3)
    names = [f.name for f in files]
    assert [v["file"] for v in run.files] == [str(f) for f in files]
    assert run.ok.tolist() == [n != "0003-x.jpg" for n in names]
    (failed,) = run.report["failed"]
    assert failed["file"].endswith("0003-x.jpg") and "pre-check" in failed["error"]
    assert run.report["fallback"] == 1 and run.outputs.shape == (len(files) - 1, 10)
    checks = check_images(program, files, run)
    assert checks["bit_exact"]
    # and the inputs are what the float model sees: its top-1 on them beside the device's
    images, _ = reference_images(program, files)
    decoded = [f for f, ok in zip(files, run.ok) if ok]
    keep = [i for i, f in enumerate(decoded) if "-p" not in f.name]
    labels = [digit_label(decoded[i]) for i in keep]
    with torch.no_grad():
        float_logits = model(torch.as_tensor(images[keep].astype(np.float32) / 255))
    assert abs(top1(run.outputs[keep], labels) - top1(float_logits, labels)) <= 0.2


def test_a_wrong_output_is_caught(digits):
    program, _, folder = digits
    files = jpeg_files(folder)[:4]
    run = infer_images(program, files, "cpu")
    run.outputs[1, 2] ^= 1
    assert not check_images(program, files, run)["outputs_bit_exact"]
    run.outputs[1, 2] ^= 1
    run.inputs[0, 0, 3, 3] ^= 1
    assert not check_images(program, files, run)["inputs_bit_exact"]


def test_inputs_that_cannot_feed_the_network_are_refused(digits):
    program, _, folder = digits
    with pytest.raises(ValueError, match="batch must be at least 1"):
        infer_images(program, jpeg_files(folder), "cpu", batch=0)


@pytest.mark.slow
@pytest.mark.xdist_group("sim_board")
def test_on_the_simulated_board_bit_exact_with_stages_counted(digits):
    program, _, folder = digits
    files = jpeg_files(folder)
    run = infer_images(program, files, "sim", batch=4, clocks_mhz=(44.3,))
    checks = check_images(program, files, run)
    assert checks["inputs_bit_exact"] and checks["outputs_bit_exact"]
    assert np.array_equal(run.outputs, run_network(program, run.inputs))
    r = run.report
    assert r["images"] == len(files) - 1 and len(r["failed"]) == 1 and r["fallback"] == 1
    # the device decoded and resized the baseline files; the host the progressive one
    assert r["decode"]["resized"] == {"device": len(files) - 2, "host": 1}
    assert r["decode"]["core_cycles"] > 0 and r["batches"] == 3
    (clock,) = r["at_clock"]
    assert clock["clock_mhz"] == 44.3 and 0 < clock["utilization"] < r["device_utilization"]


def test_photos_through_resnet_sized_requests_on_the_cpu(tmp_path):
    """A colour input (3 channels, eval resize) from real photos written by libjpeg."""
    photos = [skimage.data.coffee(), skimage.data.chelsea()]
    for i, rgb in enumerate(photos):
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, "JPEG", quality=85)
        (tmp_path / f"{i}.jpg").write_bytes(buf.getvalue())
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(8, 4)).eval()
    network = compile_module(net, torch.zeros(1, 3, 32, 32))
    images, _ = reference_images(network, jpeg_files(tmp_path), 40)
    assert images.shape == (2, 3, 32, 32)
    program = quantize(network, images.astype(np.float32) / 255)
    run = infer_images(program, jpeg_files(tmp_path), "cpu", resize=40)
    assert check_images(program, jpeg_files(tmp_path), run, 40)["bit_exact"]
    assert run.outputs.shape == (2, 4)
