"""The DMA link (``dma:PATH``): shared memory and a descriptor DMA engine, so that the host
neither copies images nor frames files (DLBooster's point: the host must not become the
bottleneck).

The layout, the descriptor and record kinds: :mod:`dlforge.rtl.link.dma_layout`.  The other side
is the simulated board's DMA engine (``sim/board/dma_engine.h``, ``dlforge sim-board --link
dma``), a model of what a PCIe card's DMA engine does.  On the host:

* :meth:`DmaLink.post_file` posts one descriptor per file: ``FILE_AT`` (the engine reads the
  bytes where they lie in this process, as a card reads host RAM; probed when the link
  opens) or, where the engine may not read our memory, ``FILE`` (copied once into the
  request ring); the engine cuts the file into frames and computes their CRCs.  A file
  posted for a core waits in the engine until that core's input FIFO has room for it
  (:meth:`DmaLink.set_credit`), so the host posts files well ahead and sleeps;
* :meth:`DmaLink.place` reserves room in the image arena for a tag's pixels and returns the
  NumPy array over it: the engine writes the decoded payloads there, and the host only learns
  how many bytes arrived (a ``PLACED`` record before that tag's ``JPEG_END`` frame);
* control requests and engine words are ordinary frames (:meth:`DmaLink.queue`), and every
  reply that is not placed comes back as the device sent it, parsed by :class:`FrameLink`.

An arena slot belongs to its array: it returns to the free list when the last array over it
is garbage (and the engine is done with it).  When the arena is full, :meth:`place` returns
None and the pixels come through the record ring instead (one copy, as on the other links).
"""

import bisect
import ctypes
import mmap
import os
import select
import struct
import time
from collections import deque

import numpy as np

from ...rtl.link.dma_layout import (CONTROL_BYTES, DESCRIPTOR, FLAG_BAD_CRC, FLAG_OVERFLOW, MAGIC,
                                    PLACED, RECORD_HEADER, VERSION, Desc, Field, Rec)
from ...rtl.link.protocol import Opcode
from .frame_link import FrameLink
from dlforge.host.link.errors import DeviceGone, DeviceUnreachable
from dlforge.host.link.transport import Transport

__all__ = ["DmaTransport", "DmaLink", "Arena"]

_PAGE = 4096


class Arena:
    """First-fit allocator of page-aligned slots in the image arena (offsets in the arena)."""

    def __init__(self, size):
        self.size = size
        self.free = [(0, size)]                 # sorted (offset, size), coalesced
        self.used = 0

    def alloc(self, nbytes):
        need = (max(nbytes, 1) + _PAGE - 1) & ~(_PAGE - 1)
        for k, (off, size) in enumerate(self.free):
            if size >= need:
                if size == need:
                    del self.free[k]
                else:
                    self.free[k] = (off + need, size - need)
                self.used += need
                return off, need
        return None

    def release(self, off, size):
        self.used -= size
        k = bisect.bisect(self.free, (off, 0))
        if k < len(self.free) and off + size == self.free[k][0]:
            size += self.free.pop(k)[1]
        if k and self.free[k - 1][0] + self.free[k - 1][1] == off:
            off, size = self.free[k - 1][0], self.free[k - 1][1] + size
            k -= 1
            del self.free[k]
        self.free.insert(k, (off, size))


def _numpy_address(data):
    return np.frombuffer(data, np.uint8).ctypes.data


def _bytes_offset():
    """Where a bytes object's first byte lies from its ``id`` (CPython: the object's
    address), found from two objects; None where ``id`` is not an address."""
    offsets = {_numpy_address(b) - id(b) for b in (b"probe.", bytes(4096))}
    return offsets.pop() if len(offsets) == 1 else None


_BYTES_AT = _bytes_offset()


def _address(data):
    """The address of the first byte of ``data`` (a memoryview of a file's bytes, as
    post_file passes them): for a view of a whole bytes object, from the object's address
    (a file that goes in one part: nearly all of them), else through numpy (a microsecond
    and numpy's own code once per file)."""
    if _BYTES_AT is not None:
        whole = getattr(data, "obj", None)
        if type(whole) is bytes and len(whole) == data.nbytes:
            return id(whole) + _BYTES_AT
    return _numpy_address(data)


class _Slot:
    """The owner of an arena slot's bytes (mixed into a ctypes array type of its size): the
    base of the arrays over it, which gives the slot back when the last of them is gone."""

    def __del__(self):
        arena, off, size = self.slot
        arena.release(off, size)


class DmaTransport(Transport):
    """The shared file of a board's DMA engine (``dma:PATH``)."""
    reliable = True             # the engine checks the CRCs; PCIe's link has its own
    flow_control = True

    def __init__(self, path):
        self.name = f"dma:{path}"
        self.path = str(path)
        self.mm = self.arena_mm = None
        self.rfd = self.wfd = -1
        self.sleeps = 0                         # times the host slept on the done bell
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise DeviceUnreachable(f"no device at {self.name}: {exc.strerror} (is the "
                                    "simulated board running with --link dma?)") from None
        try:
            control = os.pread(fd, CONTROL_BYTES, 0)
            if control[Field.MAGIC:Field.MAGIC + 8] != MAGIC:
                raise DeviceUnreachable(f"{self.name} is not a dlforge DMA link (or not "
                                        "ready)")
            (version,) = struct.unpack_from("<I", control, Field.VERSION)
            if version != VERSION:
                raise DeviceUnreachable(f"{self.name} has DMA layout {version}, the host "
                                        f"{VERSION}")

            def q(off):
                return struct.unpack_from("<Q", control, off)[0]
            self.desc_off, self.src_off = q(Field.DESC_OFF), q(Field.SRC_OFF)
            self.src_size, self.rec_off, self.rec_size = q(Field.SRC_SIZE), \
                q(Field.REC_OFF), q(Field.REC_SIZE)
            self.arena_off, self.arena_size = q(Field.ARENA_OFF), q(Field.ARENA_SIZE)
            (self.desc_count,) = struct.unpack_from("<I", control, Field.DESC_COUNT)
            (self.board_pid,) = struct.unpack_from("<I", control, Field.BOARD_PID)
            # Every page mapped now (MAP_POPULATE), not on first touch: the rings in one
            # mapping, the arena (where images live on after the link) in another.
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self.mm = mmap.mmap(fd, self.arena_off, flags=flags)
            self.arena_mm = mmap.mmap(fd, self.arena_size, flags=flags,
                                      offset=self.arena_off)
        finally:
            os.close(fd)
        # the indices: aligned 8-byte loads and stores (ctypes), never torn
        self.index = {f: ctypes.c_uint64.from_buffer(self.mm, f)
                      for f in (Field.DESC_HEAD, Field.DESC_TAIL, Field.REC_HEAD,
                                Field.REC_TAIL, Field.PROGRESS, Field.WAKE_ENDS,
                                Field.SLEEPING, Field.WANT_SPACE, Field.HOST_PID,
                                Field.BY_ADDRESS, Field.CREDIT)}
        try:
            self.wfd = os.open(self.path + ".bell", os.O_WRONLY | os.O_NONBLOCK)
            self.rfd = os.open(self.path + ".done", os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.close()
            raise DeviceUnreachable(f"cannot open the doorbells of {self.name}: "
                                    f"{exc.strerror}") from None

    def ring(self):
        try:
            os.write(self.wfd, b"\1")
        except BlockingIOError:
            pass                                # a full pipe wakes the board all the same
        except OSError as exc:
            raise DeviceGone(f"{self.name}: the board's doorbell is gone ({exc.strerror})") \
                from None

    def wait_done(self, timeout):
        """Sleep until the engine writes records (or ``timeout`` seconds).  One sleep, not
        slices: on this kind of VM every wake-up costs some 80 us of CPU.  The board holds
        the only writer of the done pipe, so its death wakes us at once (POLLHUP)."""
        ready = select.poll()
        ready.register(self.rfd, select.POLLIN)
        self.sleeps += 1
        events = ready.poll(max(0, int(timeout * 1000)))
        if not events:
            return False
        if events[0][1] & select.POLLIN:
            try:
                os.read(self.rfd, 4096)
            except BlockingIOError:
                pass
            return True
        self.check_alive()
        raise DeviceGone(f"{self.name}: the board closed its end of the link")

    def check_alive(self):
        try:
            os.kill(self.board_pid, 0)
        except ProcessLookupError:
            raise DeviceGone(f"{self.name}: the board's process ({self.board_pid}) has "
                             "ended") from None

        except PermissionError:
            pass

    def frame_link(self, on_frame, on_placed=None, verify=None, pace=None):
        """The DMA link: the engine frames files (:meth:`DmaLink.post_file`) and writes
        pixels where the host placed them (``on_placed``); CRCs are the engine's."""
        return DmaLink(self, on_frame, on_placed)

    def close(self):
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                os.close(fd)
        self.rfd = self.wfd = -1
        self.index = {}
        for mm in (self.mm, self.arena_mm):
            if mm is not None:
                try:
                    mm.close()
                except BufferError:
                    pass    # images still alive over the arena: the mapping goes with them
        self.mm = self.arena_mm = None


class DmaLink(FrameLink):
    """:class:`FrameLink`'s interface over the DMA link, plus files and placement."""
    frames_files = True

    def __init__(self, transport, on_frame, on_placed, max_reply=1 << 20):
        super().__init__(transport, on_frame, max_reply=max_reply, verify=False, pace=False)
        t = transport
        self.on_placed = on_placed
        self.mm, self.mv = t.mm, memoryview(t.mm)
        self.posts = deque()                # descriptors not yet in the ring (it was full)
        self.desc_head = t.index[Field.DESC_HEAD].value
        self.rec_tail = t.index[Field.REC_TAIL].value
        self.src_head = 0                   # request-ring bytes handed out (free-running)
        self.src_tail = 0                   # ... and given back
        self.src_inflight = deque()         # (descriptor number, src_head after it)
        self.arena = Arena(t.arena_size)
        self.held = {}                      # tag -> array the engine may still write
        # slot size -> its ctypes array type (a _Slot), kept: ctypes keeps array types only
        # while an instance lives, and making one again costs some 70 us (once a batch's
        # images were gone, the next batch's first image paid it)
        self.slot_types = {}
        self.placed = self.unplaced = self.arena_full = self.ring_full = 0
        self.records = 0
        self.progress = 0
        #: sleep until this many JPEG_END frames are unread (interrupt coalescing; the JPEG
        #: scheduler sets it from its window); any other frame wakes the host at once
        self.wake_ends = 1
        #: whether the engine reads files where they lie in this process (FILE_AT) instead of
        #: from the request ring; probed once
        self.by_address = self._probe()

    def _probe(self, timeout=2.0):
        """Ask the engine to read 8 bytes of this process's memory (a card reading host RAM);
        where it cannot (another user, a sandbox, Yama), files go through the request ring."""
        t = self.transport
        t.index[Field.HOST_PID].value = os.getpid()
        try:                                    # Yama: let the board read us (its parent)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(0x59616D61, t.board_pid, 0, 0, 0)        # PR_SET_PTRACER
        except (OSError, AttributeError):
            pass
        value = int.from_bytes(os.urandom(8), "little")
        cell = ctypes.c_uint64(value)
        self.posts.append((Desc.PROBE, 0, 0, 0, 0, (ctypes.addressof(cell), value), 0, 0, 0))
        self._post()
        t.ring()
        deadline = time.monotonic() + timeout
        while not t.index[Field.BY_ADDRESS].value and time.monotonic() < deadline:
            time.sleep(0.002)
        return t.index[Field.BY_ADDRESS].value == 1

    # ---- posting ------------------------------------------------------------------------
    # Posts wait in ``posts`` until the next :meth:`pump`, which writes them all and rings the
    # bell once (and only if the engine sleeps: see ``SLEEPING``).
    # A post: (kind, opcode, status, tag, chunk, what, seq, lane, credit).
    def queue(self, opcode, tag, payload=b"", status=0, seq=0):
        """One frame, framed here (control requests, engine words, a file's closer)."""
        frame = b"".join(self._frame(opcode, tag, payload, status, seq))
        self.posts.append((Desc.BYTES, 0, 0, 0, 0, frame, 0, 0, 0))

    def set_credit(self, fifo_bytes):
        """The bytes each core's input FIFO holds: the engine holds a file posted for a core
        (:meth:`post_file`'s ``core``) until the core has room for its ``credit``, and gets
        the room back with the file's JPEG_END reply (0: no file is held back)."""
        self.transport.index[Field.CREDIT].value = max(0, int(fifo_bytes))

    def post_file(self, tag, data, status, chunk, core=None, credit=0):
        """A file's frames: the engine cuts ``data`` into ``chunk``-byte JPEG_DATA frames, the
        last one JPEG_END (a long file goes as several descriptors).  With ``core``, the
        engine holds the file back until that core has room for ``credit`` bytes, behind the
        core's earlier files (:meth:`set_credit`); without, it goes in posting order.
        Returns the last frame's (number, payload): the file's closer."""
        data = memoryview(data)
        quarter = self.transport.src_size // 4         # parts of whole frames, if they fit
        part = quarter // chunk * chunk or quarter
        seq = 0
        for start in range(0, max(len(data), 1), part):
            piece = data[start:start + part]
            last = start + part >= len(data)
            opcode = Opcode.JPEG_END if last else Opcode.JPEG_DATA
            kind = Desc.FILE_AT if self.by_address else Desc.FILE
            # (the engine numbers the part's frames on from the frames before it; the later
            # parts of a file follow the first without credit of their own)
            lane = 0 if core is None else core + 1
            self.posts.append((kind, opcode, status, tag, chunk, piece, seq & 0xFF, lane,
                               max(1, credit) if lane and not start else 0))
            frames = max(1, -(-len(piece) // chunk))
            seq += frames
        return (seq - 1) & 0xFF, piece[(frames - 1) * chunk:]

    def place(self, tag, nbytes):
        """An array of ``nbytes`` in the arena where the engine puts ``tag``'s pixels, or
        None when the arena is full."""
        slot = self.arena.alloc(nbytes)
        if slot is None:
            self.arena_full += 1
            return None
        off, size = slot
        kind = self.slot_types.get(size)
        if kind is None:
            kind = self.slot_types[size] = type("Slot", (_Slot, ctypes.c_uint8 * size), {})
        owner = kind.from_buffer(self.transport.arena_mm, off)
        owner.slot = self.arena, off, size
        array = np.frombuffer(owner, np.uint8, nbytes)
        self.held[tag] = array
        self.posts.append((Desc.PLACE, 0, 0, tag, 0, (off, nbytes), 0, 0, 0))
        self.placed += 1
        return array

    def unplace(self, tag):
        """The engine forgets ``tag``'s placement; its slot is freed once it confirms."""
        if tag in self.held:
            self.posts.append((Desc.UNPLACE, 0, 0, tag, 0, None, 0, 0, 0))

    def _post(self):
        t, mm = self.transport, self.mm
        tail = t.index[Field.DESC_TAIL].value
        while self.src_inflight and self.src_inflight[0][0] < tail:
            self.src_tail = self.src_inflight.popleft()[1]     # (and FILE_AT's bytes let go)
        head, posted = self.desc_head, False
        posts, count, pack, at, step = self.posts, t.desc_count, DESCRIPTOR.pack_into, \
            t.desc_off, DESCRIPTOR.size
        while posts and head - tail < count:
            kind, opcode, status, tag, chunk, what, seq, lane, capacity = posts[0]
            offset = length = 0
            if kind == Desc.FILE_AT:
                # the engine reads the bytes where they lie: they stay alive (in src_inflight)
                # until it is done with the descriptor
                length = len(what)
                offset = _address(what) if length else 0
                self.src_inflight.append((head, self.src_head, what))
                self.bytes_out += length
            elif kind == Desc.PLACE or kind == Desc.PROBE:
                offset, capacity = what
            elif kind == Desc.BYTES or kind == Desc.FILE:
                length = len(what)
                offset = self._src_alloc(length)
                if offset is None:
                    self.ring_full += 1
                    break                               # the ring is full: later
                self.mv[t.src_off + offset:t.src_off + offset + length] = what
                self.src_inflight.append((head, self.src_head))
                self.bytes_out += length
            pack(mm, at + head % count * step, kind, opcode, status, seq, tag, lane, chunk,
                 length, offset, capacity)
            posts.popleft()
            head += 1
            posted = True
        if posted:
            self.desc_head = head
            t.index[Field.DESC_HEAD].value = head
            if t.index[Field.SLEEPING].value:
                t.ring()

    def _src_alloc(self, n):
        """An offset in the request ring for ``n`` contiguous bytes, or None (full)."""
        size = self.transport.src_size
        if n > size // 2:
            raise ValueError(f"a {n}-byte request does not fit the DMA link's ring")
        pos = self.src_head % size
        skip = size - pos if pos + n > size else 0      # no wrapping inside a request
        if self.src_head + skip + n - self.src_tail > size:
            return None
        self.src_head += skip + n
        return 0 if skip else pos

    @property
    def sending(self):
        return bool(self.posts)

    def abandon(self, barrier=False):
        """The host voids its files in flight: the engine drops the ones it still holds back
        and counts every core's FIFO as empty (nothing waits on a barrier here)."""
        if not barrier:
            self.posts.append((Desc.DROP_HELD, 0, 0, 0, 0, None, 0, 0, 0))
        return 0

    # ---- the loop -----------------------------------------------------------------------
    def pump(self, timeout=0.0):
        t = self.transport
        moved = False
        while True:
            if self.posts:
                before = len(self.posts)
                self._post()
                moved |= len(self.posts) != before
            if self._records():
                moved = True
                continue
            if moved or timeout <= 0:
                return moved
            if self.wake_ends > 1:
                t.index[Field.WAKE_ENDS].value = self.wake_ends
            if self.posts:                          # the rings are full: wake us when not
                t.index[Field.WANT_SPACE].value = 1
            woke = t.wait_done(timeout)
            if self.wake_ends > 1:
                t.index[Field.WAKE_ENDS].value = 0
            if self.posts:
                t.index[Field.WANT_SPACE].value = 0
            if not woke:
                # Unread records below the wake threshold, or bytes the engine moved (a long
                # image is placed without a record): signs of life for the silence rule.
                progress = t.index[Field.PROGRESS].value
                if self._records() or progress != self.progress:
                    self.progress = progress
                    self.last_activity = time.monotonic()
                    return True
                return False
            timeout = 0.0
            moved = True

    def _records(self):
        t, mm = self.transport, self.mm
        head = t.index[Field.REC_HEAD].value
        tail = self.rec_tail
        if tail == head:
            return False
        base, size = t.rec_off, t.rec_size
        while tail < head:
            pos = tail % size
            kind, length = RECORD_HEADER.unpack_from(mm, base + pos)
            if kind == Rec.PAD:
                tail += size - pos
                continue
            body = base + pos + RECORD_HEADER.size
            if kind == Rec.BYTES:
                self._take_bytes(body, body + length)
            elif kind in (Rec.PLACED, Rec.UNPLACED):
                tag, flags, placed = PLACED.unpack_from(mm, body)
                self.held.pop(tag, None)            # the engine is done with the slot
                if kind == Rec.UNPLACED:
                    self.unplaced += 1
                else:
                    self.on_placed(tag, placed, bool(flags & (FLAG_BAD_CRC | FLAG_OVERFLOW)))
            self.records += 1
            tail += (RECORD_HEADER.size + length + 7) & ~7
        self.rec_tail = tail
        t.index[Field.REC_TAIL].value = tail
        self.last_input = self.last_activity = time.monotonic()
        return True

    def _take_bytes(self, at, end):
        """A BYTES record's reply bytes (``mm[at:end]``) to the parser.  Where nothing waits
        in the buffer they are parsed where they lie: the record's whole frames (each file's
        JPEG_END, the control replies) are handed on from the ring itself, not copied, and
        only what is left (a frame cut across records) is copied into the buffer, to be
        parsed with the next record's bytes.  (on_frame copies what it keeps: the ring's
        bytes are the engine's again once REC_TAIL moves)"""
        if not self.end and not self._origin % self._width:     # nothing waits
            self.start = at
            try:
                self.parse_frames(self.mm, self.mv, end, self.max_reply, self.on_frame,
                                  self._on_barrier)
            finally:
                parsed, self.start = self.start - at, 0
                self.bytes_in += parsed
                self._origin = (self._origin + parsed) & 63
            at += parsed
            if at == end:
                return
        n = end - at
        if len(self.buffer) - self.end < n:
            self._compact()
        if len(self.buffer) - self.end < n:         # (records are at most 128 KiB)
            raise DeviceGone(f"{self.transport.name}: a {n}-byte record does not fit the "
                             "host's buffer")
        self.buffer[self.end:self.end + n] = self.mv[at:end]
        self.end += n
        self.bytes_in += n
        self._parse()
