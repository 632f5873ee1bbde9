"""The streamed driver: a sacct dump file read incrementally and parsed batch by batch (bounded
memory), each batch cut before an allocation line so a job's lines, and a requeued job's runs,
stay together; a loader writes each batch while the next is read
(``gpuledger.ingest.slurm.run.import_sacct_file``)."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.slurm.jobid import ALLOC_ID_RE
from connectors.slurm.run_keys import dedupe_run_keys, step_anchor_keys
from connectors.slurm.sacct_batch import Batch, final_frames, parse_piece
from connectors.slurm.sacct_bytes import line_count, read_header
from connectors.slurm.sanity import DEFAULT_LIMITS, SanityLimits
from connectors.slurm.timefmt import check_timezone

#: Bytes per batch of :func:`iter_sacct_batches` (about 130k lines of the contract's fields).
STREAM_BATCH_BYTES = 32 << 20


#: Bytes of the first batch of :func:`iter_sacct_batches`; each next one doubles up to the above.
FIRST_STREAM_BATCH_BYTES = 2 << 20


@dataclass(frozen=True)
class SacctBatch:
    """One batch of :func:`iter_sacct_batches`: a run of whole jobs of the dump.

    ``runs``/``steps``/``rejects`` are what :func:`parse_sacct` gives for these lines when
    ``complete`` is true and no run key of ``base_keys`` occurs in another batch (requeued runs
    that share a key are numbered within the batch). ``complete`` is false when a step's run is
    not the allocation line above it in this batch (a reordered dump): its ``run_key`` is then
    unknown here, and the caller should parse the dump whole.
    """

    runs: pl.DataFrame
    steps: pl.DataFrame
    rejects: list[Reject]
    lines_read: int
    blank_lines: int
    base_keys: pl.Series
    complete: bool


_ALLOC_ID_BYTES = re.compile(ALLOC_ID_RE.encode())


#: How far back from a batch's end the cut looks for an allocation line.
_CUT_LOOKBACK = 1 << 20


def _job_cut(data: bytes, sep: bytes, jobid_at: int, raw_at: int) -> int:
    """Where to end a batch of ``data`` (whose last line may be incomplete).

    At the start of its last allocation line whose JobIDRaw differs from the line above's, so each
    job's steps, and the runs of a requeued job, stay in one batch. When there is none: 0 (read
    on) if ``data`` is shorter than the look-back, else the start of its last line.
    """
    last = data.rfind(b"\n")
    if last < 0:
        return 0
    width = max(jobid_at, raw_at) + 1

    def head(begin: int, end: int) -> list[bytes]:
        return data[begin : min(end, begin + 512)].split(sep, width)

    p = last + 1  # the start of the (incomplete or next) last line
    floor = max(0, len(data) - _CUT_LOOKBACK)
    while p > floor:
        begin = data.rfind(b"\n", 0, p - 1) + 1
        if begin == 0:  # maybe the tail of a line cut by the read
            break
        fields = head(begin, p - 1)
        if len(fields) > width and _ALLOC_ID_BYTES.match(fields[jobid_at]):
            above = head(data.rfind(b"\n", 0, begin - 1) + 1, begin - 1)
            if len(above) <= width or above[raw_at].split(b".", 1)[0] != fields[raw_at]:
                return begin
        p = begin
    return 0 if floor == 0 else last + 1


def iter_sacct_batches(
    source: Path,
    *,
    delimiter: str | None = None,
    timezone: str = "UTC",
    source_file: str,
    batch_bytes: int | None = None,
    cluster: str | None = None,
    limits: SanityLimits | None = None,
) -> Iterator[SacctBatch]:
    """Parse a sacct dump file batch by batch, reading it incrementally (bounded memory).

    Batches are cut before allocation lines, so a job's lines stay together. Each batch is what
    :func:`parse_sacct` would give for its lines, see :class:`SacctBatch` for the two cases
    (reordered steps, run keys shared across batches) where the caller must fall back to
    :func:`parse_sacct`. ``cluster`` and ``limits`` as for :func:`parse_sacct`. Raises
    :class:`SacctFormatError` like :func:`parse_sacct`.
    """
    check_timezone(timezone)
    limits = DEFAULT_LIMITS if limits is None else limits
    if not source.is_file():
        msg = f"expected a sacct dump at {source}, found none"
        raise SourceError(msg)
    target = max(1, batch_bytes or STREAM_BATCH_BYTES)
    # the first batches are small and grow to ``target``: a caller loading batch by batch
    # starts sooner (it waits for the first batch alone)
    size = max(1, min(target, FIRST_STREAM_BATCH_BYTES))
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as fh:
        pending = fh.read(size)
        while b"\n" not in pending:
            more = fh.read(size)
            if not more:
                break
            pending += more
        dump, body_start = read_header(pending, delimiter, source_file, cluster)
        sep_bytes = dump.sep.encode("utf-8")
        jobid_at = dump.header.index("JobID")
        # without JobIDRaw a step's JobID names its job the same way (123_4.batch → 123_4)
        raw_at = dump.header.index("JobIDRaw") if "JobIDRaw" in dump.header else jobid_at
        pending = pending[body_start:]
        line_no = 2
        while True:
            block = fh.read(size)
            size = min(target, size * 2)
            eof = not block
            if not eof:
                cut = _job_cut(block, sep_bytes, jobid_at, raw_at)
                if cut:
                    piece = b"".join((pending, memoryview(block)[:cut])) if pending else block[:cut]
                    pending = block[cut:]
                else:  # no cut in this block alone: look at all that is pending
                    data = pending + block
                    cut = _job_cut(data, sep_bytes, jobid_at, raw_at)
                    if not cut:  # read on
                        pending = data
                        continue
                    piece, pending = data[:cut], data[cut:]
                    del data
            else:
                piece, pending = pending, b""
            del block
            if piece:
                lines = line_count(piece)
                batch = parse_piece(piece, line_no, dump.header, dump.present, dump.sep,
                                    timezone, source_file, lines, limits=limits)
                del piece
                yield _stream_batch(batch, line_no, source_file)
                line_no += lines
            if eof:
                return


def _stream_batch(batch: Batch, first_line: int, source_file: str) -> SacctBatch:
    base_keys = batch.runs["run_key"]
    runs = dedupe_run_keys(batch.runs)
    if batch.steps.height:
        keys, look_up = step_anchor_keys(batch.steps, runs, batch.alloc_lines, batch.lines,
                                         offset=first_line)
        complete = not look_up.any()
    else:
        keys, complete = pl.Series("run_key", [], dtype=pl.String), True
    runs, steps = final_frames(runs, batch.steps, keys, source_file)
    rejects = sorted(batch.rejects, key=lambda r: r.line_no)
    return SacctBatch(runs, steps, rejects, batch.lines, batch.blank_lines, base_keys.unique(),
                      complete)
