// The simulated board's DMA engine: the host side of `--link dma`, a model of a PCIe card's
// descriptor DMA engine in front of the accelerator's byte streams.
//
// Host and board share one file (/dev/shm/...; layout in dma_layout.h, generated from
// dlforge/rtl/link/dma_layout.py).  The frames' format (the header's fields, the magic, the
// sections, tags and opcodes) is frame_protocol.h's, namespace frame, generated from
// dlforge/rtl/link/protocol.py.  Towards the device the engine walks the host's descriptors:
// raw bytes go in as they are, a FILE descriptor is cut into request frames with their CRCs
// (the host does not frame files), PLACE/UNPLACE set where a tag's pixels go.  From the
// device it parses the reply frames: a JPEG_DATA payload whose tag has a placement is written
// straight into the arena (its CRC-32 checked on the way) and never crosses the host's CPU;
// everything else is handed over as BYTES records, exactly as the device sent it.  Before a
// placed tag's JPEG_END frame the engine writes a PLACED record: how many bytes it placed and
// whether any payload was damaged.
//
// A file posted with a lane (core c + 1) is held back, behind core c's earlier files, until
// that core's input FIFO has room for its credit (the host's CREDIT: what the FIFO holds); the
// room comes back with the file's JPEG_END reply.  So the host posts many files ahead and
// sleeps while the engine feeds each core as it empties, as a card's multi-queue DMA engine
// does with per-queue credit.  Descriptors then finish out of order: DESC_TAIL counts those
// done below the oldest one still held, and only those are the host's again.
//
// Doorbells are two named pipes: the host writes a byte to PATH.bell after posting (it wakes
// an idle board), the engine writes one to PATH.done after an I/O step that wrote records.
#pragma once

#include "dma_layout.h"
#include "frame_protocol.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

#ifndef DLFORGE_LINK_BYTES
#define DLFORGE_LINK_BYTES 1
#endif

namespace dma {

// The link's width: every frame section (header, payload, CRC) is zero-padded to whole beats
// of W bytes and the CRC-32 covers the padded payload (dlforge.rtl.link.protocol).
constexpr size_t W = DLFORGE_LINK_BYTES;
constexpr size_t padded(size_t n) { return (n + W - 1) / W * W; }
constexpr size_t HEADER_SECTION = padded(frame::HEADER_BYTES);
constexpr size_t TRAILER_SECTION = padded(frame::TRAILER_BYTES);
constexpr size_t TAGS = size_t(1) << frame::TAG_BITS;
using Tag = uint16_t;
static_assert(sizeof(Tag) == frame::TAG_BYTES, "a frame's tag");

// zlib's CRC-32 (reflected 0xEDB88320) and binascii.crc_hqx's CRC-16/CCITT from 0xFFFF.
struct Crc {
    uint32_t t32[8][256];
    uint16_t t16[256];
    Crc() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t32[0][i] = c;
            uint16_t h = uint16_t(i << 8);
            for (int k = 0; k < 8; ++k) h = h & 0x8000 ? uint16_t((h << 1) ^ 0x1021) : uint16_t(h << 1);
            t16[i] = h;
        }
        for (uint32_t i = 0; i < 256; ++i)
            for (int s = 1; s < 8; ++s) t32[s][i] = (t32[s - 1][i] >> 8) ^ t32[0][t32[s - 1][i] & 0xFF];
    }
    // Running CRC-32 without the final inversion: start with 0xFFFFFFFF, finish with ~.
    uint32_t update32(uint32_t c, const uint8_t* p, size_t n) const {
        while (n >= 8) {                             // slicing by 8
            uint32_t a, b;
            std::memcpy(&a, p, 4);
            std::memcpy(&b, p + 4, 4);
            a ^= c;
            c = t32[7][a & 0xFF] ^ t32[6][(a >> 8) & 0xFF] ^ t32[5][(a >> 16) & 0xFF] ^
                t32[4][a >> 24] ^ t32[3][b & 0xFF] ^ t32[2][(b >> 8) & 0xFF] ^
                t32[1][(b >> 16) & 0xFF] ^ t32[0][b >> 24];
            p += 8;
            n -= 8;
        }
        while (n--) c = t32[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        return c;
    }
    uint16_t crc16(const uint8_t* p, size_t n) const {
        uint16_t c = 0xFFFF;
        while (n--) c = uint16_t((c << 8) ^ t16[((c >> 8) ^ *p++) & 0xFF]);
        return c;
    }
};

template <typename T> T load(const uint8_t* p) { T v; std::memcpy(&v, p, sizeof v); return v; }

struct Engine {
    std::string path, bell_path, done_path;
    int fd = -1, bell = -1, done = -1;
    uint8_t* base = nullptr;
    size_t size = 0;
    Descriptor* desc = nullptr;
    uint64_t desc_count = 0;
    uint8_t *src = nullptr, *rec = nullptr, *arena = nullptr;
    uint64_t src_size = 0, rec_size = 0, arena_size = 0;
    Crc crc;

    // Towards the device: the descriptor being worked on, and frame bytes not yet taken.
    bool busy = false;
    Descriptor cur{};
    uint64_t cur_index = 0;                          // its number (free-running)
    uint64_t next = 0;                               // the next descriptor to read
    std::vector<uint8_t> done_early;                 // per ring slot: done above the tail
    // Files held back by credit: a queue per core, in posting order, and per core the
    // credit of its files sent and not yet answered with JPEG_END.
    struct Held { uint64_t index; Descriptor d; bool waited = false; };
    std::vector<std::deque<Held>> lanes;
    std::vector<uint64_t> owed;
    struct Credit { uint16_t lane = 0; uint64_t bytes = 0; };
    std::vector<Credit> credits = std::vector<Credit>(TAGS);
    size_t next_lane = 0;                            // round robin among the cores
    uint64_t held_now = 0, held_files = 0, held_back = 0, dropped_held = 0;
    uint64_t cur_pos = 0;
    bool cur_framed = false;
    std::vector<uint8_t> stage, remote;
    size_t stage_pos = 0;
    uint64_t remote_errors = 0;

    // From the device: the reply parser.
    enum State { HDR, PAY_PLACE, PAY_PASS, TRL_PLACE, TRL_PASS } state = HDR;
    uint8_t hdr[HEADER_SECTION];
    size_t hdr_len = 0;
    uint8_t trl[TRAILER_SECTION];
    size_t trl_len = 0;
    uint32_t remaining = 0, run_crc = 0;
    uint32_t real = 0;                               // payload bytes of the frame (no padding)
    Tag frame_tag = 0;
    struct Place { uint64_t offset = 0, capacity = 0, filled = 0; uint32_t frames = 0; uint16_t flags = 0; bool on = false; };
    std::vector<Place> places = std::vector<Place>(TAGS);
    std::vector<uint8_t> pass;                       // reply bytes for the next BYTES record
    uint64_t rec_notified = 0, ends_unread = 0, progress = 0, desc_notified = 0;
    bool urgent = false;
    uint64_t placed_bytes = 0, placed_frames = 0, descriptors = 0, records = 0;
    uint64_t bad_crc = 0, overflows = 0, hunted = 0, gaps = 0;

    static constexpr uint32_t MAX_FRAME = 64u << 20;
    static constexpr uint16_t MAX_LANES = 256;       // (more: the file goes in posting order)
    static constexpr size_t STEP = 64u << 10;        // reply bytes per parsing step

    uint64_t* word(uint64_t off) { return reinterpret_cast<uint64_t*>(base + off); }
    uint64_t get(uint64_t off) { return __atomic_load_n(word(off), __ATOMIC_ACQUIRE); }
    void set(uint64_t off, uint64_t v) { __atomic_store_n(word(off), v, __ATOMIC_RELEASE); }

    [[noreturn]] static void fail(const std::string& what) {
        std::fprintf(stderr, "sim_board: dma: %s: %s\n", what.c_str(), std::strerror(errno));
        std::exit(2);
    }

    void open(const std::string& p, uint64_t arena_bytes, uint64_t request_bytes) {
        path = p;
        bell_path = p + ".bell";
        done_path = p + ".done";
        desc_count = DEFAULT_DESC_COUNT;
        done_early.assign(desc_count, 0);
        src_size = request_bytes ? (request_bytes + 4095) / 4096 * 4096 : DEFAULT_SRC_SIZE;
        rec_size = DEFAULT_REC_SIZE;
        arena_size = arena_bytes ? (arena_bytes + 4095) / 4096 * 4096 : DEFAULT_ARENA_SIZE;
        auto up = [](uint64_t n) { return (n + 4095) / 4096 * 4096; };
        const uint64_t desc_off = CONTROL_BYTES;
        const uint64_t src_off = up(desc_off + desc_count * sizeof(Descriptor));
        const uint64_t rec_off = up(src_off + src_size);
        const uint64_t arena_off = up(rec_off + rec_size);
        size = up(arena_off + arena_size);
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) fail("create " + path);
        if (ftruncate(fd, off_t(size)) < 0) fail("size " + path);
        void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) fail("mmap " + path);
        base = static_cast<uint8_t*>(m);
        desc = reinterpret_cast<Descriptor*>(base + desc_off);
        src = base + src_off;
        rec = base + rec_off;
        arena = base + arena_off;
        for (const std::string& f : {bell_path, done_path}) {
            if (mkfifo(f.c_str(), 0600) < 0) fail("mkfifo " + f);
        }
        bell = ::open(bell_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        done = ::open(done_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (bell < 0 || done < 0) fail("open the doorbells");
        std::memcpy(base + F_VERSION, &VERSION, 4);
        *word(F_DESC_OFF) = desc_off;
        *reinterpret_cast<uint32_t*>(base + F_DESC_COUNT) = uint32_t(desc_count);
        *word(F_SRC_OFF) = src_off;
        *word(F_SRC_SIZE) = src_size;
        *word(F_REC_OFF) = rec_off;
        *word(F_REC_SIZE) = rec_size;
        *word(F_ARENA_OFF) = arena_off;
        *word(F_ARENA_SIZE) = arena_size;
        *reinterpret_cast<uint32_t*>(base + F_BOARD_PID) = uint32_t(getpid());
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        std::memcpy(base + F_MAGIC, MAGIC, 8);       // last: the host checks it first
    }

    void close_all() {
        if (base) munmap(base, size);
        for (int f : {fd, bell, done})
            if (f >= 0) ::close(f);
        for (const std::string& f : {path, bell_path, done_path}) unlink(f.c_str());
        base = nullptr;
        fd = bell = done = -1;
    }

    // ---- records (engine -> host) ------------------------------------------------------
    uint64_t rec_free() { return rec_size - (*word(F_REC_HEAD) - get(F_REC_TAIL)); }

    void put_record(uint32_t kind, const void* a, size_t na, const void* b = nullptr, size_t nb = 0) {
        const uint64_t body = na + nb, total = (sizeof(RecordHeader) + body + 7) & ~uint64_t(7);
        uint64_t head = *word(F_REC_HEAD);
        uint64_t pos = head % rec_size;
        if (pos + total > rec_size) {                // no record wraps: pad to the start
            RecordHeader pad{uint32_t(R_PAD), uint32_t(rec_size - pos - sizeof(RecordHeader))};
            std::memcpy(rec + pos, &pad, sizeof pad);
            head += rec_size - pos;
            pos = 0;
        }
        RecordHeader h{kind, uint32_t(body)};
        std::memcpy(rec + pos, &h, sizeof h);
        if (na) std::memcpy(rec + pos + sizeof h, a, na);
        if (nb) std::memcpy(rec + pos + sizeof h + na, b, nb);
        set(F_REC_HEAD, head + total);
        ++records;
    }

    void flush_pass() {
        if (!pass.empty()) put_record(uint32_t(R_BYTES), pass.data(), pass.size());
        pass.clear();
    }

    void placed_record(uint32_t kind, Tag tag) {
        Place& pl = places[tag];
        Placed body{tag, pl.flags, uint32_t(kind == R_UNPLACED ? 0 : pl.filled)};
        flush_pass();
        put_record(kind, &body, sizeof body);
        pl = Place{};
    }

    // ---- towards the device ------------------------------------------------------------
    // Reads n bytes of the host's memory, as a card's DMA engine reads host RAM.
    bool read_host(uint64_t address, uint8_t* dst, size_t n) {
        if (!n) return true;
        iovec local{dst, n}, remote{reinterpret_cast<void*>(address), n};
        const pid_t pid = pid_t(get(F_HOST_PID));
        return pid > 0 && process_vm_readv(pid, &local, 1, &remote, 1, 0) == ssize_t(n);
    }

    // Frames the next chunk of the FILE (or FILE_AT) descriptor into the stage.
    void stage_frame() {
        const uint32_t chunk = cur.chunk ? cur.chunk : cur.length;
        const uint32_t n = uint32_t(std::min<uint64_t>(chunk, cur.length - cur_pos));
        const bool last = cur_pos + n >= cur.length;
        const uint8_t* payload = src + cur.offset + cur_pos;
        if (cur.kind == D_FILE_AT) {
            remote.resize(n);
            if (!read_host(cur.offset + cur_pos, remote.data(), n)) {
                std::memset(remote.data(), 0, n);    // (the host let go of its file: it
                ++remote_errors;                     // decodes as an error, nothing hangs)
            }
            payload = remote.data();
        }
        uint8_t h[frame::HEADER_BYTES];
        std::memcpy(h + frame::MAGIC_AT, frame::MAGIC, frame::MAGIC_BYTES);
        h[frame::OPCODE_AT] = last ? cur.opcode : frame::OP_JPEG_DATA;
        h[frame::STATUS_AT] = cur.status;
        const Tag tag = cur.tag;
        std::memcpy(h + frame::TAG_AT, &tag, frame::TAG_BYTES);
        // the length, and above it the frame's number in its file (the descriptor's first
        // frame's number, then one more a chunk)
        const uint32_t seq = (cur.seq + uint32_t(cur_pos / chunk)) & 0xFFu;
        const uint32_t word = n | seq << frame::SEQ_SHIFT;
        std::memcpy(h + frame::LENGTH_AT, &word, sizeof word);
        const uint16_t hc = crc.crc16(h + frame::FIELDS_AT, frame::FIELDS_BYTES);
        std::memcpy(h + frame::HCRC_AT, &hc, frame::HCRC_BYTES);
        static const uint8_t zeros[64] = {};
        const size_t pad = padded(n) - n;
        const uint32_t pc = ~crc.update32(crc.update32(0xFFFFFFFFu, payload, n), zeros, pad);
        stage.clear();
        stage_pos = 0;
        stage.insert(stage.end(), h, h + frame::HEADER_BYTES);
        stage.insert(stage.end(), zeros, zeros + (HEADER_SECTION - frame::HEADER_BYTES));
        stage.insert(stage.end(), payload, payload + n);
        stage.insert(stage.end(), zeros, zeros + pad);
        const uint8_t* t = reinterpret_cast<const uint8_t*>(&pc);
        stage.insert(stage.end(), t, t + frame::TRAILER_BYTES);
        stage.insert(stage.end(), zeros, zeros + (TRAILER_SECTION - frame::TRAILER_BYTES));
        cur_pos += n;
    }

    // Descriptor `index` is done: the tail moves over it and over those done after it (their
    // request bytes, and FILE_AT's memory, are the host's again).
    void complete(uint64_t index) {
        ++descriptors;
        uint64_t tail = *word(F_DESC_TAIL);
        if (index != tail) {
            done_early[index % desc_count] = 1;
            return;
        }
        ++tail;
        while (tail < next && done_early[tail % desc_count]) done_early[tail++ % desc_count] = 0;
        set(F_DESC_TAIL, tail);
    }

    void finish_descriptor() {
        busy = false;
        complete(cur_index);
    }

    // ---- credit ------------------------------------------------------------------------
    void hold(uint64_t index, const Descriptor& d) {
        const size_t lane = d.lane - 1u;
        if (lanes.size() <= lane) lanes.resize(lane + 1), owed.resize(lane + 1, 0);
        lanes[lane].push_back(Held{index, d});
        ++held_now;
        ++held_files;
    }

    // Whether the first file held for `lane` may go: a later part of a file already sent, a
    // core with nothing in flight (it takes any file), or room for the file's credit.
    bool may_go(size_t lane, uint64_t limit) const {
        if (lanes[lane].empty()) return false;
        const Descriptor& d = lanes[lane].front().d;
        return !d.capacity || !limit || !owed[lane] || owed[lane] + d.capacity <= limit;
    }

    // The first file, round robin over the cores, that may go; it becomes the descriptor
    // worked on.
    bool admit() {
        if (!held_now) return false;
        const uint64_t limit = get(F_CREDIT);
        for (size_t k = 0; k < lanes.size(); ++k) {
            const size_t lane = (next_lane + k) % lanes.size();
            std::deque<Held>& q = lanes[lane];
            if (!may_go(lane, limit)) {
                if (!q.empty() && !q.front().waited) q.front().waited = true, ++held_back;
                continue;
            }
            const Descriptor& d = q.front().d;
            if (d.capacity) {
                owed[lane] += d.capacity;
                credits[d.tag] = Credit{uint16_t(lane + 1), d.capacity};
            }
            start(q.front().index, d);
            q.pop_front();
            --held_now;
            next_lane = lane + 1;
            return true;
        }
        return false;
    }

    // A file's JPEG_END reply: its core's room comes back.
    void release(Tag tag) {
        Credit& c = credits[tag];
        if (!c.lane) return;
        uint64_t& o = owed[c.lane - 1u];
        o -= std::min(o, c.bytes);
        c = Credit{};
    }

    void drop_held() {
        for (std::deque<Held>& q : lanes) {
            for (const Held& h : q) complete(h.index);
            dropped_held += q.size();
            q.clear();
        }
        held_now = 0;
        std::fill(owed.begin(), owed.end(), 0);
        std::fill(credits.begin(), credits.end(), Credit{});
    }

    void start(uint64_t index, const Descriptor& d) {
        cur = d;
        cur_index = index;
        cur_pos = 0;
        cur_framed = false;
        busy = true;
    }

    // Up to `room` request bytes for the device; 0 when there is nothing.
    size_t fill_input(uint8_t* dst, size_t room) {
        size_t put = 0;
        while (put < room) {
            if (stage_pos < stage.size()) {
                size_t k = std::min(room - put, stage.size() - stage_pos);
                std::memcpy(dst + put, stage.data() + stage_pos, k);
                put += k;
                stage_pos += k;
                continue;
            }
            if (busy && (cur.kind == D_FILE || cur.kind == D_FILE_AT)) {
                if (cur_pos < cur.length || !cur_framed) {   // (an empty file: one empty frame)
                    cur_framed = true;
                    stage_frame();
                    continue;
                }
                finish_descriptor();
                continue;
            }
            if (!busy) {
                // every new descriptor first (control requests overtake held files), then a
                // held file whose core has room
                if (get(F_DESC_HEAD) == next) {
                    if (admit()) continue;
                    break;
                }
                const Descriptor d = desc[next % desc_count];
                if ((d.kind == D_FILE || d.kind == D_FILE_AT) && d.lane && d.lane <= MAX_LANES) {
                    hold(next++, d);
                    continue;
                }
                start(next++, d);
                if (cur.kind == D_PLACE) {
                    Place& pl = places[cur.tag];
                    pl = Place{};
                    if (cur.offset + cur.capacity <= arena_size) {
                        pl.offset = cur.offset;
                        pl.capacity = cur.capacity;
                        pl.on = true;
                    }
                    finish_descriptor();
                } else if (cur.kind == D_UNPLACE) {
                    if (rec_free() < (1u << 20)) { busy = false; --next; break; }   // after the host reads
                    placed_record(uint32_t(R_UNPLACED), cur.tag);
                    urgent = true;
                    finish_descriptor();
                } else if (cur.kind == D_PROBE) {
                    uint64_t value = 0;
                    const bool ok = read_host(cur.offset, reinterpret_cast<uint8_t*>(&value), 8) &&
                                    value == cur.capacity;
                    set(F_BY_ADDRESS, ok ? 1 : 2);
                    finish_descriptor();
                } else if (cur.kind == D_DROP_HELD) {
                    drop_held();
                    finish_descriptor();
                } else if (cur.kind == D_FILE_AT) {
                    // read where it lies, chunk by chunk (stage_frame)
                } else if (cur.kind != D_BYTES && cur.kind != D_FILE) {
                    std::fprintf(stderr, "sim_board: dma: unknown descriptor kind %u skipped\n", cur.kind);
                    finish_descriptor();
                } else if (cur.offset + cur.length > src_size) {
                    std::fprintf(stderr, "sim_board: dma: descriptor outside the request ring skipped\n");
                    finish_descriptor();
                }
                continue;
            }
            // BYTES
            size_t k = size_t(std::min<uint64_t>(room - put, cur.length - cur_pos));
            std::memcpy(dst + put, src + cur.offset + cur_pos, k);
            put += k;
            cur_pos += k;
            if (cur_pos == cur.length) finish_descriptor();
        }
        progress += put;
        return put;
    }

    // ---- from the device ---------------------------------------------------------------
    void header_done() {
        const uint8_t opcode = hdr[frame::OPCODE_AT];
        std::memcpy(&frame_tag, hdr + frame::TAG_AT, frame::TAG_BYTES);
        uint32_t word;
        std::memcpy(&word, hdr + frame::LENGTH_AT, sizeof word);
        real = word & frame::LENGTH_MASK;
        const uint8_t seq = uint8_t(word >> frame::SEQ_SHIFT);
        remaining = uint32_t(padded(real));
        Place& pl = places[frame_tag];
        if (opcode == frame::OP_JPEG_DATA && pl.on) {
            // a file's reply frames count 0, 1, 2, ...: a gap is a frame lost to a destroyed
            // header, and the image is damaged
            if (seq != uint8_t(pl.frames)) pl.flags |= FLAG_BAD_CRC, ++gaps;
            ++pl.frames;
            state = remaining ? PAY_PLACE : TRL_PLACE;
            run_crc = 0xFFFFFFFFu;
            return;
        }
        if (opcode == frame::OP_JPEG_END && pl.on) placed_record(uint32_t(R_PLACED), frame_tag);
        if (opcode == frame::OP_JPEG_END) ++ends_unread, release(frame_tag);
        else urgent = true;
        pass.insert(pass.end(), hdr, hdr + HEADER_SECTION);
        state = remaining ? PAY_PASS : TRL_PASS;
    }

    // Takes up to n reply bytes; returns how many (fewer when the host's record ring is full).
    size_t take_output(const uint8_t* data, size_t n) {
        size_t i = 0;
        while (i < n) {
            if (rec_free() < 8 * STEP) break;        // the host is behind: hold the device back
            const size_t stop = std::min(n, i + STEP);
            while (i < stop) {
                switch (state) {
                case HDR: {
                    hdr[hdr_len++] = data[i++];
                    if (hdr_len == 1 && hdr[frame::MAGIC_AT] != frame::MAGIC[0] && W == 1) {
                        pass.push_back(hdr[0]);
                        hdr_len = 0;
                        ++hunted;
                        urgent = true;
                    } else if (hdr_len == HEADER_SECTION) {
                        uint16_t hc;
                        uint32_t len;
                        std::memcpy(&hc, hdr + frame::HCRC_AT, frame::HCRC_BYTES);
                        std::memcpy(&len, hdr + frame::LENGTH_AT, sizeof len);
                        len &= frame::LENGTH_MASK;       // (the frame's number above it)
                        if (!std::memcmp(hdr + frame::MAGIC_AT, frame::MAGIC, frame::MAGIC_BYTES) &&
                            crc.crc16(hdr + frame::FIELDS_AT, frame::FIELDS_BYTES) == hc &&
                            len <= MAX_FRAME) {
                            hdr_len = 0;
                            header_done();
                        } else {                     // not a header: pass one beat, hunt on
                            pass.insert(pass.end(), hdr, hdr + W);
                            hdr_len -= W;
                            std::memmove(hdr, hdr + W, hdr_len);
                            ++hunted;
                            urgent = true;
                        }
                    }
                    break;
                }
                case PAY_PLACE: {
                    const size_t k = std::min<size_t>(remaining, stop - i);
                    Place& pl = places[frame_tag];
                    run_crc = crc.update32(run_crc, data + i, k);
                    // (the padding after the payload's real bytes is checked, not placed)
                    const size_t kr = std::min<size_t>(k, real);
                    const uint64_t room = pl.capacity - std::min(pl.capacity, pl.filled);
                    const size_t w = size_t(std::min<uint64_t>(room, kr));
                    if (w) std::memcpy(arena + pl.offset + pl.filled, data + i, w);
                    if (w < kr) pl.flags |= FLAG_OVERFLOW, ++overflows;
                    pl.filled += w;
                    placed_bytes += w;
                    real -= uint32_t(kr);
                    remaining -= uint32_t(k);
                    i += k;
                    if (!remaining) state = TRL_PLACE;
                    break;
                }
                case PAY_PASS: {
                    const size_t k = std::min<size_t>(remaining, stop - i);
                    pass.insert(pass.end(), data + i, data + i + k);
                    remaining -= uint32_t(k);
                    i += k;
                    if (!remaining) state = TRL_PASS;
                    break;
                }
                case TRL_PLACE:
                    trl[trl_len++] = data[i++];
                    if (trl_len == TRAILER_SECTION) {
                        uint32_t want;
                        std::memcpy(&want, trl, 4);
                        if (~run_crc != want) places[frame_tag].flags |= FLAG_BAD_CRC, ++bad_crc;
                        ++placed_frames;
                        trl_len = 0;
                        state = HDR;
                    }
                    break;
                case TRL_PASS:
                    pass.push_back(data[i++]);
                    if (++trl_len == TRAILER_SECTION) {
                        trl_len = 0;
                        state = HDR;
                    }
                    break;
                }
            }
            if (pass.size() >= STEP) flush_pass();
        }
        flush_pass();
        progress += i;
        return i;
    }

    // A byte on the done pipe when records were written since the last one: at once for
    // anything but JPEG_END frames, which wait until the host's WAKE_ENDS of them are unread
    // (interrupt coalescing: on a VM, each wake-up costs the host more CPU than an image).
    // Checked every I/O step, so a threshold the host lowers takes effect at the next one.
    void notify() {
        set(F_PROGRESS, progress);
        const uint64_t tail = *word(F_DESC_TAIL), head = *word(F_REC_HEAD);
        const bool space = tail != desc_notified && get(F_WANT_SPACE);   // the host waits to post
        const bool records = head != rec_notified && (urgent || ends_unread >= get(F_WAKE_ENDS));
        if (!space && !records) return;
        if (space) desc_notified = tail;
        rec_notified = head;
        urgent = false;
        ends_unread = 0;
        const uint8_t one = 1;
        ssize_t r = ::write(done, &one, 1);          // a full pipe already wakes the host
        (void)r;
    }

    // Work towards the device (held files wait for replies, which the device's clock brings).
    bool pending() {
        if (busy || stage_pos < stage.size() || get(F_DESC_HEAD) != next) return true;
        if (!held_now) return false;
        const uint64_t limit = get(F_CREDIT);
        for (size_t lane = 0; lane < lanes.size(); ++lane)
            if (may_go(lane, limit)) return true;
        return false;
    }

    // The idle board's sleep: until the host rings (or, with replies waiting for room in the
    // record ring, a short while: the host frees room without ringing).
    void wait(int timeout_ms, bool want_room) {
        set(F_SLEEPING, 1);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);     // the flag before the last look
        if (!pending()) {
            pollfd p{bell, POLLIN, 0};
            if (poll(&p, 1, want_room ? 2 : timeout_ms) > 0) drain_bell();
        }
        set(F_SLEEPING, 0);
    }

    void drain_bell() {
        uint8_t junk[4096];
        while (::read(bell, junk, sizeof junk) > 0) {
        }
    }
};

}  // namespace dma
