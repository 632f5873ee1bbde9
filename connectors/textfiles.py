"""Open plain or gzip-compressed text inputs the same way."""

import gzip
import hashlib
import logging
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)


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


def regular_files(folder: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The regular files of `folder` whose names `wanted` accepts, sorted by name.

    A snapshot folder's entries are inputs only when they are regular files of the folder: a
    symlink (to a private file elsewhere, whose first line would land in ``rejects.raw`` for
    every SQL reader to see), a FIFO or a device is skipped and said (issue #28)."""
    out = []
    for path in sorted(folder.iterdir()):
        if not wanted(path.name):
            continue
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            log.warning("%s: skipped: expected a regular file in a snapshot folder, found %s",
                        path, kind)
            continue
        out.append(path)
    return out
