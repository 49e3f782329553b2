"""Damaged and unusual files get Pillow's pixels, or Pillow's refusal with the reason (issue
40): the reference for every file is ``Image.open(f).convert("RGB")``, torchvision's
``pil_loader``.

The damage classes come from a real photo (:func:`~dlforge.sim.corpus.jpeg_corpus.
damaged_corpus`); each goes through the ``cpu`` device and the simulated board, with
``on_damage="pillow"`` (decoded as Pillow decodes it, the verdict saying what was tolerated)
and ``on_damage="error"`` (a damaged file refused, the rest unchanged).  The malformed and
unsupported corpora are held to the same rule on the ``cpu`` device.
"""

import io
import json

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from dlforge.gen.cli import main
from dlforge.host.device.open import open_device
from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.jpeg.transforms import eval_request, eval_transform
from dlforge.sim.corpus.jpeg_corpus import damaged_corpus, malformed_corpus, unsupported_corpus

CLASSES = ("before_soi", "extraneous_bytes", "short_app_segment", "after_eoi",
           "multi_picture", "corrupt_scan", "cmyk", "ycck", "grey", "truncated")


def pillow(data):
    """Pillow's pixels of ``data``, or None where Pillow refuses it."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, SyntaxError, Image.DecompressionBombError):
        return None


@pytest.fixture(scope="module")
def files():
    return damaged_corpus()


def test_every_class_is_there_and_is_what_it_claims(files):
    """The corpus holds each damage class of the issue, and Pillow and a strict libjpeg-turbo
    judge each file as its features say (so the tests below test what they name)."""
    assert {f.features["reason"] for f in files} == set(CLASSES)
    for f in files:
        assert (pillow(f.data) is not None) == (f.features["pillow"] == "decodes"), f.name
        try:
            simplejpeg.decode_jpeg(f.data, colorspace="RGB")
            strict = "clean"
        except ValueError as exc:
            strict = "warns" if "Corrupt JPEG data" in str(exc) else "fails"
        assert strict == f.features["libjpeg"], f.name


def check(files, results, on_damage):
    """Each result agrees with Pillow under ``on_damage``; the damage noted is the damage
    there is.  A refused file leaves the next one fine (the files interleave)."""
    for f, r in zip(files, results, strict=True):
        want = pillow(f.data)
        damaged = f.features["libjpeg"] == "warns"
        if want is None:
            assert r.status == "error" and r.pixels is None, f.name
            assert "Pillow" in r.error or "pre-check" in r.error, (f.name, r.error)
        elif damaged and on_damage == "error":
            assert r.status == "error" and "damaged (on_damage='error')" in r.error, f.name
            assert r.damage or "libjpeg-turbo" in r.error, f.name
        else:
            assert r.status in ("ok", "fallback"), (f.name, r.error)
            assert r.pixels.shape == want.shape and (r.pixels == want).all(), f.name
            assert (r.damage is not None) == damaged, (f.name, r.damage)
            if damaged:
                assert r.damage.startswith("corrupt data tolerated: "), r.damage


@pytest.mark.parametrize("on_damage", ["pillow", "error"])
def test_on_the_cpu_device(files, on_damage):
    with DecoderService("cpu", on_damage=on_damage) as service:
        results = list(service.decode([(f.name, f.data) for f in files]))
        counts = service.counts
    check(files, results, on_damage)
    assert counts["damaged"] == sum(f.features["libjpeg"] == "warns" for f in files)


@pytest.mark.slow
@pytest.mark.xdist_group("sim_board")
def test_on_the_simulated_board(files):
    """The board's cores decode what the host repairs (extraneous bytes dropped: "ok", with
    the damage noted) and what is clean; Pillow decodes what the cores find damaged."""
    device = open_device("sim")
    try:
        for on_damage in ("pillow", "error"):
            with DecoderService(device, on_damage=on_damage) as service:
                results = list(service.decode([(f.name, f.data) for f in files]))
            check(files, results, on_damage)
            verdicts = {f.name: r.status for f, r in zip(files, results)}
            assert verdicts["after_eoi-second-image"] == "ok"
            if on_damage == "pillow":
                assert verdicts["extraneous_bytes-dqt"] == "ok"          # on the device
                assert verdicts["corrupt_scan-restart-out-of-order"] == "fallback"
                assert verdicts["cmyk-adobe"] == "fallback"
    finally:
        device.close()


def test_the_device_gets_the_file_without_the_extraneous_bytes(files):
    """The device decodes the file without what libjpeg skips, and the verdict names what was
    dropped in libjpeg's words, with libjpeg's count."""
    chosen = [f for f in files if f.features["reason"] in ("extraneous_bytes",
                                                           "short_app_segment")]
    assert len(chosen) == 4
    with DecoderService("cpu") as service:
        results = list(service.decode([(f.name, f.data) for f in chosen]))
    assert results[0].damage == "corrupt data tolerated: 5 extraneous bytes before marker 0xDB"
    for f, r in zip(chosen, results):
        with pytest.raises(ValueError) as warned:
            simplejpeg.decode_jpeg(f.data, colorspace="RGB")
        words = str(warned.value).removeprefix("Corrupt JPEG data: ")
        assert r.status == "ok" and r.damage.lower() == f"corrupt data tolerated: {words}"


def test_the_malformed_and_unsupported_corpora_agree_with_pillow():
    """Every file Pillow decodes, dlforge decodes with Pillow's pixels; every file Pillow
    refuses, dlforge refuses (the ``cpu`` device: the host's side of the rule)."""
    corpus = malformed_corpus() + unsupported_corpus()
    with DecoderService("cpu") as service:
        results = list(service.decode([(f.name, f.data) for f in corpus]))
    for f, r in zip(corpus, results, strict=True):
        want = pillow(f.data)
        if want is None:
            assert r.status == "error", f.name
        else:
            assert r.status in ("ok", "fallback") and (r.pixels == want).all(), (f.name, r.error)


def test_transforms_apply_to_host_decoded_files(files):
    """torchvision's eval pipeline on a CMYK file and a corrupt scan: the same pixels as
    Resize and CenterCrop on Pillow's decode."""
    chosen = [f for f in files if f.name in ("cmyk-adobe", "corrupt_scan-early-eoi",
                                             "extraneous_bytes-sos")]

    def resize(index, name, width, height):
        return eval_request(width, height, 72, 64)
    with DecoderService("cpu") as service:
        results = list(service.decode([(f.name, f.data) for f in chosen], resize=resize))
    for f, r in zip(chosen, results):
        assert r.resized is not None, f.name
        assert (r.pixels == eval_transform(pillow(f.data), 72, 64)).all(), f.name


def test_the_loader_counts_damaged_files(files, tmp_path):
    from dlforge.host.jpeg.loader import JpegBatches
    for f in files:
        (tmp_path / f"{f.name}.jpg").write_bytes(f.data)
    damaged = sum(f.features["libjpeg"] == "warns" for f in files)
    refused = sum(f.features["pillow"] == "refuses" for f in files)
    loader = JpegBatches(tmp_path, 4, size=32, device="cpu")
    images = sum(len(batch.names) for batch in loader)
    assert images == len(files) - refused
    assert loader.stats["damaged"] == damaged and loader.stats["error"] == refused
    strict = JpegBatches(tmp_path, 4, size=32, device="cpu", on_damage="error")
    assert sum(len(batch.names) for batch in strict) == len(files) - refused - damaged
    assert len(strict.errors) == refused + damaged


def test_decode_command_on_damage(files, tmp_path, capsys):
    paths = []
    for name in ("extraneous_bytes-dqt", "grey-pillow"):
        paths.append(tmp_path / f"{name}.jpg")
        paths[-1].write_bytes(next(f.data for f in files if f.name == name))
    assert main(["decode", "--device", "cpu", "--json", *map(str, paths)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in report["files"]] == ["ok", "ok"]
    assert report["files"][0]["damage"].startswith("corrupt data tolerated: 5 extraneous")
    assert main(["decode", "--device", "cpu", "--on-damage", "error", "--json",
                 *map(str, paths)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in report["files"]] == ["error", "ok"]
    with pytest.raises(SystemExit):
        main(["decode", "--device", "cpu", "--on-damage", "drop", str(paths[0])])
