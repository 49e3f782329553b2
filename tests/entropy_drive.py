"""amaranth.sim drivers for an entropy decoder's ports (an EntropyDecoder, or one job of an
EntropyDecoderPair): feed a file's tables, scan beat and scan bytes; collect its blocks and
verdict."""

from dlforge.sim.tb.entropy_stimulus import dht_bodies, scan_bytes, scan_config

__all__ = ["feed_scan", "collect_scan"]


async def feed_scan(ctx, dec, data, headers):
    """The DHT bodies, the scan beat, then the scan's bytes until they run out or the decoder
    stops (a damaged scan ends early)."""
    for body in dht_bodies(data, headers):
        for i, b in enumerate(body):
            ctx.set(dec.dht.valid, 1)
            ctx.set(dec.dht.payload, {"byte": b, "last": i == len(body) - 1})
            await ctx.tick().until(dec.dht.ready)
    ctx.set(dec.dht.valid, 0)
    ctx.set(dec.scan.valid, 1)
    ctx.set(dec.scan.payload, scan_config(headers))
    await ctx.tick().until(dec.scan.ready)
    ctx.set(dec.scan.valid, 0)
    body = scan_bytes(data, headers)
    for _ in range(4):                     # busy may follow the scan beat a clock or two late
        await ctx.tick()
    for i, b in enumerate(body):
        ctx.set(dec.i.valid, 1)
        ctx.set(dec.i.payload, {"byte": b, "last": i == len(body) - 1})
        await ctx.tick().until(dec.i.ready | ~dec.busy)
        if not ctx.get(dec.busy) and not ctx.get(dec.i.ready):
            break
    ctx.set(dec.i.valid, 0)


async def collect_scan(ctx, dec, rng, ready_prob=1.0, max_cycles=200_000):
    """(blocks as (component, 64 coefficients), (status, marker)), with ``coef.ready`` drawn
    at random each clock."""
    blocks, current = [], [0] * 64
    ctx.set(dec.done.ready, 1)
    for _ in range(max_cycles):
        ctx.set(dec.coef.ready, rng.random() < ready_prob)
        _, _, c_valid, c_ready, beat, d_valid, d_beat = await ctx.tick().sample(
            dec.coef.valid, dec.coef.ready, dec.coef.payload, dec.done.valid, dec.done.payload)
        if c_valid and c_ready:
            if beat.write:
                current[beat.zz] = beat.value
            if beat.end:
                blocks.append((int(beat.component), current))
                current = [0] * 64
        if d_valid:
            return blocks, (int(d_beat.status), int(d_beat.marker))
    raise AssertionError("the decoder did not finish")
