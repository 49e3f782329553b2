"""``dlforge bench sched`` on tiny configurations: the JSON keys, sane figures, the trace, the
argument parsing, and a two-process run against DistributedDataParallel."""

import json

import pytest
import torch

from dlforge.gen.bench.sched import bench_sched
from dlforge.gen.cli import main

KEYS = {"stock_images_per_s", "sched_images_per_s", "ratio", "max_param_abs_diff", "trace"}


def test_small_resnet_side_by_side(tmp_path):
    threads = torch.get_num_threads()
    result = bench_sched(model="small", batch=4, steps=2, image_size=16,
                         trace=tmp_path / "t.json", threads=1)
    assert KEYS <= set(result)
    assert result["stock_images_per_s"] > 0 and result["sched_images_per_s"] > 0
    assert result["ratio"] == pytest.approx(
        result["sched_images_per_s"] / result["stock_images_per_s"], rel=1e-3)
    assert result["max_param_abs_diff"] == 0.0          # the same kernels, bit for bit
    assert len(result["sched_step_ms"]) == 2 and len(result["iterations"]) == 2
    assert result["split_layers"] == 7 and result["allreduces"] == 0
    trace = json.loads((tmp_path / "t.json").read_text())
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {"scheduled rank 0", "stock rank 0"}
    assert result["threads"] == 1 and torch.get_num_threads() == threads    # given back


def test_command_prints_json(capsys):
    assert main(["bench", "sched", "--model", "mlp", "--batch", "2", "--steps", "1",
                 "--image-size", "8", "--warmup", "0", "--executor", "inline", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert KEYS <= set(result) and result["trace"] is None
    assert result["executor"] == "InlineExecutor" and result["steps"] == 1


def test_command_prints_figures(capsys, tmp_path):
    assert main(["bench", "sched", "--model", "shared", "--batch", "2", "--steps", "1",
                 "--image-size", "8", "--trace", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "images/s" in out and "ratio" in out and str(tmp_path / "t.json") in out


def test_command_refuses(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "sched", "--model", "vgg"])
    if not torch.cuda.is_available():
        assert main(["bench", "sched", "--device", "cuda"]) == 2
        assert "no CUDA" in capsys.readouterr().err


@pytest.mark.slow
def test_two_processes_against_distributed_data_parallel(tmp_path):
    result = bench_sched(model="small", batch=4, steps=2, image_size=16, world_size=2,
                         trace=tmp_path / "t.json", bucket_cap_mb=0.01, threads=1)
    assert result["world_size"] == 2 and result["buckets"] > 1
    assert result["allreduces"] == 3 * result["buckets"]       # warmup + 2 steps
    # DDP divides by the world size before its sum as well; with 2 processes both are exact
    # in float32, so the two match bit for bit.
    assert result["max_param_abs_diff"] == 0.0
    trace = json.loads((tmp_path / "t.json").read_text())
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"allreduce bucket 0", "wait allreduce", "weight_grad layer1.0.conv1"} <= names
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {f"{v} rank {r}" for v in ("scheduled", "stock") for r in (0, 1)}
