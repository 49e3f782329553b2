"""The host's handle on a dlforge accelerator behind any link (a card, or the simulated board,
through the same transports): connecting, its registers and counters, and the routing of
every reply frame to the request it answers.

Tags name the requests (:mod:`dlforge.rtl.link.protocol`): tags below ``FIRST_DATA_TAG`` are
this handle's control requests (registers, pings), one at a time; the data tags from
``FIRST_DATA_TAG`` up name a JPEG file's attempt (:mod:`dlforge.host.device.jpeg_scheduler`,
which spreads the files over the decoder cores) or an exchange with the convolution engine
(:mod:`dlforge.host.conv.exchange`).

The link width (``link_bytes``, the frame padding of :mod:`dlforge.rtl.link.protocol`) must be
known before the first frame: it comes from the transport (or the ``link_bytes`` argument)
and is checked against ``Register.LINK_WIDTH``.
"""

import struct
import time

from dlforge.rtl.link.protocol import (FIRST_DATA_TAG, LINK_WIDTHS, MAX_PAYLOAD, TAG_BITS,
                                       VERSION, Opcode, Register, Status, parse_array_word,
                                       parse_scales_word)
from dlforge.host.device.base import Device
from dlforge.host.device.jpeg_scheduler import JpegScheduler
from dlforge.host.link.device_string import open_transport, parse_device
from dlforge.host.link.errors import DeviceUnreachable, LinkTimeout

__all__ = ["AcceleratorDevice", "EngineReplies"]

# (plain ints: the frames' fields are, and the reply path runs for every file)
_JPEG_DATA, _JPEG_END = int(Opcode.JPEG_DATA), int(Opcode.JPEG_END)


class EngineReplies:
    """The convolution engine's reply frames as the routing takes them in: result bytes by
    tag, and whether a frame was refused, or came damaged or not at all (the engine numbers
    its reply frames mod 256, and the numbers run on across exchanges)."""

    def __init__(self):
        self.results = {}                   # tag -> bytearray of result bytes
        self.seq = None                     # the engine's next reply frame number (mod 256)
        self.refused = False                # the engine's words were refused (resend them)
        self.damaged = False                # ... its results came damaged or a frame was lost

    def take(self, status, tag, payload, seq):
        """A ``CONV_WORDS`` reply: its results, after checking its number."""
        # a gap in the numbers is a frame lost to a destroyed header
        if status == Status.BAD_CRC or seq != (self.seq if self.seq is not None else seq):
            self.damaged = True
        self.seq = (seq + 1) & 0xFF
        self.results.setdefault(tag, bytearray()).extend(payload)

    def refuse(self, tag):
        """The device refused engine words sent under ``tag``."""
        self.results.setdefault(tag, bytearray())
        self.refused = True


class AcceleratorDevice(Device):
    """A dlforge accelerator behind a link: a real card or the simulated board, through the
    same transports.  Its JPEG files go through its :class:`JpegScheduler`
    (``jpeg_scheduler``), which keeps every core fed within its input FIFO, resubmits what a
    damaged or lost frame spoiled, and returns each job's reply in submission order."""

    def __init__(self, transport, *, timeout=30.0, retries=3, window=None, verify=None,
                 owner=None, pace=None, link_bytes=None):
        self.transport = transport
        self.name = transport.name
        self.timeout = timeout
        self.retries = retries
        self.owner = owner                  # e.g. the simulated board started for us
        # The link width pads every frame, the first register read's too: it must come from
        # the transport (or the caller), and the device's LINK_WIDTH register confirms it.
        self.link_bytes = getattr(transport, "link_bytes", 1) if link_bytes is None \
            else link_bytes
        if self.link_bytes not in LINK_WIDTHS:
            self.close()
            raise ValueError(f"link_bytes must be one of {LINK_WIDTHS}, not {self.link_bytes}")
        # pace: None = when the transport has no flow control (serial)
        self.link = transport.frame_link(self._on_frame, self._on_placed, verify=verify,
                                         pace=pace)
        self.link.link_bytes = self.link_bytes
        self._control = {}                  # tag -> (opcode, status, payload)
        self._next_control = 1
        self._next_tag = FIRST_DATA_TAG
        #: the files in flight and their rules; made once the registers are read (a reply
        #: under a data tag before then is a stale one, and ignored as any other)
        self.jpeg_scheduler = None
        #: the convolution engine's replies (:func:`dlforge.host.conv.exchange.conv_exchange`)
        self.engine_replies = EngineReplies()
        try:
            regs = self.read_regs(Register.VERSION, 8)
            if regs[Register.VERSION] >> 16 == VERSION >> 16:
                width, fifo = self.read_regs(Register.LINK_WIDTH, 2)
                taps, largest, scales, files = self.read_regs(Register.RESAMPLE_TAPS, 4)
        except LinkTimeout as exc:
            self.close()
            raise DeviceUnreachable(f"no answer from {self.name}: is it an accelerator "
                                    f"built by dlforge, powered, and with a "
                                    f"{self.link_bytes}-byte link (the frames' padding)? "
                                    f"({exc})") from None
        except Exception:
            self.close()
            raise
        if regs[Register.VERSION] >> 16 != VERSION >> 16:
            self.close()
            raise DeviceUnreachable(f"{self.name} speaks protocol version "
                                    f"{regs[Register.VERSION] >> 16}.{regs[0] & 0xFFFF}, the "
                                    f"host {VERSION >> 16}.{VERSION & 0xFFFF}")
        width = width or 1                  # 0: a device from before wide links (bytes)
        if width != self.link_bytes:
            self.close()
            raise DeviceUnreachable(f"{self.name} has a {width}-byte link but the host frames "
                                    f"for {self.link_bytes} bytes per clock (from the "
                                    f"transport, or link_bytes=): open it with "
                                    f"link_bytes={width}")
        #: the protocol version the device speaks (major << 16 | minor)
        self.version = regs[Register.VERSION]
        #: bytes each core's input FIFO holds: the credit per core (0: not reported, no limit)
        self.input_fifo = fifo
        #: the files it decodes at once (lanes: cores x files_per_core), each a "core" to
        #: the scheduler
        self.cores = regs[Register.CORES]
        #: files each core decodes at once (2: C-slowed pairs, each file at half a core's
        #: rate per clock; 0 from a device older than the register: 1)
        self.files_per_core = files or 1
        self.max_width, self.max_height = regs[Register.MAX_WIDTH], regs[Register.MAX_HEIGHT]
        #: the cores' resampler: taps per pass (0: none; the host resizes) and its largest
        #: crop and output (width, height)
        self.resample_taps = taps
        self.resample_max = (largest & 0xFFFF, largest >> 16)
        #: the denominators its cores decode at (1/2, 1/4, 1/8: the reduced IDCTs)
        self.scales = parse_scales_word(scales)
        self.max_payload = regs[Register.MAX_PAYLOAD] or MAX_PAYLOAD
        self.reply_payload = regs[Register.REPLY_PAYLOAD] or MAX_PAYLOAD
        self.array = regs[Register.ARRAY]
        self.engine_word = regs[Register.LINK_BYTES]    # the engine's link word (bytes)
        self.link.max_reply = max(self.reply_payload, MAX_PAYLOAD)
        self.jpeg_scheduler = JpegScheduler(self, window)

    @classmethod
    def simulated(cls, spec="sim", **options):
        """Start a private simulated board and connect to it: ``sim`` over a local socket,
        ``sim:dma`` over shared memory and its DMA engine (:mod:`dlforge.host.link.dma`)."""
        from dlforge.sim.board.process import SimBoard
        parsed = parse_device(spec)
        if parsed.kind != "sim":
            raise ValueError(f"unknown simulated board {spec!r}: use sim or sim:dma")
        kind = parsed.target
        sim_keys = ("cores", "conv", "max_width", "max_height", "max_payload", "reply_payload",
                    "link_bytes", "input_fifo_bytes", "corrupt", "drop", "seed", "contexts")
        sim_options = {k: options.pop(k) for k in sim_keys if k in options}
        if sim_options.get("corrupt") or sim_options.get("drop"):
            options.setdefault("verify", True)      # faults injected under a reliable socket
        if kind == "dma":
            board = SimBoard(link="dma", **sim_options)
        else:
            board = SimBoard(link="tcp", exit_on_disconnect=True, **sim_options)
        board.start()
        try:
            # (the device string names the board's link width: dma:P?link_bytes=32)
            return cls(open_transport(board.device), owner=board, **options)
        except BaseException:
            board.stop()
            raise

    def info(self):
        """What the device reported of itself when connected, as a dict."""
        array = parse_array_word(self.array)
        return {"device": self.name, "cores": self.cores,
                "files_per_core": self.files_per_core, "max_width": self.max_width,
                "max_height": self.max_height, "max_payload": self.max_payload,
                "reply_payload": self.reply_payload, "link_bytes": self.link_bytes,
                "input_fifo": self.input_fifo, "resample_taps": self.resample_taps,
                "resample_max": list(self.resample_max) if self.resample_taps else None,
                "engine": "{}x{}x{} int{}".format(*array) if array else None}

    def decode_jpegs(self, jobs):
        """:meth:`Device.decode_jpegs`, by the device's :class:`JpegScheduler`."""
        return self.jpeg_scheduler.decode(jobs)

    @property
    def resubmissions(self):
        """Files sent again after a damaged or lost frame (the scheduler's count)."""
        return self.jpeg_scheduler.resubmissions

    @property
    def decode_wait_s(self):
        """Seconds the host has spent in decode_jpegs waiting for the link (the rest of its
        time there is the host's own work: what dlforge infer --images counts as host time)."""
        return self.jpeg_scheduler.decode_wait_s

    def close(self):
        """Close the link, and stop the simulated board started for this handle."""
        if getattr(self, "transport", None) is not None:
            self.transport.close()
            self.transport = None
        if getattr(self, "owner", None) is not None:
            self.owner.stop()
            self.owner = None

    # ---- frames in ------------------------------------------------------------------------
    def _on_frame(self, opcode, status, tag, payload, seq=0):
        if tag < FIRST_DATA_TAG:
            self._control[tag] = (opcode, status, bytes(payload))
            return
        if opcode == _JPEG_END or opcode == _JPEG_DATA:
            if self.jpeg_scheduler is not None:
                self.jpeg_scheduler.take_reply(opcode, status, tag, payload, seq)
            return
        if opcode == Opcode.ERROR:
            refused = payload[0] if len(payload) else None
            if refused in (Opcode.JPEG_DATA, Opcode.JPEG_END):
                if self.jpeg_scheduler is not None:
                    self.jpeg_scheduler.take_refusal(tag)
            elif refused == Opcode.CONV_WORDS:
                self.engine_replies.refuse(tag)
            return
        if opcode == Opcode.CONV_WORDS:
            self.engine_replies.take(status, tag, payload, seq)
            return
        if self.jpeg_scheduler is not None:
            self.jpeg_scheduler.take_other(status, tag)     # another opcode under a file's tag

    def _on_placed(self, tag, nbytes, damaged):
        """The DMA engine placed ``nbytes`` of ``tag``'s pixels (its JPEG_END frame follows)."""
        if self.jpeg_scheduler is not None:
            self.jpeg_scheduler.take_placed(tag, nbytes, damaged)

    def data_tag(self):
        """A tag for a new file attempt or engine exchange: the data tags in turn, skipping
        those of files still in flight."""
        in_flight = self.jpeg_scheduler.attempts
        while True:
            tag = self._next_tag
            self._next_tag = tag + 1 if tag + 1 < 1 << TAG_BITS else FIRST_DATA_TAG
            if tag not in in_flight:
                return tag

    # ---- control requests ---------------------------------------------------------------------
    def _request(self, opcode, payload=b"", timeout=None):
        timeout = self.timeout if timeout is None else timeout
        for _ in range(self.retries + 1):
            tag = self._next_control
            self._next_control = self._next_control % (FIRST_DATA_TAG - 1) + 1
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
        """Send ``data`` in a PING and return the device's echo of it."""
        return self._request(Opcode.PING, data, timeout)

    def read_regs(self, first, count=1):
        """``count`` registers from ``first`` on, as a list of ints."""
        data = self._request(Opcode.READ_REGS, struct.pack("<HH", first, count))
        return list(struct.unpack(f"<{count}I", data))

    def write_reg(self, register, value):
        """Write ``value`` to ``register``; returns once the device has answered."""
        self._request(Opcode.WRITE_REG, struct.pack("<HI", register, value))

    def open_span(self):
        """Start the device's own measure of the next batch: from the first byte of its
        first data request to the last byte of its last reply (``Register.SPAN_START``)."""
        self.write_reg(Register.SPAN_START, 1)

    def span_cycles(self):
        """Device clocks from the first data request after :meth:`open_span` to the last
        data reply so far, from the device's SPAN registers; None before any reply."""
        start, end = self.read_regs(Register.SPAN_START, 2)
        cycles = (end - start) & 0xFFFFFFFF
        return None if cycles >= 1 << 31 else cycles

    def counters(self):
        """The device's counters: cycles, link errors, per-core images and errors."""
        regs = dict(zip(range(0x08, 0x10), self.read_regs(0x08, 8)))
        images = self.read_regs(Register.JPEG_IMAGES, self.cores)
        errors = self.read_regs(Register.JPEG_ERRORS, self.cores)
        return {"cycles": regs[Register.CYCLES], "crc_errors": regs[Register.CRC_ERRORS],
                "header_errors": regs[Register.HEADER_ERRORS], "images": images,
                "errors": errors}
