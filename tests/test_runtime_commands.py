"""The commands that run work through a device (``decode``, ``stream``, ``conv``,
``sim-board``, ``bench loader``) as a user runs them: on the default simulated board, on the
CPU, and on a board started by hand with ``dlforge sim-board``.

Every simulated board here is the default one (``--device sim`` without engine options), the
Verilator build the rest of the suite shares: another configuration would cost a build of
minutes."""

import io
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from PIL import Image

from dlforge.gen.cli import main
from dlforge.rtl.jpeg.syntax import Marker
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.models.conv_model import conv_layer

import libjpeg_c

pytestmark = [pytest.mark.xdist_group("sim_board"), pytest.mark.slow]

DLFORGE = str(Path(sys.executable).with_name("dlforge"))


def _jpeg(array, **options):
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buf, "JPEG", **options)
    return buf.getvalue()


GARBAGE = (Marker.SOI.bytes + b" this is not a JPEG file ") * 4


def _files(folder):
    """Small real photos (4:2:0 and 4:4:4), a progressive one and a garbage file; name ->
    (path, the status every device gives it)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "astronaut420": (_jpeg(skimage.data.astronaut()[:48, :64], quality=85, subsampling=2),
                         "ok"),
        "coffee444": (_jpeg(skimage.data.coffee()[100:141, 200:237], quality=90,
                            subsampling=0), "ok"),
        "progressive": (_jpeg(skimage.data.astronaut()[100:140, 100:150], quality=80,
                              progressive=True), "fallback"),
        "garbage": (GARBAGE, "error"),
    }
    out = {}
    for name, (data, status) in files.items():
        path = folder / f"{name}.jpg"
        path.write_bytes(data)
        out[name] = (path, status)
    return out


def _libjpeg(path):
    """libjpeg-turbo's C build: not simplejpeg, which the cpu device and the fallback run."""
    return libjpeg_c.decode(path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_decode(report, files, out):
    """Statuses in order, sizes, and the saved pixels equal to libjpeg-turbo's."""
    rows = {Path(row["file"]).stem: row for row in report["files"]}
    assert [Path(row["file"]).stem for row in report["files"]] == list(files)
    for name, (path, status) in files.items():
        row = rows[name]
        assert row["status"] == status, row
        if status == "error":
            assert row["error"] and (row["width"], row["height"]) == (0, 0)
            assert not (out / f"{name}.npy").exists()
            continue
        want = _libjpeg(path)
        assert (row["height"], row["width"]) == want.shape[:2]
        pixels = np.load(out / f"{name}.npy")
        assert pixels.dtype == np.uint8 and np.array_equal(pixels, want), name
    assert "PROGRESSIVE" in rows["progressive"]["error"]
    return rows


# ---- decode -------------------------------------------------------------------------------------

def test_decode_on_the_simulated_board(tmp_path, capsys):
    files = _files(tmp_path / "in")
    truncated = [f for f in jpeg_corpus.malformed_corpus() if f.name == "truncated-mid-scan"][0]
    (tmp_path / "in" / "truncated.jpg").write_bytes(truncated.data)
    files["truncated"] = (tmp_path / "in" / "truncated.jpg", "error")
    out = tmp_path / "out"
    code = main(["decode", "--device", "sim", "--json", "--out", str(out),
                 *(str(path) for path, _ in files.values())])
    captured = capsys.readouterr()
    assert code == 1, captured.err                         # because of the error files
    report = json.loads(captured.out)
    assert report["device"].startswith("tcp:127.0.0.1:") and report["upsample"] == "fancy"
    rows = _check_decode(report, files, out)
    for name in ("astronaut420", "coffee444"):
        assert rows[name]["cycles"] > 0 and rows[name]["error"] is None
    assert rows["garbage"]["error"].startswith("host pre-check:")
    assert rows["truncated"]["cycles"] is not None          # the device's own verdict


def test_decode_on_the_cpu(tmp_path, capsys):
    files = _files(tmp_path / "in")
    out = tmp_path / "out"
    code = main(["decode", "--device", "cpu", "--json", "--out", str(out),
                 *(str(path) for path, _ in files.values())])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    report = json.loads(captured.out)
    assert report["device"] == "cpu"
    rows = _check_decode(report, files, out)
    assert all(row["cycles"] is None for row in rows.values())
    # the table
    assert main(["decode", "--device", "cpu", str(files["coffee444"][0])]) == 0
    line = capsys.readouterr().out
    assert line.startswith("ok") and "37x41" in line


def _pillow_resize_crop(path, resize, crop, scale=1):
    """torchvision's Resize(resize) then CenterCrop(crop) on Pillow's decode of ``path``
    (drafted to 1/scale first), its rules written out here."""
    with Image.open(path) as im:
        if scale > 1:
            im.draft("RGB", (im.width // scale, im.height // scale))
        im = im.convert("RGB")
        w, h = im.size
        size = (resize, int(resize * h / w)) if w <= h else (int(resize * w / h), resize)
        im = im.resize(size, Image.Resampling.BILINEAR)
        left, top = int(round((size[0] - crop) / 2)), int(round((size[1] - crop) / 2))
        return np.asarray(im.crop((left, top, left + crop, top + crop)))


def test_decode_with_resize_and_crop(tmp_path, capsys):
    """`--resize N --crop C`: torchvision's Resize then CenterCrop, Pillow's pixels, done by
    the simulated board's resamplers (the CPU's Pillow gives the same); `--transform train`
    likewise with its seeded draws; PNGs out."""
    files = _files(tmp_path / "in")
    photos = [str(files[name][0]) for name in ("astronaut420", "coffee444", "progressive")]
    for device in ("sim", "cpu"):
        out = tmp_path / device
        assert main(["decode", "--device", device, "--json", "--resize", "40", "--crop", "32",
                     "--format", "png", "--out", str(out), *photos]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [(r["width"], r["height"]) for r in report["files"]] == [(32, 32)] * 3
        assert [r["resized"] for r in report["files"]] == \
            (["device", "device", "host"] if device == "sim" else ["host"] * 3)
        for path in photos:
            want = _pillow_resize_crop(path, 40, 32)
            with Image.open(out / f"{Path(path).stem}.png") as got:
                assert np.array_equal(np.asarray(got), want), (device, path)
        assert main(["decode", "--device", device, "--transform", "train", "--size", "24",
                     "--seed", "3", "--out", str(out), *photos[:2]]) == 0
        capsys.readouterr()
    for name in ("astronaut420", "coffee444"):
        assert np.array_equal(np.load(tmp_path / "sim" / f"{name}-train3.npy"),
                              np.load(tmp_path / "cpu" / f"{name}-train3.npy"))
    # a crop larger than the resized image: that file's error, the others fine
    assert main(["decode", "--device", "cpu", "--resize", "30", "--crop", "36", "--json",
                 photos[0]]) == 1
    assert "window" in json.loads(capsys.readouterr().out)["files"][0]["error"]
    assert main(["decode", "--device", "cpu", "--transform", "eval", "--crop", "3",
                 photos[0]]) == 2
    assert "not with --resize/--crop" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["decode", "stream", "conv"])
def test_nothing_listening_is_a_clear_error(tmp_path, command):
    files = _files(tmp_path)
    device = f"tcp:127.0.0.1:{_free_port()}"
    if command == "decode":
        args = ["decode", "--device", device, str(files["coffee444"][0])]
    elif command == "stream":
        args = ["stream", "--device", device, "--images", str(files["coffee444"][0])]
    else:
        np.save(tmp_path / "x.npy", np.zeros((1, 8, 6, 6), np.int8))
        np.save(tmp_path / "w.npy", np.zeros((16, 8, 3, 3), np.int8))
        np.save(tmp_path / "m.npy", np.full(16, 1 << 20))
        np.save(tmp_path / "s.npy", np.full(16, 28))
        args = ["conv", "--device", device, "--input", str(tmp_path / "x.npy"),
                "--weight", str(tmp_path / "w.npy"), "--multiplier", str(tmp_path / "m.npy"),
                "--shift", str(tmp_path / "s.npy"), "--out", str(tmp_path / "y.npy")]
    result = subprocess.run([DLFORGE, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"no device at {device}" in result.stderr and "Traceback" not in result.stderr


def test_stream_of_an_empty_folder_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = subprocess.run([DLFORGE, "stream", "--device", "cpu", "--images",
                             str(tmp_path / "empty")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "no JPEG files" in result.stderr and "Traceback" not in result.stderr


def test_unknown_device_is_a_clear_error(tmp_path, capsys):
    files = _files(tmp_path)
    assert main(["decode", "--device", "gpu0", str(files["coffee444"][0])]) == 2
    assert "unknown device 'gpu0'" in capsys.readouterr().err


# ---- stream -------------------------------------------------------------------------------------

def _dataset(root, corrupt=False):
    """Two classes: cats (two baseline photos), dogs (a progressive one and a photo)."""
    files = _files(root / "src")
    (root / "data" / "cats").mkdir(parents=True)
    (root / "data" / "dogs").mkdir(parents=True)
    for src, dst in (("astronaut420", "cats/a.jpg"), ("coffee444", "cats/b.jpg"),
                     ("progressive", "dogs/c.jpg"), ("astronaut420", "dogs/d.jpg")):
        (root / "data" / dst).write_bytes(files[src][0].read_bytes())
    if corrupt:
        (root / "data" / "dogs" / "e.jpg").write_bytes(GARBAGE)
    return root / "data"


KEYS = {"device", "batch", "size", "layout", "images", "ok", "fallback", "error", "batches",
        "images_per_s", "host_cpu_s_per_image", "device_cycles_per_image", "errors"}


def _stream(capsys, *args):
    code = main(["stream", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_stream_on_the_simulated_board(tmp_path, capsys, layout):
    data = _dataset(tmp_path)
    code, report, err = _stream(capsys, "--device", "sim", "--images", str(data), "--batch", "2",
                                "--size", "32", "--layout", layout)
    assert code == 0, err
    assert KEYS <= set(report)
    assert (report["images"], report["ok"], report["fallback"], report["error"]) == (4, 3, 1, 0)
    assert report["batches"] == 2 and report["layout"] == layout and report["errors"] == []
    assert report["device_cycles_per_image"] > 0 and report["host_cpu_s_per_image"] > 0


def test_stream_reports_a_corrupt_file(tmp_path, capsys):
    data = _dataset(tmp_path, corrupt=True)
    code, report, _ = _stream(capsys, "--device", "sim", "--images", str(data), "--batch", "2",
                              "--size", "32")
    assert code == 1
    # "images" counts the images delivered in batches: the corrupt file is not one of them
    assert (report["images"], report["ok"], report["fallback"], report["error"]) == (4, 3, 1, 1)
    assert len(report["errors"]) == 1
    assert Path(report["errors"][0]["file"]).name == "e.jpg" and report["errors"][0]["error"]


def test_stream_on_the_cpu(tmp_path, capsys):
    data = _dataset(tmp_path, corrupt=True)
    code, report, _ = _stream(capsys, "--device", "cpu", "--images", str(data), "--batch", "3",
                              "--size", "32", "--layout", "NHWC")
    assert code == 1
    assert KEYS <= set(report) and report["device"] == "cpu"
    assert (report["images"], report["ok"], report["fallback"], report["error"]) == (4, 3, 1, 1)
    assert report["device_cycles_per_image"] is None and report["host_cpu_s_per_image"] > 0
    # files instead of a folder, and the text report
    files = [str(p) for p in sorted((data / "cats").iterdir())]
    assert main(["stream", "--device", "cpu", "--images", *files, "--batch", "1",
                 "--size", "0"]) == 0
    assert "2 images in 2 batches of up to 1" in capsys.readouterr().out


def test_stream_with_torchvision_transforms(tmp_path, capsys):
    data = _dataset(tmp_path, corrupt=True)
    for transform in ("eval", "train"):
        code, report, _ = _stream(capsys, "--device", "cpu", "--images", str(data), "--batch",
                                  "3", "--size", "24", "--transform", transform, "--seed", "3")
        assert code == 1 and report["transform"] == transform
        assert (report["images"], report["ok"], report["fallback"]) == (4, 3, 1)
    assert main(["stream", "--device", "cpu", "--images", str(data), "--size", "0",
                 "--transform", "eval"]) == 2
    assert "--transform eval needs --size" in capsys.readouterr().err
    # --resize N --crop C: the eval pipeline at those sizes, resized by the board's cores
    code, report, _ = _stream(capsys, "--device", "sim", "--images", str(data), "--batch", "3",
                              "--resize", "30", "--crop", "24")
    assert code == 1 and report["transform"] == "eval" and report["size"] == 24
    assert (report["images"], report["ok"], report["fallback"]) == (4, 3, 1)
    assert report["resized_on_device"] == 3
    assert main(["stream", "--device", "cpu", "--images", str(data), "--resize", "30"]) == 2
    assert "--resize N and --crop C go together" in capsys.readouterr().err


def test_decode_and_stream_with_a_scale(tmp_path, capsys):
    """`--scale 1/2` (then `--resize`/`--crop`): libjpeg-turbo's scaled decode, equal to
    Pillow's draft then torchvision's Resize and CenterCrop; the simulated board's cores
    scale in the DCT domain and resize, the cpu device is libjpeg-turbo: baseline files are
    ok on both."""
    files = _files(tmp_path / "in")
    photos = [str(files[name][0]) for name in ("astronaut420", "coffee444", "progressive")]
    for device in ("sim", "cpu"):
        out = tmp_path / device
        assert main(["decode", "--device", device, "--json", "--scale", "1/2", "--resize",
                     "16", "--crop", "12", "--out", str(out), *photos]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["scale"] == "1/2"
        rows = report["files"]
        assert [(r["width"], r["height"]) for r in rows] == [(12, 12)] * 3
        # (the progressive file is a fallback on every device, as without a scale)
        assert [r["status"] for r in rows] == ["ok", "ok", "fallback"]
        if device == "sim":
            assert [r["resized"] for r in rows[:2]] == ["device"] * 2
        for path in photos:
            want = _pillow_resize_crop(path, 16, 12, scale=2)
            assert np.array_equal(np.load(out / f"{Path(path).stem}-s2.npy"), want), path
    # without a resize: the scaled image itself
    assert main(["decode", "--device", "cpu", "--scale", "1/4", "--out", str(tmp_path / "q"),
                 photos[0]]) == 0
    assert np.load(tmp_path / "q" / "astronaut420-s4.npy").shape == (12, 16, 3)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:                 # (argparse's usage error)
        main(["decode", "--device", "cpu", "--scale", "1/3", photos[0]])
    assert stop.value.code == 2
    assert "scale must be 1, 1/2, 1/4 or 1/8" in capsys.readouterr().err
    data = _dataset(tmp_path)
    code, report, _ = _stream(capsys, "--device", "sim", "--images", str(data), "--batch",
                              "2", "--size", "12", "--transform", "eval", "--scale", "1/2")
    assert code == 0 and report["scale"] == "1/2"
    assert (report["images"], report["ok"], report["fallback"]) == (4, 3, 1)   # (progressive)


# ---- a board started by hand ---------------------------------------------------------------------

class _HandStartedBoard:
    """``dlforge sim-board --link LINK`` in a separate process, until SIGTERM."""

    def __init__(self, link, stderr_path):
        self.stderr = open(stderr_path, "w+")
        self.process = subprocess.Popen([DLFORGE, "sim-board", "--link", link],
                                        stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.device = None
        for line in self.process.stdout:
            if line.startswith("simulated board ready: "):
                self.device = line.split(": ", 1)[1].split()[0]
                break
        if self.device is None:
            self.stop()
            raise AssertionError(f"sim-board did not report ready:\n{self.err()}")

    def err(self):
        self.stderr.seek(0)
        return self.stderr.read()[-3000:]

    def stop(self):
        """SIGTERM; the exit status and what it printed after the ready line."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            out, _ = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return self.process.returncode, out

    def close(self):
        try:
            if self.process.returncode is None:
                self.stop()
        finally:
            self.stderr.close()


def _stats(out):
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, out
    return json.loads(lines[-1])


def test_sim_board_over_tcp(tmp_path, capsys):
    data = _dataset(tmp_path)
    board = _HandStartedBoard("tcp", tmp_path / "board.err")
    try:
        assert board.device.startswith("tcp:127.0.0.1:")
        code, report, err = _stream(capsys, "--device", board.device, "--images", str(data),
                                    "--batch", "2", "--size", "32")
        assert code == 0, err
        assert report["device"] == board.device
        assert (report["images"], report["ok"], report["fallback"]) == (4, 3, 1)
        assert report["device_cycles_per_image"] > 0
        status, out = board.stop()
        assert status == 0, board.err()
        stats = _stats(out)
        assert stats["cycles"] > 0 and stats["bytes_in"] > 0 and stats["bytes_out"] > 0
        assert stats["clients"] >= 1
    finally:
        board.close()


def test_sim_board_over_a_pty(tmp_path, capsys):
    files = _files(tmp_path / "in")
    files = {k: v for k, v in files.items() if k in ("astronaut420", "coffee444")}
    board = _HandStartedBoard("pty", tmp_path / "board.err")
    try:
        assert board.device.startswith("serial:/dev/pts/")
        out = tmp_path / "out"
        code = main(["decode", "--device", board.device, "--json", "--out", str(out),
                     *(str(path) for path, _ in files.values())])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        report = json.loads(captured.out)
        # (the transport names its bit rate: serial:/dev/pts/N@3000000?link_bytes=32)
        path, _, width = board.device.partition("?")
        assert report["device"].startswith(path) and report["device"].endswith(width)
        rows = _check_decode_ok(report, files, out)
        assert all(row["cycles"] > 0 for row in rows)
        status, printed = board.stop()
        assert status == 0, board.err()
        assert _stats(printed)["bytes_out"] > 0
    finally:
        board.close()


def _check_decode_ok(report, files, out):
    assert [Path(row["file"]).stem for row in report["files"]] == list(files)
    for row, (path, _) in zip(report["files"], files.values()):
        assert row["status"] == "ok", row
        assert np.array_equal(np.load(out / f"{Path(path).stem}.npy"), _libjpeg(path))
    return report["files"]


# ---- conv ---------------------------------------------------------------------------------------

def _layer(tmp_path):
    rng = np.random.default_rng(21)
    tensors = {"input": rng.integers(-128, 128, (1, 8, 6, 6)).astype(np.int8),
               "weight": rng.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8),
               "bias": rng.integers(-3000, 3000, 16).astype(np.int32),
               "multiplier": rng.integers(1 << 19, 1 << 21, 16).astype(np.int64),
               "shift": rng.integers(27, 31, 16).astype(np.int64)}
    args = []
    for name, array in tensors.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += [f"--{name}", str(tmp_path / f"{name}.npy")]
    return tensors, args


def test_conv_on_the_simulated_board(tmp_path, capsys):
    t, args = _layer(tmp_path)
    out = tmp_path / "y.npy"
    assert main(["conv", "--device", "sim", *args, "--padding", "1", "--relu",
                 "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    want = conv_layer(t["input"], t["weight"], t["bias"], t["multiplier"], t["shift"],
                      stride=1, padding=1, groups=1, relu=True)
    y = np.load(out)
    assert y.dtype == np.int8 and y.shape == (1, 16, 6, 6) and np.array_equal(y, want)
    assert len(np.unique(y)) > 20                          # not a saturated, trivial output
    assert report["out"] == str(out) and report["shape"] == [1, 16, 6, 6]
    assert report["dtype"] == "int8" and report["cycles"] > 0
    assert report["device"].startswith("tcp:127.0.0.1:")
    # the text report
    assert main(["conv", *args, "--padding", "1", "--relu", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"wrote {out}: (1, 16, 6, 6) int8") and "cycles" in text
    assert np.array_equal(np.load(out), want)


@pytest.mark.parametrize("device", ["cpu", "tcp:127.0.0.1:9"])
def test_conv_engine_parameters_need_the_simulated_board(tmp_path, capsys, device):
    _, args = _layer(tmp_path)
    assert main(["conv", "--device", device, *args, "--rows", "4",
                 "--out", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert "engine parameters choose the simulated board's engine (--device sim)" in err
    assert not (tmp_path / "y.npy").exists()


# ---- bench loader -------------------------------------------------------------------------------

def test_bench_loader_with_a_transform_on_the_cpu(tmp_path, capsys):
    """Training-ready images: every one equal to the CPU pipeline's, the figures reported."""
    files = _files(tmp_path)
    for transform in ("eval", "train"):
        main(["bench", "loader", "--device", "cpu", "--transform", transform, "--passes", "2",
              "--json",
              "--batches", "1", str(files["astronaut420"][0]), str(files["coffee444"][0])])
        report = json.loads(capsys.readouterr().out)
        assert report["transform"] == transform and report["images"] == 4
        assert report["ok"] == 4 and report["mismatches"] == 0
        assert report["host_cpu_s_per_image"] > 0 and report["cpu_pipeline_s_per_image"] > 0


def test_bench_loader_on_the_cpu(tmp_path, capsys):
    files = _files(tmp_path)
    assert main(["bench", "loader", "--device", "cpu", "--passes", "2", "--batches", "2", "--json",
                 str(files["astronaut420"][0]), str(files["coffee444"][0])]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "cpu" and report["images"] == 8 and report["ok"] == 8
    assert report["batches"] == 2 and len(report["host_cpu_s_per_image_batches"]) == 2
    assert report["mismatches"] == 0 and "bit-exact" in report["checked"]
    assert report["files"] == ["astronaut420.jpg", "coffee444.jpg"]
    assert {"host_cpu_s_per_image", "libjpeg_cpu_s_per_image", "host_vs_libjpeg"} <= set(report)
