"""`dlforge sim-board`: build the simulated board and run it in the foreground."""

import argparse
import json
import signal
import sys
import time

from dlforge.sim.board.build import DEFAULTS, UART_DEFAULTS
from dlforge.sim.board.process import SimBoard

__all__ = ["add_arguments", "run_command", "main"]


def add_arguments(parser):
    """The options of ``dlforge sim-board``."""
    parser.add_argument("--link", choices=("tcp", "socket", "pty", "fifo", "dma"), default="tcp",
                        help="host transport: tcp (or socket) on 127.0.0.1, a pty (serial:), "
                             "named pipes (xdma:), or shared memory with a DMA engine (dma:)")
    parser.add_argument("--cores", type=int, default=DEFAULTS["cores"],
                        help="JPEG decoder cores")
    parser.add_argument("--no-conv", dest="conv", action="store_false",
                        help="without the convolution engine (smaller, faster build)")
    parser.add_argument("--link-bytes", type=int, default=None, choices=(1, 4, 8, 16, 32, 64),
                        help=f"host link width in bytes a clock (default "
                             f"{DEFAULTS['link_bytes']}: a PCIe card's DMA stream; 1 with --uart)")
    parser.add_argument("--input-fifo", type=int, default=None, metavar="BYTES",
                        help=f"each decoder core's input FIFO (default "
                             f"{DEFAULTS['input_fifo_bytes']} on a wide link)")
    parser.add_argument("--max-width", type=int, default=DEFAULTS["max_width"])
    parser.add_argument("--max-height", type=int, default=DEFAULTS["max_height"])
    parser.add_argument("--uart", type=int, default=None, metavar="N",
                        help="the UART board (the real boards' top, UartAccelerator): the "
                             "host's bytes go in as bits at N clock cycles per bit (N >= 4); "
                             "one second of board time is N * 3e6 cycles")
    parser.add_argument("--rx-fifo", type=int, default=None, metavar="BYTES",
                        help=f"with --uart: the UART's receive FIFO "
                             f"(default {UART_DEFAULTS['rx_fifo']})")
    parser.add_argument("--max-payload", type=int, default=None, metavar="BYTES",
                        help=f"request frame payload (default {DEFAULTS['max_payload']}, "
                             f"{UART_DEFAULTS['max_payload']} with --uart)")
    parser.add_argument("--reply-payload", type=int, default=None, metavar="BYTES",
                        help=f"reply frame payload (default {DEFAULTS['reply_payload']}, "
                             f"{UART_DEFAULTS['reply_payload']} with --uart)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--corrupt", type=float, default=0.0, metavar="P",
                        help="probability per byte of a flipped bit (both directions)")
    parser.add_argument("--drop", type=float, default=0.0, metavar="P",
                        help="probability per byte of its loss (both directions)")
    parser.add_argument("--seed", type=int, default=1, help="fault injection seed")
    return parser


def run_command(args):
    """``dlforge sim-board``: build, run in the foreground until Ctrl-C / SIGTERM, print
    the device string and, at the end, the statistics.  Returns the exit code."""
    print("building the simulated board (minutes the first time) ...", file=sys.stderr,
          flush=True)
    link = "tcp" if args.link == "socket" else args.link      # socket: the same TCP socket
    sizes = {k: v for k in ("max_payload", "reply_payload")
             if (v := getattr(args, k, None)) is not None}
    if getattr(args, "link_bytes", None) is not None:
        sizes["link_bytes"] = args.link_bytes
    if getattr(args, "input_fifo", None) is not None:
        sizes["input_fifo_bytes"] = args.input_fifo
    uart = getattr(args, "uart", None)
    rx_fifo = getattr(args, "rx_fifo", None)
    if rx_fifo is not None and uart is None:
        print("sim-board: --rx-fifo needs --uart", file=sys.stderr)
        return 2
    if uart is not None and link != "pty":
        print(f"sim-board: note: a UART board has no flow control; the host paces only "
              f"serial: links, so use --link pty (a {link} link will overrun it)",
              file=sys.stderr)
    board = SimBoard(link, cores=args.cores, conv=args.conv, corrupt=args.corrupt,
                     drop=args.drop, seed=args.seed, port=args.port,
                     max_width=args.max_width, max_height=args.max_height, uart=uart,
                     rx_fifo=rx_fifo, **sizes)
    stop = []

    def on_term(signum, frame):
        stop.append(signum)

    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        board.start()
        print(f"simulated board ready: {board.device}  (Ctrl-C to stop)", flush=True)
        try:
            while not stop and board.running:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        exited = not board.running and not stop
        stats = board.stop()
    except KeyboardInterrupt:
        board.stop()
        return 130
    except RuntimeError as exc:
        board.stop()
        print(f"sim-board: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old_term)
    print(json.dumps(stats))
    if exited and board.returncode:
        print(f"sim-board: the board program exited with status {board.returncode}",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(prog="sim_board"))
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
