"""The simulated board's DMA engine (``sim/board/dma_engine.h``) on its own, driven by a small
C++ program through a script of host posts and device replies: files posted for a core wait
until that core's input FIFO has room for them (its credit comes back with each JPEG_END),
behind that core's earlier files, while other cores' files and control bytes go past; the
descriptors then finish out of order and the tail stops below the oldest one still held; a
DROP_HELD forgets the held files and the credit."""

import shutil
import subprocess
from pathlib import Path

import pytest

from dlforge.sim.board.build import GENERATED_HEADERS

ENGINE = Path(__file__).resolve().parents[1] / "sim" / "board" / "dma_engine.h"

# Commands on stdin, one a line:
#   credit N                 the host's CREDIT (bytes a core's FIFO holds)
#   file TAG LANE CREDIT LEN a FILE descriptor of LEN bytes (lane 0: in posting order)
#   bytes LEN                a BYTES descriptor (a frame the host framed: LEN raw bytes)
#   drop                     a DROP_HELD descriptor
#   end TAG                  the device's JPEG_END reply for TAG
#   run                      the engine moves what it may: prints "sent" and the tags of the
#                            frames' first bytes in order ("b" for raw bytes), then "tail T"
DRIVER = r"""
#include "dma_engine.h"
#include <iostream>
#include <sstream>
using namespace dma;
int main(int argc, char** argv) {
    Engine e;
    e.open(argv[1], 1 << 20, 1 << 20);
    uint64_t src_used = 0;
    auto post = [&](Descriptor d) {
        const uint64_t h = e.get(F_DESC_HEAD);
        e.desc[h % e.desc_count] = d;
        e.set(F_DESC_HEAD, h + 1);
    };
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "credit") {
            uint64_t n; in >> n; e.set(F_CREDIT, n);
        } else if (cmd == "file" || cmd == "bytes") {
            Descriptor d{};
            unsigned tag = 0, lane = 0; uint64_t credit = 0, len = 0;
            if (cmd == "file") in >> tag >> lane >> credit;
            in >> len;
            d.kind = uint8_t(cmd == "file" ? D_FILE : D_BYTES);
            d.opcode = frame::OP_JPEG_END;
            d.tag = uint16_t(tag);
            d.lane = uint16_t(lane);
            d.capacity = credit;
            d.length = uint32_t(len);
            d.chunk = uint32_t(len);
            d.offset = src_used;
            std::memset(e.src + src_used, 0xAB, len);
            src_used += len;
            post(d);
        } else if (cmd == "drop") {
            Descriptor d{};
            d.kind = uint8_t(D_DROP_HELD);
            post(d);
        } else if (cmd == "end") {
            unsigned tag; in >> tag;
            uint8_t f[frame::HEADER_BYTES + frame::TRAILER_BYTES] = {};
            std::memcpy(f + frame::MAGIC_AT, frame::MAGIC, frame::MAGIC_BYTES);
            f[frame::OPCODE_AT] = frame::OP_JPEG_END;
            const uint16_t t = uint16_t(tag);
            std::memcpy(f + frame::TAG_AT, &t, frame::TAG_BYTES);
            const uint16_t hc = e.crc.crc16(f + frame::FIELDS_AT, frame::FIELDS_BYTES);
            std::memcpy(f + frame::HCRC_AT, &hc, frame::HCRC_BYTES);
            e.take_output(f, sizeof f);
        } else if (cmd == "run") {
            std::vector<uint8_t> out(1 << 20);
            const size_t n = e.fill_input(out.data(), out.size());
            std::cout << "sent";
            for (size_t i = 0; i < n;) {
                if (!std::memcmp(&out[i + frame::MAGIC_AT], frame::MAGIC, frame::MAGIC_BYTES)) {
                    uint16_t tag; uint32_t word;
                    std::memcpy(&tag, &out[i + frame::TAG_AT], frame::TAG_BYTES);
                    std::memcpy(&word, &out[i + frame::LENGTH_AT], 4);
                    std::cout << " " << tag;
                    i += frame::HEADER_BYTES + (word & frame::LENGTH_MASK) + frame::TRAILER_BYTES;
                } else {
                    std::cout << " b";
                    ++i;
                    while (i < n && out[i] == 0xAB) ++i;
                }
            }
            std::cout << "\ntail " << e.get(F_DESC_TAIL) << std::endl;
        }
    }
    e.close_all();
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    folder = tmp_path_factory.mktemp("dma_engine")
    for name, make in GENERATED_HEADERS.items():
        (folder / name).write_text(make())
    shutil.copy(ENGINE, folder / "dma_engine.h")
    (folder / "driver.cpp").write_text(DRIVER)
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", "driver",
                    "driver.cpp"], cwd=folder, check=True)
    return folder


def _run(driver, script):
    """The engine's answers to ``script``: one (sent tags, tail) pair per ``run``."""
    out = subprocess.run([str(driver / "driver"), str(driver / "link")], input=script,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    lines = out.splitlines()
    return [(lines[k].split()[1:], int(lines[k + 1].split()[1]))
            for k in range(0, len(lines), 2)]


def test_files_wait_for_their_cores_room(driver):
    # FIFOs of 1000 bytes; core 0 gets 600 + 600 + 300, core 1 gets 900
    steps = _run(driver, """credit 1000
file 10 1 600 600
file 11 1 600 600
file 12 2 900 900
file 13 1 300 300
run
end 10
run
end 12
run
end 11
run
""")
    # 10 goes, 11 does not fit beside it (and 13 waits behind 11: a core's files in order);
    # 12 goes to the other core; the tail stops at 11, the oldest file held
    assert steps[0] == (["10", "12"], 1)
    # 10's end frees core 0: 11 and then 13 (600 + 300 fit); every descriptor done
    assert steps[1] == (["11", "13"], 4)
    assert steps[2] == ([], 4) and steps[3] == ([], 4)


def test_an_idle_core_takes_any_file_and_later_parts_follow_the_first(driver):
    steps = _run(driver, """credit 1000
file 20 1 3000 1500
file 20 1 0 1500
file 21 1 100 100
run
end 20
run
""")
    # a file larger than the FIFO goes to its idle core, its second part (no credit of its
    # own) right after; the next file waits for the first's end
    assert steps[0] == (["20", "20"], 2)
    assert steps[1] == (["21"], 3)


def test_control_bytes_and_unheld_files_go_past_held_files(driver):
    steps = _run(driver, """credit 1000
file 30 1 800 800
file 31 1 800 800
bytes 16
file 32 0 0 100
run
end 30
run
""")
    # new descriptors first: the bytes and the unheld file, then 30 (31 held: the tail stays
    # below it)
    assert steps[0] == (["b", "32", "30"], 1)
    assert steps[1] == (["31"], 4)


def test_drop_held_forgets_held_files_and_the_credit(driver):
    steps = _run(driver, """credit 1000
file 40 1 800 800
file 41 1 800 800
file 42 2 800 800
file 43 2 800 800
run
drop
file 44 1 800 800
run
end 40
file 45 1 800 800
run
""")
    assert steps[0] == (["40", "42"], 1)
    # 41 and 43 dropped (never sent, their descriptors done); core 0 counts as empty: 44 goes
    assert steps[1] == (["44"], 6)
    # 40's late end gives back nothing: 44 still holds core 0's room, 45 waits
    assert steps[2] == ([], 6)


def test_without_credit_nothing_waits(driver):
    steps = _run(driver, """file 50 1 800 800
file 51 1 800 800
file 52 2 800 800
run
""")
    assert steps[0] == (["50", "52", "51"], 3)         # (the cores in turn)
