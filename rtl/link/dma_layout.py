"""The shared-memory DMA link's layout: defined once here, imported by the host
(:mod:`dlforge.host.link.dma`) and written as a C header for the simulated board's DMA engine
(:func:`c_header`, compiled into ``sim/board/main.cpp``; the frames' own contract comes
from :func:`dlforge.rtl.link.protocol.c_header`).  A contract between the host and
the board's DMA engine, so it lives with the other link contracts under ``rtl/link``: the
board's side (``sim/``) must not import ``host``.

The link models a descriptor DMA engine of a PCIe card: the host never copies an image and
never frames a file.  It places a JPEG file's bytes in host memory and posts one descriptor;
the engine fetches them, cuts them into request frames with their CRCs and feeds the device.
Before that, the host posts where the file's decoded pixels go; the engine writes the
payloads of the device's ``JPEG_DATA`` replies for that tag straight there (checking each
payload's CRC-32) and tells the host how much it placed.  Every other reply frame reaches the
host as it left the device, through a record ring.  See docs/runtime.md ("The DMA link").

One file (``/dev/shm/...``), mapped by both sides, holds five regions: a control page,
the descriptor ring, the request-bytes ring, the record ring and the image arena.  The four
indices are free-running 64-bit counts, each written by one side only; each sits on its own
cache line.  The host is Python: its stores reach memory in program order and its loads are
not reordered with each other on x86-64 (TSO), which is what the two rings need.
"""

import struct

__all__ = ["MAGIC", "VERSION", "CONTROL_BYTES", "Field", "DESCRIPTOR", "RECORD_HEADER",
           "Desc", "Rec", "DEFAULT_SIZES", "region_offsets", "c_header", "PLACED"]

MAGIC = b"DLFDMA\x00\x01"
VERSION = 2
CONTROL_BYTES = 4096


class Field:
    """Byte offsets in the control page."""
    MAGIC = 0                   # 8 bytes
    VERSION = 8                 # u32
    DESC_OFF = 16               # u64: the descriptor ring
    DESC_COUNT = 24             # u32: its entries (a power of two)
    SRC_OFF = 32                # u64: the request-bytes ring (the host's bytes for the device)
    SRC_SIZE = 40               # u64
    REC_OFF = 48                # u64: the record ring (what the engine tells the host)
    REC_SIZE = 56               # u64
    ARENA_OFF = 64              # u64: the image arena (where pixels are placed)
    ARENA_SIZE = 72             # u64
    BOARD_PID = 80              # u32: the simulated board's process
    DESC_HEAD = 128             # u64, host: descriptors posted
    DESC_TAIL = 192             # u64, engine: descriptors done (their bytes may be reused)
    REC_HEAD = 256              # u64, engine: record bytes written
    REC_TAIL = 320              # u64, host: record bytes consumed
    PROGRESS = 384              # u64, engine: bytes moved either way (the host's sign of life)
    WAKE_ENDS = 448             # u64, host: ring the done bell once this many JPEG_END frames
                                # are unread (0 or 1: at once); any other frame rings at once
    SLEEPING = 512              # u64, engine: 1 while it may sleep in poll(); the host rings
                                # the bell only then (the engine's sleep is 20 ms at most)
    WANT_SPACE = 576            # u64, host: 1 while descriptors wait for room in the rings;
                                # the engine then rings the done bell when it frees some
    HOST_PID = 640              # u64, host: its process, for FILE_AT's reads of its memory
    BY_ADDRESS = 704            # u64, engine: 0 not probed, 1 it can read the host's memory
                                # (process_vm_readv, as a card reads host RAM), 2 it cannot
    CREDIT = 768                # u64, host: the bytes each core's input FIFO holds; the engine
                                # holds a file with a lane back until its core has room for it
                                # (0: no file is held back)


class Desc:
    """Descriptor kinds (``DESCRIPTOR``: kind, opcode, status, seq, tag, lane, chunk, length,
    offset, capacity; 32 bytes; ``seq``: a FILE's first frame number).

    ``lane`` (FILE and FILE_AT): 0, the file goes to the device in posting order; ``c + 1``,
    it is for core ``c`` and the engine holds it back, behind core ``c``'s earlier files,
    until that core's input FIFO has room for ``capacity`` bytes (its credit: the bytes it
    takes there as the link carries them; 0 for the second and later parts of a long file,
    which follow their first part).  The room comes back with the file's JPEG_END reply.
    So the host can post many files ahead and sleep while the engine feeds each core as it
    empties (a card's multi-queue DMA engine with per-queue credit); the request ring's
    bytes and the descriptors then complete out of order, and ``DESC_TAIL`` counts those
    done below the oldest one still held."""
    BYTES = 1       # ``length`` bytes at ``offset`` of the request ring go to the device as-is
    FILE = 2        # the same bytes cut into frames of ``chunk`` bytes: JPEG_DATA, the last
                    # one ``opcode`` (JPEG_END, or JPEG_DATA for a part of a long file)
    PLACE = 3       # JPEG_DATA payloads tagged ``tag`` go to ``offset`` of the arena, at most
                    # ``capacity`` bytes; until that tag's JPEG_END or an UNPLACE
    UNPLACE = 4     # forget ``tag``'s placement; the engine answers with an UNPLACED record
    FILE_AT = 5     # FILE, but ``offset`` is an address in the host's memory (HOST_PID): the
                    # engine reads the file where it lies, the host copies nothing
    PROBE = 6       # can the engine read the host's memory?  ``offset``: an address holding
                    # the 8-byte value ``capacity``; the answer goes to BY_ADDRESS
    DROP_HELD = 7   # the host voided its files in flight: the engine drops the files it
                    # holds back (never sent; their descriptors done) and counts every core's
                    # FIFO as empty again (as the host does; voided bytes may still drain)


class Rec:
    """Record kinds (``RECORD_HEADER``: kind, length; the body follows, padded to 8)."""
    PAD = 0         # skip to the ring's start
    BYTES = 1       # reply bytes as the device sent them (frames, for the host's parser)
    PLACED = 2      # ``PLACED``: tag, flags, bytes placed; before that tag's JPEG_END frame
    UNPLACED = 3    # ``PLACED`` with 0 bytes: the placement is gone, the memory is the host's


DESCRIPTOR = struct.Struct("<BBBBHHIIQQ")
RECORD_HEADER = struct.Struct("<II")
PLACED = struct.Struct("<HHI")          # tag, flags, bytes placed
FLAG_BAD_CRC = 1                        # a placed payload failed its CRC-32
FLAG_OVERFLOW = 2                       # more bytes came than the capacity (the rest dropped)
assert DESCRIPTOR.size == 32

#: Region sizes (bytes; the descriptor count in entries).  The host maps every page up front
#: (a first touch costs some 4 us on a VM: 500 of them per 2 MB image), so all of it is
#: memory.
DEFAULT_SIZES = {"desc_count": 4096, "src_size": 8 << 20, "rec_size": 4 << 20,
                 "arena_size": 256 << 20}


def region_offsets(desc_count, src_size, rec_size, arena_size):
    """(desc_off, src_off, rec_off, arena_off, file size), each region page-aligned."""
    def up(n):
        return (n + 4095) & ~4095
    desc = CONTROL_BYTES
    src = up(desc + desc_count * DESCRIPTOR.size)
    rec = up(src + src_size)
    arena = up(rec + rec_size)
    return desc, src, rec, arena, up(arena + arena_size)


def c_header():
    """The same layout for the harness (``dma_layout.h``)."""
    lines = ["// Generated from dlforge/rtl/link/dma_layout.py: do not edit.", "#pragma once",
             "#include <cstdint>",
             "namespace dma {",
             f"constexpr char MAGIC[8] = {{{', '.join(str(b) for b in MAGIC)}}};",
             f"constexpr uint32_t VERSION = {VERSION};",
             f"constexpr uint64_t CONTROL_BYTES = {CONTROL_BYTES};"]
    for cls, prefix in ((Field, "F_"), (Desc, "D_"), (Rec, "R_")):
        for name, value in vars(cls).items():
            if not name.startswith("_") and isinstance(value, int):
                lines.append(f"constexpr uint64_t {prefix}{name} = {value};")
    lines += [f"constexpr uint32_t FLAG_BAD_CRC = {FLAG_BAD_CRC};",
              f"constexpr uint32_t FLAG_OVERFLOW = {FLAG_OVERFLOW};",
              "#pragma pack(push, 1)",
              "struct Descriptor { uint8_t kind, opcode, status, seq; uint16_t tag, lane; "
              "uint32_t chunk, length; uint64_t offset, capacity; };",
              "struct RecordHeader { uint32_t kind, length; };",
              "struct Placed { uint16_t tag, flags; uint32_t bytes; };",
              "#pragma pack(pop)",
              f"static_assert(sizeof(Descriptor) == {DESCRIPTOR.size}, \"the descriptor layout\");",
              f"static_assert(sizeof(Placed) == {PLACED.size}, \"the PLACED record\");"]
    for key, value in DEFAULT_SIZES.items():
        lines.append(f"constexpr uint64_t DEFAULT_{key.upper()} = {value};")
    lines.append("}  // namespace dma")
    return "\n".join(lines) + "\n"
