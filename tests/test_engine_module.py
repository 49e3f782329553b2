"""EngineModule: a float model as an nn.Module that runs on a device, float or uint8 in,
float logits out, equal to the golden network model's times the output scale."""

import numpy as np
import pytest
import torch

from dlforge.host.conv.digits import top1, train_digits_cnn
from dlforge.host.conv.engine_module import EngineModule, as_float_input
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.models.network_model import run_network


@pytest.fixture(scope="module")
def digits():
    return train_digits_cnn()


def test_cpu_forward_is_the_golden_model_scaled(digits):
    model, (x_train, _, x_test, y_test) = digits
    with EngineModule(model, device="cpu", calibration=x_train[:256]) as module:
        logits = module(torch.as_tensor(x_test))
        xq = module.quantize_input(x_test)
        expected = run_network(module.program, xq) * np.float32(module.program.output_scale)
        assert isinstance(logits, torch.Tensor) and logits.dtype == torch.float32
        assert np.array_equal(logits.numpy(), expected.astype(np.float32))
        with torch.no_grad():
            assert top1(logits, y_test) >= top1(model(torch.as_tensor(x_test)), y_test) - 0.01
        # uint8 images are scaled by 1/255 first
        images = (x_test[:4] * 255).round().astype(np.uint8)
        assert np.array_equal(module.quantize_input(images),
                              module.quantize_input(images.astype(np.float32) / 255))
        assert module(torch.as_tensor(images)).shape == (4, 10)


def test_bad_inputs_are_refused(digits):
    model, (x_train, *_) = digits
    with pytest.raises(ValueError, match="calibration"):
        EngineModule(model, device="cpu")
    with pytest.raises(ValueError, match="non-empty"):
        EngineModule(model, device="cpu", calibration=x_train[:0])
    module = EngineModule(model, device="cpu", calibration=x_train[:64])
    with pytest.raises(ValueError, match="does not match"):
        module(torch.zeros(2, 1, 9, 8))
    with pytest.raises(TypeError, match="float or uint8"):
        as_float_input(np.zeros((1, 1, 8, 8), np.int32))
    with pytest.raises(ValueError, match="config"):
        EngineModule(model, device="cpu", calibration=x_train[:64], config=object())


@pytest.mark.slow
@pytest.mark.xdist_group("sim_board")
def test_sim_forward_equals_cpu(digits):
    model, (x_train, _, x_test, _) = digits
    cpu = EngineModule(model, device="cpu", calibration=x_train[:256])
    with EngineModule(model, device="sim", calibration=x_train[:256]) as sim:
        assert np.array_equal(sim(torch.as_tensor(x_test[:5])).numpy(),
                              cpu(torch.as_tensor(x_test[:5])).numpy())
        assert sim.last_report["device_cycles"] > 0


def test_files_in_float_logits_out_one_row_per_file(digits, tmp_path):
    from dlforge.host.conv.digits import write_digit_jpegs
    from dlforge.host.conv.image_infer import input_table, reference_images
    model, (x_train, _, x_test, y_test) = digits
    files = write_digit_jpegs(tmp_path, x_test[:5], y_test[:5], size=16)
    (tmp_path / "broken.jpg").write_bytes(Marker.SOI.bytes + b"\xff")
    files.insert(2, tmp_path / "broken.jpg")
    with EngineModule(model, device="cpu", calibration=x_train[:256]) as module:
        logits, run = module.forward_files(files)
        images, _ = reference_images(module.program, files)
        xq = input_table(module.program.input_scale)[images]
        expected = run_network(module.program, xq) * np.float32(module.program.output_scale)
    assert logits.shape == (6, 10) and torch.isnan(logits[2]).all()
    assert np.array_equal(logits.numpy()[[0, 1, 3, 4, 5]], expected.astype(np.float32))
    assert module.last_report is run.report and len(run.report["failed"]) == 1
