"""Storing one Kubernetes ingest window (gpuledger/ingest/kubernetes/run.py): interval pieces
merged across
windows, and the "seen" spans that only widen.

Everything here runs inside the caller's transaction (``atomic=False``) and is idempotent: a window
written twice, or windows written in any order, leave the same rows. Pieces are clipped to their
window and merged by entity (:func:`coalesce_intervals`), so a pod running across midnight is one
row once both days are in; phases keep the latest one shown; per-pod GPUs, Job sizes and pending
pods keep the widest ``[first_seen, last_seen)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS
from gpuledger.ingest.timewindows import MINUTE_GRAIN as GRAIN
from models import schema
from models.lake_changes import delete_marked
from models.runner import replace_rows

_US = 1_000_000
#: kept as the earliest non-null of the merged pieces: a pod's first Running scrape (a piece of a
#: window that saw the pod only Pending, or Running since before the window, has none)
EARLIEST = ("first_running_ts",)


def with_gpu_seconds(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        gpu_seconds=pl.col("gpus").cast(pl.Float64)
        * (pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds() / _US
    )


def conform(frame: pl.DataFrame, table: schema.Table, **constants: object) -> pl.DataFrame:
    """`frame` with `table`'s columns (constants added, missing ones null)."""
    frame = frame.with_columns([pl.lit(v).alias(k) for k, v in constants.items()])
    return frame.select(
        [pl.col(c) if c in frame.columns else pl.lit(None).alias(c) for c in table.column_names]
    )


def register_frame(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> str:
    name = f"_k8s_{uuid.uuid4().hex}"
    con.register(name, frame.to_arrow())
    return name


def coalesce_intervals(
    pieces: pl.DataFrame, entity: Iterable[str], same: Iterable[str], attributes: Iterable[str]
) -> pl.DataFrame:
    """Merge intervals of the same entity that touch or overlap and agree on `same`.

    ``samples`` are added up, ``start_ts``/``end_ts`` span the merged pieces, `attributes` are
    the last non-null value in time order, ``scrape_interval_s`` the last one, ``EARLIEST``
    columns the earliest value, every other column the first piece's (``start_source``).
    """
    entity, same, attributes = list(entity), list(same), list(attributes)
    if pieces.height == 0:
        return pieces
    s = pieces.sort([*entity, "start_ts", "end_ts"], nulls_last=True)
    prev_end = pl.col("end_ts").cum_max().shift(1).over(entity)
    brk = prev_end.is_null() | (pl.col("start_ts") > prev_end)
    for c in same:
        brk = brk | pl.col(c).ne_missing(pl.col(c).shift(1).over(entity))
    s = s.with_columns(_run=brk.cum_sum())
    earliest = [c for c in EARLIEST if c in s.columns and c not in {*entity, *same,
                                                                    *attributes}]
    keep = [c for c in s.columns if c not in {*entity, *same, *attributes, *earliest, "start_ts",
                                              "end_ts", "samples", "scrape_interval_s",
                                              "gpu_seconds", "_run"}]
    merged = s.group_by("_run", maintain_order=True).agg(
        *[pl.col(c).first() for c in (*entity, *same, *keep)],
        pl.col("start_ts").min(),
        pl.col("end_ts").max(),
        pl.col("samples").sum(),
        pl.col("scrape_interval_s").drop_nulls().last(),
        *[pl.col(c).drop_nulls().last() for c in attributes],
        *[pl.col(c).min() for c in earliest],
    ).drop("_run")
    return merged


def _clip_outside(rows: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """The parts of stored pieces outside ``[start, end)`` (pieces of windows with other
    boundaries); their sample counts are shared in proportion to the time kept."""
    if rows.height == 0:
        return rows
    total = (pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds()
    before = rows.filter(pl.col("start_ts") < start).with_columns(
        _kept=(pl.min_horizontal("end_ts", pl.lit(start).cast(TS)) - pl.col("start_ts"))
        .dt.total_microseconds(), _total=total,
    ).with_columns(end_ts=pl.min_horizontal("end_ts", pl.lit(start).cast(TS)))
    after = rows.filter(pl.col("end_ts") > end).with_columns(
        _kept=(pl.col("end_ts") - pl.max_horizontal("start_ts", pl.lit(end).cast(TS)))
        .dt.total_microseconds(), _total=total,
    ).with_columns(start_ts=pl.max_horizontal("start_ts", pl.lit(end).cast(TS)))
    out = pl.concat([before, after])
    return out.with_columns(
        samples=(pl.col("samples") * pl.col("_kept") / pl.col("_total")).round().cast(pl.Int64)
    ).drop("_kept", "_total")


def replace_window_intervals(
    con: duckdb.DuckDBPyConnection,
    pieces_table: schema.Table,
    merged_table: schema.Table,
    incoming: pl.DataFrame,
    *,
    cluster: str,
    start: datetime,
    end: datetime,
    entity: tuple[str, ...],
    same: tuple[str, ...],
    attributes: tuple[str, ...] = (),
) -> int:
    """Replace the window's pieces with `incoming` and rebuild the merged rows concerned.

    Runs inside the caller's transaction. Returns the number of merged rows rewritten.
    """
    overlap = "cluster = ? AND start_ts < ? AND end_ts > ?"
    stored = con.execute(f"SELECT * FROM {pieces_table.name} WHERE {overlap}",
                         [cluster, end, start]).pl()
    outside = _clip_outside(stored, start, end)
    delete_marked(con, pieces_table.name, overlap, [cluster, end, start])  # lake partitions
    new_pieces = pl.concat(
        [conform(outside, pieces_table), conform(incoming, pieces_table, cluster=cluster)],
        how="vertical_relaxed",
    ) if outside.height else conform(incoming, pieces_table, cluster=cluster)
    if "gpu_seconds" in pieces_table.column_names:
        new_pieces = with_gpu_seconds(new_pieces)
    replace_rows(con, pieces_table, new_pieces, where="FALSE", atomic=False)

    keys = pl.concat([stored.select(list(entity)), incoming.select(list(entity))]).unique()
    if keys.height == 0:
        return 0
    view = register_frame(con, keys)
    try:
        quoted = ", ".join(f'"{c}"' for c in entity)
        match = f"cluster = ? AND ({quoted}) IN (SELECT {quoted} FROM {view})"
        every = con.execute(f"SELECT * FROM {pieces_table.name} WHERE {match}", [cluster]).pl()
        merged = coalesce_intervals(every, entity, same, attributes)
        merged = conform(merged, merged_table)
        if "gpu_seconds" in merged_table.column_names:
            merged = with_gpu_seconds(merged)
        replace_rows(con, merged_table, merged, where=match, params=(cluster,), atomic=False)
    finally:
        con.unregister(view)
    return merged.height


def store_phases(con: duckdb.DuckDBPyConnection, phases: pl.DataFrame, cluster: str) -> None:
    """Keep, per pod, the phase with the latest timestamp (re-ingests never go backwards)."""
    if phases.height == 0:
        return
    table = schema.K8S_POD_PHASES
    incoming = conform(phases, table, cluster=cluster)
    view = register_frame(con, incoming)
    try:
        stored = con.execute(
            f"SELECT * FROM {table.name} WHERE cluster = ? AND uid IN (SELECT uid FROM {view})",
            [cluster],
        ).pl()
        both = pl.concat([conform(stored, table), incoming], how="vertical_relaxed")
        latest = both.sort(["uid", "phase_ts"]).group_by("uid", maintain_order=True).last()
        replace_rows(con, table, conform(latest, table),
                     where=f"cluster = ? AND uid IN (SELECT uid FROM {view})", params=(cluster,),
                     atomic=False)
    finally:
        con.unregister(view)


def pod_gpus_seen(utilization: pl.DataFrame) -> pl.DataFrame:
    held = utilization.filter(pl.col("pod").is_not_null() & pl.col("namespace").is_not_null())
    return held.group_by(["namespace", "pod", "node", "gpu_uuid",
                          pl.col("bucket_start").dt.date().alias("day")]).agg(
        pl.col("bucket_start").min().alias("first_seen"),
        (pl.col("bucket_start").max() + GRAIN).alias("last_seen"),
    )


def store_seen(con: duckdb.DuckDBPyConnection, table: schema.Table, frame: pl.DataFrame,
               cluster: str) -> None:
    """Widen (never narrow) the [first, last) seen span of each key of `table` (a pod's GPUs per
    day, Job sizes, pending pods): re-ingesting a window changes nothing, windows add up in any
    order."""
    if frame.height == 0:
        return
    incoming = conform(frame, table, cluster=cluster)
    key = list(table.key)
    view = register_frame(con, incoming)
    try:
        # a key may hold nulls (a Job without completions): matched null-safe
        same = " AND ".join(f'v."{c}" IS NOT DISTINCT FROM {table.name}."{c}"' for c in key)
        where = f"EXISTS (SELECT 1 FROM {view} AS v WHERE {same})"
        stored = con.execute(f"SELECT * FROM {table.name} WHERE {where}").pl()
        both = pl.concat([conform(stored, table), incoming], how="vertical_relaxed")
        rest = [c for c in table.column_names if c not in (*key, "first_seen", "last_seen")]
        # samples: the most one window saw (a sum would grow with every re-ingest)
        merged = both.sort("last_seen").group_by(key).agg(
            pl.col("first_seen").min(), pl.col("last_seen").max(),
            *[(pl.col(c).max() if c == "samples" else pl.col(c).drop_nulls().last())
              for c in rest])
        replace_rows(con, table, conform(merged, table), where=where, atomic=False)
    finally:
        con.unregister(view)


def store_line_rejects(con: duckdb.DuckDBPyConnection, rejects: list[Reject],
                       source: MetricsSource) -> None:
    """An OpenMetrics file's unreadable lines, replacing what an earlier read of it stored."""
    path = getattr(source, "path", None)
    if path is None:
        return
    name = str(Path(path).resolve())
    replace_rows(con, schema.REJECTS, rejects_frame(rejects),
                 where="source = 'openmetrics' AND source_file = ?", params=(name,),
                 atomic=False)
