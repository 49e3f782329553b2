// The simulated board: the Verilated accelerator top (module dlforge_top) behind a real host
// transport, so that the host runtime talks to it as it would to a card.
//
//   sim_board --link tcp  [--port N]        listen on 127.0.0.1:N (0: any free port)
//   sim_board --link pty                    a pseudo-terminal: the host opens /dev/pts/N
//   sim_board --link fifo --path P          named pipes P_h2c_0 (host to card) and P_c2h_0
//   sim_board --link dma --path P           shared memory P (/dev/shm/...) and its DMA engine
//                                           (dma_engine.h), [--arena BYTES] for the images,
//                                           [--request-ring BYTES] for the host's requests
//   options: --corrupt P --drop P --seed S  per-byte fault injection, both directions
//            --max-cycles N (0: never stop) --reset-cycles N (4) --exit-on-disconnect
//            --idle-cycles N (2^20; 0: never idle)
//
// When ready it prints one line, "DEVICE tcp:127.0.0.1:PORT" / "DEVICE serial:/dev/pts/N" /
// "DEVICE xdma:P", to stdout.  On exit (SIGTERM, SIGINT, the parent's death, --max-cycles, or
// the client's disconnect with --exit-on-disconnect) it prints one JSON line of statistics
// to stderr.  See docs/sim-board.md.
//
// The clock loop does no system call: bytes move between the model and two buffers, and
// every IO_PERIOD cycles (sooner when the output buffer fills) one non-blocking I/O step
// exchanges the buffers with the transport.  After idle_cycles cycles without a byte moving
// the board blocks in poll() (20 ms) between short bursts of cycles, so an idle board costs
// little CPU and still wakes at once when bytes arrive.
//
// UART mode (compiled with -DDLFORGE_UART_DIVISOR=N, by build_board(uart=N)): the model is
// the real boards' top (UartAccelerator: pins rx, tx, got, sent, framing_errors, overruns),
// clocked at N * 3 Mbaud.  The host's bytes are serialised onto rx at N cycles per bit (start
// bit, 8 data bits LSB first, stop bit), back to back, whether or not the device is ready (a
// USB-UART bridge does not wait for the FPGA); tx is deserialised (the falling edge of the
// start bit, samples at the bit centres) into bytes for the host.  The harness reads from
// the host only while its bridge buffer (UART_IN_BUFFER) has room, which throttles the host
// to the line rate as a real bridge's finite buffer does.

#include "Vdlforge_top.h"
#include "verilated.h"
#include "dma_engine.h"

// The model's own evaluation, which Vdlforge_top::eval() wraps.  The wrapper adds per-call
// bookkeeping this model never needs: a mutex-guarded deleter for SystemVerilog class objects
// and the message queue of multithreaded models (there are neither: no classes, no DPI, one
// thread, --noassert).  The clock loops call it directly, which makes the decoder top about
// 6 % faster (docs/sim-board.md).  The reset cycles still go through eval(), whose first call
// also initialises the model.  Verilator declares the function in the model's own source
// (Vdlforge_top.cpp), not in a header; a Verilator that renamed it fails at link time.
void Vdlforge_top___024root___eval(Vdlforge_top___024root* vlSelf);
static inline void eval_fast(Vdlforge_top* top) { Vdlforge_top___024root___eval(top->rootp); }

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <vector>

// Verilator escapes the double underscores of Amaranth's port names (i__valid -> i___05Fvalid).
#define I_VALID i___05Fvalid
#define I_READY i___05Fready
#define I_PAYLOAD i___05Fpayload
#define O_VALID o___05Fvalid
#define O_READY o___05Fready
#define O_PAYLOAD o___05Fpayload

// The host link's width in bytes (the build's link_bytes): the ports carry that many bytes a
// clock, little-endian, and the byte stream is cut into beats (frames are padded to whole
// beats, dlforge.rtl.link.protocol).
#ifndef DLFORGE_LINK_BYTES
#define DLFORGE_LINK_BYTES 1
#endif
constexpr size_t LINK_BYTES = DLFORGE_LINK_BYTES;

template <typename Port> inline void put_beat(Port& port, const uint8_t* bytes) {
    static_assert(sizeof(Port) >= LINK_BYTES, "the link port is narrower than LINK_BYTES");
    std::memcpy(&port, bytes, LINK_BYTES);
}
template <typename Port> inline void get_beat(const Port& port, uint8_t* bytes) {
    std::memcpy(bytes, &port, LINK_BYTES);
}

#ifdef DLFORGE_UART_DIVISOR
#define UART_MODE 1
#else
#define UART_MODE 0
#endif

namespace {

#if UART_MODE
constexpr uint32_t UART_DIVISOR = DLFORGE_UART_DIVISOR;   // clock cycles per bit
static_assert(UART_DIVISOR >= 4, "the UART divisor must be at least 4");
#ifndef DLFORGE_BAUD
#define DLFORGE_BAUD 3000000                  // dlforge.rtl.link.protocol.BAUD (the build sets it)
#endif
constexpr double UART_BAUD = DLFORGE_BAUD;
constexpr size_t UART_IN_BUFFER = 4096;     // the bridge's buffer towards the FPGA (FT2232H)
constexpr size_t UART_OUT_FLUSH = 512;      // ... and its USB packets towards the host
#endif

constexpr size_t OUT_CAP = 4u << 20;        // output buffer: the model stalls when it is full
#if UART_MODE
constexpr size_t OUT_FLUSH = UART_OUT_FLUSH;
#else
constexpr size_t OUT_FLUSH = 256u << 10;    // ... and an I/O step comes early past this mark
#endif
// Output is written in bursts (interrupt moderation, as a DMA engine completes whole buffers):
// when OUT_FLUSH bytes are pending, or when the model's output paused for a whole I/O period
// (a frame ended), or when idle.  The host then wakes once per reply frame, not per kilobyte.
constexpr size_t IN_CHUNK = 256u << 10;     // the most one read takes
constexpr size_t IN_CAP = 2 * IN_CHUNK;
constexpr uint32_t IO_PERIOD = 1024;        // cycles between I/O steps
constexpr uint32_t IDLE_BATCH = 256;        // cycles between the idle board's polls
constexpr int IDLE_POLL_MS = 20;

volatile sig_atomic_t g_stop = 0;

void on_signal(int) { g_stop = 1; }

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "sim_board: %s: %s\n", what, std::strerror(errno));
    std::exit(2);
}

[[noreturn]] void usage(const char* message) {
    std::fprintf(stderr,
                 "sim_board: %s\n"
                 "usage: sim_board --link tcp|pty|fifo|dma [--port N] [--path P] [--arena BYTES] [--request-ring BYTES] [--corrupt P] "
                 "[--drop P] [--seed S] [--max-cycles N] [--reset-cycles N] "
                 "[--idle-cycles N] [--exit-on-disconnect]\n", message);
    std::exit(2);
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) die("fcntl");
}

// xorshift64*: the fault injector's random numbers (fast, seeded, reproducible).
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
        if (!s) s = 1;
    }
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};

// Per-byte drops and single-bit flips, applied in place; returns the bytes kept.
// On a wide link (LINK_BYTES > 1) drops take whole beats, as a DMA stream loses beats, not
// bytes; the probability is per byte all the same.
struct Faults {
    double corrupt = 0, drop = 0;
    Rng rng{1};
    uint64_t dropped = 0, corrupted = 0;
    uint64_t position = 0;                  // bytes seen, for the beat boundaries
    bool dropping = false;
    bool active() const { return corrupt > 0 || drop > 0; }
    size_t apply(uint8_t* data, size_t n) {
        size_t kept = 0;
        for (size_t k = 0; k < n; ++k, ++position) {
            uint8_t byte = data[k];
            if (position % LINK_BYTES == 0)
                dropping = drop > 0 && rng.uniform() < drop * LINK_BYTES;
            if (dropping) {
                ++dropped;
                continue;
            }
            if (corrupt > 0 && rng.uniform() < corrupt) {
                byte ^= uint8_t(1u << (rng.next() % 8));
                ++corrupted;
            }
            data[kept++] = byte;
        }
        return kept;
    }
};

enum class Link { TCP, PTY, FIFO, DMA };

struct Options {
    Link link = Link::TCP;
    int port = 0;
    std::string path;
    double corrupt = 0, drop = 0;
    uint64_t seed = 1;
    uint64_t max_cycles = 0;
    uint64_t reset_cycles = 4;
    uint64_t idle_cycles = 1u << 20;
    uint64_t arena = 0;                   // dma: the image arena's bytes (0: the default)
    uint64_t request_ring = 0;            // dma: the request ring's bytes (0: the default)
    bool exit_on_disconnect = false;
};

Options parse(int argc, char** argv) {
    Options o;
    bool have_link = false;
    for (int k = 1; k < argc; ++k) {
        std::string a = argv[k];
        auto value = [&]() -> std::string {
            if (k + 1 >= argc) usage(("missing value after " + a).c_str());
            return argv[++k];
        };
        auto number = [&]() -> uint64_t {
            std::string v = value();
            char* end = nullptr;
            errno = 0;
            unsigned long long n = std::strtoull(v.c_str(), &end, 0);
            if (errno || !end || *end || v.empty() || v[0] == '-')
                usage(("bad number for " + a + ": " + v).c_str());
            return n;
        };
        auto probability = [&]() -> double {
            std::string v = value();
            char* end = nullptr;
            double p = std::strtod(v.c_str(), &end);
            if (!end || *end || v.empty() || !(p >= 0.0 && p <= 1.0))
                usage(("bad probability for " + a + ": " + v).c_str());
            return p;
        };
        if (a == "--link") {
            std::string v = value();
            if (v == "tcp") o.link = Link::TCP;
            else if (v == "pty") o.link = Link::PTY;
            else if (v == "fifo") o.link = Link::FIFO;
            else if (v == "dma") o.link = Link::DMA;
            else usage(("unknown link " + v).c_str());
            have_link = true;
        } else if (a == "--port") {
            uint64_t p = number();
            if (p > 65535) usage("port out of range");
            o.port = int(p);
        } else if (a == "--path") o.path = value();
        else if (a == "--corrupt") o.corrupt = probability();
        else if (a == "--drop") o.drop = probability();
        else if (a == "--seed") o.seed = number();
        else if (a == "--max-cycles") o.max_cycles = number();
        else if (a == "--reset-cycles") o.reset_cycles = number();
        else if (a == "--idle-cycles") o.idle_cycles = number();
        else if (a == "--arena") o.arena = number();
        else if (a == "--request-ring") o.request_ring = number();
        else if (a == "--exit-on-disconnect") o.exit_on_disconnect = true;
        else if (a == "-h" || a == "--help") usage("help");
        else usage(("unknown option " + a).c_str());
    }
    if (!have_link) usage("--link is required");
    if (o.link == Link::FIFO && o.path.empty()) usage("--link fifo needs --path");
    if (o.link == Link::DMA && o.path.empty()) usage("--link dma needs --path");
#if UART_MODE
    if (o.link == Link::DMA) usage("a UART board has no DMA link");
#endif
    return o;
}

// The host side of the board: where bytes come from and go to.
struct Transport {
    Link kind;
    bool exit_on_disconnect = false;
    int listen_fd = -1;           // tcp
    int rfd = -1, wfd = -1;       // the connected client / pty master / the two fifos
    int pty_slave = -1;           // held open so that the pty never hangs up
    std::string fifo_in, fifo_out;
    dma::Engine dma;              // dma
    std::string device;
    uint64_t clients = 0;
    bool finished = false;        // the client left and --exit-on-disconnect was given

    bool connected() const { return rfd >= 0 || kind == Link::DMA; }

    void open(const Options& o) {
        kind = o.link;
        exit_on_disconnect = o.exit_on_disconnect;
        if (kind == Link::TCP) {
            listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (listen_fd < 0) die("socket");
            int one = 1;
            setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(uint16_t(o.port));
            addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("bind");
            if (listen(listen_fd, 4) < 0) die("listen");
            socklen_t len = sizeof addr;
            if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0)
                die("getsockname");
            device = "tcp:127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
        } else if (kind == Link::PTY) {
            int master = posix_openpt(O_RDWR | O_NOCTTY);
            if (master < 0) die("posix_openpt");
            if (grantpt(master) < 0) die("grantpt");
            if (unlockpt(master) < 0) die("unlockpt");
            const char* name = ptsname(master);
            if (!name) die("ptsname");
            device = std::string("serial:") + name;
            pty_slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
            if (pty_slave < 0) die("open pty slave");
            termios t;
            if (tcgetattr(pty_slave, &t) < 0) die("tcgetattr");
            cfmakeraw(&t);
            if (tcsetattr(pty_slave, TCSANOW, &t) < 0) die("tcsetattr");
            fcntl(master, F_SETFD, FD_CLOEXEC);
            set_nonblocking(master);
            rfd = wfd = master;
        } else if (kind == Link::DMA) {
            dma.open(o.path, o.arena, o.request_ring);
            device = "dma:" + o.path;
        } else {
            fifo_in = o.path + "_h2c_0";
            fifo_out = o.path + "_c2h_0";
            for (const std::string& p : {fifo_in, fifo_out}) {
                if (mkfifo(p.c_str(), 0600) < 0) {
                    struct stat st;
                    if (errno != EEXIST || stat(p.c_str(), &st) < 0 || !S_ISFIFO(st.st_mode))
                        die(("mkfifo " + p).c_str());
                }
            }
            // O_RDWR: neither open blocks, and the pipes never report EOF or EPIPE to us.
            rfd = ::open(fifo_in.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
            if (rfd < 0) die(("open " + fifo_in).c_str());
            wfd = ::open(fifo_out.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
            if (wfd < 0) die(("open " + fifo_out).c_str());
            device = "xdma:" + o.path;
        }
    }

    // TCP: take a waiting client, if any.
    void accept_client() {
        if (kind != Link::TCP || connected() || finished) return;
        int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        rfd = wfd = fd;
        ++clients;
        std::fprintf(stderr, "sim_board: client %llu connected\n", (unsigned long long)clients);
    }

    void drop_client() {
        if (kind != Link::TCP) return;
        close(rfd);
        rfd = wfd = -1;
        std::fprintf(stderr, "sim_board: client %llu disconnected\n", (unsigned long long)clients);
        if (exit_on_disconnect) finished = true;
    }

    // Bytes the host sent: >0 read, 0 nothing now, -1 the client has gone.
    ssize_t read_some(uint8_t* data, size_t n) {
        if (kind == Link::DMA) return ssize_t(dma.fill_input(data, n));
        if (!connected()) return 0;
        ssize_t got = ::read(rfd, data, n);
        if (got > 0) return got;
        if (got == 0) return kind == Link::TCP ? -1 : 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        if (kind == Link::TCP) return -1;
        if (errno == EIO) return 0;                  // pty: no slave open (cannot happen here)
        die("read");
    }

    // Bytes written to the host: >=0 written, -1 the client has gone.
    ssize_t write_some(const uint8_t* data, size_t n) {
        if (kind == Link::DMA) return ssize_t(dma.take_output(data, n));
        if (!connected()) return 0;
        ssize_t put = kind == Link::TCP ? ::send(wfd, data, n, MSG_NOSIGNAL) : ::write(wfd, data, n);
        if (put >= 0) return put;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        if (kind == Link::TCP) return -1;
        if (errno == EIO) return 0;
        die("write");
    }

    // Block until the host may have something for us (or timeout_ms passes).
    void wait(int timeout_ms, bool want_write) {
        if (kind == Link::DMA) {
            dma.wait(timeout_ms, want_write);
            return;
        }
        pollfd fds[2];
        int n = 0;
        if (connected()) {
            fds[n++] = {rfd, POLLIN, 0};
            if (want_write) {
                if (wfd == rfd) fds[0].events |= POLLOUT;
                else fds[n++] = {wfd, POLLOUT, 0};
            }
        } else if (listen_fd >= 0 && !finished) {
            fds[n++] = {listen_fd, POLLIN, 0};
        }
        poll(fds, n, timeout_ms);
    }

    void close_all() {
        if (kind == Link::DMA) dma.close_all();
        if (rfd >= 0) close(rfd);
        if (wfd >= 0 && wfd != rfd) close(wfd);
        rfd = wfd = -1;
        if (listen_fd >= 0) close(listen_fd);
        if (pty_slave >= 0) close(pty_slave);
        if (kind == Link::FIFO) {
            unlink(fifo_in.c_str());
            unlink(fifo_out.c_str());
        }
    }
};

}  // namespace

int main(int argc, char** argv) {
    Options opt = parse(argc, argv);

    prctl(PR_SET_PDEATHSIG, SIGTERM);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    if (getppid() == 1) g_stop = 1;                  // the parent died before prctl

    VerilatedContext* context = new VerilatedContext;
    context->fatalOnError(true);
    Vdlforge_top* top = new Vdlforge_top{context, "dlforge_top"};

    // Reset.
#if UART_MODE
    top->rx = 1;                                     // the line idles high
#else
    top->I_VALID = 0;
    { const uint8_t zero[LINK_BYTES] = {}; put_beat(top->I_PAYLOAD, zero); }
    top->O_READY = 0;
#endif
    top->rst = 1;
    uint64_t cycles = 0;
    for (uint64_t k = 0; k < opt.reset_cycles; ++k) {
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
        ++cycles;
    }
    // One more cycle with the link idle: the build's top registers its reset (see
    // sim/board/sim_board.py), so the design leaves reset an edge after rst falls; no byte may be
    // offered before that edge.
    top->clk = 0;
    top->rst = 0;
    top->eval();
    top->clk = 1;
    top->eval();
    ++cycles;
    top->clk = 0;
    top->eval();

    Transport link;
    link.open(opt);
    Faults in_faults, out_faults;
    in_faults.corrupt = out_faults.corrupt = opt.corrupt;
    in_faults.drop = out_faults.drop = opt.drop;
    in_faults.rng = Rng(opt.seed);
    out_faults.rng = Rng(opt.seed ^ 0x5A5A5A5A5A5A5A5Aull);

    std::vector<uint8_t> inbuf(IN_CAP), outbuf(OUT_CAP);
    uint8_t* const in = inbuf.data();
    uint8_t* const out = outbuf.data();
    size_t in_pos = 0, in_end = 0;                   // bytes for the model: in[in_pos, in_end)
    size_t out_pos = 0, out_len = 0, out_checked = 0;  // written / produced / fault-injected
    uint64_t bytes_in = 0, bytes_out = 0;            // through the model's ports
    uint64_t link_in = 0, link_out = 0;              // through the transport
    uint64_t discarded = 0;                          // produced while no client was connected
    uint64_t last_move = cycles, last_in = 0, last_out = 0;
    bool owed = false;                               // a byte went in after the last byte out
    uint64_t idle_cycles_total = 0;
    double idle_seconds = 0;
    bool idle = false;
    double idle_since = 0;
    bool producing = false;                          // the last cycle batch made output
#if UART_MODE
    // The bridge's serialiser (host -> rx): the frame's bits still to send, bit 0 on the line.
    uint32_t ser_bits = 0, ser_left = 0, ser_clock = 0;
    // Its deserialiser (tx -> host): 0 hunting for a start edge, 1 in a frame, 2 waiting for
    // the line to go high after a framing error.
    int des_state = 0;
    uint32_t des_time = 0, des_next = 0, des_bit = 0, des_byte = 0;
    uint64_t device_in = 0, device_out = 0;          // the model's got / sent pulses
    uint64_t host_framing = 0, uart_lost = 0;
#endif

    // A wide link says its width in the device string (the host frames for it).
    if (LINK_BYTES > 1) link.device += "?link_bytes=" + std::to_string(LINK_BYTES);
    std::printf("DEVICE %s\n", link.device.c_str());
    std::fflush(stdout);
    const double start = now_s();

    while (!g_stop && !link.finished) {
        // ---- I/O step ----------------------------------------------------------------------
        link.accept_client();
        // Output: fault-inject what is new, then write what the host will take.
        if (out_checked < out_len) {
            if (out_faults.active()) {
                size_t kept = out_faults.apply(out + out_checked, out_len - out_checked);
                out_len = out_checked + kept;
            }
            out_checked = out_len;
        }
        if (!link.connected()) {
            discarded += out_len - out_pos;          // nobody on the cable: the bytes are lost
            out_pos = out_len = out_checked = 0;
        }
        // (the DMA engine places payloads as they come: only its records wake the host)
        const bool flush = !producing || idle || out_len - out_pos >= OUT_FLUSH ||
                           link.kind == Link::DMA;
        while (flush && out_pos < out_len) {
            ssize_t put = link.write_some(out + out_pos, out_len - out_pos);
            if (put < 0) {
                link.drop_client();
                discarded += out_len - out_pos;
                out_pos = out_len = out_checked = 0;
                break;
            }
            if (put == 0) break;
            out_pos += size_t(put);
            link_out += uint64_t(put);
        }
        if (out_pos == out_len) out_pos = out_len = out_checked = 0;
        else if (out_pos >= OUT_CAP / 2) {
            std::memmove(out, out + out_pos, out_len - out_pos);
            out_len -= out_pos;
            out_checked -= out_pos;
            out_pos = 0;
        }
        // Input: read while there is room for a whole chunk.
        if (in_pos == in_end) in_pos = in_end = 0;
        else if (in_pos > 0 && IN_CAP - in_end < IN_CHUNK) {
            std::memmove(in, in + in_pos, in_end - in_pos);
            in_end -= in_pos;
            in_pos = 0;
        }
#if UART_MODE
        // The bridge takes from the host only what its buffer holds.
        const size_t want = in_end - in_pos < UART_IN_BUFFER ? UART_IN_BUFFER - (in_end - in_pos)
                                                             : 0;
#else
        const size_t want = IN_CHUNK;
#endif
        if (want && IN_CAP - in_end >= want && link.connected()) {
            ssize_t got = link.read_some(in + in_end, want);
            if (got < 0) link.drop_client();
            else if (got > 0) {
                link_in += uint64_t(got);
                in_end += in_faults.active() ? in_faults.apply(in + in_end, size_t(got))
                                             : size_t(got);
            }
        }
        if (link.kind == Link::DMA) link.dma.notify();
        if (g_stop || link.finished) break;
        if (opt.max_cycles && cycles >= opt.max_cycles) break;

        // ---- Idle: nothing has moved for a long time -----------------------------------------
        const uint64_t moved_in = bytes_in + link_in, moved_out = bytes_out + link_out;
        if (moved_in != last_in || moved_out != last_out) {
            last_in = moved_in;
            last_out = moved_out;
            last_move = cycles;
            if (idle) {
                idle = false;
                idle_seconds += now_s() - idle_since;
            }
        } else if (opt.idle_cycles && !idle) {
            // A device that owes an answer (the host's bytes came last) may be computing: it
            // gets 16 times longer before the board slows down.
            uint64_t limit = owed ? opt.idle_cycles * 16 : opt.idle_cycles;
            if (cycles - last_move >= limit) {
                idle = true;
                idle_since = now_s();
            }
        }

        // ---- Clock cycles ------------------------------------------------------------------
        uint32_t batch = idle ? IDLE_BATCH : IO_PERIOD;
        if (opt.max_cycles && opt.max_cycles - cycles < batch) batch = uint32_t(opt.max_cycles - cycles);
        const size_t flush_at = out_len + OUT_FLUSH < OUT_CAP ? out_len + OUT_FLUSH : OUT_CAP;
        uint32_t n = 0, took_at = 0, gave_at = 0;   // 1 + the cycle of the batch's last transfer
        const uint64_t in_before = in_pos;
        const size_t out_before = out_len;
#if UART_MODE
        while (n < batch) {
            top->clk = 0;
            if (!ser_left && in_pos < in_end) {      // the next byte's start bit, back to back
                ser_bits = 0x200u | (uint32_t(in[in_pos++]) << 1);
                ser_left = 10;
                ser_clock = 0;
                took_at = n + 1;
            }
            top->rx = ser_left ? (ser_bits & 1u) : 1u;
            eval_fast(top);
            ++n;
            device_in += top->got;
            device_out += top->sent;
            top->clk = 1;
            eval_fast(top);
            if (ser_left && ++ser_clock == UART_DIVISOR) {
                ser_clock = 0;
                ser_bits >>= 1;
                --ser_left;
            }
            // tx, as it is after this edge: bit k of a frame is sampled N/2 + k*N cycles
            // after the cycle its start edge was seen.
            const uint32_t line = top->tx;
            if (des_state == 0) {
                if (!line) {
                    des_state = 1;
                    des_time = 0;
                    des_next = UART_DIVISOR / 2;
                    des_bit = 0;
                    des_byte = 0;
                }
            } else if (des_state == 1) {
                if (++des_time == des_next) {
                    des_next += UART_DIVISOR;
                    if (des_bit == 0) {
                        if (line) des_state = 0;     // a glitch, not a start bit
                    } else if (des_bit <= 8) {
                        des_byte |= line << (des_bit - 1);
                    } else if (line) {               // the stop bit
                        des_state = 0;
                        if (out_len < OUT_CAP) {
                            out[out_len++] = uint8_t(des_byte);
                            gave_at = n;
                        } else {
                            ++uart_lost;             // nobody reads the host side: lost
                        }
                    } else {
                        des_state = 2;
                        ++host_framing;
                    }
                    ++des_bit;
                }
            } else if (line) {
                des_state = 0;
            }
            if (out_len >= flush_at) break;
        }
#else
        while (n < batch) {
            const bool valid = in_end - in_pos >= LINK_BYTES;
            top->clk = 0;
            top->I_VALID = valid;
            if (valid) put_beat(top->I_PAYLOAD, in + in_pos);
            top->O_READY = out_len + LINK_BYTES <= OUT_CAP;
            eval_fast(top);
            ++n;
            if (valid && top->I_READY) {
                in_pos += LINK_BYTES;
                took_at = n;
            }
            if (top->O_VALID && top->O_READY) {
                get_beat(top->O_PAYLOAD, out + out_len);
                out_len += LINK_BYTES;
                gave_at = n;
            }
            top->clk = 1;
            eval_fast(top);
            if (out_len >= flush_at) break;
        }
#endif
        if (took_at || gave_at) owed = took_at > gave_at;
        cycles += n;
        bytes_in += in_pos - in_before;
        bytes_out += out_len - out_before;
        producing = out_len != out_before;
        if (idle) {
            idle_cycles_total += n;
            link.wait(IDLE_POLL_MS, out_pos < out_len);   // then straight to the I/O step
        }
    }

    const double end = now_s();
    if (idle) idle_seconds += end - idle_since;
#if UART_MODE
    const unsigned framing_errors = top->framing_errors, overruns = top->overruns;
#endif
    top->final();
    delete top;
    delete context;
    link.close_all();

    const double seconds = end - start;
    const double busy_seconds = seconds - idle_seconds;
    const uint64_t busy_cycles = cycles - idle_cycles_total;
    std::fprintf(stderr,
                 "{\"cycles\": %llu, \"seconds\": %.6f, \"cycles_per_s\": %.1f, "
                 "\"busy_cycles\": %llu, \"busy_seconds\": %.6f, \"busy_cycles_per_s\": %.1f, "
                 "\"bytes_in\": %llu, \"bytes_out\": %llu, \"link_bytes_in\": %llu, "
                 "\"link_bytes_out\": %llu, \"discarded\": %llu, \"clients\": %llu, "
                 "\"dropped\": %llu, \"corrupted\": %llu",
                 (unsigned long long)cycles, seconds, seconds > 0 ? cycles / seconds : 0.0,
                 (unsigned long long)busy_cycles, busy_seconds,
                 busy_seconds > 0 ? busy_cycles / busy_seconds : 0.0,
                 (unsigned long long)bytes_in, (unsigned long long)bytes_out,
                 (unsigned long long)link_in, (unsigned long long)link_out,
                 (unsigned long long)discarded, (unsigned long long)link.clients,
                 (unsigned long long)(in_faults.dropped + out_faults.dropped),
                 (unsigned long long)(in_faults.corrupted + out_faults.corrupted));
    if (link.kind == Link::DMA) {
        const dma::Engine& e = link.dma;
        std::fprintf(stderr,
                     ", \"dma_descriptors\": %llu, \"dma_records\": %llu, \"dma_placed_bytes\": %llu, "
                     "\"dma_placed_frames\": %llu, \"dma_bad_crc\": %llu, \"dma_overflows\": %llu, "
                     "\"dma_hunted\": %llu, \"dma_remote_errors\": %llu, \"dma_held_files\": %llu, "
                     "\"dma_held_back\": %llu, \"dma_dropped_held\": %llu",
                     (unsigned long long)e.descriptors, (unsigned long long)e.records,
                     (unsigned long long)e.placed_bytes, (unsigned long long)e.placed_frames,
                     (unsigned long long)e.bad_crc, (unsigned long long)e.overflows,
                     (unsigned long long)e.hunted, (unsigned long long)e.remote_errors,
                     (unsigned long long)e.held_files, (unsigned long long)e.held_back,
                     (unsigned long long)e.dropped_held);
    }
#if UART_MODE
    // board_seconds: the time the board would have taken (the clock stands for N * 3 MHz).
    std::fprintf(stderr,
                 ", \"uart_divisor\": %u, \"clock_hz\": %.0f, \"board_seconds\": %.9f, "
                 "\"uart_framing\": %u, \"uart_overruns\": %u, \"device_bytes_in\": %llu, "
                 "\"device_bytes_out\": %llu, \"host_framing\": %llu, \"uart_lost\": %llu",
                 unsigned(UART_DIVISOR), UART_DIVISOR * UART_BAUD,
                 cycles / (UART_DIVISOR * UART_BAUD), framing_errors, overruns,
                 (unsigned long long)device_in, (unsigned long long)device_out,
                 (unsigned long long)host_framing, (unsigned long long)uart_lost);
#endif
    std::fprintf(stderr, "}\n");
    std::fflush(stderr);
    return 0;
}
