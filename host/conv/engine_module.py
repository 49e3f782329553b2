"""``EngineModule``: a float PyTorch model as an ``nn.Module`` whose forward runs on a device.

The model is exported (``torch.export``), compiled into engine layers and host operations
(host/conv/compile.py) and quantised with the calibration batch (host/conv/quantize.py), once,
when the module is made.  ``forward`` takes a float batch as the model does, or a uint8 image
batch, which it scales by 1/255 first (torchvision's ``ToTensor``), and returns float logits:
the device's int8 outputs times the output's scale.  The device stays open between calls;
``close()`` (or ``with``) stops a simulated board.  ``forward_files`` takes JPEG files instead
and decodes them on the device on their way into the network.
"""

import numpy as np
import torch
import torch.nn as nn

from dlforge.host.conv.compile import compile_exported, export_model
from dlforge.host.conv.network_run import prepare, run_program
from dlforge.host.conv.program import quantize_input
from dlforge.host.conv.run import engine_config
from dlforge.host.conv.quantize import quantize
from dlforge.host.device.open import open_device
from dlforge.host.link.device_string import parse_device

__all__ = ["EngineModule", "as_float_input"]


def as_float_input(x):
    """A float32 numpy batch from a float or uint8 tensor or array (uint8 scaled by 1/255)."""
    x = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    if x.dtype == np.uint8:
        return x.astype(np.float32) / np.float32(255)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"input must be a float or uint8 image batch, got {x.dtype}")
    return x.astype(np.float32)


class EngineModule(nn.Module):
    """``EngineModule(model, device="sim", calibration=batch)``; see the module docstring.

    ``program`` is the quantised network, ``last_report`` the device's report of the last
    forward (cycles per layer, host time)."""

    def __init__(self, model=None, device="sim", calibration=None, *, exported=None,
                 mode="pipelined", clocks_mhz=(), config=None):
        super().__init__()
        if calibration is None:
            raise ValueError("calibration: give a float batch of typical inputs (N, C, H, W)")
        calib = as_float_input(calibration)
        if calib.ndim != 4 or len(calib) == 0:
            raise ValueError(f"calibration must be a non-empty (N, C, H, W) batch, got shape "
                             f"{calib.shape}")
        if exported is None:
            if model is None:
                raise ValueError("give a model or an exported program")
            exported = export_model(model, torch.as_tensor(calib[:1]))
        self.network = compile_exported(exported)
        self.program = quantize(self.network, calib)
        self.mode, self.clocks_mhz = mode, tuple(clocks_mhz)
        kind = parse_device(device).kind if isinstance(device, str) else None
        if config is not None and kind != "sim":
            raise ValueError("config chooses the engine of the simulated board (device sim)")
        self.device_name = device if isinstance(device, str) else getattr(device, "name", "")
        self._owned = isinstance(device, str) and kind != "cpu"
        self.device = ("cpu" if kind == "cpu" else
                       open_device(device, conv=config or True) if kind == "sim" else
                       open_device(device))
        self.last_report = None
        self._prepared = None

    def quantize_input(self, x):
        """int8 (N, C, H, W) for a float or uint8 batch, checked against the model's shape."""
        x = as_float_input(x)
        if x.ndim == 3:
            x = x[None]
        if x.ndim != 4 or x.shape[1:] != tuple(self.program.input_shape):
            raise ValueError(f"input shape {tuple(x.shape)} does not match the model's "
                             f"(N, {', '.join(map(str, self.program.input_shape))})")
        return quantize_input(x, self.program.input_scale)

    def run_int8(self, xq):
        """int8 outputs of the device for an int8 batch (the engine's words prepared once)."""
        if self.device != "cpu" and self.mode == "pipelined" and self._prepared is None:
            self._prepared = prepare(self.program, engine_config(self.device))
        y, self.last_report = run_program(self.program, xq, self.device, self.mode,
                                          self.clocks_mhz, prepared=self._prepared)
        return y

    def forward_files(self, files, resize=None, batch=4):
        """Decode -> infer (host/conv/image_infer.py): float logits, one row per file (NaN
        for a file that failed, named in the run's report), and the run.  ``resize``: the
        shorter side before the centre crop (default: the input's size)."""
        from dlforge.host.conv.image_infer import infer_images
        files = list(files)
        if self.device != "cpu" and self._prepared is None:
            self._prepared = prepare(self.program, engine_config(self.device))
        run = infer_images(self.program, files, self.device, resize=resize, batch=batch,
                           clocks_mhz=self.clocks_mhz, prepared=self._prepared)
        self.last_report = run.report
        shape = self.program.shapes[self.program.output]
        shape = (int(np.prod(shape)),) if self.program.flatten_output else tuple(shape)
        logits = np.full((len(files), *shape), np.nan, np.float32)
        if run.outputs is not None:
            logits[run.ok] = self._dequantize(run.outputs)
        return torch.as_tensor(logits), run

    def _dequantize(self, y):
        """float32 logits of the device's int8 outputs (times the output's scale)."""
        return y.astype(np.float32) * np.float32(self.program.output_scale)

    def forward(self, x):
        return torch.as_tensor(self._dequantize(self.run_int8(self.quantize_input(x))))

    def close(self):
        if self._owned and self.device is not None:
            self.device.close()
        self.device = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
