"""`make demo` as the Makefile runs it (``dlforge gen jpeg -o ...``, then
``python -m dlforge.gen.demo``): its output read and checked line by line, not only its exit
status.  The demo's board is the default simulated board every runtime test shares (one
Verilator build); decoding scikit-image's big photos on it takes minutes."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlforge.gen import demo

pytestmark = [pytest.mark.slow, pytest.mark.verilator, pytest.mark.xdist_group("sim_board")]

DLFORGE = str(Path(sys.executable).with_name("dlforge"))
LAYOUTS = {"gray", "4:4:4", "4:2:2", "4:4:0", "4:2:0"}


def _table(lines, head):
    """The rows (lists of cells) of the table whose header line starts with ``head``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    assert set(lines[start + 1]) <= {"-", " "}, lines[start + 1]
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_make_demo(tmp_path, capsys):
    # 1. `dlforge gen jpeg -o build/demo/jpeg_core`: the decoder's Verilog and its manifest
    core = tmp_path / "jpeg_core"
    gen = subprocess.run([DLFORGE, "gen", "jpeg", "-o", str(core)], capture_output=True,
                         text=True)
    assert gen.returncode == 0, gen.stderr[-3000:]
    manifest = json.loads((core / "manifest.json").read_text())
    verilog = (core / manifest["verilog"]).read_text()
    assert f"module {manifest['top']}" in verilog
    assert {"i__payload", "o__payload"} <= {p["name"] for p in manifest["ports"]}

    # 2. `python -m dlforge.gen.demo` (its inputs in tmp_path instead of build/demo/jpeg)
    folder = tmp_path / "jpeg"
    status = demo.main(["--folder", str(folder)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert status == 0, out
    inputs = sorted(p.name for p in folder.iterdir())
    assert len(inputs) == 3 + 4                     # skimage's three JPEG files + 4 photos

    board = next(line for line in lines if line.startswith("simulated board at "))
    m = re.search(r"(\d+) decoder core\(s\) up to (\d+)x(\d+), engine (.+), (\d+)-byte link",
                  board)
    assert m, board
    cores, link = int(m[1]), int(m[5])
    assert cores >= 1 and link >= 1

    # every image decoded on the board, bit-exact to libjpeg-turbo, with the core's cycles
    rows = _table(lines, "file ")
    assert sorted(r[0] for r in rows) == inputs
    pixels = 0
    for name, layout, size, state, exact, cycles, rate in rows:
        assert layout in LAYOUTS and state == "ok" and exact == "yes", (name, layout, state)
        w, h = map(int, size.split("x"))
        assert int(cycles) > 0 and float(rate) == pytest.approx(w * h / int(cycles), abs=1e-3)
        pixels += w * h

    device = next(line for line in lines if line.startswith("device: "))
    m = re.match(r"device: (\d+) images, (\d+) pixels in (\d+) cycles .*, (\d+) cores, "
                 r"(\d+)-byte link\): ([\d.]+) pixels/clock", device)
    assert m, device
    assert (int(m[1]), int(m[2]), int(m[4]), int(m[5])) == (len(rows), pixels, cores, link)
    assert float(m[6]) == pytest.approx(pixels / int(m[3]), abs=1e-3)

    # the loader's batches, every image within 1 of Pillow's decode + resize + crop
    stream = next(line for line in lines if line.startswith("stream: "))
    m = re.match(r"stream: (\d+) images in (\d+) batches of (\d+) x 3 x (\d+) x \d+ uint8; "
                 r"(\d+) decoded on the board, (\d+) fallback, (\d+) error; (\d+) within (\d+) "
                 r"of Pillow's decode \+ resize \+ crop \(largest difference (\d+); (\d+) "
                 r"equal\)", stream)
    assert m, stream
    images, batches, batch = int(m[1]), int(m[2]), int(m[3])
    assert images == len(inputs) and batches == -(-images // batch)
    assert (int(m[5]), int(m[6]), int(m[7])) == (images, 0, 0)
    assert int(m[8]) == images and int(m[9]) == demo.STREAM_TOLERANCE
    assert int(m[10]) <= demo.STREAM_TOLERANCE

    # the ResNet-18 layer on the board's engine, bit-exact to the golden model
    conv = _table(lines, "ResNet-18 layer")
    assert [r[0] for r in conv] == list(demo.CONV_LAYERS)
    for layer, macs, tiles, predicted, engine, span, util, exact in conv:
        assert exact == "yes" and int(macs) > 0 and int(tiles) > 0, layer
        assert 0 < int(predicted) and 0 < int(engine) and 0 < int(span)
        assert 0 < float(util.rstrip("%")) <= 100

    # a real network: the digits CNN on the board, its accuracy beside the float model's
    network = next(line for line in lines if line.startswith("network: "))
    m = re.match(r"network: the digits CNN \(trained here on scikit-learn's digits, (\d+) held "
                 r"out\): float top-1 ([\d.]+)%, int8 ([\d.]+)%; on the board (\d+) images "
                 r"bit-exact to the golden network model; at ([\d.]+) MHz (\d+) cycles per "
                 r"image, end-to-end utilisation ([\d.]+)% \(device alone ([\d.]+)%\), "
                 r"([\d.]+) images/s, ([\d.]+)x the naive integration", network)
    assert m, network
    assert int(m[1]) == 397 and float(m[2]) > 95 and float(m[3]) >= float(m[2]) - 1
    assert int(m[4]) == 32 and 0 < float(m[7]) <= float(m[8]) <= 100
    assert float(m[10]) > 1
    # decode -> infer: the same CNN fed JPEG files through the board's decoder
    line = next(line for line in lines if line.startswith("decode -> infer: "))
    m = re.match(r"decode -> infer: (\d+) held-out digits as JPEG files through the board's "
                 r"decoder cores and resampler into the CNN: inputs and logits bit-exact to "
                 r"the host's decode and the golden model; top-1 float ([\d.]+)%, on the "
                 r"board ([\d.]+)%; at ([\d.]+) MHz (\d+) cycles per image, ([\d.]+) "
                 r"images/s", line)
    assert m, line
    assert int(m[1]) == 397 and float(m[2]) > 90 and float(m[3]) >= float(m[2]) - 1
    assert int(m[5]) > 0

    assert lines[-1] == (f"demo: ok: {len(rows)} of {len(rows)} images bit-exact, {images} of "
                         f"{images} stream images within {demo.STREAM_TOLERANCE}, "
                         f"{len(conv)} of {len(conv)} convolution layers bit-exact, "
                         f"the digits CNN bit-exact")
