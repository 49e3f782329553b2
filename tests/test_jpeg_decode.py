"""Decoding files on a device: the simulated core and the CPU give the same images; files the
core does not support fall back to the CPU; malformed files are errors with the reason."""

import pytest
import simplejpeg

from dlforge.host.jpeg_decode import decode_files
from dlforge.sim import jpeg_corpus


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jpeg")
    good = [f for f in jpeg_corpus.baseline_corpus("quick") if "100x75" in f.name][:2]
    progressive = [f for f in jpeg_corpus.unsupported_corpus()
                   if f.features.get("reason") == "progressive"][:1]
    broken = [f for f in jpeg_corpus.malformed_corpus() if f.name == "truncated-mid-scan"]
    paths = []
    for f in good + progressive + broken:
        paths.append(folder / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    empty = folder / "empty.jpg"
    empty.write_bytes(b"")
    return paths + [empty]


@pytest.mark.parametrize("mode", ["fancy", "fast"])
def test_sim_device_agrees_with_libjpeg(files, mode):
    results = decode_files(files, device="sim", upsample=mode, max_width=512)
    assert [r.status for r in results] == ["ok", "ok", "fallback", "error", "error"]
    for path, r in zip(files[:3], results):
        want = simplejpeg.decode_jpeg(path.read_bytes(), colorspace="RGB", fastdct=False,
                                      fastupsample=mode == "fast")
        assert (r.pixels == want).all() and (r.width, r.height) == (want.shape[1], want.shape[0])
    assert results[0].cycles > 0 and results[2].cycles > 0     # the core saw the fallback file
    assert "UNSUPPORTED_PROGRESSIVE" in results[2].error
    assert "TRUNCATED" in results[3].error and "malformed" in results[3].error
    assert "empty" in results[4].error


def test_cpu_device(files):
    results = decode_files(files, device="cpu")
    assert [r.status for r in results] == ["ok", "ok", "ok", "error", "error"]
    assert "Premature end" in results[3].error
    assert all(r.cycles is None for r in results)


def test_bad_arguments(files, tmp_path):
    with pytest.raises(ValueError, match="device"):
        decode_files(files, device="gpu")
    with pytest.raises(ValueError, match="upsampling"):
        decode_files(files, upsample="bilinear")
    with pytest.raises(ValueError, match="no such file"):
        decode_files([tmp_path / "missing.jpg"])
