"""A device behind a link: registers, pipelined JPEG decoding and convolution layers, with the
recovery rules that keep a lossy link from losing or swapping an image.

Decoding keeps ``window`` files in flight (each file's frames back to back, one tag per
attempt), so the cores are fed in turn and the link stays busy; results are handed back in
submission order.

Recovery (a serial link can flip, drop or add bytes; TCP and PCIe do not):

* a request frame the device refuses (``ERROR``/``BAD_CRC``) was not acted on, but the frames
  after it were: the file it belonged to, and any file whose bytes may have run into it in the
  same core, is damaged.  The host *voids* every attempt in flight (their late replies are
  ignored by tag), sends a *closer* (the last file's final frame again, which ends a packet a
  refused final frame left open in a core), and resubmits the files under new tags;
* a reply whose payload CRC fails, or whose pixel count does not match its record, makes its
  file resubmitted;
* a device silent for ``timeout`` seconds while work is in flight: the same as a refusal
  (a frame whose header was destroyed gets no answer at all); if it does not answer a ping
  either, :class:`DeviceUnreachable` names the files in flight;
* on a link that is not reliable, a file the device calls malformed is tried once more (a
  lost chunk looks like a malformed file); the second verdict stands;
* each file is tried at most ``retries + 1`` times, then reported as an error saying why.

On a link without flow control (a UART board) the :class:`FrameLink` paces the requests
(``pace``, see :mod:`dlforge.host.link`): one data frame in the device at a time, each
followed by a barrier PING.  Voiding the attempts drops their frames not yet written; the
silence rule's ping, answered after everything written, also ends the wait for a barrier
whose answer was lost.
"""

import struct
import time
from collections import OrderedDict, deque

import numpy as np

from ..rtl.jpeg.status import JpegStatus
from ..rtl.link.jpeg_reply import END_RECORD
from ..rtl.link.protocol import MAX_PAYLOAD, VERSION, Opcode, Register, Status
from .device import Device, JpegReply
from .link import FrameLink
from .transport import DeviceGone, DeviceUnreachable, LinkTimeout

__all__ = ["Board"]

_CONTROL_TAGS = 256                  # tags below this are control requests; files use the rest
_RECORD = struct.Struct("<BBHHII")
_STATUS = {int(s): s for s in JpegStatus}


class _Attempt:
    __slots__ = ("tag", "job", "pixels", "filled", "damaged", "end_frame", "placed")

    def __init__(self, tag, job, pixels=None):
        self.tag, self.job = tag, job
        # the image's array, allocated once when the host knows its size (no regrowing); on
        # the DMA link, the arena slot the engine writes into
        if pixels is None and job.pixel_bytes:
            pixels = np.empty(job.pixel_bytes, np.uint8)
        self.pixels = pixels
        self.filled = 0
        self.damaged = False
        self.end_frame = None
        self.placed = False

    def add(self, payload):
        n = len(payload)
        end = self.filled + n
        if self.pixels is None or end > len(self.pixels):
            grown = np.empty(max(end, 2 * self.filled, 1 << 16), np.uint8)
            if self.filled:
                grown[:self.filled] = self.pixels[:self.filled]
            self.pixels = grown
        self.pixels[self.filled:end] = np.frombuffer(payload, np.uint8)
        self.filled = end


class _Job:
    __slots__ = ("index", "key", "data", "fast", "tries", "why", "pixel_bytes")

    def __init__(self, index, key, data, fast, size=None):
        self.index, self.key, self.data, self.fast = index, key, data, fast
        self.pixel_bytes = size[0] * size[1] * 3 if size and size[0] and size[1] else 0
        self.tries = 0
        self.why = None


class Board(Device):
    def __init__(self, transport, *, timeout=30.0, retries=3, window=None, verify=None,
                 owner=None, pace=None):
        self.transport = transport
        self.name = transport.name
        self.timeout = timeout
        self.retries = retries
        self.owner = owner                  # e.g. the simulated board started for us
        # pace: None = when the transport has no flow control (serial)
        if hasattr(transport, "dma_link"):      # shared memory: files and pixels by DMA
            self.link = transport.dma_link(self._on_frame, self._on_placed)
        else:
            self.link = FrameLink(transport, self._on_frame, verify=verify, pace=pace)
        self._control = {}                  # tag -> (opcode, status, payload)
        self._next_control = 1
        self._next_tag = _CONTROL_TAGS
        self._attempts = OrderedDict()      # tag -> _Attempt in flight
        self._finished = deque()            # (attempt, record bytes)
        self._refusals = 0
        self._conv = {}                     # tag -> bytearray of result bytes
        self.resubmissions = 0
        try:
            regs = self.read_regs(Register.VERSION, 8)
        except LinkTimeout as exc:
            self.close()
            raise DeviceUnreachable(f"no answer from {self.name}: is it an accelerator "
                                    f"built by dlforge, and powered? ({exc})") from None
        except Exception:
            self.close()
            raise
        if regs[Register.VERSION] >> 16 != VERSION >> 16:
            self.close()
            raise DeviceUnreachable(f"{self.name} speaks protocol version "
                                    f"{regs[Register.VERSION] >> 16}.{regs[0] & 0xFFFF}, the "
                                    f"host {VERSION >> 16}.{VERSION & 0xFFFF}")
        self.cores = regs[Register.CORES]
        self.max_width, self.max_height = regs[Register.MAX_WIDTH], regs[Register.MAX_HEIGHT]
        self.max_payload = regs[Register.MAX_PAYLOAD] or MAX_PAYLOAD
        self.reply_payload = regs[Register.REPLY_PAYLOAD] or MAX_PAYLOAD
        self.array = regs[Register.ARRAY]
        self.link_bytes = regs[Register.LINK_BYTES]
        self.link.max_reply = max(self.reply_payload, MAX_PAYLOAD)
        # DMA: 32 files in flight, so that the host can sleep until half of them are done:
        # one wake-up per 16 images (each costs some 80 us of CPU on a VM; host/dma.py)
        dma = hasattr(self.link, "post_file")
        self.window = window or (max(32, 2 * self.cores + 1) if dma else 2 * self.cores + 1)

    @classmethod
    def simulated(cls, spec="sim", **options):
        """Start a private simulated board and connect to it: ``sim`` over a local socket,
        ``sim:dma`` over shared memory and its DMA engine (:mod:`dlforge.host.dma`)."""
        from ..sim.sim_board import SimBoard
        from .transport import TcpTransport
        kind = str(spec).partition(":")[2] or "tcp"
        if kind not in ("tcp", "dma"):
            raise ValueError(f"unknown simulated board {spec!r}: use sim or sim:dma")
        sim_keys = ("cores", "conv", "max_width", "max_height", "max_payload", "reply_payload",
                    "corrupt", "drop", "seed")
        sim_options = {k: options.pop(k) for k in sim_keys if k in options}
        if sim_options.get("corrupt") or sim_options.get("drop"):
            options.setdefault("verify", True)      # faults injected under a reliable socket
        if kind == "dma":
            board = SimBoard(link="dma", **sim_options)
        else:
            board = SimBoard(link="tcp", exit_on_disconnect=True, **sim_options)
        board.start()
        try:
            if kind == "dma":
                from .dma import DmaTransport
                transport = DmaTransport(board.device.partition(":")[2])
            else:
                _, host, port = board.device.split(":")
                transport = TcpTransport(host, port)
            return cls(transport, owner=board, **options)
        except BaseException:
            board.stop()
            raise

    def info(self):
        rows, cols, simd, bits = (self.array >> s & 0xFF for s in (0, 8, 16, 24))
        return {"device": self.name, "cores": self.cores, "max_width": self.max_width,
                "max_height": self.max_height, "max_payload": self.max_payload,
                "reply_payload": self.reply_payload,
                "engine": f"{rows}x{cols}x{simd} int{bits}" if self.array else None}

    def close(self):
        if getattr(self, "transport", None) is not None:
            self.transport.close()
            self.transport = None
        if getattr(self, "owner", None) is not None:
            self.owner.stop()
            self.owner = None

    # ---- frames in ------------------------------------------------------------------------
    def _on_frame(self, opcode, status, tag, payload):
        if tag < _CONTROL_TAGS:
            self._control[tag] = (opcode, status, bytes(payload))
            return
        if opcode == Opcode.ERROR:
            refused = payload[0] if len(payload) else None
            if refused in (Opcode.JPEG_DATA, Opcode.JPEG_END):
                self._refusals += 1
            elif refused == Opcode.CONV_WORDS:
                self._conv.setdefault(tag, bytearray())
                self._conv_refused = True
            return
        if opcode == Opcode.CONV_WORDS:
            if status == Status.BAD_CRC:
                self._conv_refused = True
            self._conv.setdefault(tag, bytearray()).extend(payload)
            return
        attempt = self._attempts.get(tag)
        if attempt is None:
            return                              # a voided attempt's late reply
        if status == Status.BAD_CRC:
            attempt.damaged = True
        elif opcode == Opcode.JPEG_DATA:
            attempt.add(payload)
        elif opcode == Opcode.JPEG_END:
            self._finished.append((attempt, bytes(payload)))

    def _on_placed(self, tag, nbytes, damaged):
        """The DMA engine placed ``nbytes`` of ``tag``'s pixels (its JPEG_END frame follows)."""
        attempt = self._attempts.get(tag)
        if attempt is None or not attempt.placed:
            return                              # a voided attempt's
        attempt.filled = nbytes
        attempt.damaged |= damaged

    # ---- control requests ---------------------------------------------------------------------
    def _request(self, opcode, payload=b"", timeout=None):
        timeout = self.timeout if timeout is None else timeout
        for _ in range(self.retries + 1):
            tag = self._next_control
            self._next_control = self._next_control % (_CONTROL_TAGS - 1) + 1
            self._control.pop(tag, None)
            self.link.queue(opcode, tag, payload)
            deadline = time.monotonic() + timeout
            while tag not in self._control and time.monotonic() < deadline:
                self.link.pump(min(0.05, max(0.0, deadline - time.monotonic())))
            reply = self._control.pop(tag, None)
            if reply is None:
                continue                        # lost on the way: ask again
            op, status, data = reply
            if status == Status.BAD_CRC:
                continue
            if op == Opcode.ERROR:
                raise ValueError(f"{self.name} refused {Opcode(opcode).name}: "
                                 f"{Status(status).name}")
            return data
        raise LinkTimeout(f"{self.name}: no answer to {Opcode(opcode).name} "
                          f"({self.retries + 1} tries, {timeout:g} s each)")

    def ping(self, data=b"dlforge", timeout=None):
        return self._request(Opcode.PING, data, timeout)

    def read_regs(self, first, count=1):
        data = self._request(Opcode.READ_REGS, struct.pack("<HH", first, count))
        return list(struct.unpack(f"<{count}I", data))

    def write_reg(self, register, value):
        self._request(Opcode.WRITE_REG, struct.pack("<HI", register, value))

    def counters(self):
        """The device's counters: cycles, link errors, per-core images and errors."""
        regs = dict(zip(range(0x08, 0x10), self.read_regs(0x08, 8)))
        images = self.read_regs(Register.JPEG_IMAGES, self.cores)
        errors = self.read_regs(Register.JPEG_ERRORS, self.cores)
        return {"cycles": regs[Register.CYCLES], "crc_errors": regs[Register.CRC_ERRORS],
                "header_errors": regs[Register.HEADER_ERRORS], "images": images,
                "errors": errors}

    # ---- JPEG files ---------------------------------------------------------------------------
    def _tag(self):
        while True:
            tag = self._next_tag
            self._next_tag = tag + 1 if tag + 1 < 1 << 16 else _CONTROL_TAGS
            if tag not in self._attempts:
                return tag

    def _submit(self, job):
        tag = self._tag()
        status = int(job.fast)
        if hasattr(self.link, "post_file"):
            # DMA: the pixels go straight into an arena slot, the engine frames the file
            pixels = self.link.place(tag, job.pixel_bytes) if job.pixel_bytes else None
            attempt = _Attempt(tag, job, pixels)
            attempt.placed = pixels is not None
            self.link.post_file(tag, job.data, status, self.max_payload)
            last = len(job.data) - 1 - (len(job.data) - 1) % self.max_payload
            attempt.end_frame = (Opcode.JPEG_END, tag, memoryview(job.data)[last:], status)
            self._attempts[tag] = attempt
            self._last_end = attempt.end_frame
            return
        attempt = _Attempt(tag, job)
        data, step = memoryview(job.data), self.max_payload
        for offset in range(0, len(data), step):
            last = offset + step >= len(data)
            chunk = data[offset:offset + step]
            opcode = Opcode.JPEG_END if last else Opcode.JPEG_DATA
            self.link.queue(opcode, attempt.tag, chunk, status)
            if last:
                attempt.end_frame = (opcode, attempt.tag, chunk, status)
        self._attempts[attempt.tag] = attempt
        self._last_end = attempt.end_frame

    def _void_all(self, why, retry):
        """Drop every attempt in flight (late replies are ignored), close a packet that a lost
        final frame may have left open, and put the files back in front of the queue."""
        attempts = list(self._attempts.values())
        self._attempts.clear()
        self.link.abandon()                 # paced: their frames not yet written
        for attempt in attempts:
            if attempt.placed:
                self.link.unplace(attempt.tag)      # DMA: the engine stops writing there
        if attempts and getattr(self, "_last_end", None):
            self.link.queue(*self._last_end)            # the closer
        for attempt in reversed(attempts):
            job = attempt.job
            job.why = why
            retry.appendleft(job)

    def decode_jpegs(self, jobs):
        if not self.cores:
            # (a small FPGA carrying the engine or the link alone: JPEG frames would only be
            # refused as unknown opcodes, which looks like a damaged link)
            raise ValueError(f"{self.name} has no JPEG decoder cores (it was built with "
                             "cores=0); decode on a board with a decoder, or on the cpu")
        jobs = iter(jobs)
        retry = deque()
        results = {}
        index = 0                               # next job number to take
        emit = 0                                # next result to hand back
        exhausted = False
        while True:
            # top up the window
            while len(self._attempts) < self.window and (retry or not exhausted):
                if retry:
                    job = retry.popleft()
                    job.tries += 1
                    if job.tries > self.retries:
                        results[job.index] = JpegReply(
                            job.key, JpegStatus.TRUNCATED,
                            error=f"link: gave up after {job.tries} tries ({job.why})")
                        continue
                    self.resubmissions += 1
                else:
                    try:
                        key, data, fast, *size = next(jobs)
                    except StopIteration:
                        exhausted = True
                        break
                    job = _Job(index, key, data, fast, size[0] if size else None)
                    index += 1
                    if data is None:
                        results[job.index] = JpegReply(key, JpegStatus.OK)
                        continue
                    if not len(data):
                        results[job.index] = JpegReply(key, JpegStatus.NO_SOI,
                                                       error="empty file")
                        continue
                self._submit(job)
            while emit in results:
                yield results.pop(emit)
                emit += 1
                # silence counts only while the host waits, not while its consumer is busy
                self.link.last_activity = time.monotonic()
            if exhausted and not self._attempts and not retry and emit == index:
                return
            if not self._attempts and not retry:
                continue
            try:
                # sleep until bytes move or the silence deadline: no periodic wake-ups
                quiet = time.monotonic() - self.link.last_activity
                # DMA links coalesce wake-ups: with the window full, wake when half of it is
                # done; with every file submitted, when all are
                if retry:
                    self.link.wake_ends = 1
                elif len(self._attempts) >= self.window:
                    self.link.wake_ends = max(1, self.window // 2)
                elif exhausted:
                    self.link.wake_ends = max(1, len(self._attempts))
                else:
                    self.link.wake_ends = 1
                self.link.pump(max(0.001, self.timeout - quiet))
            except DeviceGone as exc:
                names = ", ".join(str(a.job.key) for a in self._attempts.values())
                raise DeviceGone(f"{exc}; files in flight: {names or 'none'}") from None
            if self._refusals:
                self._refusals = 0
                self._void_all("the device refused a damaged frame", retry)
            while self._finished:
                attempt, record = self._finished.popleft()
                if self._attempts.get(attempt.tag) is not attempt:
                    continue
                del self._attempts[attempt.tag]
                self._finish(attempt, record, results, retry)
            if self._attempts and time.monotonic() - self.link.last_activity > self.timeout:
                self._silent(retry)

    def _finish(self, attempt, record, results, retry):
        job = attempt.job
        if len(record) != END_RECORD:
            attempt.damaged = True
            status = width = height = cycles = 0
        else:
            status, _, width, height, cycles, _ = _RECORD.unpack(record)
        status = _STATUS.get(status, JpegStatus.BAD_FRAME_HEADER)
        if status == JpegStatus.OK and attempt.filled != width * height * 3:
            attempt.damaged = True
        if attempt.damaged:
            job.why = "a reply arrived damaged"
            retry.append(job)
            return
        if status == JpegStatus.OK:
            pixels = attempt.pixels[:attempt.filled].reshape(height, width, 3)
            results[job.index] = JpegReply(job.key, status, width, height, cycles,
                                           pixels=pixels)
            return
        if status.malformed and not self.transport.reliable and job.tries == 0 \
                and job.why is None:
            job.why = f"the device found it malformed ({status.name}); trying once more"
            retry.append(job)
            return
        kind = "unsupported" if status.unsupported else "malformed"
        results[job.index] = JpegReply(job.key, status, width, height, cycles,
                                       error=f"{status.name} (0x{int(status):02X}, {kind})")

    def _silent(self, retry):
        names = ", ".join(str(a.job.key) for a in self._attempts.values())
        # Paced: the frames still waiting (for a barrier answer that may have been lost) are
        # dropped, so the ping goes out now; they belong to attempts voided below.
        self.link.abandon()
        try:
            self.ping(timeout=min(self.timeout, 5.0))
        except LinkTimeout:
            raise DeviceUnreachable(f"{self.name} stopped answering (silent for "
                                    f"{self.timeout:g} s and no answer to a ping); files in "
                                    f"flight: {names}") from None
        # The ping was answered after everything written before it: no barrier is pending.
        self.link.abandon(barrier=True)
        self._void_all(f"no reply within {self.timeout:g} s", retry)
        self.link.last_activity = time.monotonic()

    # ---- convolution ------------------------------------------------------------------------
    def conv_exchange(self, raw, result_bytes):
        """Send an engine word stream, return its ``result_bytes`` of result words."""
        if not self.array:
            raise ValueError(f"{self.name} has no convolution engine")
        lb = self.link_bytes
        step = max(lb, self.max_payload // lb * lb)
        tag = self._tag()
        self._conv[tag] = bytearray()
        self._conv_refused = False
        view = memoryview(raw)
        chunks = [view[i:i + step] for i in range(0, len(view), step)]
        deadline = time.monotonic() + self.timeout
        if self.transport.reliable:
            for chunk in chunks:
                self.link.queue(Opcode.CONV_WORDS, tag, chunk)
        else:
            # stop and wait: a refused frame is sent again before the next one
            for chunk in chunks:
                for _ in range(self.retries + 1):
                    self._conv_refused = False
                    self.link.queue(Opcode.CONV_WORDS, tag, chunk)
                    self.ping()
                    if not self._conv_refused:
                        break
                else:
                    raise LinkTimeout(f"{self.name}: engine words refused "
                                      f"{self.retries + 1} times")
        got = self._conv[tag]
        while len(got) < result_bytes:
            if self.link.pump(0.05):
                deadline = time.monotonic() + self.timeout
            elif time.monotonic() > deadline:
                del self._conv[tag]
                raise LinkTimeout(f"{self.name}: the engine sent {len(got)} of {result_bytes} "
                                  f"result bytes, then nothing for {self.timeout:g} s")
        del self._conv[tag]
        if self._conv_refused:
            raise DeviceGone(f"{self.name}: engine results arrived damaged")
        return bytes(got[:result_bytes])
