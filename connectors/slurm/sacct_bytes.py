"""A sacct dump's bytes and lines: the file read whole (``.gz`` decompressed) or given as text,
cut at line ends into batches, split fast by Polars' CSV reader when every line has the header's
field count, read line by line otherwise (invalid UTF-8 → a reject per line), and the header line
(delimiter, fields; names and aliases by :mod:`connectors.slurm.header`)."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.slurm.fields import UNIT_SEPARATOR
from connectors.slurm.header import SacctFormatError, header_columns

SOURCE = "sacct"


def source_bytes(source: Path | str | bytes) -> bytes:
    """The dump as bytes: a file (``.gz`` decompressed), or text given directly."""
    if isinstance(source, Path):
        if not source.is_file():
            msg = f"expected a sacct dump at {source}, found none"
            raise SourceError(msg)
        data = source.read_bytes()
        return gzip.decompress(data) if source.suffix == ".gz" else data
    if isinstance(source, str):
        return source.encode("utf-8")
    return bytes(source)


def chunk_bounds(data: bytes, start: int, target: int) -> list[tuple[int, int, int]]:
    """Cut ``data[start:]`` at line ends into pieces of about ``target`` bytes.

    Returns (begin, end, number of the piece's first line) with line 1 = the header.
    """
    bounds: list[tuple[int, int, int]] = []
    pos, line_no, n = start, 2, len(data)
    while pos < n:
        end = min(n, pos + target)
        if end < n:
            nl = data.find(b"\n", end - 1)
            end = n if nl < 0 else nl + 1
        bounds.append((pos, end, line_no))
        line_no += data.count(b"\n", pos, end) + (0 if data[end - 1 : end] == b"\n" else 1)
        pos = end
    return bounds or [(start, start, 2)]


def read_piece(piece: bytes, first_line: int, source_file: str
               ) -> tuple[pl.DataFrame, list[Reject]]:
    """The lines of ``piece`` (``line_no``, ``line``); non-UTF-8 lines → rejects."""
    try:
        lines = pl.read_lines(piece, name="line")
    except pl.exceptions.ComputeError:
        return _read_lines_lenient(piece, source_file, first_line)
    return lines.with_row_index("line_no", offset=first_line), []


def line_count(piece: bytes) -> int:
    return piece.count(b"\n") + (0 if piece[-1:] in (b"\n", b"") else 1)


def fast_split(piece: bytes, sep: str, n_fields: int, first_line: int,
               n_lines: int | None = None) -> pl.DataFrame | None:
    """``line_no``, ``f0`` … ``f{n-1}`` when every line of ``piece`` has exactly ``n_fields``
    fields, else ``None`` (the caller then takes the line-by-line path).

    Polars' CSV reader (no quoting, every field a String, multi-threaded) splits the lines. It
    fails on a line with too many fields and on invalid UTF-8; a line with too few fields (or a
    blank one) shows in the separator count, which is ``n_fields - 1`` per line exactly when no
    line has too many and none too few. ``\r`` (which the reader would drop) sends the piece to
    the slow path.
    """
    if not piece or len(sep) != 1 or len(sep.encode("utf-8")) != 1 or b"\r" in piece:
        return None
    n_lines = line_count(piece) if n_lines is None else n_lines
    if piece.count(sep.encode("utf-8")) != n_lines * (n_fields - 1):
        return None
    try:
        frame = pl.read_csv(
            piece, has_header=False, separator=sep, quote_char=None, infer_schema=False,
            empty_string_is_null=False, new_columns=[f"f{i}" for i in range(n_fields)],
            raise_if_empty=False, truncate_ragged_lines=False,
        )
    except pl.exceptions.PolarsError:
        return None
    if frame.height != n_lines or frame.width != n_fields:
        return None
    return frame.select(
        pl.int_range(first_line, first_line + n_lines, dtype=pl.Int64).alias("line_no"), pl.all()
    )


def _read_lines_lenient(raw: bytes, source_file: str, first_line: int = 1
                        ) -> tuple[pl.DataFrame, list[Reject]]:
    """The slow way, for input with invalid UTF-8: such lines become rejects."""
    parts = raw.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    line_nos: list[int] = []
    texts: list[str] = []
    rejects: list[Reject] = []
    for no, part in enumerate(parts, start=first_line):
        if part.endswith(b"\r"):
            part = part[:-1]
        try:
            texts.append(part.decode("utf-8"))
            line_nos.append(no)
        except UnicodeDecodeError as exc:
            reason = f"expected UTF-8 text, found invalid bytes ({exc.reason} at byte {exc.start})"
            rejects.append(Reject(SOURCE, source_file, no, "line", reason,
                                  part.decode("utf-8", "replace")))
    frame = pl.DataFrame(
        {"line_no": line_nos, "line": texts}, schema={"line_no": pl.UInt32, "line": pl.String}
    )
    return frame, rejects


def _detect_delimiter(header: str, source_file: str) -> str:
    if UNIT_SEPARATOR in header:
        return UNIT_SEPARATOR
    if "|" in header:
        return "|"
    msg = (f"{source_file}: expected a header line with fields separated by '|' or the unit "
           f"separator (0x1f), found {header[:200]!r}; pass delimiter= for another "
           "separator")
    raise SacctFormatError(msg)


@dataclass(frozen=True)
class DumpHeader:
    """What the header says: the delimiter, the field of each column, the fields present."""

    sep: str
    header: list[str | None]
    present: set[str]


def read_header(data: bytes, delimiter: str | None, source_file: str,
                cluster: str | None = None) -> tuple[DumpHeader, int]:
    """The header of a dump starting with ``data``, and where the body starts."""
    if not data:
        msg = f"{source_file}: expected a header line (JobID|JobIDRaw|…), found an empty file"
        raise SacctFormatError(msg)
    header_end = data.find(b"\n")
    header_end = len(data) if header_end < 0 else header_end
    try:
        header_line = data[:header_end].decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"{source_file}: expected a UTF-8 header on line 1, found invalid bytes"
        raise SacctFormatError(msg) from exc
    header_line = header_line.removesuffix("\r").removeprefix("\ufeff")
    sep = delimiter if delimiter is not None else _detect_delimiter(header_line, source_file)
    if sep == "":
        msg = "expected a non-empty delimiter, found ''"
        raise ValueError(msg)
    header = header_columns(header_line, sep, source_file, cluster=cluster)
    present = {h for h in header if h is not None}
    return DumpHeader(sep, header, present), min(len(data), header_end + 1)
