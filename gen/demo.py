"""``make demo``: real photos through the simulated decoder core, checked against libjpeg-turbo.

Decodes scikit-image's three shipped JPEG files and a few Pillow encodes of its photos with
the generated core in Verilator (``dlforge decode --device sim``), compares every image with
simplejpeg (libjpeg-turbo), and prints a table: file, layout, size, bit-exact, pixels/clock
from the core's own cycle counter.  Exit status 1 if any image differs.
"""

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


def _layout(data):
    from ..sim.jpeg_parse import parse_headers
    h = parse_headers(data)
    if len(h.components) == 1:
        return "gray"
    return {(1, 1): "4:4:4", (2, 1): "4:2:2", (1, 2): "4:4:0",
            (2, 2): "4:2:0"}[(h.components[0].h, h.components[0].v)]


def demo_files(folder, photos=4):
    """Paths of the demo's inputs: skimage's JPEG files, plus ``photos`` photo-corpus files."""
    from ..sim import jpeg_corpus
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in jpeg_corpus.shipped_jpegs():
        paths.append(folder / name)
        paths[-1].write_bytes(data)
    corpus = jpeg_corpus.photo_corpus()
    step = max(1, len(corpus) // photos) if photos else len(corpus) + 1
    for f in corpus[::step][:photos]:
        paths.append(folder / f"{f.name}.jpg")
        paths[-1].write_bytes(f.data)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m dlforge.gen.demo", description=__doc__)
    parser.add_argument("--photos", type=int, default=4, help="photo-corpus files to add")
    parser.add_argument("--folder", default="build/demo/jpeg", help="where the inputs go")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import simplejpeg
    from ..host.jpeg_decode import decode_files
    paths = demo_files(args.folder, args.photos)
    results = decode_files(paths, device="sim")
    rows = []
    for path, r in zip(paths, results):
        data = path.read_bytes()
        ref = simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False)
        exact = r.status == "ok" and r.pixels.shape == ref.shape and bool((r.pixels == ref).all())
        rows.append({"file": path.name, "layout": _layout(data), "size": f"{ref.shape[1]}x"
                     f"{ref.shape[0]}", "status": r.status, "bit_exact": exact,
                     "cycles": r.cycles, "pixels_per_clock":
                     round(ref.shape[0] * ref.shape[1] / r.cycles, 3) if r.cycles else None})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        head = ("file", "layout", "size", "status", "bit-exact", "cycles", "pixels/clock")
        table = [(w["file"], w["layout"], w["size"], w["status"], "yes" if w["bit_exact"] else "NO",
                  str(w["cycles"]), str(w["pixels_per_clock"])) for w in rows]
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:<{n}}}" for n in widths)
        print(fmt.format(*head))
        print(fmt.format(*("-" * n for n in widths)))
        for t in table:
            print(fmt.format(*t))
    return 0 if all(w["bit_exact"] for w in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
