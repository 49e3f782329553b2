"""Engine words out, result words back: one exchange with the convolution engine of an
:class:`~dlforge.host.device.accelerator.AcceleratorDevice` over its link.

The device routes the engine's reply frames to its ``engine_replies``
(:class:`~dlforge.host.device.accelerator.EngineReplies`), which checks their numbers; this
module sends the words and waits for the results.  On a link that is not reliable the words
go stop and wait (each frame followed by a ping), and a refused frame is sent again."""

import time

from dlforge.rtl.link.protocol import Opcode
from dlforge.host.link.errors import DeviceGone, LinkTimeout

__all__ = ["conv_exchange"]


def conv_exchange(device, raw, result_bytes):
    """Send an engine word stream to ``device``'s engine, return its ``result_bytes`` of
    result words.

    ``raw``: the bytes, or an iterable of byte strings (each a whole number of words)
    made while the earlier ones travel: on a reliable link each is sent as soon as it
    is made and the replies so far are taken in between, so the host's packing
    overlaps the engine's work."""
    if not device.array:
        raise ValueError(f"{device.name} has no convolution engine")
    link, replies = device.link, device.engine_replies
    reliable = device.transport.reliable
    lb = device.engine_word
    step = max(lb, device.max_payload // lb * lb)
    tag = device.data_tag()
    replies.results[tag] = bytearray()
    replies.refused = replies.damaged = False
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        if reliable:
            for piece in raw:
                if len(piece) % lb:
                    raise ValueError(f"engine words are {lb} bytes: a piece of "
                                     f"{len(piece)} bytes")
                view = memoryview(piece)
                for i in range(0, len(view), step):
                    link.queue(Opcode.CONV_WORDS, tag, view[i:i + step])
                link.pump(0)
            raw = b""
        else:
            raw = b"".join(raw)
    view = memoryview(raw)
    chunks = [view[i:i + step] for i in range(0, len(view), step)]
    deadline = time.monotonic() + device.timeout
    if reliable:
        for chunk in chunks:
            link.queue(Opcode.CONV_WORDS, tag, chunk)
    else:
        # stop and wait: a refused frame is sent again before the next one
        for chunk in chunks:
            for _ in range(device.retries + 1):
                replies.refused = False
                link.queue(Opcode.CONV_WORDS, tag, chunk)
                device.ping()
                if not replies.refused:
                    break
            else:
                raise LinkTimeout(f"{device.name}: engine words refused "
                                  f"{device.retries + 1} times")
    got = replies.results[tag]
    moved = time.monotonic()
    while len(got) < result_bytes:
        if link.pump(0.05):
            moved = time.monotonic()
            deadline = moved + device.timeout
        elif (replies.damaged or replies.refused) and time.monotonic() > moved + 1.0:
            break                               # frames lost: what is still due never comes
        elif time.monotonic() > deadline:
            del replies.results[tag]
            raise LinkTimeout(f"{device.name}: the engine sent {len(got)} of {result_bytes} "
                              f"result bytes, then nothing for {device.timeout:g} s")
    del replies.results[tag]
    if replies.refused:
        raise DeviceGone(f"{device.name}: the engine's words were refused (damaged on the "
                         "way)")
    if replies.damaged:
        raise DeviceGone(f"{device.name}: engine results arrived damaged or a reply frame "
                         "was lost")
    return bytes(got[:result_bytes])
