"""Parse a ``sacct --parsable2`` dump into typed run and step frames.

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

Run keys (requeues)
-------------------
With ``--duplicates`` a requeued job has one allocation row per run, all with the same JobID and
JobIDRaw. Slurm resets ``Submit`` at each requeue, so ``run_key = {cluster}:{job_id_raw}:{submit}``
(submit as epoch seconds; ``none`` when Submit is Unknown) is stable across re-ingests of
overlapping windows. If several rows of one dump still share a key (a requeue within the same
second as the submit), they are ordered by start, then end (nulls last), then line number; the first
keeps the plain key and the n-th (n ≥ 2) gets ``#n`` appended (``gpulab:20:1796017424#2``). This is
deterministic and does not depend on the order of the lines, only on the rows' own times.

Steps carry the ``run_key`` of their run: sacct prints each run's steps right after its allocation
row, so a step belongs to the allocation line right above it when that line has the same cluster
and JobIDRaw. If that allocation line was rejected, the step gets no run (null: no guessing, since
an earlier run of a requeued job has the same JobIDRaw). For a dump whose lines were reordered
(the line above belongs to another job, or there is none) the run is looked up by (cluster,
JobIDRaw): the nearest allocation row above, else below; null when the dump has none.

Stray separators (``|`` in names under plain ``-P``)
-----------------------------------------------------
Lines are split with vectorized Polars; only lines whose separator count differs from the header's
go through a Python path:

- fewer fields than the header → rejected;
- more fields and exactly one free-text field (:data:`FREE_TEXT_FIELDS`) in the header → the extra
  separators belong to it without doubt;
- more fields and several free-text fields → every placement of the extra separators among them is
  tried; a placement is kept when every other field parses (State, times, ids, TRES, numbers,
  NodeList …) and the free-text fields are plausible (AdminComment empty, JSON or a jobstats
  ``JS1:`` blob; WCKey a single word). Exactly one such placement → the line loads; several → the
  ones under which the fields nobody reads also have sacct's shapes
  (:mod:`connectors.slurm.shapes`, for ``--format=ALL``) are kept, exactly one → the line loads;
  otherwise rejected ("ambiguous: 1 extra separator(s) could belong to JobName or Comment").
  Columns are never shifted silently.

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
while the next is parsed with bounded memory (``gpuledger.slurm_ingest.import_sacct_file``).
``benchmarks/sacct_ingest.py`` measures the whole ingest (``make bench``).

Times
-----
See :mod:`connectors.slurm.timefmt`. A naive local time in the repeated DST hour is resolved from
the same row when only one reading satisfies ``Submit ≤ Start``, ``Eligible ≤ Start``,
``Start ≤ End`` and ``End − Start = Elapsed`` (or, failing that for every reading, e.g. for a
suspended job, ``End − Start ≥ Elapsed``); otherwise the line is rejected. ``Submit ≤ Eligible`` is
deliberately not assumed.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.slurm.fields import UNIT_SEPARATOR
from connectors.slurm.header import (
    FREE_TEXT_FIELDS,
    GPU_SECONDS_FIELDS,
    KNOWN_FIELDS,
    HeaderColumns,
    SacctFormatError,
    derived_columns,
    field_of,
    header_columns,
    row_checks,
)
from connectors.slurm.hostlist import expand_hostlist_column
from connectors.slurm.jobid import (
    ALLOC_ID_RE,
    JOBID_EXPECTED,
    JOBIDRAW_EXPECTED,
    array_het_columns,
    jobid_frame,
)
from connectors.slurm.records import (
    NODE_ALLOCATIONS_SCHEMA,
    RUNS_SCHEMA,
    STEPS_SCHEMA,
)
from connectors.slurm.sanity import DEFAULT_LIMITS, SanityLimits, check_limits
from connectors.slurm.shapes import shape_ok
from connectors.slurm.states import EXIT_EXPECTED, STATE_EXPECTED, exit_exprs, state_exprs
from connectors.slurm.timefmt import (
    DURATION_EXPECTED,
    TIME_EXPECTED,
    check_timezone,
    duration_exprs,
    raw_seconds_exprs,
    time_frame,
)
from connectors.slurm.tres import TRES_EXPECTED, tres_exprs

SOURCE = "sacct"

#: A dump without these cannot give GPU-seconds per run (JobIDRaw and Cluster are derived when
#: absent: :mod:`connectors.slurm.header`).
REQUIRED_FIELDS: tuple[str, ...] = GPU_SECONDS_FIELDS

TIME_FIELDS: tuple[str, ...] = ("Submit", "Eligible", "Start", "End")
MAX_PLACEMENTS = 2_000


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


# --------------------------------------------------------------------------------------------
# reading


def _source_bytes(source: Path | str | bytes) -> bytes:
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


def _chunk_bounds(data: bytes, start: int, target: int) -> list[tuple[int, int, int]]:
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


def _read_piece(piece: bytes, first_line: int, source_file: str
                ) -> tuple[pl.DataFrame, list[Reject]]:  # fmt: skip
    """The lines of ``piece`` (``line_no``, ``line``); non-UTF-8 lines → rejects."""
    try:
        lines = pl.read_lines(piece, name="line")
    except pl.exceptions.ComputeError:
        return _read_lines_lenient(piece, source_file, first_line)
    return lines.with_row_index("line_no", offset=first_line), []


def _line_count(piece: bytes) -> int:
    return piece.count(b"\n") + (0 if piece[-1:] in (b"\n", b"") else 1)


def _fast_split(piece: bytes, sep: str, n_fields: int, first_line: int,
                n_lines: int | None = None) -> pl.DataFrame | None:  # fmt: skip
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
    n_lines = _line_count(piece) if n_lines is None else n_lines
    if piece.count(sep.encode("utf-8")) != n_lines * (n_fields - 1):
        return None
    try:
        frame = pl.read_csv(
            piece, has_header=False, separator=sep, quote_char=None, infer_schema=False,
            empty_string_is_null=False, new_columns=[f"f{i}" for i in range(n_fields)],
            raise_if_empty=False, truncate_ragged_lines=False,
        )  # fmt: skip
    except pl.exceptions.PolarsError:
        return None
    if frame.height != n_lines or frame.width != n_fields:
        return None
    return frame.select(
        pl.int_range(first_line, first_line + n_lines, dtype=pl.Int64).alias("line_no"), pl.all()
    )


def _read_lines_lenient(raw: bytes, source_file: str, first_line: int = 1
                        ) -> tuple[pl.DataFrame, list[Reject]]:  # fmt: skip
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
                                  part.decode("utf-8", "replace")))  # fmt: skip
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
           "separator")  # fmt: skip
    raise SacctFormatError(msg)


# --------------------------------------------------------------------------------------------
# typed columns and validation


@dataclass(frozen=True)
class _Check:
    field: str  # the flag is _bad_<field>
    expected: str
    label: str | None = None  # the field named in a reject (default: field)
    found: Callable[[Mapping[str, object]], str] | None = None  # default: repr of the value


def _lookup(values: pl.Series, build: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame:
    """Compute ``build`` once per distinct value (column ``_k``) and spread it over the rows.

    TRES strings, states, exit codes, node lists, time limits … repeat a lot in a dump; parsing
    the distinct values and gathering back is several times faster than parsing every row.
    """
    table = build(pl.DataFrame({"_k": values.unique()}, schema={"_k": pl.String}))
    index = distinct_index(values, table["_k"])
    return table.drop("_k").select(pl.all().gather(index))


def distinct_index(values: pl.Series, distinct: pl.Series) -> pl.Series:
    """For each of ``values``, its position in ``distinct`` (which holds each value once; a null
    matches a null). A join to the positions then gathers are much cheaper than a join carrying
    wide payload columns (lists, structs)."""
    keys = pl.DataFrame({"_k": distinct}).with_row_index("_i")
    return (
        pl.DataFrame({"_k": values}).lazy()
        .join(keys.lazy(), on="_k", how="left", nulls_equal=True, maintain_order="left")
        .collect()["_i"]
    )  # fmt: skip


def _typed(raw: pl.DataFrame, present: set[str], timezone: str
           ) -> tuple[pl.DataFrame, list[_Check]]:  # fmt: skip
    """Typed columns, ``_bad_<Field>`` flags, and ambiguity columns, for a frame of raw texts.

    ``raw`` has ``line_no`` and one String column per field of :data:`KNOWN_FIELDS` (null when the
    dump does not have the field). Returns the checks that apply (fields present in the dump).

    Low-cardinality fields (TRES, State, exit codes, node lists) are parsed once per distinct
    value; ``Elapsed``/``Timelimit`` texts are not read when their ``…Raw`` twin is present.
    Array/het parts are added later, to allocation rows only.
    """
    ids = jobid_frame(raw, array_het=False)
    times = time_frame(raw, list(TIME_FIELDS), timezone)

    def k_state(f: pl.DataFrame) -> pl.DataFrame:
        e = state_exprs("_k")
        return f.select("_k", e.state.alias("state"), e.cancelled_by_uid.alias("cancelled_by_uid"),
                        e.bad.fill_null(False).alias("_bad_State"))  # fmt: skip

    def k_exit(prefix: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            code, sig, bad = exit_exprs("_k")
            return f.select("_k", code.alias(f"{prefix}exit_code"),
                            sig.alias(f"{prefix}exit_signal"),
                            bad.fill_null(False).alias(f"_bad_{field_name}"))  # fmt: skip
        return build

    def k_tres(prefix: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            t = tres_exprs("_k")
            cols = [t.gpus.alias(f"{prefix}_gpus"), t.mem_bytes.alias(f"{prefix}_mem_bytes")]
            if prefix == "alloc":
                cols += [t.gpu_types.alias("alloc_gpu_types"), t.billing.alias("alloc_billing")]
            return f.select("_k", *cols, t.bad.fill_null(False).alias(f"_bad_{field_name}"))
        return build

    def k_duration(out: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            value, bad = duration_exprs("_k")
            return f.select("_k", value.alias(out),
                            bad.fill_null(False).alias(f"_bad_{field_name}"))  # fmt: skip
        return build

    def matches(col: str, pattern: str) -> pl.Expr:
        return (~pl.col(col).str.contains(pattern)).fill_null(False)

    has_el_raw = "ElapsedRaw" in present
    has_tl_raw = "TimelimitRaw" in present
    parts = [
        _lookup(raw["State"], k_state),
        _lookup(raw["ExitCode"], k_exit("", "ExitCode")),
        _lookup(raw["AllocTRES"], k_tres("alloc", "AllocTRES")),
        _lookup(raw["DerivedExitCode"], k_exit("derived_", "DerivedExitCode")),
        _lookup(raw["ReqTRES"], k_tres("req", "ReqTRES")),
    ]
    if not has_tl_raw:
        parts.append(_lookup(raw["Timelimit"], k_duration("timelimit_s", "Timelimit")))
    if not has_el_raw:
        parts.append(_lookup(raw["Elapsed"], k_duration("elapsed_s", "Elapsed")))
    nodes, nodes_err = expand_hostlist_column(raw["NodeList"])

    def num(col: str) -> tuple[pl.Expr, pl.Expr]:
        c = pl.col(col)
        n = c.str.to_integer(strict=False)
        return n, ((n.is_null() & (c != "")) | (n < 0)).fill_null(False)

    uid, uid_bad = num("UID")
    cpus, cpus_bad = num("AllocCPUS")
    nnodes, nnodes_bad = num("AllocNodes")
    extra: list[pl.Expr] = []
    # with the …Raw twin present, the Elapsed/Timelimit texts are redundant and not read
    if has_el_raw:
        el_raw, el_raw_bad = raw_seconds_exprs("ElapsedRaw")
        extra += [el_raw.alias("elapsed_s"), el_raw_bad.fill_null(False).alias("_bad_ElapsedRaw")]
    if has_tl_raw:
        tl_raw, tl_raw_bad = raw_seconds_exprs("TimelimitRaw", factor=60)
        extra += [tl_raw.alias("timelimit_s"),
                  tl_raw_bad.fill_null(False).alias("_bad_TimelimitRaw")]  # fmt: skip
    direct = raw.lazy().select(
        pl.col("line_no").cast(pl.Int64),
        pl.col("JobID").alias("job_id_text"),
        pl.col("JobName").alias("job_name"),
        pl.col("User").alias("user"),
        uid.alias("uid"),
        uid_bad.alias("_bad_UID"),
        pl.col("Account").alias("account"),
        pl.col("Partition").alias("partition"),
        pl.col("QOS").alias("qos"),
        cpus.alias("alloc_cpus"),
        cpus_bad.alias("_bad_AllocCPUS"),
        nnodes.alias("alloc_nodes"),
        nnodes_bad.alias("_bad_AllocNodes"),
        *extra,
        pl.col("NodeList").alias("nodelist"),
        pl.col("AllocTRES").alias("alloc_tres"),
        pl.col("ReqTRES").alias("req_tres"),
        pl.col("Cluster").alias("cluster"),
        matches("Cluster", r"^\S+$").alias("_bad_Cluster"),
        pl.col("Reservation").alias("reservation"),
        pl.col("Reason").alias("reason"),
        pl.col("Flags").alias("flags"),
        matches("Flags", r"^[A-Za-z_,]*$").alias("_bad_Flags"),
        pl.col("WCKey").alias("wckey"),
        pl.col("AdminComment").alias("admin_comment"),
    ).collect()
    out = pl.concat([direct, ids, times, *parts], how="horizontal").with_columns(
        nodes.alias("nodes"),
        nodes_err.alias("_nodes_err"),
        nodes_err.is_not_null().alias("_bad_NodeList"),
    )
    checks = [_Check(f, _EXPECTED[f]) for f in _EXPECTED
              if f in present and f"_bad_{f}" in out.columns]  # fmt: skip
    # a field under two header names, the cluster given for the dump (connectors.slurm.header)
    extra = row_checks(raw.columns)
    if extra:
        out = out.with_columns(raw.select(c.bad.alias(f"_bad_{c.key}") for c in extra))
        checks += [_Check(c.key, c.expected, c.label, c.found) for c in extra]
    return out, checks


_EXPECTED: dict[str, str] = {
    "JobID": JOBID_EXPECTED,
    "JobIDRaw": JOBIDRAW_EXPECTED,
    "State": STATE_EXPECTED,
    "ExitCode": EXIT_EXPECTED,
    "DerivedExitCode": EXIT_EXPECTED,
    "UID": "expected a numeric uid or nothing",
    "AllocCPUS": "expected a CPU count",
    "AllocNodes": "expected a node count",
    **dict.fromkeys(TIME_FIELDS, TIME_EXPECTED),
    "ElapsedRaw": "expected whole seconds",
    "Elapsed": DURATION_EXPECTED,
    "TimelimitRaw": "expected whole minutes, UNLIMITED or Partition_Limit",
    "Timelimit": DURATION_EXPECTED,
    "AllocTRES": TRES_EXPECTED,
    "ReqTRES": TRES_EXPECTED,
    "Cluster": "expected a cluster name",
    "Flags": "expected comma-separated flag words such as SchedMain,StartRecieved",
    "NodeList": "expected a Slurm hostlist such as gpu-[01-03,07]",
}


def _bad_any(checks: list[_Check]) -> pl.Expr:
    return pl.any_horizontal([pl.col(f"_bad_{c.field}") for c in checks])


def _order_checks(checks: list[_Check], header: list[str | None]) -> list[_Check]:
    pos = {name: i for i, name in enumerate(header) if name is not None}
    return sorted(checks, key=lambda c: pos.get(c.field, len(pos)))


def _problem_of(row: dict, raw_row: dict, checks: list[_Check], timezone: str) -> tuple[str, str]:
    """(field, reason) of the first failing check of a row."""
    for c in checks:
        if row[f"_bad_{c.field}"]:
            if c.found is not None:
                return c.label or c.field, f"{c.expected}, found {c.found(raw_row)}"
            value = raw_row.get(c.field)
            if c.field == "NodeList" and row.get("_nodes_err"):
                return c.field, str(row["_nodes_err"])
            if c.field in TIME_FIELDS and row.get(f"_gap_{c.field}"):
                return c.field, (f"expected a local time that exists in {timezone}, "
                                 f"found {value!r} (inside the hour skipped when DST "
                                 "starts)")  # fmt: skip
            return c.field, f"{c.expected}, found {value!r}"
    return "line", "unknown problem"  # pragma: no cover - only called for rows with a problem


# --------------------------------------------------------------------------------------------
# DST ambiguity


def _resolve_ambiguous(row: dict) -> dict[str, object] | str:
    """Pick one reading for each ambiguous local time of a row, or say why not."""
    names = [f for f in TIME_FIELDS if row.get(f.lower()) is not None]
    options = {
        f: [row[f.lower()]] + ([row[f"_later_{f}"]] if row.get(f"_later_{f}") is not None else [])
        for f in names
    }
    elapsed = row.get("elapsed_s")

    def consistent(choice: dict[str, Any], exact: bool) -> bool:
        start, end = choice.get("Start"), choice.get("End")
        if start is not None:
            for f in ("Submit", "Eligible"):
                if choice.get(f) is not None and choice[f] > start:
                    return False
        if start is None or end is None:
            return True
        if end < start:
            return False
        if elapsed is None:
            return True
        span = (end - start).total_seconds()
        # Elapsed excludes suspended time: exact for most jobs, a lower bound for all
        return span == elapsed if exact else span >= elapsed

    combos = [dict(zip(names, vals, strict=True)) for vals in itertools.product(*options.values())]
    ok = [c for c in combos if consistent(c, exact=True)]
    if not ok:
        ok = [c for c in combos if consistent(c, exact=False)]
    resolved: dict[str, object] = {}
    for f in names:
        values = {c[f] for c in ok}
        if len(values) != 1:
            if len(options[f]) > 1:
                a, b = options[f]
                return (f"{f}: expected a local time that is unambiguous in the dump's time zone, "
                        f"found one in the hour repeated when DST ends (UTC {a} or {b}) and the "
                        "row's other times do not tell which")  # fmt: skip
            continue
        resolved[f.lower()] = values.pop()
    return resolved


# --------------------------------------------------------------------------------------------
# stray separators


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """All ways to write ``total`` as an ordered sum of ``parts`` non-negative integers."""
    for cut in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cut, total + parts - 1)
        yield tuple(b - a - 1 for a, b in itertools.pairwise(bounds))


def _assemble(tokens: list[str], n_fields: int, free_pos: list[int], extra: tuple[int, ...],
              sep: str) -> list[str]:  # fmt: skip
    give = dict(zip(free_pos, extra, strict=True))
    values: list[str] = []
    p = 0
    for i in range(n_fields):
        take = give.get(i, 0) + 1
        values.append(sep.join(tokens[p : p + take]))
        p += take
    return values


def _plausible_free_text(name: str, value: str) -> bool:
    if name == "AdminComment":
        if value == "" or value.startswith("JS1:"):
            return "|" not in value and " " not in value
        try:
            json.loads(value)
        except ValueError:
            return False
        return True
    if name == "WCKey":
        return all(not ch.isspace() for ch in value) and "|" not in value
    return True


# --------------------------------------------------------------------------------------------
# the parser


def _raw_frame(data: pl.DataFrame, header: list[str | None]) -> pl.DataFrame:
    """Select the known fields (by position; a field's twin columns too), derive JobIDRaw and
    Cluster where the dump has none (:func:`connectors.slurm.header.derived_columns`), and add
    the other absent fields as null."""
    cols = [pl.col("line_no")]
    for i, name in enumerate(header):
        if name is not None and field_of(name) in KNOWN_FIELDS:
            cols.append(pl.col(f"f{i}").alias(name))
    frame = data.select(cols)
    if isinstance(header, HeaderColumns):
        frame = frame.with_columns(derived_columns(header, frame.columns))
    missing = [f for f in KNOWN_FIELDS if f not in frame.columns]
    if missing:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(f) for f in missing)
    return frame


def _split(lines: pl.DataFrame, sep: str, n_fields: int) -> tuple[pl.DataFrame, pl.Series]:
    """Split every line into ``f0`` … ``f{n-1}`` (vectorized) and tell which lines fit.

    A line fits when it has exactly ``n_fields`` fields. Returns (split frame, fits mask); the
    columns of lines that do not fit hold whatever the split gave and are dropped by the caller.
    """
    parts = pl.col("_l")
    split = (
        lines.lazy()
        .select(pl.col("line_no").cast(pl.Int64), pl.col("line").str.split(sep).alias("_l"))
        .select(
            "line_no",
            *(parts.list.get(i, null_on_oob=True).alias(f"f{i}") for i in range(n_fields)),
            (parts.list.len() == n_fields).alias("_fits"),
        )
        .collect()
    )  # fmt: skip
    return split.drop("_fits"), split["_fits"]


_Meta = tuple[int, int, str, tuple[str, ...]]


def _candidates(odd: pl.DataFrame, header: list[str | None], sep: str, source_file: str
                ) -> tuple[pl.DataFrame, list[_Meta], list[Reject]]:  # fmt: skip
    """Candidate rows for lines with more fields than the header; rejects for the hopeless ones.

    Returns (candidate frame with ``line_no``, ``_cand`` and ``f0``…, per-line meta, rejects);
    meta is (line_no, number of candidates, description, free-text field names).
    """
    n = len(header)
    free_pos = [i for i, name in enumerate(header) if field_of(name) in FREE_TEXT_FIELDS]
    free_names = tuple(str(header[i]) for i in free_pos)
    rows: list[list[object]] = []
    meta: list[_Meta] = []
    rejects: list[Reject] = []
    for line_no, line in odd.select("line_no", "line").iter_rows():
        tokens = line.split(sep)
        k = len(tokens) - n
        if k < 0:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields separated by {sep!r}, found {len(tokens)}",
                                  line))  # fmt: skip
            continue
        if not free_pos:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields separated by {sep!r}, found {len(tokens)}"
                                  " and no free-text field (JobName, AdminComment, …) in the "
                                  "header to hold the extra separators", line))  # fmt: skip
            continue
        placements = list(itertools.islice(_compositions(k, len(free_pos)), MAX_PLACEMENTS + 1))
        if len(placements) > MAX_PLACEMENTS:
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {n} fields, found {len(tokens)}: too many ways "
                                  f"(>{MAX_PLACEMENTS}) to place {k} extra separators in "
                                  f"{' or '.join(free_names)}", line))  # fmt: skip
            continue
        for ci, extra in enumerate(placements):
            rows.append([line_no, ci, *_assemble(tokens, n, free_pos, extra, sep)])
        meta.append((line_no, len(placements), f"{k} extra separator(s)", free_names))
    schema = {"line_no": pl.Int64, "_cand": pl.Int64, **{f"f{i}": pl.String for i in range(n)}}
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame, meta, rejects


def _choose(cands: pl.DataFrame, meta: list[_Meta],
            header: list[str | None], present: set[str], timezone: str, source_file: str,
            raw_of: dict[int, str]) -> tuple[pl.DataFrame, list[Reject]]:  # fmt: skip
    """Keep, per line, the one candidate that parses; reject lines with none or several."""
    if cands.height == 0:
        return cands, []
    raw = _raw_frame(cands.drop("_cand"), header).with_columns(cands["_cand"])
    typed, checks = _typed(raw.drop("_cand"), present, timezone)
    ok = typed.select(~_bad_any(checks)).to_series()
    free = [(str(h), f"f{i}") for i, h in enumerate(header) if field_of(h) in FREE_TEXT_FIELDS]
    plausible = [
        all(_plausible_free_text(str(field_of(name)), v or "")
            for (name, _), v in zip(free, vals, strict=True))
        for vals in cands.select([c for _, c in free]).iter_rows()
    ]
    good = [bool(a) and b for a, b in zip(ok.to_list(), plausible, strict=True)]
    by_line: dict[int, list[int]] = {}
    for idx, (line_no, is_good) in enumerate(zip(cands["line_no"].to_list(), good, strict=True)):
        if is_good:
            by_line.setdefault(line_no, []).append(idx)
    keep: list[int] = []
    rejects: list[Reject] = []
    ordered = _order_checks(checks, header)
    typed_rows = typed.to_dicts()
    raw_rows = raw.to_dicts()
    cands_rows = cands.to_dicts()
    first_idx: dict[int, int] = {}
    for idx, line_no in enumerate(cands["line_no"].to_list()):
        first_idx.setdefault(line_no, idx)
    names = getattr(header, "names", ())
    shaped_ok = shape_ok(cands, names) if names else [False] * cands.height
    for line_no, n_cand, what, free_names in meta:
        chosen = by_line.get(line_no, [])
        if n_cand == 1:
            # one free-text field: the extra separators are its own; ordinary validation decides
            keep.append(first_idx[line_no])
        elif len(chosen) == 1:
            keep.append(chosen[0])
        elif len(shaped := [c for c in chosen if shaped_ok[c]]) == 1:
            keep.append(shaped[0])  # the fields nobody reads tell (connectors.slurm.shapes)
        elif not chosen:
            i = first_idx[line_no]
            fld, why = _problem_of(typed_rows[i], raw_rows[i], ordered, timezone)
            if fld == "line":  # every field parsed; a free-text field was implausible
                fld, why = next(
                    (name, f"implausible text {cands_rows[i][col]!r}") for name, col in free
                    if not _plausible_free_text(str(field_of(name)), cands_rows[i][col] or "")
                )  # fmt: skip
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"expected {len(header)} fields; {what} fit no placement in "
                                  f"{' or '.join(free_names)} that makes every other field valid "
                                  f"(first placement: {fld}: {why})", raw_of[line_no]))  # fmt: skip
        else:
            chosen = shaped or chosen
            holders = [name for name in free_names
                       if len({cands_rows[c][f"f{header.index(name)}"] for c in chosen}) > 1]
            rejects.append(Reject(SOURCE, source_file, line_no, "line",
                                  f"ambiguous: {what} could belong to {' or '.join(holders)} "
                                  f"({len(chosen)} placements give valid fields)",
                                  raw_of[line_no]))  # fmt: skip
    chosen_frame = cands[keep].drop("_cand") if keep else cands.clear().drop("_cand")
    return chosen_frame, rejects


def _pods_of(text: str) -> list[str]:
    try:
        obj = json.loads(text)
    except ValueError:
        return []
    value = obj.get("pods") if isinstance(obj, dict) else None
    return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []


#: ``{"pods": ["ns/pod", …]}`` and nothing else (JSON whitespace, no control characters, no
#: ``\\u`` escapes): Polars' JSON decoder reads it exactly as ``json.loads`` does; other texts go
#: through :func:`_pods_of`.
_JSON_WS = r"[ \t\n\r]*"
_JSON_STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"'
_PODS_ONLY_RE = (rf'^\{{{_JSON_WS}"pods"{_JSON_WS}:{_JSON_WS}\[{_JSON_WS}'
                 rf'(?:{_JSON_STR}{_JSON_WS}(?:,{_JSON_WS}{_JSON_STR}{_JSON_WS})*)?\]{_JSON_WS}\}}$')
_PODS_DTYPE = pl.Struct({"pods": pl.List(pl.String)})


def _pods_table(texts: pl.Series) -> pl.Series:
    """The pods of each of ``texts`` (distinct AdminComment texts mentioning "pods")."""
    simple = texts.str.contains(_PODS_ONLY_RE).fill_null(False)
    position = pl.arange(0, texts.len(), eager=True)
    parts = []
    if simple.any():
        decoded = texts.filter(simple).str.json_decode(_PODS_DTYPE).struct.field("pods")
        parts.append(pl.DataFrame({"_p": position.filter(simple), "bridge_pods": decoded}))
    if not simple.all():
        values = [_pods_of(t) for t in texts.filter(~simple).to_list()]
        parts.append(pl.DataFrame({"_p": position.filter(~simple), "bridge_pods": values},
                                  schema={"_p": position.dtype,
                                          "bridge_pods": pl.List(pl.String)}))  # fmt: skip
    return pl.concat(parts).sort("_p")["bridge_pods"]


def _bridge_pods(admin: pl.Series) -> pl.Series:
    """``{"pods": ["ns/pod", …]}`` → the list; anything else (free text, bad JSON) → [].

    Only rows mentioning ``"pods"`` are decoded (once per distinct text); the others share one
    empty list through a gather.
    """
    mask = admin.str.contains('"pods"', literal=True).fill_null(False)
    n_pods = int(mask.sum())
    if n_pods == 0:
        return pl.repeat([], admin.len(), dtype=pl.List(pl.String), eager=True).alias("bridge_pods")
    texts = admin.filter(mask)
    uniq = texts.unique(maintain_order=True)
    table = pl.concat([pl.Series("bridge_pods", [[]], dtype=pl.List(pl.String)),
                       _pods_table(uniq)])  # fmt: skip
    ids = (
        pl.DataFrame({"_k": texts})
        .join(pl.DataFrame({"_k": uniq, "_id": pl.int_range(1, uniq.len() + 1, eager=True)}),
              on="_k", how="left", maintain_order="left")["_id"]
    )  # fmt: skip
    index = pl.zeros(admin.len(), dtype=pl.Int64, eager=True).scatter(
        pl.arange(0, admin.len(), eager=True).filter(mask), ids
    )
    return table.gather(index).alias("bridge_pods")


#: ``{cluster}:{job_id_raw}:{submit epoch seconds | none}``; a dump without JobIDRaw has the JobID
#: text where the id cannot be derived (``123_4``, ``123+1``: connectors.slurm.header)
_RUN_KEY = pl.concat_str([
    pl.col("cluster"), pl.lit(":"),
    pl.coalesce(pl.col("job_id_raw").cast(pl.String), pl.col("job_id")), pl.lit(":"),
    pl.col("submit").dt.epoch("s").cast(pl.String).fill_null("none"),
])  # fmt: skip


def _dedupe_run_keys(out: pl.DataFrame) -> pl.DataFrame:
    """Number rows that share a base ``run_key`` (see the module docstring for ``#n``)."""
    dup = out["run_key"].is_duplicated()
    if not dup.any():
        return out
    ranked = (
        out.with_row_index("_i")
        .filter(dup)
        .sort(["run_key", "start", "end", "line_no"], nulls_last=True)
        .with_columns(pl.int_range(pl.len()).over("run_key").alias("_n"))
        .select(
            "_i",
            pl.when(pl.col("_n") == 0).then(pl.col("run_key"))
            .otherwise(pl.format("{}#{}", pl.col("run_key"), pl.col("_n") + 1))
            .alias("_key"),
        )
    )  # fmt: skip
    return (
        out.with_row_index("_i")
        .join(ranked, on="_i", how="left", maintain_order="left")
        .with_columns(pl.coalesce("_key", "run_key").alias("run_key"))
        .drop("_i", "_key")
    )


def _step_anchor_keys(steps: pl.DataFrame, runs: pl.DataFrame, alloc_lines: pl.Series,
                      n_lines: int, offset: int = 0) -> tuple[pl.Series, pl.Series]:  # fmt: skip
    """(run key through each step's anchor or null, steps that need the look-up).

    Line numbers minus ``offset`` index dense arrays of ``n_lines + 2`` slots.
    """
    size = n_lines + 2
    run_lines = runs["line_no"].cast(pl.Int64) - offset
    row_of_line = pl.Series("_r", [None] * 0, dtype=pl.Int64).extend_constant(None, size)
    row_of_line = row_of_line.scatter(run_lines, pl.int_range(0, runs.height, eager=True))
    is_alloc = pl.zeros(size, dtype=pl.Boolean, eager=True).scatter(
        alloc_lines.cast(pl.Int64) - offset, True
    )
    last_alloc = pl.select(
        pl.when(is_alloc).then(pl.int_range(0, size, dtype=pl.Int64)).forward_fill()
    ).to_series()
    anchor = last_alloc.gather(steps["line_no"].cast(pl.Int64) - offset)
    run_row = row_of_line.gather(anchor)
    run_raw = runs["job_id_raw"].gather(run_row)
    same = (
        (runs["cluster"].gather(run_row) == steps["cluster"])
        & run_raw.eq_missing(steps["job_id_raw"])
        # no JobIDRaw (an array task or het component of a dump without it): the JobID tells
        & (run_raw.is_not_null() | (runs["job_id"].gather(run_row) == steps["job_id"]))
    ).fill_null(False)
    keys = pl.select(pl.when(same).then(runs["run_key"].gather(run_row))).to_series()
    look_up = anchor.is_null() | (run_row.is_not_null() & ~same)
    return keys.alias("run_key"), look_up


def _step_run_keys(steps: pl.DataFrame, runs: pl.DataFrame, alloc_lines: pl.Series,
                   n_lines: int) -> pl.Series:  # fmt: skip
    """The run of each step (see the module docstring).

    ``alloc_lines``: line numbers of every allocation line, loaded or rejected. A step's anchor
    is the last allocation line above it. Anchor loaded with the step's cluster and JobIDRaw →
    its run. Anchor rejected → no run (no guessing). No anchor, or an anchor of another job (a
    reordered dump) → the run is looked up by (cluster, job_id_raw): nearest allocation row
    above, else below. Line numbers index dense arrays, so the usual case is gathers only.
    """
    if steps.height == 0:
        return pl.Series("run_key", [], dtype=pl.String)
    keys, look_up = _step_anchor_keys(steps, runs, alloc_lines, n_lines)
    if not look_up.any():
        return keys
    # a reordered dump: look the allocation up by (cluster, job_id_raw), above then below
    job = pl.coalesce(pl.col("job_id_raw").cast(pl.String), "job_id").alias("_job")
    probe = steps.select("line_no", "cluster", job).with_row_index("_i")
    lost = probe.filter(look_up).sort("line_no")
    by_key = runs.select("line_no", "cluster", job, "run_key").sort("line_no")
    by = ["cluster", "_job"]
    back = lost.join_asof(by_key, on="line_no", by=by, strategy="backward")
    ahead = lost.join_asof(by_key, on="line_no", by=by, strategy="forward")
    found = back.select("_i", pl.coalesce(back["run_key"], ahead["run_key"]).alias("_found"))
    return (
        probe.with_columns(keys.alias("run_key"))
        .join(found, on="_i", how="left", maintain_order="left")
        .select(pl.coalesce("run_key", "_found").alias("run_key"))
        .to_series()
    )


#: Bytes per batch at most (about 500k lines): memory stays bounded, and batches run in parallel.
BATCH_BYTES = 128 << 20
#: Bytes per batch of :func:`iter_sacct_batches` (about 130k lines of the contract's fields).
STREAM_BATCH_BYTES = 32 << 20
#: Bytes of the first batch of :func:`iter_sacct_batches`; each next one doubles up to the above.
FIRST_STREAM_BATCH_BYTES = 2 << 20
#: Batches parsed at the same time (Polars releases the GIL; each batch is mostly one-threaded).
_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass
class _Batch:
    runs: pl.DataFrame
    steps: pl.DataFrame
    rejects: list[Reject]
    blank_lines: int
    lines: int
    alloc_lines: pl.Series  # line numbers of allocation lines, loaded or rejected


def _parse_piece(piece: bytes, first_line: int, header: list[str | None], present: set[str],
                 sep: str, timezone: str, source_file: str, n_lines: int | None = None,
                 limits: SanityLimits = DEFAULT_LIMITS) -> _Batch:  # fmt: skip
    """Parse the lines of ``piece`` (``first_line`` is the number of its first line).

    Every line has the header's field count (the usual case): Polars' CSV reader splits them and
    a rejected line's text is the fields joined again. Otherwise the lines are read one per row and
    split with the odd ones set apart (:func:`_parse_batch`).
    """
    split = _fast_split(piece, sep, len(header), first_line, n_lines)
    if split is None:
        lines, bad_utf8 = _read_piece(piece, first_line, source_file)
        batch = _parse_batch(lines, header, present, sep, timezone, source_file, limits)
        batch.rejects.extend(bad_utf8)
        batch.lines += len(bad_utf8)
        return batch
    n = len(header)

    def text_of(line_nos: list[int]) -> dict[int, str]:
        wanted = pl.Series(line_nos, dtype=pl.Int64).implode()
        return dict(
            split.lazy().filter(pl.col("line_no").is_in(wanted))
            .select("line_no", pl.concat_str([f"f{i}" for i in range(n)], separator=sep))
            .collect().iter_rows()
        )  # fmt: skip

    return _typed_batch(split, header, present, timezone, source_file, [], 0, split.height,
                        None, text_of, limits)  # fmt: skip


def _parse_batch(body: pl.DataFrame, header: list[str | None], present: set[str], sep: str,
                 timezone: str, source_file: str,
                 limits: SanityLimits = DEFAULT_LIMITS) -> _Batch:  # fmt: skip
    """Split, validate and type one batch of lines (``line_no``, ``line``)."""
    rejects: list[Reject] = []
    n = len(header)
    split, fits = _split(body, sep, n)
    blank = (body["line"] == "").fill_null(False)
    blank_lines = int(blank.sum())
    odd_jobids: pl.Series | None = None
    if not fits.all():
        odd = body.filter(~fits & ~blank).with_columns(pl.col("line_no").cast(pl.Int64))
        # allocation lines among them (JobID without a step part), for the steps' anchors
        jobid_at = header.index("JobID")
        odd_jobids = odd.filter(
            pl.col("line").str.split(sep).list.get(jobid_at, null_on_oob=True)
            .str.contains(ALLOC_ID_RE).fill_null(False)
        )["line_no"]  # fmt: skip
        split = split.filter(fits)
        raw_of: dict[int, str] = dict(odd.select("line_no", "line").iter_rows())
        cands, meta, odd_rejects = _candidates(odd, header, sep, source_file)
        rejects.extend(odd_rejects)
        chosen, choose_rejects = _choose(cands, meta, header, present, timezone, source_file,
                                         raw_of)  # fmt: skip
        rejects.extend(choose_rejects)
        if chosen.height:
            split = pl.concat([split, chosen], how="vertical").sort("line_no")

    def text_of(line_nos: list[int]) -> dict[int, str]:
        wanted = pl.Series(line_nos, dtype=pl.Int64).implode()
        return dict(
            body.select(pl.col("line_no").cast(pl.Int64), "line")
            .filter(pl.col("line_no").is_in(wanted))
            .iter_rows()
        )

    return _typed_batch(split, header, present, timezone, source_file, rejects, blank_lines,
                        body.height, odd_jobids, text_of, limits)  # fmt: skip


def _typed_batch(split: pl.DataFrame, header: list[str | None], present: set[str], timezone: str,
                 source_file: str, rejects: list[Reject], blank_lines: int, lines: int,
                 odd_jobids: pl.Series | None,
                 text_of: Callable[[list[int]], dict[int, str]],
                 limits: SanityLimits = DEFAULT_LIMITS) -> _Batch:  # fmt: skip
    """Type and validate split lines (``line_no``, ``f0`` …) into a batch's runs and steps;
    allocation lines that break a sanity limit (:mod:`connectors.slurm.sanity`) are rejected."""
    raw = _raw_frame(split, header)
    del split
    alloc_lines = [raw["line_no"].filter(raw["JobID"].str.contains(ALLOC_ID_RE).fill_null(False))]
    if odd_jobids is not None:
        alloc_lines.append(odd_jobids)
    typed = _typed_checked(raw, header, present, timezone, source_file, text_of, rejects)
    del raw
    typed, insane = check_limits(typed, limits, present, source=SOURCE, source_file=source_file,
                                 text_of=text_of)  # fmt: skip
    rejects.extend(insane)
    lf = typed.lazy()
    runs = lf.filter(~pl.col("is_step")).select(
        [c for c in RUNS_SCHEMA if c in typed.columns]
    ).with_columns(_RUN_KEY.alias("run_key")).collect()  # fmt: skip
    runs = array_het_columns(runs).with_columns(_bridge_pods(runs["admin_comment"]))
    steps = lf.filter(pl.col("is_step")).select(
        *(c for c in _STEP_SOURCE_COLUMNS if c in typed.columns)
    ).collect()  # fmt: skip
    return _Batch(runs, steps, rejects, blank_lines, lines,
                  pl.concat([a.cast(pl.Int64) for a in alloc_lines]))  # fmt: skip


def _typed_checked(raw: pl.DataFrame, header: list[str | None], present: set[str], timezone: str,
                   source_file: str, text_of: Callable[[list[int]], dict[int, str]],
                   rejects: list[Reject]) -> pl.DataFrame:  # fmt: skip
    """``_typed``, then rows with a bad field or an unresolved DST time move to ``rejects``."""
    typed, checks = _typed(raw, present, timezone)
    checks = _order_checks(checks, header)
    later_cols = [pl.col(c).is_not_null() for c in typed.columns if c.startswith("_later_")
                  if typed[c].null_count() < typed.height]  # fmt: skip
    amb = pl.any_horizontal(later_cols) if later_cols else pl.lit(False)
    flags = typed.lazy().select(_bad_any(checks).alias("bad"), amb.alias("_amb")).select(
        "bad", (pl.col("_amb") & ~pl.col("bad")).alias("amb")
    ).collect()
    if flags["bad"].any() or flags["amb"].any():
        typed, more = _fix_or_reject(typed, raw, flags, checks, timezone, source_file, text_of)
        rejects.extend(more)
    return typed


_STEP_SOURCE_COLUMNS = (
    "cluster", "job_id", "job_id_text", "job_id_raw", "step_id", "job_name", "account", "state",
    "cancelled_by_uid", "exit_code", "exit_signal", "start", "end", "elapsed_s", "alloc_cpus",
    "alloc_nodes", "nodelist", "nodes", "alloc_tres", "alloc_gpus", "alloc_gpu_types",
    "alloc_mem_bytes", "line_no",
)  # fmt: skip


@dataclass(frozen=True)
class _Dump:
    """What the header says: the delimiter, the field of each column, the fields present."""

    sep: str
    header: list[str | None]
    present: set[str]


def _read_header(data: bytes, delimiter: str | None, source_file: str,
                 cluster: str | None = None) -> tuple[_Dump, int]:  # fmt: skip
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
    return _Dump(sep, header, present), min(len(data), header_end + 1)


def _finish(runs: pl.DataFrame, steps: pl.DataFrame, step_keys: pl.Series,
            source_file: str) -> tuple[pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """Runs (keys already numbered) and steps (with their run keys) in their final schemas."""
    runs = runs.with_columns(pl.lit(source_file).alias("source_file")).select(
        list(RUNS_SCHEMA)
    ).cast(RUNS_SCHEMA)  # fmt: skip
    steps = steps.with_columns(step_keys).lazy().select(
        "run_key", "cluster", "job_id", pl.col("job_id_text").alias("step_job_id"), "job_id_raw",
        "step_id", pl.col("job_name").alias("step_name"),
        *(c for c in STEPS_SCHEMA if c in steps.columns and c not in {
            "run_key", "cluster", "job_id", "job_id_raw", "step_id"}),
        pl.lit(source_file).alias("source_file"),
    ).select(list(STEPS_SCHEMA)).cast(STEPS_SCHEMA).collect()  # fmt: skip
    return runs, steps


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
    data = _source_bytes(source)
    dump, body_start = _read_header(data, delimiter, source_file, cluster)

    body_bytes = len(data) - body_start
    parts = _THREADS * max(1, -(-body_bytes // (_THREADS * BATCH_BYTES)))
    bounds = _chunk_bounds(data, body_start, max(1, -(-body_bytes // parts)))

    held = [data]  # released as soon as every batch has its lines
    del data

    def work(bound: tuple[int, int, int]) -> _Batch:
        begin, end, first_line = bound
        return _parse_piece(held[0][begin:end], first_line, dump.header, dump.present, dump.sep,
                            timezone, source_file, limits=limits)  # fmt: skip

    with ThreadPoolExecutor(max_workers=min(len(bounds), _THREADS)) as pool:
        batches = list(pool.map(work, bounds))
    held.clear()
    rejects: list[Reject] = []
    lines_read = sum(b.lines for b in batches)
    for b in batches:
        rejects.extend(b.rejects)
    blank_lines = sum(b.blank_lines for b in batches)
    runs = _dedupe_run_keys(pl.concat([b.runs for b in batches], how="vertical"))
    steps = pl.concat([b.steps for b in batches], how="vertical")
    alloc_lines = pl.concat([b.alloc_lines for b in batches])
    del batches

    step_keys = _step_run_keys(steps, runs, alloc_lines, lines_read + 1)
    runs, steps = _finish(runs, steps, step_keys, source_file)

    rejects.sort(key=lambda r: r.line_no)
    return SacctParse(
        runs=runs, steps=steps, rejects=rejects, lines_read=lines_read,
        blank_lines=blank_lines, delimiter=dump.sep,
        fields=tuple(h if h is not None else "" for h in dump.header),
    )


# --------------------------------------------------------------------------------------------
# streaming (bounded memory, for loading big dumps batch by batch)


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
        dump, body_start = _read_header(pending, delimiter, source_file, cluster)
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
                lines = _line_count(piece)
                batch = _parse_piece(piece, line_no, dump.header, dump.present, dump.sep,
                                     timezone, source_file, lines, limits=limits)  # fmt: skip
                del piece
                yield _stream_batch(batch, line_no, source_file)
                line_no += lines
            if eof:
                return


def _stream_batch(batch: _Batch, first_line: int, source_file: str) -> SacctBatch:
    base_keys = batch.runs["run_key"]
    runs = _dedupe_run_keys(batch.runs)
    if batch.steps.height:
        keys, look_up = _step_anchor_keys(batch.steps, runs, batch.alloc_lines, batch.lines,
                                          offset=first_line)  # fmt: skip
        complete = not look_up.any()
    else:
        keys, complete = pl.Series("run_key", [], dtype=pl.String), True
    runs, steps = _finish(runs, batch.steps, keys, source_file)
    rejects = sorted(batch.rejects, key=lambda r: r.line_no)
    return SacctBatch(runs, steps, rejects, batch.lines, batch.blank_lines, base_keys.unique(),
                      complete)  # fmt: skip


def _fix_or_reject(typed: pl.DataFrame, raw: pl.DataFrame, flags: pl.DataFrame,
                   checks: list[_Check], timezone: str, source_file: str,
                   text_of: Callable[[list[int]], dict[int, str]],
                   ) -> tuple[pl.DataFrame, list[Reject]]:  # fmt: skip
    """Rows with a bad field → rejects; rows with ambiguous local times → resolved or rejects."""
    rejects: list[Reject] = []
    rows = pl.Series("_row", range(typed.height), dtype=pl.UInt32)
    bad_rows = rows.filter(flags["bad"]).to_list()
    amb_rows = rows.filter(flags["amb"]).to_list()
    touched = bad_rows + amb_rows
    sub_typed = typed[touched]
    sub_raw = raw[touched]
    line_text = text_of(sub_typed["line_no"].cast(pl.Int64).to_list())
    drop: list[int] = []
    fixes: list[tuple[int, dict[str, object]]] = []
    n_bad = len(bad_rows)
    for i, (row, raw_row) in enumerate(zip(sub_typed.to_dicts(), sub_raw.to_dicts(), strict=True)):
        row_idx = touched[i]
        line_no = int(row["line_no"])
        if i < n_bad:
            fld, why = _problem_of(row, raw_row, checks, timezone)
            rejects.append(Reject(SOURCE, source_file, line_no, fld, why, line_text[line_no]))
            drop.append(row_idx)
            continue
        resolved = _resolve_ambiguous(row)
        if isinstance(resolved, str):
            fld, why = resolved.split(": ", 1)
            rejects.append(Reject(SOURCE, source_file, line_no, fld, why, line_text[line_no]))
            drop.append(row_idx)
        else:
            fixes.append((row_idx, resolved))
    if fixes:
        cols = sorted({k for _, r in fixes for k in r})
        patch = pl.DataFrame(
            [{"_row": i, **{c: r.get(c) for c in cols}} for i, r in fixes],
            schema={"_row": pl.UInt32, **{c: pl.Datetime("us") for c in cols}},
        )
        typed = (
            typed.with_row_index("_row")
            .join(patch, on="_row", how="left", suffix="_fix", maintain_order="left")
            .with_columns(pl.coalesce(f"{c}_fix", c).alias(c) for c in cols)
            .drop([f"{c}_fix" for c in cols])
            .drop("_row")
        )
    if drop:
        typed = typed.filter(~rows.is_in(pl.Series(drop, dtype=pl.UInt32).implode()))
    return typed, rejects


# --------------------------------------------------------------------------------------------
# per-node allocations


def allocations_per_node(
    runs: pl.DataFrame,
    node_models: Mapping[str, str] | None = None,
    *,
    include_cpu_only: bool = False,
) -> pl.DataFrame:
    """One row per (run, node) with the GPUs the run held on that node.

    Slurm's accounting keeps only the job's total (``AllocTRES`` ``gres/gpu=N``), not the split per
    node. The split is even over the *expanded* node list: ``N // nodes`` each, and the remainder
    ``N % nodes`` one more on the first nodes in hostlist order (hostlists are sorted). Example:
    5 GPUs on ``gpu-[01-02]`` → gpu-01: 3, gpu-02: 2. ``AllocNodes`` is not used; the hostlist is.
    ``gpus_source`` says which: ``single_node`` (the total, exact) or ``even_split`` (an estimate;
    ``models/sql/stg_slurm_allocations.sql`` replaces it with the counts of an ``scontrol show
    job -d`` snapshot where one was loaded, see docs/slurm.md).

    ``gpu_model``: the run's single typed GPU key (``gres/gpu:a100``), else ``node_models[node]``
    when given, else ``""``.

    Runs without nodes (never started: ``None assigned``) give no rows. Runs without GPUs give no
    rows unless ``include_cpu_only`` (then with ``gpus`` 0).
    """
    frame = runs.select(
        "run_key", "cluster", "job_id", "job_id_raw", "nodes", "alloc_gpus", "alloc_gpu_types",
        "start", "end",
    )
    if not include_cpu_only:
        frame = frame.filter(pl.col("alloc_gpus") > 0)
    frame = frame.filter(pl.col("nodes").list.len() > 0)
    n = pl.col("nodes").list.len()
    models = pl.col("alloc_gpu_types").list.eval(pl.element().struct.field("model")).list.unique()
    single = pl.when(models.list.len() == 1).then(models.list.first())
    exploded = frame.with_columns(
        pl.int_ranges(0, n, dtype=pl.Int64).alias("node_index"),
        n.cast(pl.Int64).alias("_count"),
        single.alias("_single"),
    ).explode(["nodes", "node_index"])
    gpus_total = pl.col("alloc_gpus").fill_null(0)
    count = pl.col("_count")
    per_node = (gpus_total // count) + (pl.col("node_index") < (gpus_total % count)).cast(pl.Int64)
    node_model = (
        pl.col("nodes").replace_strict(dict(node_models), default=None, return_dtype=pl.String)
        if node_models else pl.lit(None, dtype=pl.String)
    )  # fmt: skip
    out = (
        exploded.with_columns(
            pl.col("nodes").alias("node"),
            per_node.alias("gpus"),
            pl.coalesce("_single", node_model, pl.lit("")).alias("gpu_model"),
            pl.when(count == 1).then(pl.lit("single_node")).otherwise(pl.lit("even_split"))
            .alias("gpus_source"),
        )
        .select(list(NODE_ALLOCATIONS_SCHEMA))
    )
    return out.cast(NODE_ALLOCATIONS_SCHEMA)
