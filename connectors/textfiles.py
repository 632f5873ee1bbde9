"""Open plain or gzip-compressed text inputs the same way."""

import gzip
import hashlib
from pathlib import Path
from typing import IO


def open_text(path: Path) -> IO[str]:
    """Open ``path`` for reading text (UTF-8), transparently decompressing ``.gz`` files.

    ``newline=""`` keeps a stray carriage return inside a field instead of splitting the line.
    """
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def file_digest(path: Path) -> tuple[str, int]:
    """SHA-256 and size in bytes of a file as stored."""
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size
