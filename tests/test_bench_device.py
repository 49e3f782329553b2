"""``dlforge bench device``: the device's pixels per clock from its own span registers, with
every image checked against libjpeg-turbo in the same run (a wrong image fails the bench and
is named), and its rates at a clock that says where it comes from."""

import io

import numpy as np
import pytest
import skimage.data
from PIL import Image

from dlforge.gen.bench import device as bench


def on_the_board(test):
    """The default simulated board (two cores, the engine, a 32-byte link): the build the
    suite shares."""
    return pytest.mark.xdist_group("sim_board")(pytest.mark.slow(test))


def test_rates_at_a_clock_say_where_it_comes_from():
    """The stated clock: the ECP5 core's measured Fmax unless one is given; 250 MHz a
    projection; one core fed directly at each clock beside one CPU core, where measured."""
    assert bench.stated_clock() == (bench.ECP5_CORE_FMAX_MHZ, bench.MEASURED_CLOCK)
    assert bench.stated_clock(60) == (60.0, bench.STATED_CLOCK)
    # a two-file core's own measured clock by default, a stated one as stated
    assert bench.stated_clock(None, 2) == (bench.ECP5_PAIR_FMAX_MHZ, bench.MEASURED_PAIR_CLOCK)
    assert bench.stated_clock(60, 2) == (60.0, bench.STATED_CLOCK)
    with pytest.raises(ValueError, match="positive"):
        bench.stated_clock(0)
    w = bench.worth(4.0, 100.0, bench.stated_clock(60), core_pixels_per_clock=2.5)
    stated, xdma = w["stated_clock"], w["xdma_250mhz"]
    assert stated["clock_mhz"] == 60 and "command line" in stated["clock_source"]
    assert stated["megapixels_per_second"] == pytest.approx(4.0 * 60)
    assert stated["cpu_cores_replaced"] == pytest.approx(4.0 * 60 / 100)
    assert stated["megapixels_per_second_per_core"] == pytest.approx(2.5 * 60)
    assert stated["per_core_vs_cpu_core"] == pytest.approx(2.5 * 60 / 100)
    assert xdma["clock_source"].startswith("projection")
    assert xdma["megapixels_per_second_per_core"] == pytest.approx(2.5 * 250)
    measured = bench.worth(4.0, 100.0, bench.stated_clock())["stated_clock"]
    assert measured["clock_mhz"] == bench.ECP5_CORE_FMAX_MHZ
    assert measured["clock_source"].startswith("measured")
    assert "megapixels_per_second_per_core" not in measured      # (no core fed directly)


def _photos(folder):
    paths = []
    for n, (crop, subsampling) in enumerate([((slice(0, 96), slice(0, 128)), 2),
                                             ((slice(200, 280), slice(100, 220)), 0),
                                             ((slice(300, 364), slice(256, 336)), 1)]):
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(skimage.data.astronaut()[crop])).save(
            buf, "JPEG", quality=88, subsampling=subsampling)
        path = folder / f"photo{n}.jpg"
        path.write_bytes(buf.getvalue())
        paths.append(path)
    return paths


@on_the_board
def test_device_figures_and_a_wrong_image_named(tmp_path, monkeypatch):
    paths = _photos(tmp_path)
    reference = bench._reference

    def one_wrong(named):
        images = reference(named)
        images[1] = images[1].copy()
        images[1][5, 7, 0] ^= 1                 # what a one-bit decoder bug would give
        return images

    monkeypatch.setattr(bench, "_reference", one_wrong)
    report = bench.bench_device([str(p) for p in paths], reference=False, conv=True,
                                clock_mhz=60)
    assert report["failures"] == ["device: photo1.jpg: OK pixels differ"]
    assert report["ok"] is False
    assert report["images"] == 3 and report["pixels"] == 96 * 128 + 80 * 120 + 64 * 80
    # two cores of at most 4 pixels a clock each (their output ports), and the span covers
    # at least one file's decode on its core
    assert 0 < report["pixels_per_clock"] < 8
    assert report["device_cycles"] > max(f["core_cycles_in_device"] for f in report["files"])
    worth = report["worth"]["xdma_250mhz"]
    assert worth["megapixels_per_second"] == pytest.approx(report["pixels_per_clock"] * 250)
    assert worth["cpu_cores_replaced"] == pytest.approx(
        worth["megapixels_per_second"]
        / report["cpu"]["libjpeg_turbo_megapixels_per_second_one_core"])
    stated = report["worth"]["stated_clock"]
    assert stated["clock_mhz"] == 60 and stated["clock_source"] == bench.STATED_CLOCK
    assert stated["megapixels_per_second"] == pytest.approx(report["pixels_per_clock"] * 60)
    text = io.StringIO()
    bench.print_table(report, text)
    assert f"at 60 MHz ({bench.STATED_CLOCK}): " in text.getvalue()


@on_the_board
def test_the_eval_transform_on_the_cores(tmp_path):
    """``transform="eval"``: the files again, each resized and cropped by the cores'
    resamplers (upscaled here: photos under 256), every image checked against Pillow, and
    the device's input pixels per clock set beside its rate without."""
    paths = _photos(tmp_path)
    report = bench.bench_device([str(p) for p in paths], reference=False, conv=True,
                                transform="eval")
    assert report["ok"], report["failures"]
    t = report["transform"]
    assert t["resized_on_device"] == 3 and t["device_cycles"] > 0
    assert t["input_pixels_per_clock"] == pytest.approx(report["pixels"] / t["device_cycles"])
    assert t["keep_pace"] == pytest.approx(t["input_pixels_per_clock"]
                                           / report["pixels_per_clock"])
    with pytest.raises(ValueError, match="takes --transform eval, not .train."):
        bench.bench_device([str(paths[0])], reference=False, conv=True, transform="train")


@on_the_board
def test_the_files_again_at_a_scale(tmp_path):
    """``scale=2``: the files again decoded at 1/2 by the cores' reduced IDCTs, each image
    checked against libjpeg-turbo's scaled decode; with ``transform="eval"`` then resized
    on the cores (here upscaled) and checked against Pillow."""
    paths = _photos(tmp_path)
    for transform in (None, "eval"):
        report = bench.bench_device([str(p) for p in paths], reference=False, conv=True,
                                    transform=transform, scale=2)
        assert report["ok"], report["failures"]
        s = report["scaled"]
        assert s["scale"] == "1/2" and s["transform"] == transform and s["device_cycles"] > 0
        assert s["input_pixels_per_clock"] == pytest.approx(report["pixels"]
                                                            / s["device_cycles"])
        assert s["resized_on_device"] == (3 if transform else 0)
        assert "scaled decode" in s["checked"]
