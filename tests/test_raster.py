"""The raster stage against the golden model: decoded blocks in, RGB lines out, both modes."""

import io
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from PIL import Image

from dlforge.rtl.jpeg.raster import PIXELS_PER_BEAT, Raster, RasterFrameLayout
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.tb.entropy_stimulus import expected_rows
from dlforge.sim.models.jpeg_model import decode
from dlforge.sim.models.jpeg_parse import parse_headers


def frame_fields(headers, scale=1):
    """The raster's frame: a scaled decode's image size (ceil(size / scale))."""
    comps = headers.components
    mcux, mcuy = headers.mcu_grid
    return {"width": -(-headers.width // scale), "height": -(-headers.height // scale),
            "components": len(comps), "h": comps[0].h, "v": comps[0].v, "mcux": mcux,
            "mcuy": mcuy}


def block_rows(data, headers, scale=1):
    return [int.from_bytes(bytes(row), "little") for row in expected_rows(data, headers, scale)]


def run_raster(files, modes, *, max_width=128, valid_prob=1.0, ready_prob=1.0, seed=0,
               scale=1, stall_prob=0.0, stall_len=0):
    """Push every (file, mode) through one Raster; return [(pixels, cycles)].  With
    ``stall_prob``, the output also stops for ``stall_len`` clocks at random moments."""
    dut = Raster(max_width)
    rng = random.Random(seed)
    jobs = []
    for f in files:
        for mode in modes:
            headers = parse_headers(f.data)
            jobs.append((headers, block_rows(f.data, headers, scale), mode))
    results = []

    async def bench(ctx):
        for headers, rows, mode in jobs:
            fields = frame_fields(headers, scale)
            ctx.set(dut.frame.payload, RasterFrameLayout.const(
                {"frame": fields, "fast": mode == "fast",
                 "log_scale": scale.bit_length() - 1}))
            ctx.set(dut.frame.valid, 1)
            await ctx.tick().until(dut.frame.ready)
            ctx.set(dut.frame.valid, 0)
            want = fields["width"] * fields["height"]
            got, sent, cycles, offering = [], 0, 0, False
            saw_last = False
            limit = 400 + 4 * len(rows) + 2 * want
            stalled = 0
            while not saw_last:
                assert cycles < limit, f"stuck after {len(got)} of {want} pixels"
                if not offering and sent < len(rows) and rng.random() < valid_prob:
                    offering = True
                    ctx.set(dut.blocks.payload.as_value(), rows[sent])
                ctx.set(dut.blocks.valid, offering)
                if not stalled and rng.random() < stall_prob:
                    stalled = stall_len
                    limit += stall_len
                stalled = max(stalled - 1, 0)
                ctx.set(dut.o.ready, not stalled and rng.random() < ready_prob)
                _, _, b_ready, o_valid, o_ready, beat = await ctx.tick().sample(
                    dut.blocks.ready, dut.o.valid, dut.o.ready, dut.o.payload)
                if offering and b_ready:
                    sent += 1
                    offering = False
                if o_valid and o_ready:
                    assert 1 <= beat.count <= PIXELS_PER_BEAT
                    got.extend([int(beat.rgb[k][c]) for c in range(3)]
                               for k in range(beat.count))
                    saw_last = bool(beat.last)
                cycles += 1
            ctx.set(dut.blocks.valid, 0)
            assert sent == len(rows)
            results.append((np.array(got, dtype=np.uint8).reshape(-1, 3), cycles))
            await ctx.tick().until(dut.frame.ready)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    out = []
    for (headers, _, mode), (pixels, cycles) in zip(jobs, results):
        out.append((headers, mode, pixels, cycles))
    return out


def _files(names=None, max_side=128):
    files = jpeg_corpus.baseline_corpus("quick")
    files = [f for f in files if max(parse_headers(f.data).width, 1) <= max_side]
    if names:
        files = [f for f in files if any(n in f.name for n in names)]
    return files


def check(files, modes, scale=1, **kw):
    results = run_raster(files, modes, scale=scale, **kw)
    for f, (headers, mode, pixels, _) in zip([f for f in files for _ in modes], results):
        model = decode(f.data, mode, scale=scale).pixels
        want = model.reshape(-1, 3)
        assert pixels.shape == want.shape, (f.name, mode, pixels.shape, want.shape)
        bad = np.flatnonzero((pixels != want).any(axis=1))
        assert not len(bad), (f"{f.name} {mode} 1/{scale}: {len(bad)} pixels differ, first "
                              f"at {divmod(int(bad[0]), model.shape[1])}: {pixels[bad[0]]} != "
                              f"{want[bad[0]]}")
    return results


@pytest.mark.parametrize("layout", ["gray", "444", "422", "440", "420"])
def test_every_layout_both_modes(layout):
    files = [f for f in _files() if f.name.startswith(layout)][:4]
    assert files
    check(files, ("fancy", "fast"))


@pytest.mark.parametrize("scale", [2, 4, 8])
@pytest.mark.parametrize("layout", ["gray", "444", "422", "440", "420"])
def test_scaled_blocks_every_layout(layout, scale):
    """The reduced IDCTs' blocks (several to a line-buffer word), and what is left to
    upsample at each scale: libjpeg-turbo's scaled decode."""
    files = [f for f in _files() if f.name.startswith(layout)][:3]
    check(files, ("fancy", "fast"), scale=scale)


@pytest.mark.parametrize("scale", [2, 8])
def test_scaled_odd_sizes_and_back_pressure(scale):
    names = ("1x1", "1x2", "2x1", "3x5", "7x9", "17x15", "31x33", "37x29")
    check(_files(names), ("fancy",), scale=scale, valid_prob=0.7, ready_prob=0.6, seed=scale)


def test_odd_sizes_and_back_pressure():
    names = ("1x1", "1x2", "2x1", "3x5", "7x9", "17x15", "31x33", "37x29")
    check(_files(names), ("fancy",), valid_prob=0.7, ready_prob=0.6, seed=5)


def test_long_output_stalls():
    """The output stops for long stretches while blocks keep coming: the writer fills the
    slot of the row two ahead meanwhile, so it must not start before the reader's last read
    of that slot has reached the memory (the read addresses wait a stage in front of it)."""
    from dlforge.sim.corpus.jpeg_making import pillow_encode
    from dlforge.sim.corpus.photos import COLOUR_PHOTOS, crop, photo_source
    files = []
    for k, (layout, w, h) in enumerate((("gray", 8, 96), ("4:2:0", 16, 96), ("4:4:4", 9, 80),
                                        ("4:2:2", 24, 64))):
        name, img = photo_source(k % len(COLOUR_PHOTOS), grey=layout == "gray")
        data = pillow_encode(crop(img, w, h, k), layout, quality=90)
        files.append(jpeg_corpus.CorpusFile(f"stall-{layout}-{w}x{h}-{name}", data))
    check(files, ("fancy", "fast"), stall_prob=0.02, stall_len=300, seed=11)


def test_restart_and_table_variants():
    check(_files(("rst-", "sof1-", "edit-", "opt-")), ("fancy", "fast"), ready_prob=0.9)


def test_full_rate_within_a_line():
    """Width 128, 4:4:4: 16 groups a line; the output runs at 4 pixels per clock."""
    rng = np.random.default_rng(1)
    img = Image.fromarray(rng.integers(0, 256, (16, 128, 3), dtype=np.uint8))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90, subsampling=0)
    f = jpeg_corpus.CorpusFile("noise-444", buf.getvalue())
    (headers, _, _, cycles), = check([f], ("fancy",))
    # Writing 16 lines x 3 components x 16 words takes 768 clocks; reading overlaps with it
    # except for the last MCU row's 8 lines of 32 clocks each.
    assert cycles < 768 + 8 * 40, cycles


def test_rejects_bad_width():
    with pytest.raises(ValueError):
        Raster(100)
