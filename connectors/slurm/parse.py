"""Parse a ``sacct --parsable2`` dump into typed run and step frames: the whole-file driver,
and the names the rest of the project imports (:func:`parse_sacct`, :class:`SacctParse`,
:func:`iter_sacct_batches`, :class:`SacctBatch`, :func:`allocations_per_node`,
:class:`SacctFormatError`).

What goes where
---------------
- allocation rows (``123``, ``123_4``, ``123_[5-9%2]``, ``123+1``) → ``runs``
  (:data:`connectors.slurm.records.RUNS_SCHEMA`);
- step rows (``123.batch``, ``123.extern``, ``123.0``, ``15+1.0`` …) → ``steps``
  (:data:`connectors.slurm.records.STEPS_SCHEMA`);
- every line that cannot be loaded → a :class:`connectors.errors.Reject` with the file, the 1-based
  line number (the header is line 1), the field, an "expected …, found …" reason and the raw line.
- allocation lines that parse but break a sanity limit (GPUs beyond the node inventory or a
  ceiling, End before Start, absurd durations, times after the observation) → rejects too, the
  reason naming the rule (:mod:`connectors.slurm.sanity`).

Nothing is dropped silently: ``lines_read == runs.height + steps.height + len(rejects) +
blank_lines`` (``lines_read`` counts the lines after the header).

Where each part lives
---------------------
- :mod:`connectors.slurm.sacct_bytes`: the dump's bytes, its lines and its header line;
- :mod:`connectors.slurm.sacct_typing`: typed columns, per-field checks, DST-ambiguous times;
- :mod:`connectors.slurm.separators`: lines with stray separators (``|`` in names under ``-P``);
- :mod:`connectors.slurm.bridge`: slurm-bridge ``AdminComment`` pods;
- :mod:`connectors.slurm.run_keys`: run keys of requeued jobs and the run of each step;
- :mod:`connectors.slurm.sacct_batch`: one batch of lines → runs, steps and rejects;
- this module (whole file, in parallel batches) and :mod:`connectors.slurm.sacct_stream`
  (incremental, bounded memory): the two drivers;
- :mod:`connectors.slurm.node_split`: the GPUs of each run per node.

Header names (aliases such as ``NNodes``, a field under two names, dumps without JobIDRaw or
Cluster) are read by :mod:`connectors.slurm.header`.

Speed
-----
The dump is cut at line ends into batches that are parsed in parallel threads (Polars releases
the GIL). A batch whose lines all have the header's field count (the separator count tells) is
split by Polars' CSV reader (no quoting, all String); any other batch is read one line per row,
split with one vectorized ``str.split``, and only the lines with a wrong field count go through
Python. Then Polars expressions only: fields that repeat (TRES, State, exit codes, node lists)
are parsed once per distinct value and gathered back. Python runs per line only for odd lines,
rejected lines and DST-ambiguous times, and per distinct value for hostlists and unusual
slurm-bridge JSON.

:func:`iter_sacct_batches` reads a file incrementally and yields batches cut before allocation
lines (a job's lines, and a requeued job's runs, stay together), so a loader can write each batch
while the next is parsed with bounded memory (``gpuledger.ingest.slurm.run.import_sacct_file``).
``benchmarks/sacct_ingest.py`` measures the whole ingest (``make bench``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from connectors.errors import Reject
from connectors.slurm.header import GPU_SECONDS_FIELDS, SacctFormatError
from connectors.slurm.node_split import allocations_per_node
from connectors.slurm.run_keys import dedupe_run_keys, step_run_keys
from connectors.slurm.sacct_batch import Batch, final_frames, parse_piece
from connectors.slurm.sacct_bytes import chunk_bounds, read_header, source_bytes
from connectors.slurm.sacct_stream import (
    FIRST_STREAM_BATCH_BYTES,
    STREAM_BATCH_BYTES,
    SacctBatch,
    iter_sacct_batches,
)
from connectors.slurm.sanity import DEFAULT_LIMITS, SanityLimits
from connectors.slurm.timefmt import check_timezone

__all__ = [
    "BATCH_BYTES", "FIRST_STREAM_BATCH_BYTES", "REQUIRED_FIELDS", "STREAM_BATCH_BYTES",
    "SacctBatch", "SacctFormatError", "SacctParse", "allocations_per_node",
    "iter_sacct_batches", "parse_sacct",
]


#: A dump without these cannot give GPU-seconds per run (JobIDRaw and Cluster are derived when
#: absent: :mod:`connectors.slurm.header`).
REQUIRED_FIELDS: tuple[str, ...] = GPU_SECONDS_FIELDS


#: Bytes per batch at most (about 500k lines): memory stays bounded, and batches run in parallel.
BATCH_BYTES = 128 << 20


#: Batches parsed at the same time (Polars releases the GIL; each batch is mostly one-threaded).
_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class SacctParse:
    """The result of :func:`parse_sacct`.

    ``lines_read`` counts the lines after the header (blank ones included), so
    ``lines_read == runs.height + steps.height + len(rejects) + blank_lines``.
    """

    runs: pl.DataFrame
    steps: pl.DataFrame
    rejects: list[Reject]
    lines_read: int
    blank_lines: int = 0
    delimiter: str = "|"
    fields: tuple[str, ...] = field(default=())

    def check_counts(self) -> None:
        """Raise ``AssertionError`` unless every line is accounted for."""
        accounted = self.runs.height + self.steps.height + len(self.rejects) + self.blank_lines
        if accounted != self.lines_read:
            msg = f"expected {self.lines_read} lines accounted for, found {accounted}"
            raise AssertionError(msg)


def parse_sacct(
    source: Path | str | bytes,
    *,
    delimiter: str | None = None,
    timezone: str = "UTC",
    source_file: str,
    cluster: str | None = None,
    limits: SanityLimits | None = None,
) -> SacctParse:
    """Parse a sacct ``--parsable2`` dump.

    ``source``: a ``Path`` to the dump (``.gz`` is decompressed) or the dump's text itself
    (``str``/``bytes``; a ``str`` is always text, never a path). ``delimiter``: detected from the
    header (unit separator 0x1f, else ``|``) unless given; any string works. ``timezone``: the IANA
    zone the sacct process printed naive local times in (ignored for epoch and offset times).
    ``source_file``: the name to put in rejects and rows. ``cluster``: the cluster of a dump
    without a Cluster field (with one, each row's Cluster must be this name). ``limits``: the
    sanity limits allocation lines are held to (:mod:`connectors.slurm.sanity`; default
    :data:`~connectors.slurm.sanity.DEFAULT_LIMITS`: the ceilings and durations, no inventory,
    no observation time); a line that breaks one is a reject naming the rule.

    Raises :class:`SacctFormatError` when the header is missing, lacks required fields, or has no
    known delimiter; every other problem is a per-line :class:`Reject`.
    """
    check_timezone(timezone)
    limits = DEFAULT_LIMITS if limits is None else limits
    data = source_bytes(source)
    dump, body_start = read_header(data, delimiter, source_file, cluster)

    body_bytes = len(data) - body_start
    parts = _THREADS * max(1, -(-body_bytes // (_THREADS * BATCH_BYTES)))
    bounds = chunk_bounds(data, body_start, max(1, -(-body_bytes // parts)))

    held = [data]  # released as soon as every batch has its lines
    del data

    def work(bound: tuple[int, int, int]) -> Batch:
        begin, end, first_line = bound
        return parse_piece(held[0][begin:end], first_line, dump.header, dump.present, dump.sep,
                           timezone, source_file, limits=limits)

    with ThreadPoolExecutor(max_workers=min(len(bounds), _THREADS)) as pool:
        batches = list(pool.map(work, bounds))
    held.clear()
    rejects: list[Reject] = []
    lines_read = sum(b.lines for b in batches)
    for b in batches:
        rejects.extend(b.rejects)
    blank_lines = sum(b.blank_lines for b in batches)
    runs = dedupe_run_keys(pl.concat([b.runs for b in batches], how="vertical"))
    steps = pl.concat([b.steps for b in batches], how="vertical")
    alloc_lines = pl.concat([b.alloc_lines for b in batches])
    del batches

    step_keys = step_run_keys(steps, runs, alloc_lines, lines_read + 1)
    runs, steps = final_frames(runs, steps, step_keys, source_file)

    rejects.sort(key=lambda r: r.line_no)
    return SacctParse(
        runs=runs, steps=steps, rejects=rejects, lines_read=lines_read,
        blank_lines=blank_lines, delimiter=dump.sep,
        fields=tuple(h if h is not None else "" for h in dump.header),
    )

