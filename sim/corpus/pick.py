"""Which JPEG files a testbench or a bench decodes, from its parameters: one place, so that a
bench that sets a testbench's results beside another decoder's finds the same files, and
every testbench takes the same ``files`` / ``corpus`` / ``limit``."""

from pathlib import Path

from dlforge.sim.corpus import jpeg_corpus, jpeg_fuzz, photos

__all__ = ["files_of"]


def _corpus(kind, params):
    if kind == "photos":
        return jpeg_corpus.photo_corpus()
    if kind == "heavy":
        return jpeg_corpus.heavy_corpus()
    if kind == "unsupported":
        return jpeg_corpus.unsupported_corpus()
    if kind == "malformed":
        return jpeg_corpus.malformed_corpus()
    if kind == "shipped":
        return [jpeg_corpus.CorpusFile(name, data) for name, data in photos.shipped_jpegs()]
    if kind == "crops":
        return [f for f in jpeg_corpus.baseline_corpus("full") if "160x120" in f.name]
    if kind == "fuzz":
        return jpeg_fuzz.fuzz_corpus(int(params.get("limit", 300)),
                                     seed=int(params.get("seed", 7)))
    if kind == "mixed":
        return jpeg_corpus.mixed_corpus()
    return jpeg_corpus.baseline_corpus(kind)


def files_of(params):
    """The [(name, bytes)] to decode for the parameters ``params``: the paths in ``files``,
    else the corpus named by ``corpus`` (quick | full | photos | heavy | crops | shipped |
    unsupported | malformed | mixed | fuzz; default quick), at most ``limit`` of them, each
    once.  Empty files are left out: a packet has at least one beat, and the host answers an
    empty file itself."""
    if "files" in params:
        files = [(Path(p).name, Path(p).read_bytes()) for p in params["files"]]
    else:
        files = [(f.name, f.data) for f in _corpus(params.get("corpus", "quick"), params)]
    files = [(name, data) for name, data in files if data]
    return files[:int(params.get("limit", len(files)))]
