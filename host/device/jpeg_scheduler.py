"""A device's JPEG files spread over its decoder cores, with the recovery rules that keep a
lossy link from losing or swapping an image.

Decoding keeps up to ``window`` files in flight (one tag per attempt); results are handed
back in submission order.  The host chooses each file's decoder core (the core number rides in
the status byte of all its frames, ``request_status``): the core with the fewest bytes
outstanding, i.e. sent in files whose ``JPEG_END`` reply has not come back.  A core's input
FIFO (``Register.INPUT_FIFO``) is the credit: a file goes to a core only if it fits beside
what is outstanding there, or if the core has nothing outstanding (a file larger than the
FIFO then goes alone).  So the device never stalls the link on one full core FIFO while the
other cores starve; files that fit nowhere yet wait, in order.  Files sent together are queued
chunk by chunk in turn between their cores, so that every core gets its first bytes early
(a core's own files stay back to back, in order: a core decodes its files in the order their
frames arrive; a device older than protocol 0.2 deals files to its cores itself and gets every
file back to back).

Recovery (a serial link can flip, drop or add bytes; TCP and PCIe do not):

* a request frame the device refuses (``ERROR``/``BAD_CRC``) was not acted on, but the frames
  after it were: the file it belonged to, and any file whose bytes may have run into it in the
  same core, is damaged.  The host *voids* every attempt in flight (their late replies are
  ignored by tag), sends a *closer* to each core that had files in flight (the final frame of
  the last file sent to that core, again: it ends a packet that a refused final frame left
  open there), frees every core's credit, and resubmits the files under new tags;
* a reply whose payload CRC fails, or whose pixel count does not match its record, makes its
  file resubmitted;
* a device silent for ``timeout`` seconds while work is in flight: the same as a refusal
  (a frame whose header was destroyed gets no answer at all); if it does not answer a ping
  either, :class:`DeviceUnreachable` names the files in flight;
* on a link that is not reliable, a file the device calls malformed is tried once more (a
  lost chunk looks like a malformed file); the second verdict stands;
* each file is tried at most ``retries + 1`` times, then reported as an error saying why.

On a link without flow control (a UART board) the :class:`FrameLink` paces the requests
(``pace``, see :mod:`dlforge.host.link.frame_link`): one data frame in the device at a
time, each followed by a barrier PING.  Voiding the attempts drops their frames not yet written; the
silence rule's ping, answered after everything written, also ends the wait for a barrier
whose answer was lost.
"""

import time
from bisect import insort
from collections import OrderedDict, deque

import numpy as np

from dlforge.rtl.jpeg.scaling import scale_word
from dlforge.rtl.jpeg.status import JpegStatus
from dlforge.rtl.link.jpeg_reply import END_FORMAT, END_RECORD
from dlforge.rtl.link.protocol import REQUEST_CLOSE, Opcode, Status, request_status
from dlforge.host.device.base import JpegReply, describe_status
from dlforge.host.device.jpeg_work import decode_work
from dlforge.host.link.errors import DeviceGone, DeviceUnreachable, LinkTimeout

__all__ = ["JpegScheduler"]

#: Files in flight per decoder core (links with flow control; the DMA link keeps 32 in all)
PER_CORE = 3
_STATUS = {int(s): s for s in JpegStatus}
# (plain ints: the frames' fields are, and the reply path runs for every file)
_JPEG_END, _BAD_CRC = int(Opcode.JPEG_END), int(Status.BAD_CRC)


class _Attempt:
    __slots__ = ("tag", "job", "pixels", "filled", "damaged", "end_frame", "placed", "core",
                 "credit", "replies")

    def __init__(self, tag, job, pixels=None, core=0, credit=0):
        self.tag, self.job = tag, job
        self.core, self.credit = core, credit       # its decoder core, the bytes it holds there
        # the image's array, allocated once when the host knows its size (no regrowing); on
        # the DMA link, the arena slot the engine writes into
        if pixels is None and job.pixel_bytes:
            pixels = np.empty(job.pixel_bytes, np.uint8)
        self.pixels = pixels
        self.filled = 0
        self.damaged = False
        self.end_frame = None               # the closer: its final frame, flagged
        self.replies = 0                    # reply frames seen: the next one's number
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
    __slots__ = ("index", "key", "data", "fast", "tries", "why", "pixel_bytes", "work",
                 "credit", "resize", "host_resize", "scale")

    def __init__(self, index, key, data, fast, size=None, credit=0, resize=None,
                 request=b"", scale=1):
        # resize: a Resize the device does (``request``: its bytes, which lead the file's),
        # or the host after a plain decode (``request`` empty); scale: the cores decode at
        # 1/scale (a scale word leads the file's bytes; ``size`` is the scaled one)
        self.index, self.key, self.fast = index, key, fast
        self.resize, self.host_resize = resize, resize is not None and not request
        self.scale = scale
        self.work = decode_work(data) if data else 0    # a core's clocks for it, estimated
        if request:
            size = resize.out_size
            self.work += len(request) / 4   # (read a word a clock)
            data = request + bytes(data)
        if scale > 1:
            data = scale_word(scale) + bytes(data)
        self.data = data
        self.pixel_bytes = size[0] * size[1] * 3 if size and size[0] and size[1] else 0
        self.credit = credit                # the bytes it takes in its core's input FIFO
        self.tries = 0
        self.why = None


def _longest_first(job):
    return -job.work


class JpegScheduler:
    """The JPEG files of one :class:`~dlforge.host.device.accelerator.AcceleratorDevice`:
    which file goes next to which core within its credit, the attempts in flight by tag, and
    their replies, retries and completion (see the module's docstring).  The device routes
    the replies of the files' tags here (``take_*``)."""

    def __init__(self, device, window=None):
        self.device = device
        self.link = device.link
        self.attempts = OrderedDict()       # tag -> _Attempt in flight
        self._finished = deque()            # (attempt, record bytes)
        self._refusals = 0
        #: files sent again after a damaged or lost frame
        self.resubmissions = 0
        #: seconds the host has spent in decode waiting for the link (the rest of its time
        #: there is the host's own work: what dlforge infer --images counts as host time)
        self.decode_wait_s = 0.0
        #: the DMA engine holds each file back until its core has room (host/link/dma.py): the
        #: host posts files ahead of the credit and sleeps
        self._engine_credit = self.link.frames_files
        if self._engine_credit:
            self.link.set_credit(device.input_fifo)
        # Before 0.2 the device dealt files to its cores in turn itself and took each file's
        # frames back to back: no interleaving there (the core bits are ignored).
        self._interleave = (device.version & 0xFFFF) >= 2
        cores = device.cores
        self._outstanding = [0] * cores                 # per core: bytes of unfinished files
        self._work = [0.0] * cores                      # ... their clocks, estimated
        self._queued = [0] * cores                      # ... how many
        # Three files a core: one decoding, the next in its FIFO, and one on the way while
        # the host hears of the first's end (the credit rule may still hold files back).
        # DMA: 32 files in flight, so that the host can sleep until half of them are done:
        # one wake-up per 16 images (each costs some 80 us of CPU on a VM; host/link/dma.py);
        # the engine holds each file back until its core has room (the credit rule there).
        dma = self.link.frames_files
        self.window = window or (max(32, PER_CORE * cores) if dma else PER_CORE * cores)
        self._per_core = None if dma or window else PER_CORE
        #: files read ahead of the ones in flight, from which the host picks the next
        self.lookahead = max(16, 2 * self.window)

    # ---- replies in (routed by the device) ------------------------------------------------
    def take_reply(self, opcode, status, tag, payload, seq):
        """A ``JPEG_DATA`` or ``JPEG_END`` reply (a voided attempt's is ignored)."""
        attempt = self.attempts.get(tag)
        if attempt is None:
            return
        # a file's reply frames count 0, 1, 2, ...: a gap is a frame lost to a destroyed
        # header (on the DMA link the engine checks the placed ones, and JPEG_END comes
        # after as many frames as the pixels fill)
        if attempt.placed:
            want = -(-attempt.filled // self.device.reply_payload) if attempt.filled else 0
        else:
            want = attempt.replies
        attempt.replies += 1
        if status == _BAD_CRC or seq != want & 0xFF:
            attempt.damaged = True
        elif opcode == _JPEG_END:
            self._finished.append((attempt, bytes(payload)))
        else:
            attempt.add(payload)

    def take_refusal(self, tag):
        """The device refused a file's frame sent under ``tag``."""
        # (a refusal of an attempt already voided was dealt with by that void: the GAP a
        # refused frame leaves on its core names the voided file's tag, and arrives late)
        if tag in self.attempts:
            self._refusals += 1

    def take_other(self, status, tag):
        """Another opcode's frame under a file's tag: it counts, and may be damaged."""
        attempt = self.attempts.get(tag)
        if attempt is None:
            return                              # a voided attempt's late reply
        attempt.replies += 1
        if status == Status.BAD_CRC:
            attempt.damaged = True

    def take_placed(self, tag, nbytes, damaged):
        """The DMA engine placed ``nbytes`` of ``tag``'s pixels (its JPEG_END frame follows)."""
        attempt = self.attempts.get(tag)
        if attempt is None or not attempt.placed:
            return                              # a voided attempt's
        attempt.filled = nbytes
        attempt.damaged |= damaged

    # ---- the files ----------------------------------------------------------------------------
    def _credit(self, length):
        """The bytes a file of ``length`` bytes takes in its core's input FIFO, counted as
        the link carries them (each chunk padded to whole beats): never less than the FIFO
        holds for it."""
        step, w = self.device.max_payload, self.device.link_bytes
        full, rest = divmod(length, step)
        return full * (step + -step % w) + rest + -rest % w

    def _choose(self, candidates):
        """``(job, core)`` to send next, or None while no core may take any of them.

        The core is the one that will be free first (the least estimated work in flight,
        :func:`~dlforge.host.device.jpeg_work.decode_work`), among those below ``PER_CORE`` files;
        the file, the first of ``candidates`` (longest first) whose bytes fit in its input FIFO
        beside what it holds (an idle core takes any; one core takes anything, since a full
        FIFO then holds up nobody else).  Longest first, from a few dozen files read ahead:
        at the end of a batch the short files are left to fill the gaps, so that the cores
        finish together (64 photos on four cores: 0.91 of the cores' time with the files in
        their order, 0.97 so, in a model of this rule; docs/runtime.md).  On the DMA link
        the engine applies the FIFO rule itself, so every file is placed on a core at once.
        """
        fifo, cores = self.device.input_fifo, self.device.cores
        if self._engine_credit:
            fifo = 0                        # the DMA engine holds files back itself
        for core in sorted(range(cores), key=self._work.__getitem__):
            if self._per_core and self._queued[core] >= self._per_core:
                continue
            held = self._outstanding[core]
            for job in candidates:          # (longest first)
                if cores == 1 or not held or not fifo or held + job.credit <= fifo:
                    return job, core
                # (else it would stall the link until this core drains)
        return None

    def _submit(self, job, core):
        """Start an attempt of ``job`` on ``core`` and take its credit; returns its frames
        (opcode, tag, chunk, status) for the caller to queue, interleaved with others' (on
        the DMA link the engine frames the file: it is posted here, and nothing returned)."""
        tag = self.device.data_tag()
        status = request_status(job.fast, core, resize=job.resize is not None
                                and not job.host_resize, scale=job.scale > 1)
        credit = job.credit
        self._outstanding[core] += credit
        self._work[core] += job.work
        self._queued[core] += 1
        max_payload = self.device.max_payload
        if self.link.frames_files:
            # DMA: the pixels go straight into an arena slot, the engine frames the file
            pixels = self.link.place(tag, job.pixel_bytes) if job.pixel_bytes else None
            attempt = _Attempt(tag, job, pixels, core, credit)
            attempt.placed = pixels is not None
            # (one core: nothing to hold back for, as the host's own rule; the FIFO's back
            # pressure lets the next file follow at once)
            seq, tail = self.link.post_file(tag, job.data, status, max_payload,
                                            core=core if self.device.cores > 1 else None,
                                            credit=credit)
            attempt.end_frame = (Opcode.JPEG_END, tag, tail, status | REQUEST_CLOSE, seq)
            self.attempts[tag] = attempt
            return []
        attempt = _Attempt(tag, job, None, core, credit)
        data, step = memoryview(job.data), max_payload
        frames = []
        for n, offset in enumerate(range(0, len(data), step)):
            last = offset + step >= len(data)
            chunk = data[offset:offset + step]
            frames.append((Opcode.JPEG_END if last else Opcode.JPEG_DATA, tag, chunk, status,
                           n & 0xFF))
        opcode, _, chunk, _, n = frames[-1]
        attempt.end_frame = (opcode, tag, chunk, status | REQUEST_CLOSE, n)
        self.attempts[tag] = attempt
        return frames

    def _queue_files(self, batch):
        """Queue the frames of files just submitted (``batch``: (core, frames) in submission
        order) a chunk of each core's in turn, so that every core gets its first bytes early
        instead of waiting behind another core's whole file; a core's own files stay back to
        back, in order (its FIFO takes one file after another)."""
        if not self._interleave:
            for _, frames in batch:
                for frame in frames:
                    self.link.queue(*frame)
            return
        per_core = {}
        for core, frames in batch:
            per_core.setdefault(core, deque()).extend(frames)
        lanes = deque(per_core.values())
        while lanes:
            frames = lanes.popleft()
            self.link.queue(*frames.popleft())
            if frames:
                lanes.append(frames)

    def _retire(self, attempt):
        """The attempt is over (finished, or to be resubmitted): its core's credit is free."""
        del self.attempts[attempt.tag]
        self._outstanding[attempt.core] -= attempt.credit
        self._work[attempt.core] -= attempt.job.work
        self._queued[attempt.core] -= 1

    def _void_all(self, why, retry):
        """Drop every attempt in flight (late replies are ignored), close the packets that a
        lost final frame may have left open, free every core's credit, and put the files back
        in front of the queue."""
        attempts = list(self.attempts.values())
        self.attempts.clear()
        cores = self.device.cores
        self._outstanding = [0] * cores         # (the FIFOs may still hold voided bytes)
        self._work = [0.0] * cores
        self._queued = [0] * cores
        self.link.abandon()                 # paced: their frames not yet written
        for attempt in attempts:
            if attempt.placed:
                self.link.unplace(attempt.tag)      # DMA: the engine stops writing there
        # The closers: a refused final frame leaves its core's packet open, and only a final
        # frame to that core ends it; the last file sent to each core with files in flight
        # (a core with none has answered every final frame it was sent).
        closers = {}
        for attempt in attempts:
            closers[attempt.core] = attempt.end_frame
        for core in sorted(closers):
            self.link.queue(*closers[core])
        for attempt in reversed(attempts):
            job = attempt.job
            job.why = why
            retry.appendleft(job)

    def decode(self, jobs):
        """:meth:`~dlforge.host.device.base.Device.decode_jpegs` on the device's cores."""
        device = self.device
        if not device.cores:
            # (a small FPGA carrying the engine or the link alone: JPEG frames would only be
            # refused as unknown opcodes, which looks like a damaged link)
            raise ValueError(f"{device.name} has no JPEG decoder cores (it was built with "
                             "cores=0); decode on a board with a decoder, or on the cpu")
        jobs = iter(jobs)
        retry = deque()
        results = {}
        ahead = []                              # files read and not yet sent, longest first
        index = 0                               # next job number to take
        emit = 0                                # next result to hand back
        exhausted = False
        while True:
            # top up the window, as far as the cores' credit allows
            batch = []
            held_back = False                   # a file waits for a core's room
            while len(self.attempts) < self.window:
                while retry and retry[0].tries >= device.retries:
                    job = retry.popleft()
                    results[job.index] = JpegReply(
                        job.key, JpegStatus.TRUNCATED,
                        error=f"link: gave up after {job.tries + 1} tries ({job.why})")
                while not exhausted and len(ahead) < self.lookahead:
                    try:
                        key, data, fast, *rest = next(jobs)
                    except StopIteration:
                        exhausted = True
                        break
                    if data is None:
                        results[index] = JpegReply(key, JpegStatus.OK)
                    elif not len(data):
                        results[index] = JpegReply(key, JpegStatus.NO_SOI, error="empty file")
                    else:
                        job = self._job(index, key, data, fast, *rest)
                        if isinstance(job, JpegReply):
                            results[index] = job
                        else:
                            insort(ahead, job, key=_longest_first)
                    index += 1
                # files sent before and voided go first, in their order
                candidates = [retry[0]] if retry else ahead
                if not candidates:
                    break
                choice = self._choose(candidates)
                if choice is None:
                    held_back = True            # until a core's JPEG_END frees its room
                    break
                job, core = choice
                if retry:
                    retry.popleft()
                    job.tries += 1
                    self.resubmissions += 1
                else:
                    ahead.remove(job)
                frames = self._submit(job, core)
                if frames:
                    batch.append((core, frames))
            if batch:
                self._queue_files(batch)
            while emit in results:
                yield results.pop(emit)
                emit += 1
                # silence counts only while the host waits, not while its consumer is busy
                self.link.last_activity = time.monotonic()
            waiting = retry or ahead
            if exhausted and not self.attempts and not waiting and emit == index:
                return
            if not self.attempts and not waiting:
                continue
            # sleep until bytes move or the silence deadline: no periodic wake-ups (and not
            # at all when replies came in while the host was away: another exchange on the
            # link, e.g. the engine's, pumped them)
            if not (self._finished or self._refusals):
                self._wait_for_replies(held_back, exhausted, waiting)
            if self._refusals:
                self._refusals = 0
                self._void_all("the device refused a damaged frame", retry)
            while self._finished:
                attempt, record = self._finished.popleft()
                if self.attempts.get(attempt.tag) is not attempt:
                    continue
                self._retire(attempt)
                self._finish(attempt, record, results, retry)
            if self.attempts and time.monotonic() - self.link.last_activity > device.timeout:
                self._silent(retry)

    def _wait_for_replies(self, held_back, exhausted, waiting):
        """decode's sleep: until bytes move or the silence deadline."""
        try:
            quiet = time.monotonic() - self.link.last_activity
            # DMA links coalesce wake-ups: with every file submitted, wake when all are
            # done; with the window full, when half of it is
            if held_back:
                self.link.wake_ends = 1     # (a file waits for the next JPEG_END)
            elif exhausted and not waiting:
                self.link.wake_ends = max(1, len(self.attempts))
            elif len(self.attempts) >= self.window:
                self.link.wake_ends = max(1, self.window // 2)
            else:
                self.link.wake_ends = 1
            waited = time.perf_counter()
            self.link.pump(max(0.001, self.device.timeout - quiet))
            self.decode_wait_s += time.perf_counter() - waited
        except DeviceGone as exc:
            names = ", ".join(str(a.job.key) for a in self.attempts.values())
            raise DeviceGone(f"{exc}; files in flight: {names or 'none'}") from None

    def _job(self, index, key, data, fast, size=None, resize=None, scale=1):
        """A :class:`_Job`, or the JpegReply of a resize that cannot apply to the file.

        A resize goes to the device when its cores have a resampler that can do it (taps,
        limits); else the device decodes and the host resizes (the same pixels: both are
        Pillow's).  A box outside the image, or an empty output, is refused here.  A scale
        other than 1 needs cores that scale (``scales``): ``size`` is then the scaled size,
        and the resize applies to the scaled image."""
        device = self.device
        if scale not in device.scales:
            raise ValueError(f"{device.name} decodes at "
                             f"1/{', 1/'.join(map(str, device.scales))}, not 1/{scale}")
        request = b""
        if resize is not None:
            try:
                if size and size[0] and size[1]:
                    resize.check(*size)
                elif min(resize.size) < 1 or min(resize.out_size) < 1:
                    raise ValueError(f"output size {resize.out_size} must be positive")
            except ValueError as exc:
                return JpegReply(key, JpegStatus.BAD_RESIZE, error=f"BAD_RESIZE: {exc}")
            if device.resample_taps:
                try:
                    request = resize.request(device.resample_taps, device.resample_max)
                except ValueError:
                    request = b""           # beyond the device's resampler: the host's job
        head = len(request) + (len(scale_word(scale)) if scale > 1 else 0)
        return _Job(index, key, data, fast, size, self._credit(len(data) + head),
                    resize, request, scale)

    def _finish(self, attempt, record, results, retry):
        job = attempt.job
        if len(record) != END_RECORD:
            attempt.damaged = True
            status = width = height = cycles = 0
        else:
            status, _, width, height, cycles, _ = END_FORMAT.unpack(record)   # (parse_end)
        status = _STATUS.get(status, JpegStatus.BAD_FRAME_HEADER)
        if status == JpegStatus.OK and attempt.filled != width * height * 3:
            attempt.damaged = True
        if attempt.damaged:
            job.why = "a reply arrived damaged"
            retry.append(job)
            return
        if status == JpegStatus.OK:
            pixels = attempt.pixels
            if len(pixels) != attempt.filled:
                pixels = pixels[:attempt.filled]
            pixels = pixels.reshape(height, width, 3)
            if job.host_resize:
                try:
                    pixels = job.resize.apply(pixels)
                except ValueError as exc:
                    results[job.index] = JpegReply(job.key, JpegStatus.BAD_RESIZE, width,
                                                   height, cycles, error=f"BAD_RESIZE: {exc}")
                    return
                height, width = pixels.shape[:2]
            resized = None if job.resize is None else "host" if job.host_resize else "device"
            results[job.index] = JpegReply(job.key, status, width, height, cycles,
                                           pixels=pixels, resized=resized)
            return
        if status.malformed and not self.device.transport.reliable and job.tries == 0 \
                and job.why is None:
            job.why = f"the device found it malformed ({status.name}); trying once more"
            retry.append(job)
            return
        results[job.index] = JpegReply(job.key, status, width, height, cycles,
                                       error=describe_status(status))

    def _silent(self, retry):
        device = self.device
        names = ", ".join(str(a.job.key) for a in self.attempts.values())
        # Paced: the frames still waiting (for a barrier answer that may have been lost) are
        # dropped, so the ping goes out now; they belong to attempts voided below.
        self.link.abandon()
        try:
            device.ping(timeout=min(device.timeout, 5.0))
        except LinkTimeout:
            raise DeviceUnreachable(f"{device.name} stopped answering (silent for "
                                    f"{device.timeout:g} s and no answer to a ping); files in "
                                    f"flight: {names}") from None
        # The ping was answered after everything written before it: no barrier is pending.
        self.link.abandon(barrier=True)
        self._void_all(f"no reply within {device.timeout:g} s", retry)
        self.link.last_activity = time.monotonic()
