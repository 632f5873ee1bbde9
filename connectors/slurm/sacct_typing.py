"""Typed columns of sacct lines and their checks: every field parsed (once per distinct value
where values repeat), a ``_bad_<Field>`` flag per check, the first failing check of a row as an
"expected …, found …" reject, and naive local times in a repeated DST hour resolved from the row.

Times
-----
See :mod:`connectors.slurm.timefmt`. A naive local time in the repeated DST hour is resolved from
the same row when only one reading satisfies ``Submit ≤ Start``, ``Eligible ≤ Start``,
``Start ≤ End`` and ``End − Start = Elapsed`` (or, failing that for every reading, e.g. for a
suspended job, ``End − Start ≥ Elapsed``); otherwise the line is rejected. ``Submit ≤ Eligible`` is
deliberately not assumed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from connectors.errors import Reject
from connectors.slurm.header import (
    KNOWN_FIELDS,
    HeaderColumns,
    derived_columns,
    field_of,
    row_checks,
)
from connectors.slurm.hostlist import expand_hostlist_column
from connectors.slurm.jobid import JOBID_EXPECTED, JOBIDRAW_EXPECTED, jobid_frame
from connectors.slurm.sacct_bytes import SOURCE
from connectors.slurm.states import EXIT_EXPECTED, STATE_EXPECTED, exit_exprs, state_exprs
from connectors.slurm.timefmt import (
    DURATION_EXPECTED,
    TIME_EXPECTED,
    duration_exprs,
    raw_seconds_exprs,
    time_frame,
)
from connectors.slurm.tres import TRES_EXPECTED, tres_exprs

TIME_FIELDS: tuple[str, ...] = ("Submit", "Eligible", "Start", "End")


@dataclass(frozen=True)
class Check:
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
    )


def raw_frame(data: pl.DataFrame, header: list[str | None]) -> pl.DataFrame:
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


def typed_fields(raw: pl.DataFrame, present: set[str], timezone: str
                 ) -> tuple[pl.DataFrame, list[Check]]:
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
                        e.bad.fill_null(False).alias("_bad_State"))

    def k_exit(prefix: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            code, sig, bad = exit_exprs("_k")
            return f.select("_k", code.alias(f"{prefix}exit_code"),
                            sig.alias(f"{prefix}exit_signal"),
                            bad.fill_null(False).alias(f"_bad_{field_name}"))
        return build

    def k_tres(prefix: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            t = tres_exprs("_k")
            cols = [t.gpus.alias(f"{prefix}_gpus"), t.mem_bytes.alias(f"{prefix}_mem_bytes")]
            if prefix == "alloc":
                cols += [t.gpu_types.alias("alloc_gpu_types"), t.billing.alias("alloc_billing"),
                         t.shards.alias("alloc_shards"), t.mps.alias("alloc_mps")]
            return f.select("_k", *cols, t.bad.fill_null(False).alias(f"_bad_{field_name}"))
        return build

    def k_duration(out: str, field_name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
        def build(f: pl.DataFrame) -> pl.DataFrame:
            value, bad = duration_exprs("_k")
            return f.select("_k", value.alias(out),
                            bad.fill_null(False).alias(f"_bad_{field_name}"))
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
                  tl_raw_bad.fill_null(False).alias("_bad_TimelimitRaw")]
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
    checks = [Check(f, _EXPECTED[f]) for f in _EXPECTED
              if f in present and f"_bad_{f}" in out.columns]
    # a field under two header names, the cluster given for the dump (connectors.slurm.header)
    header_checks = row_checks(raw.columns)
    if header_checks:
        out = out.with_columns(raw.select(c.bad.alias(f"_bad_{c.key}") for c in header_checks))
        checks += [Check(c.key, c.expected, c.label, c.found) for c in header_checks]
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


def bad_any(checks: list[Check]) -> pl.Expr:
    return pl.any_horizontal([pl.col(f"_bad_{c.field}") for c in checks])


def order_checks(checks: list[Check], header: list[str | None]) -> list[Check]:
    pos = {name: i for i, name in enumerate(header) if name is not None}
    return sorted(checks, key=lambda c: pos.get(c.field, len(pos)))


def problem_of(row: dict[str, Any], raw_row: dict[str, Any], checks: list[Check],
               timezone: str) -> tuple[str, str]:
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
                                 "starts)")
            return c.field, f"{c.expected}, found {value!r}"
    return "line", "unknown problem"  # pragma: no cover - only called for rows with a problem


def typed_checked(raw: pl.DataFrame, header: list[str | None], present: set[str], timezone: str,
                  source_file: str, text_of: Callable[[list[int]], dict[int, str]],
                  rejects: list[Reject]) -> pl.DataFrame:
    """:func:`typed_fields`, then rows with a bad field or an unresolved DST time move to
    ``rejects``."""
    typed, checks = typed_fields(raw, present, timezone)
    checks = order_checks(checks, header)
    later_cols = [pl.col(c).is_not_null() for c in typed.columns if c.startswith("_later_")
                  if typed[c].null_count() < typed.height]
    amb = pl.any_horizontal(later_cols) if later_cols else pl.lit(False)
    flags = typed.lazy().select(bad_any(checks).alias("bad"), amb.alias("_amb")).select(
        "bad", (pl.col("_amb") & ~pl.col("bad")).alias("amb")
    ).collect()
    if flags["bad"].any() or flags["amb"].any():
        typed, more = _fix_or_reject(typed, raw, flags, checks, timezone, source_file, text_of)
        rejects.extend(more)
    return typed


def _fix_or_reject(typed: pl.DataFrame, raw: pl.DataFrame, flags: pl.DataFrame,
                   checks: list[Check], timezone: str, source_file: str,
                   text_of: Callable[[list[int]], dict[int, str]],
                   ) -> tuple[pl.DataFrame, list[Reject]]:
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
            fld, why = problem_of(row, raw_row, checks, timezone)
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


def _resolve_ambiguous(row: dict[str, Any]) -> dict[str, object] | str:
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
        return bool(span == elapsed if exact else span >= elapsed)

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
                        "row's other times do not tell which")
            continue
        resolved[f.lower()] = values.pop()
    return resolved
