"""What Verilator's FST writer needs beyond a C++ compiler: the LZ4 block compressor.

Verilator 5.048 compresses FST blocks with ``LZ4_compress_default`` and links ``-llz4``.
Where the system has no LZ4 headers (Debian: liblz4-dev), this builds a static ``liblz4.a``
from the ``lz4.c``/``lz4.h`` that PyPI's ``lz4`` source distribution carries, once, under
``build/``, so waveforms need no system package either.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from filelock import FileLock

__all__ = ["lz4_build_env"]

LZ4_SDIST = "lz4==4.4.5"


def _system_has_lz4(cc):
    probe = "#include <lz4.h>\nint main(void){return LZ4_compressBound(1) > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text(probe)
        result = subprocess.run([cc, str(src), "-llz4", "-o", str(Path(tmp, "probe"))],
                                capture_output=True)
        return result.returncode == 0


def lz4_build_env(build_root):
    """Environment additions (CPPFLAGS, LDFLAGS) that let Verilator's FST tracing build."""
    cc = shutil.which(os.environ.get("CC", "cc")) or "cc"
    if _system_has_lz4(cc):
        return {}
    folder = Path(build_root) / "lz4"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        lib = folder / "liblz4.a"
        if not lib.exists():
            download = folder / "sdist"
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--no-binary", ":all:", LZ4_SDIST, "-d", str(download)], check=True)
            archive = next(download.glob("lz4-*.tar.gz"))
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    if member.name.endswith(("lz4libs/lz4.c", "lz4libs/lz4.h")):
                        (folder / Path(member.name).name).write_bytes(tar.extractfile(member).read())
            subprocess.run([cc, "-O2", "-fPIC", "-c", str(folder / "lz4.c"), "-o",
                            str(folder / "lz4.o")], check=True)
            subprocess.run(["ar", "rcs", str(lib), str(folder / "lz4.o")], check=True)
    return {"CPPFLAGS": f"-I{folder}", "LDFLAGS": f"-L{folder}"}
