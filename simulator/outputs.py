"""Output files that are byte-identical on every run: UTF-8, ``\\n`` line ends, and gzip
streams without a timestamp or file name in their header."""

import gzip
import io
from pathlib import Path
from typing import TextIO

BUFFER = 1 << 20


def open_output(path: Path, compress: bool) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        raw = path.open("wb")
        zipped = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6)
        return _OwningTextWrapper(zipped, raw)
    return path.open("w", encoding="utf-8", newline="\n", buffering=BUFFER)


class _OwningTextWrapper(io.TextIOWrapper):
    """A text layer over a gzip stream that also closes the underlying file."""

    def __init__(self, zipped: gzip.GzipFile, raw: io.BufferedWriter) -> None:
        super().__init__(zipped, encoding="utf-8", newline="\n")
        self._zipped = zipped
        self._raw = raw

    def close(self) -> None:
        if self.closed:
            return
        super().close()  # flushes and closes the gzip stream
        self._raw.close()
