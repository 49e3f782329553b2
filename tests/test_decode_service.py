"""The decoder service: every file gets a verdict in order; unsupported files go to the CPU
(before the device when the headers show it, after the device's status otherwise); malformed
files are errors that say why; the simulated board and the CPU give the same images."""

import pytest

import libjpeg_c

from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.device.cpu import CpuDevice
from dlforge.sim.corpus import jpeg_corpus, photos


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jpeg")
    good = [f for f in jpeg_corpus.baseline_corpus("quick") if "100x75" in f.name][:2]
    progressive = [f for f in jpeg_corpus.unsupported_corpus()
                   if f.features.get("reason") == "progressive"][:1]
    multiscan = [f for f in jpeg_corpus.unsupported_corpus()
                 if f.features.get("reason") == "multiscan"][:1]
    broken = [f for f in jpeg_corpus.malformed_corpus() if f.name == "truncated-mid-scan"]
    paths = []
    for f in good + progressive + broken + multiscan:
        paths.append(folder / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    empty = folder / "empty.jpg"
    empty.write_bytes(b"")
    return paths + [empty]


def _check_images(files, results, fast=False):
    for path, r in zip(files, results):
        if r.status in ("ok", "fallback"):
            # libjpeg-turbo's C build: the cpu device and the fallback are simplejpeg
            want = libjpeg_c.decode(path, "fast" if fast else "fancy")
            assert (r.width, r.height) == (want.shape[1], want.shape[0])
            assert (r.pixels == want).all(), path.name


def test_cpu_device(files):
    with DecoderService("cpu") as service:
        results = list(service.decode(files))
    assert [r.status for r in results] == ["ok", "ok", "fallback", "error", "ok", "error"]
    assert [r.index for r in results] == list(range(len(files)))
    assert "UNSUPPORTED_PROGRESSIVE" in results[2].error      # the host's pre-check decided
    assert "Premature end" in results[3].error
    assert "NO_SOI" in results[5].error
    assert all(r.cycles is None for r in results)
    assert service.counts == {"ok": 3, "fallback": 1, "error": 2, "damaged": 0}
    _check_images(files, results)


def test_bytes_and_named_items():
    data = photos.shipped_jpegs()[-1][1]
    with DecoderService(CpuDevice(), upsample="fast") as service:
        a, b = service.decode([data, ("mine", data)])
    assert (a.name, b.name) == ("#0", "mine") and (a.pixels == b.pixels).all()


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="upsampling"):
        DecoderService("cpu", upsample="bilinear")
    with pytest.raises(ValueError, match="unknown device"):
        DecoderService("gpu")
    with DecoderService("cpu") as service, pytest.raises(FileNotFoundError):
        list(service.decode([tmp_path / "missing.jpg"]))
