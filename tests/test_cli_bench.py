"""``dlforge bench``'s output: one JSON object with ``--json`` on every bench, a readable
table without, ``--plot FILE.png``, the block benches checked in the same run, and progress on
stderr only.  The benches themselves are replaced by fakes here (their own tests run them:
tests/test_cli.py runs the IDCT's with ``--json`` and progress on)."""

import gc
import json
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from dlforge.gen.bench import device as bench_device_module
from dlforge.gen.bench.table import format_report, format_rows, format_value
from dlforge.gen.cli import build_parser, main

# (the blocks the CLI builds for the fake benches are never elaborated: see fake_benches)
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


def _device_report():
    worth = {"clock_mhz": 250.0, "clock_source": "projection: x",
             "megapixels_per_second": 1220.0, "imagenet_images_per_second": 6506.0,
             "cpu_cores_replaced": 9.8, "megapixels_per_second_per_core": 650.0,
             "per_core_vs_cpu_core": 5.24}
    return {"benchmark": "device", "config": {"device": "sim", "cores": 2, "link_bytes": 32,
                                              "conv": False},
            "images": 3, "pixels": 3_000_000, "checked": "every image bit-exact to x",
            "device_cycles": 600_000, "pixels_per_clock": 4.88,
            "wall_seconds": 1.0, "decoded_megapixels_per_wall_second": 3.0,
            "simulated_cycles_per_second": 600_000.0, "board": {},
            "cpu": {"libjpeg_turbo_megapixels_per_second_one_core": 124.0, "what": "x"},
            "worth": {"xdma_250mhz": worth,
                      "stated_clock": dict(worth, clock_mhz=51.2, clock_source="measured: x",
                                           megapixels_per_second_per_core=133.1,
                                           per_core_vs_cpu_core=1.07),
                      "note": "x"},
            "files": [{"file": f"f{k}.jpg", "layout": layout, "width": 1000, "height": 1000,
                       "status": "OK", "core_cycles_in_device": 400_000 + k}
                      for k, layout in enumerate(("420", "444", "420"))],
            "failures": [], "ok": True}


def _jpeg_report():
    rows = [{"file": f"p{k}.jpg", "mode": "fancy", "layout": layout, "status": "OK",
             "width": 64, "height": 48, "cycles": 1000 + k, "symbols": 900,
             "pixels_per_clock": 3072 / (1000 + k), "cycles_per_symbol": 1.1, "bit_exact": True}
            for k, layout in enumerate(("420", "444", "422", "gray"))]
    return {"block": "jpeg", "parameters": {"cores": 1}, "simulator": "verilator",
            "testbench": "t", "testcase": "decode_files", "testbench_params": {},
            "passed": True, "checked": "every file bit-exact to the golden model",
            "files": 4, "clocks": 4100, "aggregate_pixels_per_clock": 2.99, "ok": 4,
            "pixels_per_clock_median": {"420": 3.07}, "pixels_per_clock_min": {"420": 3.0},
            "per_file": rows}


def _conv_report():
    return {"block": "conv", "parameters": {"rows": 8}, "simulator": "verilator",
            "testbench": "t", "testcase": "run_layers", "testbench_params": {},
            "passed": True, "checked": "every layer bit-exact", "config": {"rows": 8, "cols": 8,
                                                                           "simd": 8},
            "layers": [{"name": "conv1", "macs": 118013952, "tiles": 10, "plan": {},
                        "predicted_cycles": 300000, "cycles": 299000, "link_cycles": 1,
                        "utilization": 0.77},
                       {"name": "layer1.0.conv1", "macs": 115605504, "tiles": 24, "plan": {},
                        "predicted_cycles": 227529, "cycles": 227515, "link_cycles": 1,
                        "utilization": 0.9924}],
            "mean_utilization": 0.9924, "array_cycles": 1, "tiles": 34}


def _conv_device_report():
    layers = [{"layer": name, "macs": 1000, "tiles": 2, "predicted_cycles_fed_directly": 20,
               "engine_cycles": 21, "device_cycles": 22, "utilization_fed_directly": 0.99,
               "utilization_engine": 0.98, "utilization_device": 0.97,
               "device_vs_direct": 0.98, "bit_exact": True} for name in ("conv1", "fc")]
    return {"benchmark": "conv-device", "board": {}, "config": {"rows": 8}, "checked": "x",
            "layers": layers, "network_utilization_device": 0.97,
            "worst_device_vs_direct": 0.98, "failures": [], "ok": True}


LOADER = {"device": "cpu", "files": ["a.jpg"], "passes": 2, "batches": 1, "images": 2, "ok": 2,
          "fallback": 0, "error": 0, "checked": "every image bit-exact", "mismatches": 0,
          "megapixels": 1.0, "host_cpu_s_per_image": 0.0001,
          "host_cpu_s_per_image_batches": [0.0001], "libjpeg_cpu_s_per_image": 0.002,
          "host_vs_libjpeg": 0.05, "within_5_percent": True, "wall_s": 1.0}


@pytest.fixture
def fake_benches(monkeypatch):
    """Every bench's function replaced by one returning a report of its shape; which ran."""
    import dlforge.gen.bench.loader as loader
    import dlforge.gen.bench.sim_board as sim_board
    import dlforge.gen.bench.transform as transform
    import dlforge.gen.regression as regression
    ran = []

    def fake(name, report):
        def run(*args, **kwargs):
            ran.append(name)
            return json.loads(json.dumps(report))
        return run
    monkeypatch.setattr(loader, "bench_loader", fake("loader", LOADER))
    monkeypatch.setattr(loader, "bench_loader_both", fake("loader", LOADER))
    monkeypatch.setattr(transform, "bench_transform", fake("transform", dict(
        LOADER, transform="eval", cpu_pipeline_s_per_image=0.002, host_vs_cpu_pipeline=0.05)))
    monkeypatch.setattr(bench_device_module, "bench_device", fake("device", _device_report()))
    monkeypatch.setattr(bench_device_module, "bench_conv_device",
                        fake("conv-device", _conv_device_report()))
    monkeypatch.setattr(sim_board, "bench_sim_board", fake("sim-board", {
        "benchmark": "sim-board", "parameters": {}, "cycles_per_s": 1.0e6,
        "busy_cycles_per_s": 1.05e6, "pixels": 10, "files": []}))

    def block_bench(block_name, params, tb, **kwargs):
        ran.append(block_name)
        report = _conv_report() if block_name == "conv" else _jpeg_report()
        return dict(report, block=block_name, parameters=params)
    monkeypatch.setattr(regression, "run_bench", block_bench)
    yield ran
    # The fake benches never elaborate the blocks the CLI built for them (the real ones do):
    # collect them here, where their "created but never used" warnings are expected, not
    # in whichever later test the garbage collector happens to run.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        gc.collect()


BENCHES = [["idct"], ["entropy"], ["blocks"], ["jpeg"], ["conv"], ["resample"],
           ["conv", "--device", "sim"], ["device"], ["loader"], ["loader", "--device", "cpu"],
           ["loader", "--transform", "eval"], ["sim-board"]]


@pytest.mark.parametrize("bench", BENCHES, ids=" ".join)
def test_every_bench_prints_one_json_object_with_json_and_a_table_without(
        bench, fake_benches, capsys):
    assert main(["bench", *bench, "--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out)                      # the whole of stdout: one object
    assert isinstance(report, dict) and report
    assert main(["bench", *bench]) == 0
    table = capsys.readouterr().out
    with pytest.raises(ValueError):
        json.loads(table)
    assert len(fake_benches) == 2 and fake_benches[0] == fake_benches[1]
    lines = table.splitlines()
    assert len(lines) >= 3 and not table.lstrip().startswith("{")


def _bench_names():
    """Every bench ``dlforge bench`` offers, from its parser."""
    commands = build_parser()._subparsers._group_actions[0].choices
    return list(commands["bench"]._subparsers._group_actions[0].choices)


def test_bench_sched_takes_json_too():
    args = build_parser().parse_args(["bench", "sched", "--json"])
    assert args.json and args.bench == "sched"


def test_every_bench_choice_parses_json():
    names = _bench_names()
    assert names == ["idct", "entropy", "blocks", "jpeg", "conv", "resample", "device",
                     "loader", "sim-board", "sched", "network"]
    parser = build_parser()
    for name in names:
        assert parser.parse_args(["bench", name, "--json"]).json


def test_block_bench_table_has_the_headline_first_and_aligned_file_columns(fake_benches,
                                                                          capsys):
    assert main(["bench", "jpeg"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("bench jpeg (cores=1 max_width=4096 ")
    assert lines[0].endswith(") on verilator: passed")
    assert lines[1].split()[0] == "checked" and "bit-exact" in lines[1]
    assert lines[2].split()[:2] == ["files", "4"]
    head = next(k for k, line in enumerate(lines) if line.startswith("file "))
    assert lines[head - 1] == "per file (4):"
    rows = lines[head + 2:head + 6]
    assert [r.split()[0] for r in rows] == ["p0.jpg", "p1.jpg", "p2.jpg", "p3.jpg"]
    # aligned: every row's figures end where the header's column ends
    end = lines[head].index("pixels_per_clock") + len("pixels_per_clock")
    assert all(r[:end].endswith(("3.072", "3.069", "3.066", "3.063")) for r in rows)


def test_device_and_conv_tables(fake_benches, capsys):
    assert main(["bench", "device"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("device: simulated board, 2 cores") and "4.880 pixels/clock" in out
    assert "at 51.2 MHz (measured: x): 1220 MP/s" in out
    assert "one core fed directly at 51.2 MHz: 133 MP/s, 1.07x libjpeg-turbo on one CPU core" \
        in out
    assert main(["bench", "conv", "--device", "sim"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "bench conv --device sim: ok"
    assert lines[1].split()[:4] == ["network", "utilization", "device", "0.97"]


def test_format_value_and_rows():
    assert [format_value(v) for v in (None, True, 0.123456, 1234567.8, 123456, 7, "x")] == \
        ["-", "yes", "0.1235", "1,234,568", "123,456", "7", "x"]
    text = format_rows([{"name": "a", "n": 1, "skip": {"nested": 1}},
                        {"name": "bbbb", "n": 22, "skip": [1]}])
    assert text.splitlines() == ["name   n", "----  --", "a      1", "bbbb  22"]


def test_format_report_orders_headline_first_and_skips():
    text = format_report({"b": 2, "a": 1, "hidden": 3, "nested": {"x": 1, "y": [1, 2]}},
                         "title", headline=("a",), skip=("hidden",))
    assert text.splitlines() == ["title", "a       1", "b       2", "nested  x 1, y 1, 2"]


def test_the_block_benches_check_by_default_and_say_so(monkeypatch):
    """jpeg's and conv's benches compare every result with the golden model in the timed run
    (their testbenches' ``check``); ``--no-check`` times only, and the report says so."""
    import dlforge.gen.regression as regression
    from dlforge.gen.blocks import get_block
    seen = []

    class Result:
        passed, metrics, failed, test_dir = True, {"files": 1}, [], None

    def fake_run(component, **kwargs):
        seen.append(kwargs["params"])
        return Result()
    monkeypatch.setattr(regression, "run_cocotb", fake_run)
    for name in ("jpeg", "conv"):
        # (a block's own bench parameters saying otherwise do not turn the check off)
        report = regression.run_bench(name, get_block(name).full_params({}),
                                      {"corpus": "photos", "check": False}, component=object())
        assert seen[-1]["check"] is True
        assert "bit-exact" in report["checked"] and "in this run" in report["checked"]
        report = regression.run_bench(name, get_block(name).full_params({}),
                                      {"corpus": "photos"}, component=object(), check=False)
        assert seen[-1]["check"] is False and report["checked"] is False


def test_the_jpeg_bench_sets_the_core_beside_one_cpu_core(monkeypatch, tmp_path):
    """The decoder core's bench: its aggregate pixels per clock at the stated clock (the ECP5
    core's measured Fmax by default) beside libjpeg-turbo on one CPU core, timed on the
    files the core decoded OK in the run (the testbench's own file list)."""
    import io

    import numpy as np
    from PIL import Image

    import dlforge.gen.bench.device as device
    import dlforge.gen.regression as regression
    from dlforge.gen.blocks import get_block
    paths = []
    for k in range(3):
        buf = io.BytesIO()
        Image.fromarray(np.full((8, 16 + 8 * k, 3), 40 * k, np.uint8)).save(buf, "JPEG")
        paths.append(tmp_path / f"f{k}.jpg")
        paths[-1].write_bytes(buf.getvalue())
    rows = [{"file": p.name, "status": "OK" if k != 1 else "UNSUPPORTED"}
            for k, p in enumerate(paths)]

    class Result:
        passed, failed, test_dir = True, [], None
        metrics = {"files": 3, "aggregate_pixels_per_clock": 2.5, "per_file": rows}
    monkeypatch.setattr(regression, "run_cocotb", lambda component, **kwargs: Result())
    timed = []
    monkeypatch.setattr(device, "cpu_rate", lambda named: timed.append(named) or 125.0)
    params = get_block("jpeg").full_params({})
    tb = {"files": [str(p) for p in paths], "modes": ["fancy"]}
    report = regression.run_bench("jpeg", params, tb, component=object(), clock_mhz=60)
    assert [name for name, _ in timed[0]] == ["f0.jpg", "f2.jpg"]     # the OK files only
    assert timed[0][1][1] == paths[2].read_bytes()
    assert report["cpu"]["libjpeg_turbo_megapixels_per_second_one_core"] == 125.0
    at = report["at_clock"]
    assert at["clock_mhz"] == 60 and at["clock_source"] == device.STATED_CLOCK
    assert at["megapixels_per_second"] == pytest.approx(2.5 * 60)
    assert at["vs_cpu_core"] == pytest.approx(2.5 * 60 / 125)
    at = regression.run_bench("jpeg", params, tb, component=object())["at_clock"]
    assert (at["clock_mhz"], at["clock_source"]) == device.stated_clock()
    # a file list that is not the run's is an error, not a comparison on other files
    with pytest.raises(RuntimeError, match="not the files the testbench decoded"):
        regression.run_bench("jpeg", params, dict(tb, repeat=2), component=object())
    assert "at_clock" not in regression.run_bench("conv", get_block("conv").full_params({}),
                                                  {}, component=object())


def test_the_clock_reaches_the_benches(fake_benches, monkeypatch, capsys):
    """``--clock MHZ`` on bench jpeg and bench device (default: none given, the bench's
    measured clock); a clock that is not a positive number is refused."""
    import dlforge.gen.regression as regression
    seen = []
    monkeypatch.setattr(bench_device_module, "bench_device",
                        lambda *a, **kw: seen.append(kw["clock_mhz"]) or _device_report())
    real = regression.run_bench
    monkeypatch.setattr(regression, "run_bench",
                        lambda *a, **kw: seen.append(kw["clock_mhz"]) or real(*a, **kw))
    for argv in (["device"], ["device", "--clock", "62.5"], ["jpeg"], ["jpeg", "--clock", "60"]):
        assert main(["bench", *argv, "--json"]) == 0
    assert seen == [None, 62.5, None, 60.0]
    for bad in ("0", "-5", "fast"):
        with pytest.raises(SystemExit) as refused:
            main(["bench", "jpeg", "--clock", bad])
        assert refused.value.code == 2
        assert "a clock is a positive number of MHz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "entropy", "--clock", "60"])


def test_no_check_only_where_a_bench_can_skip_it(fake_benches, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["bench", "device", "--no-check"])
    assert refused.value.code == 2 and not fake_benches
    assert "unrecognized arguments: --no-check" in capsys.readouterr().err


# ---- each bench's own options ------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["device", "--taps", "3"], ["device", "--model", "digits"], ["device", "--passes", "2"],
    ["loader", "--corpus", "photos"], ["loader", "--limit", "2"], ["loader", "--cores", "2"],
    ["sim-board", "--json", "--link-bytes", "4"], ["network", "--layers", "conv1"],
    ["network", "--psum-depth", "32"], ["idct", "--limit", "2"], ["idct", "--cores", "2"],
    ["idct", "--plot", "x.png"], ["entropy", "--samples-per-clock", "8"],
    ["jpeg", "--rows", "4"], ["jpeg", "--model", "resnet18"], ["conv", "--corpus", "photos"],
    ["conv", "--max-width", "512"], ["resample", "--corpus", "photos"],
    ["sched", "--corpus", "photos"], ["sched", "--taps", "3"]], ids=" ".join)
def test_a_bench_refuses_another_benchs_option(argv, fake_benches, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["bench", *argv])
    assert refused.value.code == 2 and not fake_benches
    assert f"unrecognized arguments: {argv[-2]}" in capsys.readouterr().err


def test_bench_help_lists_the_benches_and_a_bench_its_own_options(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = capsys.readouterr().out
    for name in _bench_names():
        assert f"\n    {name} " in text or f"\n    {name}\n" in text, name
    assert "--taps" not in text and "--model" not in text
    with pytest.raises(SystemExit):
        main(["bench", "device", "--help"])
    text = capsys.readouterr().out
    assert text.startswith("usage: dlforge bench device ")
    for option in ("--corpus", "--limit", "--cores", "--link-bytes", "--conv", "--no-reference",
                   "--transform", "--scale", "--clock", "--plot", "--json", "FILE"):
        assert option in text, option
    for option in ("--taps", "--psum-depth", "--model", "--passes", "--no-check", "--sim"):
        assert option not in text, option
    with pytest.raises(SystemExit):
        main(["bench", "resample", "--help"])
    text = capsys.readouterr().out
    assert "--taps" in text and "--lanes" in text and "--samples-per-clock" not in text
    assert "--corpus" not in text and "--plot" not in text


def test_building_the_parser_does_not_import_pytorch():
    """``bench sched``'s options come from modules that import PyTorch (optional): they are
    added when that bench is used, not whenever ``dlforge`` starts."""
    import subprocess
    import sys
    code = ("import sys\nfrom dlforge.gen.cli import build_parser\n"
            "parser = build_parser()\nparser.parse_args(['bench', 'device', '--json'])\n"
            "assert 'torch' not in sys.modules\n"
            "assert parser.parse_args(['bench', 'sched', '--model', 'mlp']).model == 'mlp'\n"
            "assert 'torch' in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]


#: Every ``dlforge bench`` command line of the README, docs/*.md, the Makefile and the tests,
#: with what it parses to.
DOCUMENTED = [
    ("device --corpus photos --json", {"corpus": "photos", "json": True}),
    ("device --corpus photos --no-reference --plot docs/img/bench_device.png",
     {"no_reference": True, "plot": "docs/img/bench_device.png"}),
    ("device --corpus photos --conv --no-reference --json", {"conv": True}),
    ("device --corpus photos --cores 4 --link-bytes 16 --no-reference --json",
     {"cores": 4, "link_bytes": 16}),
    ("device --transform eval --no-reference", {"transform": "eval"}),
    ("device --transform eval --scale 1/2 --no-reference", {"scale": 2}),
    ("jpeg --corpus photos --json", {"corpus": "photos", "files": []}),
    ("jpeg --max-width 512 --json a.jpg b.jpg", {"max_width": 512, "files": ["a.jpg", "b.jpg"]}),
    ("entropy --corpus photos --limit 16 --json", {"limit": 16}),
    ("entropy --limit 2 --json", {"limit": 2}),
    ("blocks --limit 16", {"limit": 16}),
    ("idct --samples-per-clock 4 --json", {"samples_per_clock": 4}),
    ("resample --taps 17", {"taps": 17}),
    ("resample --taps 9 --max-columns 128 --max-rows 128 --json", {"max_columns": 128}),
    ("conv --model resnet18", {"model": "resnet18", "device": None}),
    ("conv --device sim", {"device": "sim"}),
    ("loader", {"device": "sim:dma", "transform": None}),
    ("loader --json", {"json": True}),
    ("loader --transform eval", {"transform": "eval"}),
    ("loader --transform train", {"transform": "train"}),
    ("loader --device cpu --transform eval --passes 2 --batches 1 --json",
     {"device": "cpu", "passes": 2, "batches": 1}),
    ("sim-board", {"cores": 1}),
    ("network --model resnet18 --limit 4 --json", {"model": "resnet18", "limit": 4}),
    ("network --model digits --json", {"model": "digits", "images": False}),
    ("network --images --model resnet18 --limit 16 --json", {"images": True}),
    ("network --images --model digits", {"images": True, "device": "sim"}),
    ("sched", {"device": "cpu"}),
    ("sched --model resnet18 --batch 8 --steps 3", {"batch": 8, "steps": 3}),
]


@pytest.mark.parametrize("line, expected", DOCUMENTED, ids=[d[0] for d in DOCUMENTED])
def test_documented_bench_command_lines_keep_their_meaning(line, expected, monkeypatch):
    """Parsed by ``main`` as a user runs it (files after options included), the bench
    itself replaced by a recorder."""
    from dlforge.gen.commands import bench
    parsed = []
    for name in ("cmd_bench", "cmd_bench_sched"):
        monkeypatch.setattr(bench, name, lambda args: parsed.append(args) or 0)
    argv = ["bench", *line.split()]
    assert main(argv) == 0
    assert parsed[0].bench == argv[1]
    for key, value in expected.items():
        assert getattr(parsed[0], key) == value, key


class _Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def phase(self, *a, **k):
        pass

    def update(self, *a, **k):
        pass


# ---- --plot ------------------------------------------------------------------------------------

def _is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


@pytest.mark.parametrize("make", [_jpeg_report, _device_report, _conv_report,
                                  _conv_device_report])
def test_plot_writes_a_png(make, tmp_path):
    pytest.importorskip("matplotlib")
    from dlforge.gen.bench.plot import plot_report
    path = tmp_path / "p.png"
    kind = plot_report(make(), path)
    assert kind == ("layers" if "layers" in make() else "files") and _is_png(path)


def test_plot_fmax_of_a_synth_report(tmp_path):
    pytest.importorskip("matplotlib")
    from dlforge.gen.bench.plot import plot_report
    figures = {"device": "ecp5-85f", "top": "idct_p8", "target_mhz": 100.0, "fmax_mhz": 71.3,
               "meets_timing": False}
    assert plot_report(figures, tmp_path / "f.png") == "fmax" and _is_png(tmp_path / "f.png")


def test_what_the_plots_draw():
    from dlforge.gen.bench.plot import file_rates, layer_utilisation
    rows, label = file_rates(_device_report())
    assert [(r[0], r[1]) for r in rows] == [("f0.jpg", "420"), ("f1.jpg", "444"),
                                            ("f2.jpg", "420")]
    assert rows[0][2] == pytest.approx(1_000_000 / 400_000) and "pixels per clock" in label
    rows, _ = file_rates(_jpeg_report())
    assert [r[1] for r in rows] == ["420", "444", "422", "gray"]
    names, series = layer_utilisation(_conv_report())
    assert names == ["conv1", "layer1.0.conv1"]
    assert list(series.values()) == [[0.77, 0.9924]]
    names, series = layer_utilisation(_conv_device_report())
    assert len(series) == 3 and series["device (link span)"] == [0.97, 0.97]


def test_bench_plot_through_the_command(fake_benches, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "device.png"
    assert main(["bench", "device", "--json", "--plot", str(path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["benchmark"] == "device"      # stdout: the JSON only
    assert f"plot: {path}" in captured.err and _is_png(path)


def test_plot_is_refused_before_a_bench_it_cannot_draw(fake_benches, tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["bench", "loader", "--plot", str(tmp_path / "x.png")])
    assert refused.value.code == 2 and not fake_benches
    assert "unrecognized arguments: --plot" in capsys.readouterr().err


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch, fake_benches, tmp_path,
                                                  capsys):
    import importlib.util
    import sys
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["bench", "jpeg", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'dlforge[plot]'" in capsys.readouterr().err and not fake_benches
    monkeypatch.setitem(sys.modules, "matplotlib", None)           # import fails
    from dlforge.gen.bench.plot import plot_report
    with pytest.raises(RuntimeError, match="needs matplotlib"):
        plot_report(_jpeg_report(), tmp_path / "y.png")


# ---- progress ----------------------------------------------------------------------------------

def test_progress_is_silent_under_pytest_unless_asked(monkeypatch, fake_benches, capsys):
    monkeypatch.delenv("DLFORGE_PROGRESS", raising=False)
    assert main(["bench", "device", "--json"]) == 0
    assert "[dlforge" not in capsys.readouterr().err
    monkeypatch.setenv("DLFORGE_PROGRESS", "1")
    assert main(["bench", "device", "--json"]) == 0
    captured = capsys.readouterr()
    assert "[dlforge bench device" in captured.err and "[dlforge" not in captured.out


def test_the_board_build_reports_its_phases(monkeypatch, tmp_path):
    """sim/board/build.py's first build: the elaboration and Verilator's build on the
    Progress it is given (the Verilog and the build itself faked: minutes otherwise)."""
    import io
    import dlforge.sim.board.build as board_build
    from dlforge.sim.tools.progress import Progress
    monkeypatch.setenv("DLFORGE_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(board_build, "_verilog", lambda params: "module x; endmodule")
    monkeypatch.setattr(board_build, "simulator_env", lambda sim: {})
    monkeypatch.setattr(board_build, "_verilator_version", lambda env: "Verilator (faked)")

    def fake_build(folder, text, env, params):
        folder.mkdir(parents=True)
        (folder / board_build.EXECUTABLE).write_text("")
        (folder / ".built").write_text("{}")
    monkeypatch.setattr(board_build, "_build", fake_build)
    stream = io.StringIO()
    progress = Progress("simulated board", stream=stream, enabled=True, heartbeat=False)
    exe = board_build.build_board(cores=1, conv=False, progress=progress)
    assert exe.name == board_build.EXECUTABLE
    phases = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    assert phases[0] == "elaborating the top (Verilog)"
    assert phases[1].startswith("Verilator build in ")
    # found through its index the next time: nothing to report
    stream.truncate(0)
    board_build.build_board(cores=1, conv=False, progress=progress)
    assert stream.getvalue() == ""
