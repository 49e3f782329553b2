"""The host's link to a device: byte transports (:mod:`.transport`), the device strings that
open them (:mod:`.device_string`), frames over a transport (:mod:`.frame_link`) and the
shared-memory DMA link (:mod:`.dma`).  The frame format itself is the gateware's
(:mod:`dlforge.rtl.link.protocol`), and so is the DMA layout (:mod:`dlforge.rtl.link.dma_layout`):
the host imports both, it defines neither."""
