"""The ``dlforge`` command as a user runs it: gen writes Verilog + manifest, sim runs a regression."""

import json
import os
import subprocess
import sys

import pytest

from dlforge.gen.cli import main

DLFORGE = [sys.executable, "-m", "dlforge.gen.cli"]


def test_gen_idct_writes_verilog_and_manifest(tmp_path):
    assert main(["gen", "idct", "--samples-per-clock", "8", "-o", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    verilog = (tmp_path / manifest["verilog"]).read_text()
    assert manifest["top"] == "idct_p8" and "module idct_p8" in verilog
    assert manifest["parameters"] == {"samples_per_clock": 8}
    assert manifest["latency_cycles"] == 32 and manifest["block_interval_cycles"] == 8
    ports = {p["name"]: p for p in manifest["ports"]}
    assert ports["i__payload"]["width"] == 8 * 32 and ports["i__payload"]["direction"] == "input"
    assert ports["o__payload"]["width"] == 8 * 8 and ports["o__ready"]["direction"] == "input"
    lane = ports["i__payload"]["shape"]["element"]["fields"]
    assert lane["coef"] == {"offset": 0, "kind": "signed", "width": 16}
    assert lane["quant"]["offset"] == 16
    for name in ports:
        assert f" {name}" in verilog or f" {name};" in verilog


def test_gen_default_width(tmp_path):
    assert main(["gen", "idct", "-o", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "manifest.json").read_text())["top"] == "idct_p1"


def test_bad_parameter_is_a_clear_error(tmp_path, capsys):
    assert main(["gen", "idct", "--samples-per-clock", "3", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "samples_per_clock must be one of 1, 2, 4, 8" in err


def test_unknown_block_is_rejected():
    result = subprocess.run([*DLFORGE, "gen", "nope", "-o", "x"], capture_output=True, text=True)
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_a_block_command_takes_that_blocks_parameters_only(tmp_path, capsys):
    """``gen``, ``sim`` and ``synth`` have a subcommand per block with its own parameters:
    another block's is refused, and the help gives this block's defaults."""
    from dlforge.gen.blocks import BLOCKS
    with pytest.raises(SystemExit) as refused:
        main(["gen", "idct", "--taps", "3", "-o", str(tmp_path)])
    assert refused.value.code == 2
    assert "unrecognized arguments: --taps 3" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    with pytest.raises(SystemExit):
        main(["gen", "--help"])
    text = capsys.readouterr().out
    assert all(f"\n    {name} " in text for name in BLOCKS())
    for command in ("gen", "sim", "synth"):
        with pytest.raises(SystemExit):
            main([command, "resample", "--help"])
        text = capsys.readouterr().out
        assert text.startswith(f"usage: dlforge {command} resample ")
        assert "--taps" in text and "--lanes" in text
        assert "--rows" not in text and "--samples-per-clock" not in text
    with pytest.raises(SystemExit):
        main(["gen", "blocks", "--help"])
    assert "(default 8; one of 1, 2, 4, 8)" in capsys.readouterr().out     # not idct's 1


@pytest.mark.verilator
def test_sim_prints_table_and_json(tmp_path):
    env = dict(os.environ)
    result = subprocess.run([*DLFORGE, "sim", "idct", "--samples-per-clock", "8", "--blocks", "100",
                             "--json"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert len(rows) == 1 and rows[0]["passed"]
    assert rows[0]["metrics"]["cycles_per_block"] == 8.0
    table = subprocess.run([*DLFORGE, "sim", "idct", "--samples-per-clock", "8", "--blocks", "50"],
                           capture_output=True, text=True, env=env)
    assert table.returncode == 0
    assert "samples_per_clock=8" in table.stdout and "pass" in table.stdout


@pytest.mark.icarus
def test_sim_on_icarus(tmp_path):
    result = subprocess.run([*DLFORGE, "sim", "idct", "--sim", "icarus", "--samples-per-clock", "4",
                             "--blocks", "50", "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)[0]["sim"] == "icarus"


@pytest.mark.verilator
def test_bench_prints_json_with_its_configuration():
    """``--json``: stdout is the one JSON object; the progress asked for goes to stderr."""
    result = subprocess.run([*DLFORGE, "bench", "idct", "--samples-per-clock", "4", "--json"],
                            capture_output=True, text=True,
                            env=dict(os.environ, DLFORGE_PROGRESS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["passed"] and report["testcase"] == "full_rate"
    assert report["parameters"] == {"samples_per_clock": 4}
    assert report["cycles_per_block"] == 16 and report["samples_per_clock"] == 4
    assert "bit-exact" in report["checked"]
    progress = [line for line in result.stderr.splitlines()
                if line.startswith("[dlforge bench idct")]
    assert any("simulating (idct.full_rate)" in line for line in progress)
    assert progress[-1].endswith("] done") and "[dlforge" not in result.stdout


@pytest.mark.verilator
def test_bench_entropy_on_two_photos():
    result = subprocess.run([*DLFORGE, "bench", "entropy", "--limit", "2", "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["files"] == 2 and report["testbench_params"]["corpus"] == "photos"
    assert report["symbols_per_clock_min"] > 0.99


@pytest.mark.verilator
@pytest.mark.xdist_group("sim_board")       # the default simulated board
def test_decode_json_and_npy(tmp_path):
    """`dlforge decode`: one .npy per decoded file, JSON with every file, exit 1 on an error
    (here a damaged file that Pillow would decode, refused with ``--on-damage error``)."""
    import numpy as np
    from dlforge.sim.corpus import jpeg_corpus
    good = [f for f in jpeg_corpus.baseline_corpus("quick") if f.name.startswith("420-31x33")][0]
    bad = [f for f in jpeg_corpus.malformed_corpus()
           if f.name == "huffman_mismatch-huffman-swapped-optimised"][0]
    paths = []
    for f in (good, bad):
        paths.append(tmp_path / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    out = tmp_path / "out"
    result = subprocess.run([*DLFORGE, "decode", "--json", "--on-damage", "error", "--out",
                             str(out), *map(str, paths)], capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    first, second = report["files"]
    assert (first["status"], first["width"], first["height"]) == ("ok", 31, 33)
    assert first["cycles"] > 0 and first["error"] is None
    assert second["status"] == "error" and second["error"].startswith("BAD_HUFFMAN_CODE")
    assert "damaged (on_damage='error')" in second["error"]
    assert second["damage"] == "corrupt data: bad Huffman code"
    pixels = np.load(out / f"{good.name}.npy")
    assert pixels.shape == (33, 31, 3) and pixels.dtype == np.uint8
    assert not (out / f"{bad.name}.npy").exists()
    cpu = subprocess.run([*DLFORGE, "decode", "--device", "cpu", str(paths[0])],
                         capture_output=True, text=True)
    assert cpu.returncode == 0 and "ok" in cpu.stdout


@pytest.mark.verilator
def test_bench_jpeg_on_files(tmp_path):
    """`dlforge bench jpeg FILE...`: per-file pixels/clock and cycles/symbol, medians per
    layout, and the configuration, as JSON."""
    from dlforge.sim.corpus import jpeg_corpus
    paths = []
    for f in [f for f in jpeg_corpus.baseline_corpus("quick") if "100x75" in f.name][:2]:
        paths.append(tmp_path / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    result = subprocess.run([*DLFORGE, "bench", "jpeg", "--max-width", "512", "--json",
                             *map(str, paths)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["parameters"]["max_width"] == 512 and report["files"] == 2
    assert set(report["pixels_per_clock_median"]) == {"420", "444"}
    # the timed run checked every file against the golden model
    assert report["passed"] and "bit-exact" in report["checked"]
    for row in report["per_file"]:
        assert row["pixels_per_clock"] > 0.5 and row["cycles_per_symbol"] >= 1
        assert row["bit_exact"] is True


def _conv_files(tmp_path):
    import numpy as np
    rng = np.random.default_rng(8)
    files = {"input": rng.integers(-128, 128, (1, 5, 7, 7)).astype(np.int8),
             "weight": rng.integers(-128, 128, (6, 5, 3, 3)).astype(np.int8),
             "bias": rng.integers(-100, 100, 6).astype(np.int32),
             "multiplier": np.full(6, 1 << 20), "shift": np.full(6, 28)}
    args = []
    for name, array in files.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += [f"--{name}", str(tmp_path / f"{name}.npy")]
    return args


@pytest.mark.verilator
@pytest.mark.xdist_group("sim_board")       # the default simulated board
def test_conv_sim_and_cpu_agree(tmp_path, capsys):
    """The default simulated board (the build the suite shares) and the golden model."""
    import numpy as np
    from dlforge.rtl.conv.config import EngineConfig
    args = _conv_files(tmp_path) + ["--padding", "1", "--relu"]
    assert main(["conv", *args, "--out", str(tmp_path / "sim.npy"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"].startswith("tcp:127.0.0.1:")      # the private board's socket
    assert report["cycles"] > 0 and report["shape"] == [1, 6, 7, 7]
    assert report["config"] == EngineConfig().as_dict()
    assert main(["conv", "--device", "cpu", *args, "--out", str(tmp_path / "cpu.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "sim.npy"), np.load(tmp_path / "cpu.npy"))


def test_conv_engine_parameters_are_for_the_simulated_board(tmp_path, capsys):
    args = _conv_files(tmp_path)
    for device in ("cpu", "tcp:127.0.0.1:9", "serial:/dev/ttyUSB0"):
        assert main(["conv", "--device", device, *args, "--rows", "4", "--simd", "4",
                     "--out", str(tmp_path / "y.npy")]) == 2
        err = capsys.readouterr().err
        assert "engine parameters choose the simulated board's engine (--device sim)" in err
        assert device in err
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.verilator
@pytest.mark.xdist_group("sim_board")       # the default simulated board
def test_conv_refusal_is_a_clear_error(tmp_path, capsys):
    args = _conv_files(tmp_path)
    assert main(["conv", *args, "--stride", "3", "--out", str(tmp_path / "y.npy")]) == 2
    assert "stride 3 unsupported" in capsys.readouterr().err


def test_gen_conv_writes_verilog_and_manifest(tmp_path):
    assert main(["gen", "conv", "--rows", "2", "--cols", "2", "--simd", "2", "--weight-depth",
                 "64", "--input-depth", "256", "--psum-depth", "32", "--link-bytes", "16",
                 "-o", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"]["macs_per_clock"] == 8 and manifest["link_bits"] == 128
    names = {port["name"] for port in manifest["ports"]}
    assert {"i__payload", "o__payload", "cycles", "error_code"} <= names
    assert (tmp_path / f"{manifest['top']}.v").read_text().startswith("/*")


@pytest.mark.verilator
def test_bench_resample_over_the_factors_its_taps_allow():
    """`dlforge bench resample --taps 9`: the whole image shrunk by 1, 1.5, 2, 3 and 4 (6 and
    8 need 13 and 17 taps), every output checked against the model, pixels per clock each:
    near the four a clock of its four lanes."""
    result = subprocess.run([*DLFORGE, "bench", "resample", "--taps", "9", "--max-columns",
                             "128", "--max-rows", "128", "--json"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    jobs = report["jobs"]
    assert [tuple(j["size"]) for j in jobs] == [(96, 72), (64, 48), (48, 36), (32, 24),
                                                (24, 18)]
    assert report["passed"] and report["checked"].startswith("bit-exact")
    for job in jobs:
        w, h = job["size"]
        assert job["output_pixels_per_clock"] == pytest.approx(w * h / job["cycles"], abs=1e-4)
        assert 3.5 < job["crop_pixels_per_clock"] <= 4
