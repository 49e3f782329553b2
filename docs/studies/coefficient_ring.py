"""How many block slots the coefficient buffer needs: a queueing model of the decoder core.

Per file, the Huffman loop takes a clock per symbol; the read-out behind the coefficient
buffer takes a fixed number of clocks per block: 8 for the IDCT at 8 samples per clock, or,
for 4:2:0 and other subsampled layouts, the raster's output of 4 pixels per clock spread over
the MCU's blocks (256 pixels / 4 / 6 blocks = 10.7 clocks).  The two meet in the buffer's
ring of block slots: the loop may start a block once a slot is free, the read-out a block
once it is whole.  The model is that tandem queue, clock by clock, over each block's symbol
count as the golden model decodes it (DC, nonzero ACs, zero-run symbols, EOB).

With two slots (the buffer before issue 41's ring) the model gives 14.40 million clocks for
the 64 photos; the device measured 14.29 million (docs/results.md).  It predicted +8 %
pixels per clock at four slots and +10 % at eight; what the device measured with eight is
in docs/studies/huffman_loop.md and docs/results.md.

    .venv/bin/python docs/studies/coefficient_ring.py --corpus photos
    .venv/bin/python docs/studies/coefficient_ring.py --corpus photos --backend 2

``--backend 2`` asks what a back end of twice the rate would give (the IDCT at 16 samples per
clock, 4 clocks a block, and the raster's output at 8 pixels per clock): the files whose
light blocks leave the loop waiting even with eight slots (the 1411 x 1411 photos, 45 % of
the corpus's pixels) are bound by the back end, not by the loop.
"""
import argparse

from dlforge.sim.models.jpeg_entropy import blocks_in_scan_order, decode_scan
from dlforge.sim.models.jpeg_parse import parse_headers
from dlforge.sim.corpus.pick import files_of

SLOTS = (2, 4, 8, 16)


def symbols_per_block(data, backend=1):
    """Symbols of each block of the file in scan order, and the read-out's clocks per block
    with a back end ``backend`` times today's rate."""
    headers = parse_headers(data)
    blocks, _ = decode_scan(data, headers)
    counts = []
    for _, zz in blocks_in_scan_order(blocks, headers):
        count, prev = 1, 0                          # the DC symbol
        for k in range(1, 64):
            if zz[k]:
                count += 1 + (k - prev - 1) // 16    # the coefficient and its zero runs
                prev = k
        counts.append(count + (prev < 63))           # EOB unless the block ends full
    comps = headers.components
    per_mcu = sum(c.h * c.v for c in comps)
    pixels_per_mcu = 64 * max(c.h for c in comps) * max(c.v for c in comps)
    readout = max(8.0, pixels_per_mcu / 4 / per_mcu) / backend
    return counts, readout, headers.width * headers.height


def clocks(symbols, readout, slots):
    """The tandem queue: when the last block has been read out."""
    loop_free, read_free, read_done = 0.0, 0.0, [0.0] * len(symbols)
    for i, s in enumerate(symbols):
        start = max(loop_free, read_done[i - slots] if i >= slots else 0.0)
        loop_free = start + s
        read_free = read_done[i] = max(loop_free, read_free) + readout
    return read_free


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="photos")
    parser.add_argument("--backend", type=int, default=1,
                        help="the back end's rate as a multiple of today's (IDCT and output)")
    args = parser.parse_args()
    pixels, total = 0, {n: 0.0 for n in SLOTS}
    symbols_total = 0
    for _, data in files_of({"corpus": args.corpus}):
        counts, readout, px = symbols_per_block(data, args.backend)
        pixels += px
        symbols_total += sum(counts)
        for n in SLOTS:
            total[n] += clocks(counts, readout, n)
    print(f"{args.corpus}, back end x{args.backend}: {pixels} pixels, {symbols_total} symbols "
          f"({pixels / symbols_total:.3f} pixels per symbol: the loop's bound)")
    for n in SLOTS:
        print(f"  {n:2d} slots: {total[n]:12.0f} clocks, {pixels / total[n]:.3f} px/clk "
              f"({total[2] / total[n]:.3f}x two slots)")


if __name__ == "__main__":
    main()
