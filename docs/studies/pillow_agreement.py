"""How often dlforge's verdict on a file agrees with Pillow's (issue 40): the reference for
every file is ``Image.open(f).convert("RGB")`` (torchvision's ``pil_loader``).

For each corpus (the damage classes, the malformed and unsupported files, and fuzzed files:
truncated, bit-flipped and spliced real files), every file goes through the decoder service
on the ``cpu`` device (the host's side of the rule: pre-check, repair, libjpeg-turbo, Pillow)
and, for the device's side, through the golden model, which the cores equal bit for bit, on
the bytes the host sends (extraneous bytes dropped): a file the model decodes without an
error is one the device decodes itself, whose pixels Pillow is not asked for.  A file agrees when both refuse it, or both decode it to the same
pixels.  Prints JSON.

    .venv/bin/python docs/studies/pillow_agreement.py [--fuzz N]
"""

import argparse
import io
import json

import numpy as np
from PIL import Image


def _pillow(data):
    try:
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, SyntaxError, Image.DecompressionBombError):
        return None


def _same(a, b):
    return bool(a is not None and b is not None and a.shape == b.shape and (a == b).all())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=1500, help="fuzzed files (default 1500)")
    args = parser.parse_args()
    from dlforge.host.jpeg.decode_service import DecoderService
    from dlforge.host.jpeg.precheck import drop_extraneous_bytes, precheck
    from dlforge.sim.corpus.jpeg_corpus import (damaged_corpus, malformed_corpus,
                                                unsupported_corpus)
    from dlforge.sim.corpus.jpeg_fuzz import fuzz_corpus
    from dlforge.sim.models.jpeg_model import JpegDecodeError, decode
    corpora = {"damaged": damaged_corpus(), "malformed": malformed_corpus(),
               "unsupported": unsupported_corpus(), "fuzzed": fuzz_corpus(args.fuzz)}
    report = {}
    for name, files in corpora.items():
        with DecoderService("cpu") as service:
            results = list(service.decode([(f.name, f.data) for f in files]))
        row = {"files": len(files), "pillow_decodes": 0, "cpu_agrees": 0,
               "device_decodes": 0, "device_differs_from_pillow": []}
        for f, r in zip(files, results):
            want = _pillow(f.data)
            row["pillow_decodes"] += want is not None
            row["cpu_agrees"] += bool((want is None and r.status == "error")
                                      or _same(r.pixels, want))
            sent = f.data
            if precheck(sent)[0].malformed:                  # the host's repair, as sent
                repaired = drop_extraneous_bytes(sent)
                if repaired is not None and not precheck(repaired[0])[0].malformed:
                    sent = repaired[0]
            try:
                mine = decode(sent, "fancy").pixels
            except JpegDecodeError:
                continue
            row["device_decodes"] += 1
            if not _same(mine, want):
                row["device_differs_from_pillow"].append(f.name)
        report[name] = row
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
