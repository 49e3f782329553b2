"""Every source module with behaviour of its own has a test file, so that a reader looking for
a module's tests finds them by its name.

The rule: ``tests/test_<module>.py`` or ``tests/test_<package>_<module>.py`` (e.g.
``rtl/jpeg/core.py`` -> ``tests/test_jpeg_core.py``).  A module whose tests sit under another
name, because it is tested as part of a larger block or through the command that runs it, is
named in :data:`TESTED_BY` with that file; a module without behaviour of its own (layouts,
constants, an interface, exception types, command glue with nothing to decide) is named in
:data:`NO_BEHAVIOUR` with why.  Every other module must follow the rule, and the two tables
may name only modules and test files that exist, so the map cannot go stale.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PARTS = ("rtl", "host", "sim", "gen", "boards")

#: module -> the test file that tests it (how, where it is not plain)
TESTED_BY = {
    "boards/presets.py": "test_board_top.py",
    "boards/top.py": "test_board_top.py",
    "gen/bench/plot.py": "test_cli_bench.py",               # --plot's pictures
    "gen/bench/transform.py": "test_cli_bench.py",          # bench loader --transform
    "gen/commands/axi.py": "test_axi_export.py",
    "gen/commands/bench.py": "test_cli_bench.py",
    "gen/commands/blocks.py": "test_cli.py",                # gen, sim, synth
    "gen/commands/boards.py": "test_build.py",              # build (test_program.py: program)
    "gen/commands/infer.py": "test_infer_command.py",
    "gen/commands/options.py": "test_cli_bench.py",
    "gen/commands/runtime.py": "test_runtime_commands.py",  # decode, conv, stream, sim-board
    "gen/manifest.py": "test_cli.py",                       # dlforge gen's manifest.json
    "gen/regression.py": "test_cli_bench.py",
    "gen/verilog.py": "test_cli.py",
    "host/conv/link_words.py": "test_layer_pack.py",        # byte-equal to the layer pack
    "host/conv/networks.py": "test_conv_models.py",
    "host/conv/random_layer.py": "test_conv_engine_model.py",
    "host/device/accelerator.py": "test_accelerator_device.py",  # and test_board.py
    "host/device/cpu.py": "test_decode_service.py",
    "host/device/open.py": "test_board.py",
    "host/jpeg/batch_producer.py": "test_loader.py",        # the loader's thread and buffers
    "host/link/frame_parser.py": "test_protocol.py",        # and test_frame_link, dma_records
    "host/link/raw_link.py": "test_sim_board.py",
    "rtl/conv/config.py": "test_conv_plan.py",
    "rtl/conv/descriptor.py": "test_walker.py",
    "rtl/jpeg/core_pair.py": "test_jpeg_core.py",           # two files per core
    "rtl/jpeg/decoder.py": "test_jpeg_core.py",             # JpegDecoder(cores=N)
    "rtl/jpeg/entropy_decoder.py": "test_entropy_cocotb.py",
    "rtl/jpeg/frame.py": "test_marker_parser.py",           # mcu_grid
    "rtl/jpeg/idct.py": "test_idct_rtl.py",
    "rtl/jpeg/lane.py": "test_jpeg_core.py",                # a decoder's lanes
    "rtl/jpeg/scaling.py": "test_jpeg_core.py",
    "rtl/jpeg/status.py": "test_packets.py",
    "rtl/top.py": "test_accel_top.py",
    "rtl/uart_top.py": "test_uart_board.py",                # the UART board in Verilator
    "sim/board/process.py": "test_sim_board.py",
    "sim/board/wrapper.py": "test_sim_board.py",            # every board build
    "sim/corpus/idct_vectors.py": "test_idct_rtl.py",
    "sim/corpus/jpeg_making.py": "test_jpeg_corpus.py",
    "sim/corpus/jpeg_markers.py": "test_jpeg_syntax.py",    # the walker against it
    "sim/corpus/photos.py": "test_jpeg_corpus.py",
    "sim/corpus/pick.py": "test_jpeg_corpus.py",            # which files a bench decodes
    "sim/tb/entropy.py": "test_entropy_cocotb.py",
    "sim/tb/entropy_stimulus.py": "test_huffman_decoder.py",
    "sim/tb/idct.py": "test_idct_cocotb.py",
    "sim/tb/narrow.py": "test_runner.py",
    "sim/tb/resample.py": "test_resampler.py",
    "sim/tb/streams.py": "test_accel_top.py",               # under every cocotb testbench
    "sim/tools/fst_support.py": "test_runner.py",           # waves
}

#: module -> why it has no behaviour of its own to test
NO_BEHAVIOUR = {
    "host/device/base.py": "the Device interface and its reply type",
    "host/link/errors.py": "exception types",
    "rtl/jpeg/idct_constants.py": "jidctint.c's constants (checked with the IDCT model)",
}


def source_modules():
    """Every source module, as a path relative to the project root."""
    return sorted(str(p.relative_to(ROOT)) for part in PARTS for p in (ROOT / part).rglob("*.py")
                  if p.name != "__init__.py")


def named_test(module):
    """The test file the naming rule finds for ``module``, or None."""
    path = Path(module)
    for name in (f"test_{path.stem}.py", f"test_{path.parent.name}_{path.stem}.py"):
        if (TESTS / name).is_file():
            return name
    return None


def modules_without_tests():
    """The modules that neither the naming rule nor the two tables account for."""
    return [m for m in source_modules()
            if named_test(m) is None and m not in TESTED_BY and m not in NO_BEHAVIOUR]


def test_every_module_with_behaviour_has_a_test_file():
    missing = modules_without_tests()
    assert not missing, f"modules without a test file (add one, or map it here): {missing}"


def test_the_map_names_modules_and_test_files_that_exist():
    modules = set(source_modules())
    stale = [m for m in (*TESTED_BY, *NO_BEHAVIOUR) if m not in modules]
    assert not stale, f"no such module: {stale}"
    absent = [t for t in TESTED_BY.values() if not (TESTS / t).is_file()]
    assert not absent, f"no such test file: {absent}"
    assert not set(TESTED_BY) & set(NO_BEHAVIOUR)


def test_the_map_lists_only_what_the_rule_does_not_find():
    """An entry says something the rule does not: another file than the rule's (the rule may
    find a namesake, e.g. ``test_blocks.py`` of ``gen/blocks.py`` for ``gen/commands/blocks.py``)
    or no behaviour where the rule finds no file."""
    redundant = [m for m, t in TESTED_BY.items() if named_test(m) == t]
    redundant += [m for m in NO_BEHAVIOUR if named_test(m) is not None]
    assert not redundant, f"found by the naming rule already: {redundant}"


def test_a_module_without_a_test_file_is_found(tmp_path, monkeypatch):
    """The check can fail: a new module with no test file and no entry is reported."""
    fake = tmp_path / "rtl"
    fake.mkdir()
    (fake / "brand_new_block.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert modules_without_tests() == ["rtl/brand_new_block.py"]
