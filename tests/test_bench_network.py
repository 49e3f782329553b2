"""``dlforge bench network``: a whole network on the simulated board in both integrations,
every output checked against the golden network model, the digits' accuracy beside the
float model's."""

import json

import pytest

from dlforge.gen.bench.network import bench_network, bench_network_images
from dlforge.gen.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sim_board")]


def test_digits_on_the_simulated_board(capsys):
    assert main(["bench", "network", "--model", "digits", "--limit", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["failures"] == [] and report["images"] == 8
    assert report["pipelined"]["bit_exact"] and report["naive"]["bit_exact"]
    acc = report["accuracy"]
    assert acc["held_out"] == 397 and acc["int8_top1"] >= acc["float_top1"] - 0.01
    assert report["engine_layers"] == 4 and report["macs_per_image"] == 337_536
    assert {r["mode"] for r in report["summary"]} == {"pipelined", "naive"}
    for row in report["summary"]:
        assert 0 < row["end_to_end_utilization"] <= row["device_utilization"] <= 1
    assert all(s["speedup"] > 1 for s in report["pipelined_vs_naive"])


def test_digits_from_jpeg_files_on_the_simulated_board(capsys):
    assert main(["bench", "network", "--images", "--model", "digits", "--limit", "10",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["bit_exact"] and report["files"] == 10
    assert report["inputs_bit_exact"] and report["outputs_bit_exact"]
    assert report["run"]["batches"] == 3 and report["run"]["decode"]["resized"]["device"] == 10
    acc = report["accuracy"]
    assert acc["images"] == 10 and acc["float_top1"] >= 0.7 and acc["device_int8_top1"] >= 0.7
    for row in report["summary"]:
        assert 0 < row["end_to_end_utilization"] <= row["device_utilization"] <= 1
        assert row["decode_core_cycles_per_image"] > 0


def test_unknown_models_and_options_are_refused(capsys):
    with pytest.raises(ValueError, match="unknown model"):
        bench_network("vgg")
    with pytest.raises(ValueError, match="unknown model"):
        bench_network_images("vgg")
    with pytest.raises(SystemExit) as refused:           # --layers is bench conv's option
        main(["bench", "network", "--model", "digits", "--layers", "conv1"])
    assert refused.value.code == 2
    assert "unrecognized arguments: --layers conv1" in capsys.readouterr().err
