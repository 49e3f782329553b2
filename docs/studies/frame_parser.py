"""What the host's frame parsing costs (issue 39: one parser for FrameDecoder, FrameLink and
the DMA link): realistic reply streams through each entry point, in microseconds per frame
and per megabyte of the process's CPU time (the machine may be shared), the median of several
repetitions.

Streams: ``jpeg``, 48 images of four 256 KiB JPEG_DATA reply frames and a JPEG_END frame each
(the pixels of a 1 MB image); ``control``, 5000 small control replies (0..32 payload bytes).
Entry points: ``decoder`` (FrameDecoder.feed, 64 KiB reads), ``framelink``
(FrameLink.pump over a transport that returns 64 KiB reads; payload CRCs skipped, as on a
reliable link), ``dma`` (DmaLink's record ring: ``placed``, each image's JPEG_END frame and
the control replies a record each, the pixels placed by the engine, so only those frames
reach the host, handed on from the ring without a copy; ``unplaced``, the whole stream in
64 KiB records as the engine cuts it when the arena is full).  Each at link widths 32 and 1.

    .venv/bin/python docs/studies/frame_parser.py [--base PATH] [--reps N] [--cases TEXT]

``--base PATH``: measure the dlforge checkout at PATH instead (e.g. a
``git worktree add /tmp/base HEAD``), to compare the code before a change with the code
after it on the same machine.
"""
import argparse
import ctypes
import importlib.util
import json
import mmap
import platform
import statistics
import sys
import time
from pathlib import Path

CHUNK = 64 << 10                # a transport read, and the DMA engine's record (its STEP)


def _load_dlforge(base):
    """Import the package ``dlforge`` from the checkout at ``base`` (before anything else
    imports it)."""
    base = Path(base).resolve()
    spec = importlib.util.spec_from_file_location("dlforge", base / "__init__.py",
                                                  submodule_search_locations=[str(base)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["dlforge"] = module
    spec.loader.exec_module(module)


def _streams(protocol, w):
    """(frames, bytes) of each stream at width ``w``: the list of encoded frames."""
    encode, op = protocol.encode_frame, protocol.Opcode
    pixels = bytes(range(256)) * 1024                       # 256 KiB
    jpeg, placed = [], []
    for image in range(48):
        tag = 256 + image
        for seq in range(4):
            jpeg.append(encode(op.JPEG_DATA, tag, pixels, max_payload=1 << 20, link_bytes=w,
                               seq=seq))
        end = encode(op.JPEG_END, tag, bytes(14), link_bytes=w, seq=4)
        jpeg.append(end)
        placed.append(end)
    control = [encode(op.READ_REGS, 1 + n % 255, bytes(4 * (n % 9)), link_bytes=w)
               for n in range(5000)]
    return {"jpeg": jpeg, "control": control, "placed": placed + control}


def _frame_decoder(protocol):
    """FrameDecoder where the measured checkout has it (host/link/frame_parser.py since the
    parsers became one; rtl/link/protocol.py before)."""
    try:
        from dlforge.host.link.frame_parser import FrameDecoder
    except ImportError:
        return protocol.FrameDecoder
    return FrameDecoder


def _decoder(protocol, w, frames):
    wire = b"".join(frames)
    frame_decoder = _frame_decoder(protocol)

    def run():
        decoder = frame_decoder(max_length=1 << 20, link_bytes=w)
        got = 0
        for k in range(0, len(wire), CHUNK):
            got += len(decoder.feed(wire[k:k + CHUNK]))
        return got
    return run


def _framelink(w, frames):
    from dlforge.host.link.frame_link import FrameLink
    from dlforge.host.link.transport import Transport
    wire = b"".join(frames)

    class Reads(Transport):
        name, reliable = "memory", True

        def __init__(self):
            self.at = 0

        def send(self, data):
            return len(data)

        def recv_into(self, buffer):
            n = min(CHUNK, len(buffer), len(wire) - self.at)
            buffer[:n] = wire[self.at:self.at + n]
            self.at += n
            return n

        def wait(self, want_write, timeout):
            return False

    def run():
        count = [0]

        def on_frame(opcode, status, tag, payload, seq):
            count[0] += 1
        link = FrameLink(Reads(), on_frame, max_reply=1 << 20, link_bytes=w)
        link.pump()
        return count[0]
    return run


class _Ring:
    """A DmaTransport's shape over an anonymous mapping: the record ring written here as the
    board's engine writes it (BYTES records, PLACED records), for DmaLink to read."""
    reliable = flow_control = True
    name = "dma:bench"
    board_pid = 0
    sleeps = 0

    def __init__(self, layout, rec_size):
        self.layout = layout
        sizes = dict(layout.DEFAULT_SIZES, rec_size=rec_size, arena_size=1 << 20)
        self.desc_off, self.src_off, self.rec_off, self.arena_off, total = \
            layout.region_offsets(**sizes)
        self.desc_count, self.src_size = sizes["desc_count"], sizes["src_size"]
        self.rec_size, self.arena_size = rec_size, sizes["arena_size"]
        self.mm = mmap.mmap(-1, self.arena_off)
        self.arena_mm = mmap.mmap(-1, self.arena_size)
        self.index = {f: ctypes.c_uint64(0) for f in vars(layout.Field).values()
                      if isinstance(f, int)}
        self.index[layout.Field.BY_ADDRESS].value = 2       # the probe: answered at once

    def ring(self):
        pass

    def write(self, records):
        """Records (kind, body) from the ring's start; sets the head."""
        at, size = 0, self.layout.RECORD_HEADER.size
        for kind, body in records:
            self.layout.RECORD_HEADER.pack_into(self.mm, self.rec_off + at, kind, len(body))
            self.mm[self.rec_off + at + size:self.rec_off + at + size + len(body)] = body
            at += (size + len(body) + 7) & ~7
        self.index[self.layout.Field.REC_HEAD].value = at


def _dma(w, frames, placed):
    from dlforge.host.link.dma import DmaLink
    from dlforge.rtl.link import dma_layout as layout
    Rec = layout.Rec
    if placed:                                  # a record a frame, a PLACED before each end
        records = []
        for frame in frames:
            if frame[2] == 0x11:                # JPEG_END: the engine placed the pixels
                records.append((Rec.PLACED, layout.PLACED.pack(0, 0, 1 << 20)))
            records.append((Rec.BYTES, frame))
    else:
        wire = b"".join(frames)
        records = [(Rec.BYTES, wire[k:k + CHUNK]) for k in range(0, len(wire), CHUNK)]
    ring = _Ring(layout, sum(len(body) + 16 for _, body in records) + 4096)
    ring.write(records)
    count = [0]

    def on_frame(opcode, status, tag, payload, seq):
        count[0] += 1
    link = DmaLink(ring, on_frame, lambda tag, nbytes, damaged: None)
    link.link_bytes = w

    def run():
        count[0] = 0
        link.rec_tail = 0
        link._records()
        assert link.start == link.end == 0
        return count[0]
    return run


def _measure(run, reps):
    times, frames = [], None
    for _ in range(reps):
        started = time.process_time()
        got = run()
        times.append(time.process_time() - started)
        assert frames in (None, got)
        frames = got
    return statistics.median(times), frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the dlforge checkout to measure (default: this one)")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--cases", default="", help="only the cases whose names hold this")
    args = parser.parse_args()
    if args.base:
        _load_dlforge(args.base)
    from dlforge.rtl.link import protocol
    results = {}
    for w in (32, 1):
        streams = _streams(protocol, w)
        cases = {f"decoder_jpeg_w{w}": (_decoder(protocol, w, streams["jpeg"]), "jpeg"),
                 f"decoder_control_w{w}": (_decoder(protocol, w, streams["control"]),
                                           "control"),
                 f"framelink_jpeg_w{w}": (_framelink(w, streams["jpeg"]), "jpeg"),
                 f"framelink_control_w{w}": (_framelink(w, streams["control"]), "control"),
                 f"dma_placed_w{w}": (_dma(w, streams["placed"], True), "placed"),
                 f"dma_unplaced_w{w}": (_dma(w, streams["jpeg"] + streams["control"], False),
                                        None)}
        for name, (run, stream) in cases.items():
            if args.cases not in name:
                continue
            frames = streams[stream] if stream else streams["jpeg"] + streams["control"]
            seconds, got = _measure(run, args.reps)
            assert got == len(frames), (name, got, len(frames))
            mbytes = sum(map(len, frames)) / 1e6
            results[name] = {"frames": got, "mbytes": round(mbytes, 3),
                             "ms": round(seconds * 1e3, 3),
                             "us_per_frame": round(seconds * 1e6 / got, 3),
                             "us_per_mb": round(seconds * 1e6 / mbytes, 1)}
    print(json.dumps({"code": str(Path(protocol.__file__).resolve().parents[2]),
                      "python": platform.python_version(), "reps": args.reps,
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
