"""The DMA link's layout is defined once: the C header the simulated board's engine compiles
says what the Python module says (checked by compiling it with the C++ compiler the board's
build uses; the frames' own header, protocol.c_header, is checked in test_protocol.py)."""

import shutil
import subprocess

import pytest

from dlforge.rtl.link.dma_layout import (CONTROL_BYTES, DEFAULT_SIZES, DESCRIPTOR, MAGIC,
                                         PLACED, RECORD_HEADER, VERSION, Desc, Field, Rec,
                                         c_header, region_offsets)


def test_indices_sit_on_their_own_cache_lines():
    shared = [Field.DESC_HEAD, Field.DESC_TAIL, Field.REC_HEAD, Field.REC_TAIL, Field.PROGRESS,
              Field.WAKE_ENDS, Field.SLEEPING, Field.WANT_SPACE, Field.HOST_PID,
              Field.BY_ADDRESS, Field.CREDIT]
    assert all(f % 64 == 0 for f in shared) and len({f // 64 for f in shared}) == len(shared)
    assert max(shared) + 8 <= CONTROL_BYTES


def test_regions_are_page_aligned_and_apart():
    desc, src, rec, arena, total = region_offsets(**DEFAULT_SIZES)
    assert [x % 4096 for x in (desc, src, rec, arena, total)] == [0] * 5
    assert desc >= CONTROL_BYTES
    assert src >= desc + DEFAULT_SIZES["desc_count"] * DESCRIPTOR.size
    assert rec >= src + DEFAULT_SIZES["src_size"] and arena >= rec + DEFAULT_SIZES["rec_size"]
    assert total >= arena + DEFAULT_SIZES["arena_size"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_the_c_header_matches(tmp_path):
    (tmp_path / "dma_layout.h").write_text(c_header())
    (tmp_path / "probe.cpp").write_text("""
#include "dma_layout.h"
#include <cstddef>
#include <cstdio>
int main() {
    using namespace dma;
    std::printf("%u %llu %zu %zu %zu\\n", VERSION, (unsigned long long)CONTROL_BYTES,
                sizeof(Descriptor), sizeof(RecordHeader), sizeof(Placed));
    std::printf("%zu %zu %zu %zu %zu %zu\\n", offsetof(Descriptor, tag), offsetof(Descriptor, lane),
                offsetof(Descriptor, chunk),
                offsetof(Descriptor, length), offsetof(Descriptor, offset),
                offsetof(Descriptor, capacity));
    std::printf("%llu %llu %llu %llu %llu %llu %llu\\n", (unsigned long long)F_DESC_HEAD,
                (unsigned long long)F_DESC_TAIL, (unsigned long long)F_REC_HEAD,
                (unsigned long long)F_REC_TAIL, (unsigned long long)F_PROGRESS,
                (unsigned long long)F_WAKE_ENDS, (unsigned long long)F_SLEEPING);
    std::printf("%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\\n",
                (unsigned long long)F_CREDIT, (unsigned long long)D_DROP_HELD,
                (unsigned long long)D_BYTES,
                (unsigned long long)D_FILE, (unsigned long long)D_PLACE,
                (unsigned long long)D_UNPLACE, (unsigned long long)R_PAD,
                (unsigned long long)R_BYTES, (unsigned long long)R_PLACED,
                (unsigned long long)R_UNPLACED);
    for (char c : MAGIC) std::printf("%d ", c);
    std::printf("\\n");
}
""")
    subprocess.run(["g++", "-std=c++17", "-o", "probe", "probe.cpp"], cwd=tmp_path, check=True)
    lines = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert lines[0].split() == [str(VERSION), str(CONTROL_BYTES), str(DESCRIPTOR.size),
                                str(RECORD_HEADER.size), str(PLACED.size)]
    # the Python struct "<BBBBHHIIQQ": tag at 4, lane 6, chunk 8, length 12, offset 16,
    # capacity 24
    assert lines[1].split() == ["4", "6", "8", "12", "16", "24"]
    assert lines[2].split() == [str(f) for f in (Field.DESC_HEAD, Field.DESC_TAIL,
                                                 Field.REC_HEAD, Field.REC_TAIL,
                                                 Field.PROGRESS, Field.WAKE_ENDS,
                                                 Field.SLEEPING)]
    assert lines[3].split() == [str(k) for k in (Field.CREDIT, Desc.DROP_HELD,
                                                 Desc.BYTES, Desc.FILE, Desc.PLACE,
                                                 Desc.UNPLACE, Rec.PAD, Rec.BYTES, Rec.PLACED,
                                                 Rec.UNPLACED)]
    assert lines[4].split() == [str(b) for b in MAGIC]
