"""The marker parser gateware against the golden model, status for status.

The testbench plays the entropy decoder itself, from the model: it takes the scan's bytes up
to the marker that ends the scan (the unstuffer reads the FF fill and the marker code) and
answers ``done`` with that marker, or, where the model's ``decode_scan`` fails, takes bytes up
to just past the fault (all of them when the data ran out) and answers with the model's status.
"""

import random
import struct
from dataclasses import dataclass, field

import pytest
from amaranth import Elaboratable, Module, ResetInserter
from amaranth.lib import wiring
from amaranth.sim import Simulator

from dlforge.rtl.jpeg.entropy_decoder import EntropyDecoder
from dlforge.rtl.jpeg.frame import FrameLayout, mcu_grid
from dlforge.rtl.jpeg.marker_parser import MarkerParser
from dlforge.rtl.jpeg.status import JpegStatus as S
from dlforge.rtl.jpeg.syntax import Marker as M, walk_segments
from dlforge.sim.corpus import jpeg_corpus
from dlforge.sim.tb.entropy_stimulus import dht_bodies, dqt_bodies, scan_beat
from dlforge.sim.models.jpeg_entropy import decode_scan
from dlforge.sim.corpus.jpeg_fuzz import fuzz_corpus
from dlforge.sim.models.jpeg_model import check_trailer
from dlforge.sim.models.jpeg_parse import (DEFAULT_MAX_HEIGHT, DEFAULT_MAX_WIDTH, JpegDecodeError,
                                           parse_headers)
from jpeg_files import encode, photo


# ---------------------------------------------------------------------------------------
# What the model says about a file, and how the fake entropy decoder answers


@dataclass
class Plan:
    status: S
    headers: object = None          # the model's headers where they parse
    take: int = 0                   # entropy beats the fake decoder reads
    done: tuple = (0, 0)            # (status, marker) it answers with


def plan(data, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT):
    try:
        headers = parse_headers(data, max_width, max_height)
    except JpegDecodeError as error:
        return Plan(error.status)
    rest = len(data) - headers.scan_start
    try:
        _, end = decode_scan(data, headers)
    except JpegDecodeError as error:
        if rest == 0:
            take = 1                                   # the parser's made-up FF/last beat
        elif error.offset >= len(data):
            take = rest                                # the data ran out: EOF after `last`
        else:
            take = min(rest, max(1, error.offset - headers.scan_start + 1))
        return Plan(error.status, headers, take, (error.status, 0))
    try:
        check_trailer(data, end)
        status = S.OK
    except JpegDecodeError as error:
        status = error.status
    # The unstuffer reads up to and including the marker code at end + 1.
    return Plan(status, headers, end + 2 - headers.scan_start, (S.OK, data[end + 1]))


@dataclass
class Seen:
    """Everything the parser gave for one file."""
    dqt: list = field(default_factory=list)
    dht: list = field(default_factory=list)
    scans: list = field(default_factory=list)
    frames: list = field(default_factory=list)
    entropy: list = field(default_factory=list)      # (byte, last)
    entropy_cycles: list = field(default_factory=list)
    quant_select: int = None
    status: int = None
    first_cycle: int = None                          # its first byte read
    result_cycle: int = None


def _payload(byte, last):
    return byte | (last << 8)


def run_parser(files, *, max_width=DEFAULT_MAX_WIDTH, max_height=DEFAULT_MAX_HEIGHT,
               valid_prob=1.0, ready_prob=1.0, entropy_prob=1.0, done_delay=(0, 3), seed=0,
               plans=None):
    """Feed ``files`` (bytes) back to back as packets; return ([Seen], [Plan], clocks)."""
    dut = MarkerParser(max_width, max_height)
    plans = plans or [plan(f, max_width, max_height) for f in files]
    rng = random.Random(seed)
    beats = [(k, _payload(b, i == len(f) - 1)) for k, f in enumerate(files)
             for i, b in enumerate(f)]
    ends = [sum(len(f) for f in files[:k + 1]) for k in range(len(files))]
    seen = [Seen() for _ in files]
    limit = 40 * len(beats) + 2000 * len(files)
    clocks = [0]

    async def bench(ctx):
        sent, offering, cycle = 0, False, 0
        current = 0                                   # the file whose outputs come now
        open_dqt, open_dht = [], []
        ent = None                                    # fake decoder: [taken, delay, done]
        fixed_ready = ready_prob >= 1.0
        for port in (dut.dqt, dut.dht, dut.scan, dut.frame, dut.result):
            ctx.set(port.ready, 1)
        while current < len(files):
            assert cycle < limit, f"no result for file {current} after {cycle} clocks"
            if not offering and sent < len(beats) and (valid_prob >= 1.0
                                                       or rng.random() < valid_prob):
                offering = True
                ctx.set(dut.i.payload.as_value(), beats[sent][1])
            ctx.set(dut.i.valid, offering)
            if not fixed_ready:
                for port in (dut.dqt, dut.dht, dut.scan, dut.frame, dut.result):
                    ctx.set(port.ready, rng.random() < ready_prob)
            p = plans[current]
            want = ent is not None and ent[0] < p.take
            ctx.set(dut.entropy.ready, want and (entropy_prob >= 1.0
                                                 or rng.random() < entropy_prob))
            presenting = ent is not None and ent[0] == p.take and ent[1] == 0 and not ent[2]
            if presenting:
                ctx.set(dut.done.payload.as_value(), p.done[0] | (p.done[1] << 8))
            ctx.set(dut.done.valid, presenting)
            (_, _, i_ready, q_valid, q_ready, q_beat, h_valid, h_ready, h_beat, s_valid,
             s_ready, s_beat, f_valid, f_ready, f_beat, e_valid, e_ready, e_beat, d_ready,
             r_valid, r_ready, r_beat, qsel) = await ctx.tick().sample(
                dut.i.ready, dut.dqt.valid, dut.dqt.ready, dut.dqt.payload.as_value(),
                dut.dht.valid, dut.dht.ready, dut.dht.payload.as_value(),
                dut.scan.valid, dut.scan.ready, dut.scan.payload.as_value(),
                dut.frame.valid, dut.frame.ready, dut.frame.payload.as_value(),
                dut.entropy.valid, dut.entropy.ready, dut.entropy.payload.as_value(),
                dut.done.ready, dut.result.valid, dut.result.ready,
                dut.result.payload.as_value(), dut.quant_select.as_value())
            s = seen[current]
            if offering and i_ready:
                k = beats[sent][0]
                assert k == current, f"file {k}'s bytes read before file {current}'s result"
                if seen[k].first_cycle is None:
                    seen[k].first_cycle = cycle
                sent += 1
                offering = False
            for valid, ready, beat, body, bodies in ((q_valid, q_ready, q_beat, open_dqt, s.dqt),
                                                     (h_valid, h_ready, h_beat, open_dht, s.dht)):
                if valid and ready:
                    body.append(beat & 0xFF)
                    if beat >> 8:
                        bodies.append(bytes(body))
                        body.clear()
            if s_valid and s_ready:
                s.scans.append(s_beat)
                assert ent is None, "a second scan beat"
                ent = [0, rng.randint(*done_delay), False]
            if f_valid and f_ready:
                s.frames.append(f_beat)
            if e_valid:
                assert ent is not None and not ent[2], "entropy bytes outside a scan"
            if e_valid and e_ready:
                assert ent is not None and ent[0] < p.take, "an entropy byte nobody asked for"
                s.entropy.append((e_beat & 0xFF, e_beat >> 8))
                s.entropy_cycles.append(cycle)
                ent[0] += 1
            if presenting and d_ready:
                ent[2] = True
            elif ent is not None and ent[0] == p.take and ent[1] > 0:
                ent[1] -= 1
            if r_valid and r_ready:
                assert not open_dqt and not open_dht, "a table body without its last beat"
                assert sent == ends[current], f"file {current}'s result before its last byte"
                assert ent is None or ent[2], "a result before the entropy decoder's done"
                s.status, s.quant_select, s.result_cycle = r_beat, qsel, cycle
                current += 1
                ent = None
            cycle += 1
        clocks[0] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen, plans, clocks[0]


def frame_beat(headers):
    comps = len(headers.components)
    h, v = (headers.hmax, headers.vmax) if comps == 3 else (1, 1)
    mcux, mcuy = mcu_grid(headers.width, headers.height, comps, h, v)
    assert (mcux, mcuy) == headers.mcu_grid
    return FrameLayout.const({"width": headers.width, "height": headers.height,
                              "components": comps, "h": h, "v": v, "mcux": mcux,
                              "mcuy": mcuy}).as_value().value


def check(data, seen, p, name=""):
    """The parser's outputs for one file against the model's."""
    assert S(seen.status) == p.status, (name, S(seen.status), p.status)
    if p.headers is None:
        assert seen.scans == [] and seen.frames == [], name
        assert seen.entropy == [], name
        return
    h = p.headers
    assert seen.dqt == dqt_bodies(data, h), name
    assert seen.dht == dht_bodies(data, h), name
    assert seen.scans == [scan_beat(h)], name
    assert seen.frames == [frame_beat(h)], name
    tqs = [c.tq for c in h.components] + [0] * (3 - len(h.components))
    assert seen.quant_select == tqs[0] | tqs[1] << 2 | tqs[2] << 4, name
    sent = data[h.scan_start:h.scan_start + p.take]
    if not sent:
        assert seen.entropy == [(0xFF, 1)], name       # the made-up beat of an empty scan
    else:
        assert seen.entropy == [(b, int(h.scan_start + i == len(data) - 1))
                                for i, b in enumerate(sent)], name


def run_and_check(files, names=None, **kw):
    seen, plans, clocks = run_parser(files, **kw)
    for k, (data, s, p) in enumerate(zip(files, seen, plans)):
        check(data, s, p, names[k] if names else k)
    return seen, plans, clocks


# ---------------------------------------------------------------------------------------
# Files


@pytest.fixture(scope="module")
def quick():
    return jpeg_corpus.baseline_corpus("quick")


def small(name="astronaut", w=16, h=16, **options):
    pixels = photo(name)[:h, :w]
    return encode(pixels, **options)


def seg(data, marker, nth=0):
    """(offset of its FF, length) of the nth header segment ``marker``."""
    return [(o, n) for m, o, n in walk_segments(data) if m == marker][nth]


def patch(data, offset, new):
    return data[:offset] + bytes(new) + data[offset + len(new):]


def insert(data, offset, new):
    return data[:offset] + bytes(new) + data[offset:]


def eoi_offset(data):
    assert data[-2:] == M.EOI.bytes
    return len(data) - 2


# ---------------------------------------------------------------------------------------
# Tests


def test_quick_corpus_back_to_back(quick):
    """Every other quick-corpus file at full rate: tables, scan, frame, quant_select and OK;
    the scan's bytes one per clock without a bubble; headers about one byte per clock."""
    files = [f for f in quick[::2] if len(f.data) < 2500]
    data = [f.data for f in files]
    seen, plans, _ = run_and_check(data, [f.name for f in files], done_delay=(0, 0))
    assert all(p.status == S.OK for p in plans)
    for f, s, p in zip(data, seen, plans):
        cyc = s.entropy_cycles
        assert cyc[-1] - cyc[0] == len(cyc) - 1, "a bubble in the entropy pass-through"
        header_bytes = p.headers.scan_start
        assert cyc[0] - s.first_cycle <= header_bytes + 2 * len(p.headers.segments) + 20
        assert s.result_cycle - s.first_cycle <= len(f) + 2 * len(p.headers.segments) + 40


def test_quick_corpus_with_backpressure(quick):
    """The other half of the corpus with gaps in the input and stalls on every output."""
    files = [f for f in quick[1::2] if len(f.data) < 2500]
    run_and_check([f.data for f in files], [f.name for f in files], valid_prob=0.7,
                  ready_prob=0.6, entropy_prob=0.7, done_delay=(0, 5), seed=3)


def test_unsupported_corpus():
    files = jpeg_corpus.unsupported_corpus()
    seen, plans, _ = run_and_check([f.data for f in files], [f.name for f in files])
    assert all(p.status.unsupported for p in plans)


def test_malformed_corpus():
    """Every malformed file (but the empty one: a packet has at least one byte)."""
    files = [f for f in jpeg_corpus.malformed_corpus() if f.data]
    seen, plans, _ = run_and_check([f.data for f in files], [f.name for f in files],
                                   valid_prob=0.9, seed=5)
    statuses = {p.status for p in plans}
    assert len(statuses) >= 15


def remove(data, marker):
    """``data`` without any of its header segments ``marker``."""
    while any(m == marker for m, _, _ in walk_segments(data)):
        o, n = seg(data, marker)
        data = data[:o] + data[o + 2 + n:]
    return data


def test_bad_files_between_good_ones():
    """A bad file does not disturb the next one, and nothing carries over: tables, frame,
    DRI and JFIF are per file (each bad file follows one that has what it lacks)."""
    good = small("astronaut", 16, 16, quality=80, subsampling=2)
    rst = small("coffee", 24, 16, quality=85, restart_marker_blocks=1)
    gray = small("camera", 16, 8, quality=70)
    rgb = remove(good, M.APP0)
    sof, _ = seg(rgb, M.SOF0)
    sos, _ = seg(rgb, M.SOS)
    for k, c in enumerate(b"RGB"):
        rgb = patch(patch(rgb, sof + 10 + 3 * k, [c]), sos + 5 + 2 * k, [c])
    files = [rst, good[:100], gray, good, remove(good, M.DHT), b"\x00", rst,
             insert(gray, 2, b"\x00"), good, remove(good, M.DQT), good, remove(good, M.SOF0),
             good, rgb, b"\xff", gray, gray[:-1] + b"\x00", good]
    seen, plans, _ = run_and_check(files)
    assert [p.status for p in plans][:16] == [
        S.OK, S.TRUNCATED, S.OK, S.OK, S.MISSING_HUFFMAN_TABLE, S.NO_SOI, S.OK,
        S.UNEXPECTED_MARKER, S.OK, S.MISSING_QUANT_TABLE, S.OK, S.UNEXPECTED_MARKER, S.OK,
        S.UNSUPPORTED_COLORSPACE, S.NO_SOI, S.OK]
    assert plans[16].status != S.OK and plans[17].status == S.OK
    # The file after the DRI one has no restart interval.
    assert seen[2].scans == [scan_beat(parse_headers(gray))]


def test_after_the_scan():
    """check_trailer's rules: segments before EOI, bytes after it, and what may not follow."""
    base = small("chelsea", 16, 16, quality=85, subsampling=1)
    e = eoi_offset(base)
    com = M.COM.bytes + b"\x00\x05abc"
    cases = {
        "com-before-eoi": (insert(base, e, com), S.OK),
        "dqt-dht-app-before-eoi": (insert(base, e, base[seg(base, M.DQT)[0]:seg(base, M.SOF0)[0]]
                                          + M.APP5.bytes + b"\x00\x02"), S.OK),
        "bytes-after-eoi": (base + b"\x00\x11" + M.SOI.bytes + b"junk", S.OK),
        "fill-before-eoi": (insert(base, e, b"\xff\xff\xff"), S.OK),
        "fill-before-com": (insert(base, e, b"\xff\xff" + com), S.OK),
        "second-sos": (insert(base, e, M.SOS.bytes + b"\x00\x02"), S.UNSUPPORTED_MULTISCAN),
        "dnl": (insert(base, e, M.DNL.bytes + b"\x00\x04\x00\x10"), S.UNSUPPORTED_DNL),
        "rst-after-com": (insert(base, e, com + M.RST3.bytes), S.UNEXPECTED_MARKER),
        "soi-after-scan": (insert(base, e, M.SOI.bytes), S.UNEXPECTED_MARKER),
        "tem-after-scan": (insert(base, e, M.TEM.bytes), S.UNEXPECTED_MARKER),
        "junk-after-com": (insert(base, e, com + b"\x12"), S.UNEXPECTED_MARKER),
        "com-length-1": (insert(base, e, M.COM.bytes + b"\x00\x01"), S.BAD_MARKER_LENGTH),
        "com-past-end": (insert(base, e, M.COM.bytes + b"\x01\x00"), S.TRUNCATED),
        "com-then-end": (base[:e] + com, S.TRUNCATED),
        "com-exactly-at-end": (base[:e] + M.COM.bytes + b"\x00\x02", S.TRUNCATED),
        "com-length-at-end-long": (base[:e] + M.COM.bytes + b"\x00\x03", S.TRUNCATED),
        "com-half-length": (base[:e] + M.COM.bytes + b"\x00", S.TRUNCATED),
        "com-marker-at-end": (base[:e] + M.COM.bytes, S.TRUNCATED),
        "ff-at-end": (base[:e] + b"\xff\xff", S.TRUNCATED),
        "no-eoi": (base[:e], S.TRUNCATED),
        "eoi-marker-only": (base[:e + 1], S.TRUNCATED),
    }
    names = list(cases)
    files = [cases[n][0] for n in names]
    seen, plans, _ = run_and_check(files, names)
    assert [p.status for p in plans] == [cases[n][1] for n in names]


def test_header_variants(quick):
    """Fill bytes, 16-bit DQT, several tables per segment, SOF1, DRI, APPn/COM: all OK."""
    wanted = ("edit-", "sof1-16bit-gray", "markers-", "rst-blocks2-gray", "gray-h2v2",
              "q-gray")
    files = [f for f in quick if f.name.startswith(wanted) and len(f.data) < 1500]
    assert len(files) >= 8
    seen, plans, _ = run_and_check([f.data for f in files], [f.name for f in files],
                                   valid_prob=0.8, seed=7)
    assert all(p.status == S.OK for p in plans)
    sixteen = [s for f, s in zip(files, seen) if "16bit" in f.name or "8and16" in f.name]
    assert any(len(body) > 129 for s in sixteen for body in s.dqt)


def _edits():
    """Single-fault edits of small real files, each with the model's status."""
    color = small("astronaut", 16, 16, quality=85, subsampling=2)
    gray = small("camera", 16, 8, quality=80)
    out = {}
    sof, sof_n = seg(color, M.SOF0)
    sos, sos_n = seg(color, M.SOS)
    dqt, dqt_n = seg(color, M.DQT)
    dht, dht_n = seg(color, M.DHT)
    app0, app0_n = seg(color, M.APP0)
    no_jfif = color[:app0] + color[app0 + 2 + app0_n:]
    jfif_end = app0 + 2 + app0_n

    def sof_byte(k, value):
        return patch(color, sof + 4 + k, [value])

    for code in (M.SOF2, M.SOF3, M.SOF5, M.SOF6, M.SOF7, M.SOF9, M.SOF10, M.SOF11, M.SOF13,
                 M.SOF14, M.SOF15, M.SOF1, M.JPG):
        out[f"sof-{code:02x}"] = patch(color, sof + 1, [code])
    out["dac"] = insert(color, sof, M.DAC.bytes + b"\x00\x04\x00\x00")
    out["dhp"] = insert(color, sof, M.DHP.bytes + b"\x00\x02")
    out["exp"] = insert(color, sof, M.EXP.bytes + b"\x00\x03\x00")
    out["dnl-before-scan"] = insert(color, sof, M.DNL.bytes + b"\x00\x04\x00\x10")
    out["dri-length-5"] = insert(color, sof, M.DRI.bytes + b"\x00\x05\x00\x01\x00")
    out["dri-length-2"] = insert(color, sof, M.DRI.bytes + b"\x00\x02")
    out["dri-0"] = insert(color, sof, M.DRI.bytes + b"\x00\x04\x00\x00")
    out["dri-258"] = insert(color, sof, M.DRI.bytes + b"\x00\x04\x01\x02")  # but no RST in the scan
    out["eoi-before-scan"] = insert(color, sof, M.EOI.bytes)
    out["rst-before-scan"] = insert(color, sof, M.RST5.bytes)
    out["tem-before-scan"] = insert(color, sof, M.TEM.bytes)
    out["ff00-segment"] = insert(color, sof, b"\xff\x00\x00\x03\x00")      # skipped
    out["not-a-marker"] = insert(color, sof, b"\x00")
    out["no-soi-second-byte"] = patch(color, 1, [M.EOI])
    out["only-ff"] = b"\xff"
    out["soi-then-ff"] = M.SOI.bytes + b"\xff"
    out["soi-then-00"] = M.SOI.bytes + b"\x00"
    out["length-at-end"] = color[:sof + 3]
    out["length-2-at-end"] = color[:sof] + M.COM.bytes + b"\x00\x02"
    out["empty-dqt-at-end"] = color[:sof] + M.DQT.bytes + b"\x00\x02"
    out["empty-dqt"] = insert(color, sof, M.DQT.bytes + b"\x00\x02")
    out["empty-dht"] = insert(color, sof, M.DHT.bytes + b"\x00\x02")
    out["dqt-precision-2"] = patch(color, dqt + 4, [0x20])
    out["dqt-table-4"] = patch(color, dqt + 4, [0x04])
    out["dqt-too-short"] = patch(color, dqt + 2, struct.pack(">H", dqt_n - 1))
    out["dqt-bad-then-cut"] = patch(color, dqt + 4, [0x20])[:dqt + 30]
    out["dht-class-2"] = patch(color, dht + 4, [0x20])
    out["dht-table-5"] = patch(color, dht + 4, [0x05])
    out["dht-short-header"] = insert(color, sof, M.DHT.bytes + b"\x00\x12\x00" + bytes(15))
    out["dht-empty-table"] = insert(color, sof, M.DHT.bytes + b"\x00\x13\x02" + bytes(16))
    out["dht-overflow"] = patch(color, dht + 5, [3])
    # Four 2-bit codes fill the space: one 3-bit code more overflows it (counts consistent).
    out["dht-overflow-deep"] = insert(color, sof, M.DHT.bytes + b"\x00\x18\x02\x00\x04\x01"
                                      + bytes(13) + bytes(range(5)))
    out["dht-symbols-past-segment"] = patch(color, dht + 2, struct.pack(">H", dht_n - 1))
    out["dht-257-symbols"] = insert(color, sof, M.DHT.bytes + struct.pack(">H", 2 + 17 + 257)
                                    + b"\x13" + bytes(8) + bytes([1, 2, 4, 8, 16, 32, 64, 130])
                                    + bytes(257))
    out["dht-all-ones"] = insert(color, sof, M.DHT.bytes + b"\x00\x15\x02\x02" + bytes(15)
                                 + b"\x00\x01")
    out["dht-one-code"] = insert(color, sof, M.DHT.bytes + b"\x00\x14\x02\x01" + bytes(15)
                                 + b"\x00")
    dc_sym = dht + 4 + 17 + 5
    out["dc-symbol-16"] = patch(color, dc_sym, [16])
    out["dc-symbol-16-unused"] = insert(color, sof, M.DHT.bytes + b"\x00\x14\x02\x01" + bytes(15)
                                        + b"\x10")
    out["dc-symbol-16-redefined"] = insert(patch(color, dc_sym, [16]), sos,
                                           color[dht:dht + 2 + dht_n])
    out["dc-symbol-16-then-missing"] = patch(patch(color, dc_sym, [16]), sos + 8, [0x22])
    out["ac-symbol-255"] = patch(color, seg(color, M.DHT, 1)[0] + 4 + 17 + 3, [0xFF])
    out["dht-overflow-then-cut"] = patch(color, dht + 5, [3])[:dht + 12]
    # A count's verdict is a register read a clock later: a fault on the segment's last
    # byte, and one on the file's last byte.
    out["dht-counts-fill-segment"] = insert(color, sof, M.DHT.bytes + b"\x00\x13\x02\x00\x01"
                                            + bytes(14))
    out["dht-overflow-at-end"] = patch(color, dht + 5, [3])[:dht + 6]
    out["sof-short"] = patch(color, sof + 2, b"\x00\x07")
    out["sof-count-2-length"] = patch(color, sof + 2 + 7, [2])
    out["sof-count-4"] = (color[:sof + 2] + struct.pack(">H", sof_n + 3) + color[sof + 4:sof + 9]
                          + b"\x04" + color[sof + 10:sof + 19] + b"\x04\x11\x01"
                          + color[sof + 19:])
    out["sof-count-0"] = (color[:sof + 2] + b"\x00\x08" + color[sof + 4:sof + 9] + b"\x00"
                          + color[sof + 19:])
    out["precision-12"] = sof_byte(0, 12)
    out["precision-12-width-0"] = patch(sof_byte(0, 12), sof + 7, b"\x00\x00")
    out["height-0-width-0"] = patch(color, sof + 5, b"\x00\x00\x00\x00")
    out["width-0"] = patch(color, sof + 7, b"\x00\x00")
    out["dup-id"] = sof_byte(9, 1)
    out["dup-id-last"] = sof_byte(12, 2)
    out["tq-4"] = sof_byte(8, 4)
    out["chroma-h0"] = sof_byte(10, 0x01)
    out["chroma-2x1"] = sof_byte(10, 0x21)
    out["luma-3x1"] = sof_byte(7, 0x31)
    out["luma-3x1-chroma-bad"] = patch(sof_byte(7, 0x31), sof + 4 + 13, [0x10])
    out["luma-1x2"] = sof_byte(7, 0x12)
    out["second-sof"] = insert(color, sos, color[sof:sof + 2 + sof_n])
    out["second-sof-progressive"] = insert(color, sos,
                                           M.SOF2.bytes + color[sof + 2:sof + 2 + sof_n])
    out["sos-before-sof"] = insert(color, dqt, color[sos:sos + 2 + sos_n])
    out["sos-empty"] = color[:sos] + M.SOS.bytes + b"\x00\x02" + color[sos + 2 + sos_n:]
    out["sos-count-vs-length"] = patch(color, sos + 4, [2])
    out["sos-length-odd"] = patch(color, sos + 2, struct.pack(">H", sos_n + 1))
    out["sos-one-of-three"] = (color[:sos] + M.SOS.bytes + b"\x00\x08\x01" + color[sos + 5:sos + 7]
                               + b"\x00\x3f\x00" + color[sos + 2 + sos_n:])
    out["sos-wrong-id"] = patch(color, sos + 7, [9])
    out["sos-td-4"] = patch(color, sos + 6, [0x40])
    out["sos-ta-4"] = patch(color, sos + 8, [0x14])
    out["sos-ss-1"] = patch(color, sos + 11, [1])
    out["sos-se-62"] = patch(color, sos + 12, [62])
    out["sos-a-1"] = patch(color, sos + 13, [1])
    out["sos-undefined-dc-2"] = patch(color, sos + 8, [0x21])
    out["sos-undefined-ac-3"] = patch(color, sos + 6, [0x03])
    out["sof-undefined-tq-3"] = sof_byte(14, 3)
    out["undefined-quant-and-huffman"] = patch(sof_byte(11, 2), sos + 6, [0x22])
    out["undefined-everything"] = patch(sof_byte(8, 2), sos + 6, [0x22])
    out["sos-at-end"] = color[:sos + 2 + sos_n]
    out["sos-cut"] = color[:sos + 8]
    adobe = M.APP14.bytes + b"\x00\x0eAdobe\x00\x64\x00\x00\x00\x00"    # its transform follows
    out["adobe-transform-0"] = insert(no_jfif, 2, adobe + b"\x00")
    out["adobe-transform-1"] = insert(no_jfif, 2, adobe + b"\x01")
    out["adobe-short"] = insert(no_jfif, 2, M.APP14.bytes + b"\x00\x0dAdobe\x00\x64\x00\x00\x00"
                                                           b"\x00")
    out["adobe-0-then-jfif"] = insert(color, jfif_end, adobe + b"\x00")
    out["adobe-0-then-1"] = insert(no_jfif, 2, adobe + b"\x00" + adobe + b"\x01")
    rgb = no_jfif
    s2, _ = seg(rgb, M.SOF0)
    q2, q2n = seg(rgb, M.SOS)
    rgb = patch(patch(patch(rgb, s2 + 10, b"R"), s2 + 13, b"G"), s2 + 16, b"B")
    rgb = patch(patch(patch(rgb, q2 + 5, b"R"), q2 + 7, b"G"), q2 + 9, b"B")
    out["rgb-ids"] = rgb
    out["rgb-ids-jfif"] = color[:app0 + 2 + app0_n] + rgb[app0:]
    out["jfif-short"] = insert(no_jfif, 2, M.APP0.bytes + b"\x00\x06JFIF")
    out["rgb-ids-jfif-short"] = insert(rgb, 2, M.APP0.bytes + b"\x00\x06JFIF")
    out["jfif-wrong"] = insert(rgb, 2, M.APP0.bytes + b"\x00\x07JFIG\x00")
    out["jfif-in-app1"] = insert(rgb, 2, M.APP1.bytes + b"\x00\x07JFIF\x00")
    out["gray-ok"] = gray
    g_sof, _ = seg(gray, M.SOF0)
    out["gray-factors-3x4"] = patch(gray, g_sof + 11, [0x34])           # ignored for one
    out["gray-factors-5x1"] = patch(gray, g_sof + 11, [0x51])           # still checked
    out["gray-adobe-0"] = insert(gray, 2, adobe + b"\x00")
    return out


def test_single_faults():
    """Each of the model's checks, one edited file each, all in one simulation."""
    cases = _edits()
    names = list(cases)
    seen, plans, _ = run_and_check([cases[n] for n in names], names, valid_prob=0.9, seed=11)
    got = {n: p.status for n, p in zip(names, plans)}
    # The edits hit what they aim at (the model's word, checked by check() above).
    for name, status in {"sof-c2": S.UNSUPPORTED_PROGRESSIVE, "sof-c1": S.OK,
                         "dht-overflow": S.BAD_TABLE, "dht-overflow-deep": S.BAD_TABLE,
                         "dht-counts-fill-segment": S.BAD_TABLE,
                         "dht-overflow-at-end": S.TRUNCATED,
                         "sos-length-odd": S.BAD_SCAN_HEADER,
                         "dqt-bad-then-cut": S.TRUNCATED, "dht-257-symbols": S.BAD_TABLE,
                         "sos-at-end": S.TRUNCATED, "rgb-ids": S.UNSUPPORTED_COLORSPACE,
                         "rgb-ids-jfif": S.OK, "adobe-transform-0": S.UNSUPPORTED_COLORSPACE,
                         "gray-adobe-0": S.OK, "dup-id": S.BAD_FRAME_HEADER,
                         "luma-3x1-chroma-bad": S.BAD_FRAME_HEADER,
                         "precision-12-width-0": S.UNSUPPORTED_PRECISION,
                         "undefined-quant-and-huffman": S.MISSING_HUFFMAN_TABLE,
                         "dht-empty-table": S.OK, "ff00-segment": S.OK,
                         "dri-0": S.OK, "dht-all-ones": S.BAD_TABLE, "dht-one-code": S.OK,
                         "dc-symbol-16": S.BAD_TABLE, "dc-symbol-16-unused": S.OK,
                         "dc-symbol-16-redefined": S.OK,
                         "dc-symbol-16-then-missing": S.MISSING_HUFFMAN_TABLE,
                         "undefined-everything": S.MISSING_QUANT_TABLE}.items():
        assert got[name] == status, (name, got[name])


def test_frame_length_against_the_component_count():
    """The SOF's length against 8 + 3·Nf, which the parser prepares from the length before
    the count byte (a division by three in registers): matched, off by up to three either
    way, at the counts where that division changes its rounding (0 to 255), and lengths that
    agree with the count only modulo 1024 (the division's width)."""
    color = small("astronaut", 16, 16, quality=85, subsampling=2)
    sof, sof_n = seg(color, M.SOF0)
    head, comps, rest = color[sof + 4:sof + 9], color[sof + 10:sof + 19], color[sof + 2 + sof_n:]
    files, names = [], []
    for nf in (0, 1, 2, 3, 4, 85, 86, 170, 254, 255):
        given = comps if nf == 3 else bytes(b for c in range(nf) for b in (c + 1, 0x11, 0))
        for delta in (-3, -1, 0, 1, 2) + ((1024,) if nf in (1, 3) else ()):
            length = 8 + 3 * nf + delta
            body = (head + bytes([nf]) + given + bytes(max(0, delta)))[:length - 2]
            files.append(color[:sof] + M.SOF0.bytes + struct.pack(">H", length) + body + rest)
            names.append(f"nf{nf}{delta:+d}")
    _, plans, _ = run_and_check(files, names, seed=17)
    got = dict(zip(names, (p.status for p in plans)))
    assert got["nf3+0"] == S.OK and got["nf4+0"] == S.UNSUPPORTED_COMPONENTS
    assert got["nf255+0"] == S.UNSUPPORTED_COMPONENTS and got["nf0+0"] == S.UNSUPPORTED_COMPONENTS
    assert all(got[n] == S.BAD_FRAME_HEADER for n in names if not n.endswith("+0")), got


def test_bad_tables_still_end_their_bodies():
    """A bad table is forwarded to its segment's end, last on the final byte; a body the
    packet cuts ends with last on the packet's final byte."""
    color = small("astronaut", 16, 16, quality=85, subsampling=2)
    dqt, dqt_n = seg(color, M.DQT)
    dht, dht_n = seg(color, M.DHT)
    dht2, _ = seg(color, M.DHT, 1)
    bad_dqt = patch(color, dqt + 4, [0x27])
    bad_dht = patch(color, dht + 5, [3])
    cut_dht = color[:dht2 + 40]
    files = [bad_dqt, bad_dht, cut_dht, color]
    seen, plans, _ = run_and_check(files)
    assert [p.status for p in plans] == [S.BAD_TABLE, S.BAD_TABLE, S.TRUNCATED, S.OK]
    assert seen[0].dqt == [bad_dqt[dqt + 4:dqt + 2 + dqt_n]]
    assert seen[1].dht == [bad_dht[dht + 4:dht + 2 + dht_n]]
    assert seen[2].dht == [color[dht + 4:dht + 2 + dht_n], cut_dht[dht2 + 4:]]


def test_too_large():
    files = [small("astronaut", 24, 16, quality=80), small("camera", 16, 17, quality=80)]
    seen, plans, _ = run_and_check(files, max_width=23, max_height=16)
    assert [p.status for p in plans] == [S.TOO_LARGE, S.TOO_LARGE]
    seen, plans, _ = run_and_check(files, max_width=24, max_height=17)
    assert [p.status for p in plans] == [S.OK, S.OK]


def test_truncation_at_every_header_byte():
    """A small file cut after each of its header bytes (every third), and inside the scan."""
    data = small("camera", 8, 8, quality=75)
    start = parse_headers(data).scan_start
    cuts = list(range(1, start + 2, 3)) + [start, start + 1, len(data) - 1]
    files = [data[:n] for n in cuts]
    seen, plans, _ = run_and_check(files)
    assert all(p.status != S.OK for p in plans)


def test_random_header_damage():
    """Random bytes of the headers replaced: the parser and the model agree on every one."""
    rng = random.Random(2024)
    data = small("camera", 8, 8, quality=75)
    color = small("astronaut", 8, 8, quality=75, subsampling=0)
    files = []
    for k in range(60):
        base = color if k % 2 else data
        start = parse_headers(base).scan_start
        f = bytearray(base)
        for _ in range(rng.choice((1, 1, 2))):
            f[rng.randrange(2, start)] = rng.choice((0, 1, 2, 3, 0x10, 0x11, 0x3F, 0xFF,
                                                     rng.randrange(256)))
        files.append(bytes(f))
    seen, plans, _ = run_and_check(files, seed=13)
    assert len({p.status for p in plans}) >= 5


def test_fuzzed_files(quick):
    """Truncated, bit-flipped and spliced corpus files (sim/jpeg_fuzz), back to back."""
    files = [f for f in fuzz_corpus(60, seed=21, bases=[b for b in quick if len(b.data) < 1000])
             if f.data]
    seen, plans, _ = run_and_check([f.data for f in files], [f.name for f in files],
                                   valid_prob=0.9, seed=23)
    assert len({p.status for p in plans}) >= 5


def test_mcu_counts_of_large_frames():
    """mcux * mcuy by shift-and-add, up to the field widths: SOF edited to large sizes.  The
    model's decode_scan is not run on these (its block arrays would be huge); the fake
    decoder reads the whole scan and reports TRUNCATED, as a real one would."""
    gray = small("camera", 8, 8, quality=75)
    color = small("astronaut", 16, 16, quality=75, subsampling=2)
    files, plans = [], []
    for base, (w, h) in ((gray, (4096, 65535)), (color, (4096, 65535)), (gray, (8184, 8)),
                         (color, (4095, 4097)), (gray, (1, 65535)), (color, (8184, 1))):
        o, _ = seg(base, M.SOF0)
        f = patch(base, o + 5, struct.pack(">HH", h, w))
        headers = parse_headers(f, max_width=8184)
        files.append(f)
        plans.append(Plan(S.TRUNCATED, headers, len(f) - headers.scan_start, (S.TRUNCATED, 0)))
    run_and_check(files, max_width=8184, plans=plans)


class _WithEntropyDecoder(Elaboratable):
    """The parser feeding the real EntropyDecoder, reset between files as the core does."""

    def __init__(self):
        self.parser = MarkerParser()
        self.decoder = EntropyDecoder()

    def elaborate(self, platform):
        m = Module()
        parser, decoder = self.parser, self.decoder
        m.submodules.parser = parser
        flush = parser.result.valid & parser.result.ready
        m.submodules.decoder = ResetInserter(flush)(decoder)
        wiring.connect(m, parser.dht, decoder.dht)
        wiring.connect(m, parser.scan, decoder.scan)
        wiring.connect(m, parser.entropy, decoder.i)
        wiring.connect(m, decoder.done, parser.done)
        m.d.comb += [decoder.coef.ready.eq(1), parser.dqt.ready.eq(1), parser.frame.ready.eq(1)]
        return m


def test_with_the_real_entropy_decoder():
    """The handshakes as the core wires them: the unstuffer's view of where the scan ends,
    ``done``, the trailer, the drain, the made-up beat of an empty scan, a bad table."""
    color = small("astronaut", 16, 16, quality=85, subsampling=2)
    rst = small("coffee", 24, 16, quality=85, restart_marker_blocks=1)
    e = eoi_offset(color)
    sos, sos_n = seg(color, M.SOS)
    dht, _ = seg(color, M.DHT)
    middle = (sos + len(color)) // 2
    files = [color, insert(color, e, b"\xff\xff" + M.COM.bytes + b"\x00\x04ab") + b"after",
             color[:middle], rst, color[:sos + 2 + sos_n], patch(color, dht + 5, [3]),
             insert(color, middle, M.EOI.bytes), color[:e] + M.COM.bytes + b"\x00", rst]
    top = _WithEntropyDecoder()
    parser = top.parser
    beats = [_payload(b, i == len(f) - 1) for f in files for i, b in enumerate(f)]
    got = []

    async def bench(ctx):
        ctx.set(parser.result.ready, 1)
        sent = 0
        for _ in range(40 * len(beats)):
            if sent < len(beats):
                ctx.set(parser.i.payload.as_value(), beats[sent])
            ctx.set(parser.i.valid, sent < len(beats))
            _, _, ready, r_valid, r_beat = await ctx.tick().sample(
                parser.i.ready, parser.result.valid, parser.result.payload.as_value())
            sent += bool(ready and sent < len(beats))
            if r_valid:
                got.append(S(r_beat))
                if len(got) == len(files):
                    return
        raise AssertionError(f"only {len(got)} results")

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [plan(f).status for f in files]
    assert got[:6] == [S.OK, S.OK, S.TRUNCATED, S.OK, S.TRUNCATED, S.BAD_TABLE]


def test_rejects_limits_outside_the_fields():
    with pytest.raises(ValueError):
        MarkerParser(max_width=8185)
    with pytest.raises(ValueError):
        MarkerParser(max_height=0)


@pytest.mark.slow
def test_whole_quick_corpus_a_photo_and_more_fuzz(quick):
    files = [f.data for f in quick]
    photos = jpeg_corpus.photo_corpus((75, 75))
    files.append(min(photos, key=lambda f: len(f.data)).data)
    seen, plans, _ = run_and_check(files, valid_prob=0.95, ready_prob=0.9, seed=17)
    assert all(p.status == S.OK for p in plans)
    fuzzed = [f.data for f in fuzz_corpus(400, seed=31) if f.data]
    run_and_check(fuzzed, seed=37)
