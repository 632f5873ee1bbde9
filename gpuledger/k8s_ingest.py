"""Kubernetes ingest: Prometheus raw samples (or their OpenMetrics fixture twin) into the ledger.

One call of :func:`ingest_kubernetes_window` handles one window ``[start, end)`` (the CLI and the
Dagster assets use UTC days) and shares every line with both sources (``MetricsSource``):

1. **Read everything first.** Pod GPU allocation intervals and node GPU capacity
   (kube-state-metrics, ``connectors/kubernetes/ksm.py``), terminal pod phases, per-GPU busy
   fractions per minute and busy seconds per UTC day (dcgm-exporter, ``dcgm.py``) and Kueue's
   counters, pending gauges, admission-wait histogram and quota gauges (``kueue_metrics.py``).
   Identical raw reads inside one call are served once (utilization and busy seconds read the
   same DCGM series). Bounded memory (issue #18): by default GPU pods are read a group of nodes
   at a time (``k8s_ksm_stream.py``) and dcgm-exporter a group of GPUs at a time
   (``k8s_dcgm_stream.py``, GPU-minute rows spilled to Parquet), with the same rows, rejects and
   warnings as one whole read (``gpus_per_group=None``, the former path).
2. **Write in one transaction.** If the source fails at any point (Prometheus killed, a timeout
   after the retries) nothing of the window is written and the exception propagates; re-running
   the window completes it. A metric that is absent is no failure: its tables get nothing for the
   window and a warning is returned (and stored in ``k8s_ingest_warnings``).

Scrape interval and look-back. The KSM interval convention (``[first Running sample, last Running
sample + interval)`` where no exact kube_pod_start_time / kube_pod_completion_time applies,
docs/kubernetes.md "Pod boundaries") needs the scrape interval Δ, and joining intervals across
window edges needs the samples from just before ``start``. Δ is inferred once per window from
``kube_node_status_capacity`` over ``[start - lookback, end)`` (median spacing; falls back to the
pods' own spacing) unless given, and passed to the readers, which then read ``2 Δ`` before
``start`` and after ``end``: an interval running across ``start`` begins exactly at ``start``,
and a pod admitted just before ``end`` gets its seconds in this window. ``lookback`` (default
1 h, at least 2 Δ) is also the baseline period of Kueue's counters and how far after ``end``
terminal pod phases are looked for (a pod finishing just before ``end`` shows ``Succeeded`` at
the next scrape).

Pod intervals across windows. Each window stores its pieces (``k8s_pod_allocation_pieces``,
clipped to the window) replacing the window's previous pieces; ``k8s_pod_allocations`` is then
rebuilt for the pods concerned by merging touching pieces of the same uid, node and GPU count.
So a pod running across midnight is ONE row after both days are ingested, in any order, and
re-ingesting a window changes nothing. Node capacity is handled the same way.

Minute buckets (``gpu_utilization``) are aligned to the epoch: a window is widened to whole
buckets and those are replaced. ``gpu_busy_daily`` and the hourly Kueue tables are computed for
the whole UTC days the window touches and those days are replaced (so a sub-day window re-reads
its day: the results never depend on where windows were cut).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.gpu_sharing import DEFAULT_NAMES, WHOLE_GPU_RESOURCE, SharingNames
from connectors.kubernetes.dcgm import gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.ksm import (
    GPU_RESOURCE,
    KUEUE_QUEUE_LABELS,
    QUEUE_LABEL,
    infer_intervals,
    node_gpu_capacity,
    pod_gpu_allocations,
    read_for_uids,
)
from connectors.kubernetes.ksm_gangs import (
    JOB_SPEC_SCHEMA,
    PENDING_POD_SCHEMA,
    job_specs,
    pending_gpu_pods,
)
from connectors.kubernetes.kueue_metrics import KueueMetrics, read_kueue_metrics
from connectors.kubernetes.prometheus import MetricsSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA, TS, empty, label
from connectors.kubernetes.workload_conditions import DEFAULT_GPU_RESOURCES
from connectors.slurm.sanity import DEFAULT_MAX_GPUS_PER_NODE
from gpuledger.k8s_dcgm_stream import (
    DEFAULT_GPUS_PER_GROUP,
    SpilledFrames,
    dcgm_groups,
    read_dcgm_grouped,
)
from gpuledger.k8s_ksm_stream import (
    DEFAULT_PODS_PER_GROUP,
    node_gpu_capacity_grouped,
    node_groups,
    node_source,
    pending_gpu_pods_grouped,
    pod_gpu_allocations_grouped,
)
from gpuledger.nodenames import NodeNamer, load_namer, record_names
from gpuledger.service import LoadResult, import_workloads
from gpuledger.timewindows import daily_windows  # noqa: F401
from gpuledger.timewindows import utc_naive as _utc_naive
from models import schema
from models.lake_changes import delete_marked, mark_span
from models.runner import record_ingest, replace_rows, transaction

DEFAULT_LOOKBACK = timedelta(hours=1)
GRAIN = timedelta(minutes=1)  # gpu_utilization buckets
KUEUE_WINDOW = timedelta(hours=1)  # Kueue tables
TERMINAL_PHASES = ("Succeeded", "Failed", "Unknown")
PHASE_BATCH = 500  # pods per terminal-phase read when streaming
NODES_PER_GROUP = 64  # nodes per node-metric read when streaming
INGEST_SOURCE = "kubernetes"
_US = 1_000_000

# a pod's GPU-like resources (whole GPUs, MIG instances, replicas) are merged apart
POD_ENTITY = ("uid", "gpu_resource")
POD_SAME = ("namespace", "pod", "node", "gpus", "sharing", "slice_profile")
# the last non-null in time order; start_source stays the first piece's (coalesce_intervals)
POD_ATTRIBUTES = ("service_account", "labels", "queue_name", "owner_kind", "owner_name",
                  "cluster_queue", "end_source")
NODE_ENTITY = ("node",)
NODE_SAME = ("capacity_gpus", "allocatable_gpus", "unschedulable")
_QUEUE_LIKE = re.compile(r"(?i)queue")


@dataclass(frozen=True)
class KubernetesLoad:
    """What one Kubernetes ingest window did."""

    cluster: str
    window_start: datetime
    window_end: datetime
    scrape_interval_s: float | None
    pod_intervals: int  # pieces of this window
    pods: int  # distinct pod uids holding GPUs in the window
    node_intervals: int
    utilization_rows: int
    busy_days: int
    kueue_rows: int
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # samples read but not usable, per (component, reason); kept in k8s_rejects
    rejected: tuple[tuple[str, str, int], ...] = field(default_factory=tuple)
    # lines of an OpenMetrics file that could not be parsed; kept in rejects
    rejected_lines: int = 0

    @property
    def rejected_samples(self) -> int:
        return sum(n for _, _, n in self.rejected)

    @property
    def rows(self) -> int:
        return (self.pod_intervals + self.node_intervals + self.utilization_rows
                + self.busy_days + self.kueue_rows)

    def summary(self, max_warnings: int = 8) -> str:
        interval = (f"{self.scrape_interval_s:g} s" if self.scrape_interval_s is not None
                    else "unknown")
        text = (
            f"kubernetes {self.cluster} {self.window_start:%Y-%m-%d %H:%M}.."
            f"{self.window_end:%Y-%m-%d %H:%M}: {self.pods} GPU pods in {self.pod_intervals} "
            f"intervals, {self.node_intervals} node capacity intervals, {self.utilization_rows} "
            f"GPU-minute rows, {self.busy_days} GPU-days busy, {self.kueue_rows} Kueue rows "
            f"(scrape interval {interval}), {len(self.warnings)} warnings, "
            f"{self.rejected_samples} samples rejected"
            + (f", {self.rejected_lines} unreadable lines" if self.rejected_lines else "")
        )
        for component, reason, n in self.rejected:
            text += f"\n  rejected {n} {component} samples: {reason}"
        for w in self.warnings[:max_warnings]:
            text += f"\n  warning: {w}"
        if len(self.warnings) > max_warnings:
            text += (f"\n  … and {len(self.warnings) - max_warnings} more warnings (see "
                     "k8s_ingest_warnings)")
        return text


# --------------------------------------------------------------------------- helpers




def floor_to(value: datetime, step: timedelta) -> datetime:
    """`value` rounded down to a multiple of `step` since the epoch."""
    epoch = datetime(1970, 1, 1)
    return epoch + step * ((value - epoch) // step)


def ceil_to(value: datetime, step: timedelta) -> datetime:
    floor = floor_to(value, step)
    return floor if floor == value else floor + step




class _MemoSource:
    """A `MetricsSource` that answers repeated identical reads from memory (one ingest call)."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self._raw: dict[tuple[str, datetime, datetime], pl.DataFrame] = {}

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        key = (selector, start, end)
        hit = self._raw.get(key)
        if hit is None:
            hit = self.source.raw_samples(selector, start, end)
            self._raw[key] = hit
        return hit

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.series(match, start, end)

    def clear(self) -> None:
        self._raw.clear()


def infer_scrape_interval(
    source: MetricsSource, start: datetime, end: datetime, lookback: timedelta, *,
    nodes_per_group: int | None = None,
) -> timedelta | None:
    """kube-state-metrics' scrape interval: median spacing of its samples near the window
    (the node probe read `nodes_per_group` nodes at a time: each series' spacing is its own)."""
    probes = (
        (f'kube_node_status_capacity{{resource="{GPU_RESOURCE}"}}', start - lookback, end),
        (f'kube_pod_container_resource_requests{{resource="{GPU_RESOURCE}"}}',
         start - lookback, min(end, start + lookback)),
    )
    for i, (selector, a, b) in enumerate(probes):
        groups = (node_groups(source, selector, a, b, nodes_per_group)
                  if i == 0 and nodes_per_group else [])
        frames = ((node_source(source, g).raw_samples(selector, a, b) for g in groups)
                  if groups else iter([source.raw_samples(selector, a, b)]))
        spacings, height = [], 0
        for frame in frames:
            height += frame.height
            if frame.height == 0:
                continue
            labels = [c for c in frame.columns if c not in ("ts", "value")]
            ids = frame.select(labels).unique(maintain_order=True).with_row_index("_sid")
            with_ids = frame.join(ids, on=labels, how="left", nulls_equal=True)
            spacings.append(infer_intervals(with_ids.select("_sid", "ts"), ["_sid"])["interval"])
        if height < 2:
            continue
        per_series = pl.concat(spacings) if spacings else pl.Series("interval", [])
        if per_series.len():
            value = per_series.median()
            if isinstance(value, timedelta) and value > timedelta(0):
                return value
    return None


def _with_gpu_seconds(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        gpu_seconds=pl.col("gpus").cast(pl.Float64)
        * (pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds() / _US
    )


def _conform(frame: pl.DataFrame, table: schema.Table, **constants: object) -> pl.DataFrame:
    """`frame` with `table`'s columns (constants added, missing ones null)."""
    frame = frame.with_columns([pl.lit(v).alias(k) for k, v in constants.items()])
    return frame.select(
        [pl.col(c) if c in frame.columns else pl.lit(None).alias(c) for c in table.column_names]
    )


def _register(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> str:
    name = f"_k8s_{uuid.uuid4().hex}"
    con.register(name, frame.to_arrow())
    return name


def coalesce_intervals(
    pieces: pl.DataFrame, entity: Iterable[str], same: Iterable[str], attributes: Iterable[str]
) -> pl.DataFrame:
    """Merge intervals of the same entity that touch or overlap and agree on `same`.

    ``samples`` are added up, ``start_ts``/``end_ts`` span the merged pieces, `attributes` are
    the last non-null value in time order, ``scrape_interval_s`` the last one.
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
    keep = [c for c in s.columns if c not in {*entity, *same, *attributes, "start_ts", "end_ts",
                                              "samples", "scrape_interval_s", "gpu_seconds",
                                              "_run"}]
    merged = s.group_by("_run", maintain_order=True).agg(
        *[pl.col(c).first() for c in (*entity, *same, *keep)],
        pl.col("start_ts").min(),
        pl.col("end_ts").max(),
        pl.col("samples").sum(),
        pl.col("scrape_interval_s").drop_nulls().last(),
        *[pl.col(c).drop_nulls().last() for c in attributes],
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
        [_conform(outside, pieces_table), _conform(incoming, pieces_table, cluster=cluster)],
        how="vertical_relaxed",
    ) if outside.height else _conform(incoming, pieces_table, cluster=cluster)
    if "gpu_seconds" in pieces_table.column_names:
        new_pieces = _with_gpu_seconds(new_pieces)
    replace_rows(con, pieces_table, new_pieces, where="FALSE", atomic=False)

    keys = pl.concat([stored.select(list(entity)), incoming.select(list(entity))]).unique()
    if keys.height == 0:
        return 0
    view = _register(con, keys)
    try:
        quoted = ", ".join(f'"{c}"' for c in entity)
        match = f"cluster = ? AND ({quoted}) IN (SELECT {quoted} FROM {view})"
        every = con.execute(f"SELECT * FROM {pieces_table.name} WHERE {match}", [cluster]).pl()
        merged = coalesce_intervals(every, entity, same, attributes)
        merged = _conform(merged, merged_table)
        if "gpu_seconds" in merged_table.column_names:
            merged = _with_gpu_seconds(merged)
        replace_rows(con, merged_table, merged, where=match, params=(cluster,), atomic=False)
    finally:
        con.unregister(view)
    return merged.height


def _terminal_phases(
    source: MetricsSource, uids: list[str], start: datetime, until: datetime, *,
    batch: int | None = None,
) -> pl.DataFrame:
    """uid -> the latest terminal phase shown (value 1) in ``[start, until)``, with its time;
    `batch` pods at a time (each pod's answer is its own: the same rows, less held)."""
    schema_ = {"uid": pl.String, "namespace": pl.String, "pod": pl.String, "phase": pl.String,
               "phase_ts": TS}
    if batch is not None and len(uids) > batch:
        parts = [_terminal_phases(source, uids[i:i + batch], start, until)
                 for i in range(0, len(uids), batch)]
        return pl.concat(parts, how="vertical_relaxed")
    if not uids:
        return pl.DataFrame(schema=schema_)
    phases = "|".join(TERMINAL_PHASES)
    raw = read_for_uids(source, "kube_pod_status_phase", uids, start, until,
                        f'phase=~"{phases}"')
    if raw.height == 0 or not {"uid", "phase"} <= set(raw.columns):
        return pl.DataFrame(schema=schema_)
    shown = raw.filter(pl.col("value") == 1)
    if shown.height == 0:
        return pl.DataFrame(schema=schema_)
    latest = shown.sort("ts").group_by("uid").agg(
        label(shown, "namespace").last().alias("namespace"),
        label(shown, "pod").last().alias("pod"),
        pl.col("phase").last(),
        pl.col("ts").last().alias("phase_ts"),
    )
    return latest.select([pl.col(c).cast(t) for c, t in schema_.items()])


def _store_phases(con: duckdb.DuckDBPyConnection, phases: pl.DataFrame, cluster: str) -> None:
    """Keep, per pod, the phase with the latest timestamp (re-ingests never go backwards)."""
    if phases.height == 0:
        return
    table = schema.K8S_POD_PHASES
    incoming = _conform(phases, table, cluster=cluster)
    view = _register(con, incoming)
    try:
        stored = con.execute(
            f"SELECT * FROM {table.name} WHERE cluster = ? AND uid IN (SELECT uid FROM {view})",
            [cluster],
        ).pl()
        both = pl.concat([_conform(stored, table), incoming], how="vertical_relaxed")
        latest = both.sort(["uid", "phase_ts"]).group_by("uid", maintain_order=True).last()
        replace_rows(con, table, _conform(latest, table),
                     where=f"cluster = ? AND uid IN (SELECT uid FROM {view})", params=(cluster,),
                     atomic=False)
    finally:
        con.unregister(view)


def _pod_gpus(utilization: pl.DataFrame) -> pl.DataFrame:
    held = utilization.filter(pl.col("pod").is_not_null() & pl.col("namespace").is_not_null())
    return held.group_by(["namespace", "pod", "node", "gpu_uuid",
                          pl.col("bucket_start").dt.date().alias("day")]).agg(
        pl.col("bucket_start").min().alias("first_seen"),
        (pl.col("bucket_start").max() + GRAIN).alias("last_seen"),
    )


def _store_pod_gpus(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, cluster: str) -> None:
    """Widen (never narrow) the [first, last) seen span of each pod's GPU per day."""
    if frame.height == 0:
        return
    table = schema.K8S_POD_GPUS
    incoming = _conform(frame, table, cluster=cluster)
    key = ["cluster", "namespace", "pod", "node", "gpu_uuid", "day"]
    view = _register(con, incoming)
    try:
        quoted = ", ".join(f'"{c}"' for c in key)
        where = f"({quoted}) IN (SELECT {quoted} FROM {view})"
        stored = con.execute(f"SELECT * FROM {table.name} WHERE {where}").pl()
        both = pl.concat([_conform(stored, table), incoming], how="vertical_relaxed")
        merged = both.group_by(key).agg(pl.col("first_seen").min(), pl.col("last_seen").max())
        replace_rows(con, table, _conform(merged, table), where=where, atomic=False)
    finally:
        con.unregister(view)


def _store_seen(con: duckdb.DuckDBPyConnection, table: schema.Table, frame: pl.DataFrame,
                cluster: str) -> None:
    """Widen (never narrow) the [first, last) seen span of each key of `table` (Job sizes,
    pending pods): re-ingesting a window changes nothing, windows add up in any order."""
    if frame.height == 0:
        return
    incoming = _conform(frame, table, cluster=cluster)
    key = list(table.key)
    view = _register(con, incoming)
    try:
        # a key may hold nulls (a Job without completions): matched null-safe
        same = " AND ".join(f'v."{c}" IS NOT DISTINCT FROM {table.name}."{c}"' for c in key)
        where = f"EXISTS (SELECT 1 FROM {view} AS v WHERE {same})"
        stored = con.execute(f"SELECT * FROM {table.name} WHERE {where}").pl()
        both = pl.concat([_conform(stored, table), incoming], how="vertical_relaxed")
        rest = [c for c in table.column_names if c not in (*key, "first_seen", "last_seen")]
        # samples: the most one window saw (a sum would grow with every re-ingest)
        merged = both.sort("last_seen").group_by(key).agg(
            pl.col("first_seen").min(), pl.col("last_seen").max(),
            *[(pl.col(c).max() if c == "samples" else pl.col(c).drop_nulls().last())
              for c in rest])
        replace_rows(con, table, _conform(merged, table), where=where, atomic=False)
    finally:
        con.unregister(view)


def _label_warnings(pods: pl.DataFrame) -> list[str]:
    """Pod labels that look like a Kueue queue label but are not one of those Kueue sets."""
    known = {name.removeprefix("label_") for name in KUEUE_QUEUE_LABELS}
    out: set[str] = set()
    for text in pods["labels"].drop_nulls().unique().to_list():
        try:
            keys = json.loads(text)
        except ValueError:
            out.add(f"kube_pod_labels: cannot read the labels {text[:80]!r}")
            continue
        for k in keys:
            if _QUEUE_LIKE.search(k) and k not in known:
                out.add(f"kube_pod_labels: label_{k} looks like a Kueue queue label but is not "
                        f"{QUEUE_LABEL}; not used as the pod's LocalQueue")
    return sorted(out)


# --------------------------------------------------------------------------- the window


@dataclass
class _Read:
    pods: pl.DataFrame
    phases: pl.DataFrame
    capacity: pl.DataFrame
    utilization: pl.DataFrame | SpilledFrames  # spilled group by group when streamed
    busy: pl.DataFrame
    kueue: KueueMetrics
    warnings: list[tuple[str, str]]
    interval: timedelta | None
    util_span: tuple[datetime, datetime]
    busy_days: tuple[date, date]
    kueue_span: tuple[datetime, datetime]
    rejects: pl.DataFrame  # SAMPLE_REJECT_SCHEMA
    line_rejects: list[Reject]  # unreadable lines of an OpenMetrics file
    # gangs from pods alone (ksm_gangs.py): Job sizes and the GPU pods waiting without a node
    job_specs: pl.DataFrame = field(default_factory=lambda: empty(JOB_SPEC_SCHEMA))
    pending_pods: pl.DataFrame = field(default_factory=lambda: empty(PENDING_POD_SCHEMA))


def read_kubernetes_window(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    lookback: timedelta = DEFAULT_LOOKBACK,
    scrape_interval: timedelta | None = None,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
    sharing: SharingNames = DEFAULT_NAMES,
    gpus_per_group: int | None = DEFAULT_GPUS_PER_GROUP,
    pods_per_group: int = DEFAULT_PODS_PER_GROUP,
    nodes_per_group: int | None = None,
) -> _Read:
    """Every read of one window (no writes). Raises whatever the source raises; a source with
    a ``window_budget`` (PrometheusHttpSource) bounds the whole read by it.

    dcgm-exporter samples are read and derived about `gpus_per_group` GPUs at a time
    (gpuledger/k8s_dcgm_stream.py: the same rows, bounded memory); ``None`` reads them whole
    (the former path, kept as the benchmark's baseline and the equivalence tests' reference),
    and kube-state-metrics GPU pods then also whole. Streamed, the GPU pods are read about
    `pods_per_group` at a time (gpuledger/k8s_ksm_stream.py)."""
    start, end = check_window(start, end, lookback)
    if (gpus_per_group is not None and gpus_per_group < 1) or pods_per_group < 1:
        msg = ("expected at least 1 GPU (or None) and 1 pod per group, found "
               f"{gpus_per_group} and {pods_per_group}")
        raise ValueError(msg)
    budget = getattr(source, "window_budget", None)
    with _quiet_connector_log(), (budget() if callable(budget) else nullcontext()):
        return _read_window(source, start, end, lookback, scrape_interval,
                            tuple(gpu_resources), sharing, gpus_per_group, pods_per_group,
                            nodes_per_group or NODES_PER_GROUP)


@contextmanager
def _quiet_connector_log() -> Iterator[None]:
    """The readers log each note they return; the notes are reported (and stored) from here."""
    logger = logging.getLogger("connectors.kubernetes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _read_window(source: MetricsSource, start: datetime, end: datetime, lookback: timedelta,
                 scrape_interval: timedelta | None,
                 gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
                 sharing: SharingNames = DEFAULT_NAMES,
                 gpus_per_group: int | None = None,
                 pods_per_group: int = DEFAULT_PODS_PER_GROUP,
                 nodes_per_group: int = 64) -> _Read:
    memo = _MemoSource(source)
    # streamed: no read is kept past its reader (none repeats); whole: the former memo
    ksm: MetricsSource = memo if gpus_per_group is None else source
    warnings: list[tuple[str, str]] = []
    interval = scrape_interval or infer_scrape_interval(
        ksm, start, end, lookback, nodes_per_group=None if gpus_per_group is None
        else nodes_per_group)
    if interval is not None and lookback < 2 * interval:
        lookback = 2 * interval

    ksm_notes: list[str] = []
    sink: list[pl.DataFrame] = []
    if gpus_per_group is None:
        pods = pod_gpu_allocations(ksm, start, end, scrape_interval=interval, names=sharing,
                                   notes=ksm_notes, rejects=sink)
    else:  # pods a group of nodes at a time (gpuledger/k8s_ksm_stream.py)
        pods = pod_gpu_allocations_grouped(ksm, start, end, scrape_interval=interval,
                                           names=sharing, notes=ksm_notes, rejects=sink,
                                           pods_per_group=pods_per_group)
    if gpus_per_group is None:
        capacity = node_gpu_capacity(ksm, start, end, scrape_interval=interval,
                                     notes=ksm_notes, rejects=sink)
    else:
        capacity = node_gpu_capacity_grouped(ksm, start, end, scrape_interval=interval,
                                             notes=ksm_notes, rejects=sink,
                                             nodes_per_group=nodes_per_group)
    # the window itself (no margin): stored widened, so windows add up
    specs = job_specs(ksm, start, end, scrape_interval=interval, notes=ksm_notes,
                      rejects=sink)
    if gpus_per_group is None:
        pending = pending_gpu_pods(ksm, start, end, scrape_interval=interval, notes=ksm_notes,
                                   rejects=sink)
    else:
        pending = pending_gpu_pods_grouped(ksm, start, end, scrape_interval=interval,
                                           notes=ksm_notes, rejects=sink,
                                           pods_per_group=pods_per_group)
    warnings += [("ksm", n) for n in dict.fromkeys(ksm_notes)]
    warnings += [("ksm", n) for n in _label_warnings(pods)]
    uids = pods["uid"].drop_nulls().unique().sort().to_list()
    phases = _terminal_phases(ksm, uids, start, end + lookback,
                              batch=None if gpus_per_group is None else PHASE_BATCH)

    memo.clear()  # each stage's raw reads are let go before the next stage reads

    u0, u1 = floor_to(start, GRAIN), ceil_to(end, GRAIN)
    # samples without pod labels go to the only pod holding the whole node (dcgm_attribution),
    # counted in nvidia_com_gpu as the capacity is: MIG instances of the mixed strategy and
    # renamed replicas are other devices, never a whole node's GPUs
    whole = pods.filter(pl.col("gpu_resource") == WHOLE_GPU_RESOURCE)
    d0 = floor_to(start, timedelta(days=1))
    d1 = ceil_to(end, timedelta(days=1))
    groups = dcgm_groups(source, d0, d1, gpus_per_group) if gpus_per_group else []
    utilization: pl.DataFrame | SpilledFrames
    if groups:
        dcgm = read_dcgm_grouped(source, groups, u0, u1, d0, d1, grain=GRAIN, rejects=sink,
                                 pods=whole, capacity=capacity)
        utilization, busy = dcgm.utilization, dcgm.busy
        util_warn, busy_warn = dcgm.util_warnings, dcgm.busy_warnings
    else:
        utilization, util_warn = gpu_utilization(memo, u0, u1, grain=GRAIN, rejects=sink,
                                                 pods=whole, capacity=capacity)
        busy, busy_warn = gpu_busy_seconds_daily(memo, d0, d1, scrape_interval=None)
        memo.clear()
    warnings += [("dcgm", w) for w in dict.fromkeys([*util_warn, *busy_warn])]

    # whole UTC days: the gauge readers let a read's last sample stand only up to the read's
    # end, so reads cut elsewhere than at midnight would give other workload_seconds
    k0, k1 = d0, d1
    kueue = read_kueue_metrics(memo, k0, k1, window=KUEUE_WINDOW, lookback=lookback,
                               resource=gpu_resources, rejects=sink)
    warnings += [("kueue", w) for w in dict.fromkeys(kueue.warnings)]
    server = getattr(source, "warnings", None)
    if isinstance(server, list):
        warnings += [("prometheus", w) for w in dict.fromkeys(server)]
        server.clear()
    if interval is None:
        warnings.append(("ksm", "scrape interval unknown (no kube_node_status_capacity or GPU "
                                "pod samples): intervals use each series' own spacing"))
    rejects = (pl.concat(sink, how="vertical_relaxed").unique(maintain_order=True) if sink
               else empty(SAMPLE_REJECT_SCHEMA))
    line_rejects = list(getattr(source, "rejects", None) or [])
    return _Read(pods, phases, capacity, utilization, busy, kueue, warnings, interval,
                 (u0, u1), (d0.date(), (d1 - timedelta(days=1)).date()), (k0, k1),
                 rejects, line_rejects, specs, pending)


def ingest_kubernetes_window(
    con: duckdb.DuckDBPyConnection,
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    lookback: timedelta = DEFAULT_LOOKBACK,
    cluster: str = "default",
    scrape_interval: timedelta | None = None,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
    sharing: SharingNames = DEFAULT_NAMES,
    gpus_per_group: int | None = DEFAULT_GPUS_PER_GROUP,
    pods_per_group: int = DEFAULT_PODS_PER_GROUP,
    nodes_per_group: int | None = None,
) -> KubernetesLoad:
    """Read ``[start, end)`` from `source` and replace what the ledger holds for it, atomically.

    Holds `con` while the source is read: callers that can open the ledger themselves use
    :func:`read_kubernetes_window` then :func:`write_kubernetes_window` (the CLI, Dagster).

    See the module docstring. Returns what was loaded and the warnings (absent metrics,
    unrecognised label spellings, exporter label situations).
    """
    start, end = check_window(start, end, lookback)
    read = read_kubernetes_window(source, start, end, lookback=lookback,
                                  scrape_interval=scrape_interval, gpu_resources=gpu_resources,
                                  sharing=sharing, gpus_per_group=gpus_per_group,
                                  pods_per_group=pods_per_group,
                                  nodes_per_group=nodes_per_group)
    return write_kubernetes_window(con, read, source, start, end, cluster=cluster)


def check_window(start: datetime, end: datetime, lookback: timedelta) -> tuple[datetime, datetime]:
    start, end = _utc_naive(start), _utc_naive(end)
    if end <= start:
        msg = f"expected an end after the start, found {start:%F %T} .. {end:%F %T}"
        raise ValueError(msg)
    if lookback <= timedelta(0):
        msg = f"expected a positive look-back, found {lookback}"
        raise ValueError(msg)
    return start, end


def write_kubernetes_window(
    con: duckdb.DuckDBPyConnection, read: _Read, source: MetricsSource, start: datetime,
    end: datetime, *, cluster: str = "default",
) -> KubernetesLoad:
    """Write what :func:`read_kubernetes_window` read, in one short transaction: the ledger is
    opened only for this, never while a source is read (one writer at a time)."""
    start, end = _utc_naive(start), _utc_naive(end)
    namer = load_namer(con)
    read = _canonical_nodes(read, namer)
    read = _within_node_capacity(con, read)
    k = read.kueue
    kueue_frames = (
        (schema.KUEUE_COUNTERS, k.counters),
        (schema.KUEUE_PENDING, k.pending),
        (schema.KUEUE_ADMISSION_WAIT, k.wait_summary),
        (schema.KUEUE_ADMISSION_WAIT_BUCKETS, k.wait_buckets),
        (schema.KUEUE_QUEUE_RESOURCES, k.queue_resources),
    )
    warning_rows = pl.DataFrame(
        {"component": [c for c, _ in read.warnings], "message": [m for _, m in read.warnings]},
        schema={"component": pl.String, "message": pl.String},
    ).unique(maintain_order=True)
    with transaction(con):
        record_names(con, namer, INGEST_SOURCE)
        replace_window_intervals(
            con, schema.K8S_POD_ALLOCATION_PIECES, schema.K8S_POD_ALLOCATIONS, read.pods,
            cluster=cluster, start=start, end=end, entity=POD_ENTITY, same=POD_SAME,
            attributes=POD_ATTRIBUTES,
        )
        _store_phases(con, read.phases, cluster)
        replace_window_intervals(
            con, schema.K8S_NODE_CAPACITY_PIECES, schema.K8S_NODE_CAPACITY, read.capacity,
            cluster=cluster, start=start, end=end, entity=NODE_ENTITY, same=NODE_SAME,
        )
        u0, u1 = read.util_span
        mark_span(con, schema.GPU_UTILIZATION.name, cluster, u0, u1)  # lake partitions
        con.execute(f"DELETE FROM {schema.GPU_UTILIZATION.name} WHERE cluster = ? "
                    "AND bucket_start >= ? AND bucket_start < ?", [cluster, u0, u1])
        pod_gpus = []
        for part in _utilization_parts(read.utilization, namer):
            replace_rows(con, schema.GPU_UTILIZATION,
                         _conform(part, schema.GPU_UTILIZATION, cluster=cluster),
                         where="FALSE", atomic=False)
            pod_gpus.append(_pod_gpus(part))
        if pod_gpus:  # one row per (pod, GPU, day): a GPU's rows are all in one part
            _store_pod_gpus(con, pl.concat(pod_gpus, how="vertical_relaxed"), cluster)
        _store_seen(con, schema.K8S_JOB_SPECS, read.job_specs, cluster)
        _store_seen(con, schema.K8S_PENDING_PODS, read.pending_pods, cluster)
        first_day, last_day = read.busy_days
        replace_rows(con, schema.GPU_BUSY_DAILY,
                     _conform(read.busy, schema.GPU_BUSY_DAILY, cluster=cluster),
                     where="cluster = ? AND day >= ? AND day <= ?",
                     params=(cluster, first_day, last_day), atomic=False)
        k0, k1 = read.kueue_span
        for table, frame in kueue_frames:
            replace_rows(con, table, _conform(frame, table, cluster=cluster),
                         where="cluster = ? AND window_start >= ? AND window_start < ?",
                         params=(cluster, k0, k1), atomic=False)
        replace_rows(con, schema.K8S_INGEST_WARNINGS,
                     _conform(warning_rows, schema.K8S_INGEST_WARNINGS, cluster=cluster,
                              window_start=start, window_end=end),
                     where="cluster = ? AND window_start = ? AND window_end = ?",
                     params=(cluster, start, end), atomic=False)
        replace_rows(con, schema.K8S_REJECTS,
                     _conform(read.rejects, schema.K8S_REJECTS, cluster=cluster,
                              window_start=start, window_end=end),
                     where="cluster = ? AND window_start = ? AND window_end = ?",
                     params=(cluster, start, end), atomic=False)
        _store_line_rejects(con, read.line_rejects, source)
        kueue_rows = sum(f.height for _, f in kueue_frames)
        load = KubernetesLoad(
            cluster=cluster, window_start=start, window_end=end,
            scrape_interval_s=read.interval / timedelta(seconds=1) if read.interval else None,
            pod_intervals=read.pods.height, pods=read.pods["uid"].n_unique(),
            node_intervals=read.capacity.height, utilization_rows=read.utilization.height,
            busy_days=read.busy.height, kueue_rows=kueue_rows,
            warnings=tuple(warning_rows["message"].to_list()),
            rejected=_reject_counts(read.rejects),
            rejected_lines=len(read.line_rejects),
        )
        record_ingest(
            con, source=INGEST_SOURCE, partition_key=f"{cluster}/{start:%Y-%m-%dT%H:%M:%S}",
            window_start=start, window_end=end, rows_loaded=load.rows,
            rows_rejected=load.rejected_samples + load.rejected_lines,
            detail=f"{len(load.warnings)} warnings", atomic=False,
        )
    if isinstance(read.utilization, SpilledFrames):
        read.utilization.close()
    return load


def _canonical_nodes(read: _Read, namer: NodeNamer) -> _Read:
    """Every node name of the window in its canonical form (gpuledger/nodenames.py), before
    anything is written or merged: the merge keys must be the stored names. Spilled
    utilization is renamed part by part as it is written; its names are decided here (the
    same decisions and warnings as for the whole frame)."""
    pods = namer.canonical_frame(read.pods)
    capacity = namer.canonical_frame(read.capacity)
    utilization = read.utilization
    if isinstance(utilization, SpilledFrames):
        namer.canonical_frame(utilization.unique("node").to_frame())
    else:
        utilization = namer.canonical_frame(utilization)
    out = replace(read, pods=pods, capacity=capacity, utilization=utilization,
                  busy=namer.canonical_frame(read.busy))
    out.warnings.extend(("nodes", w) for w in dict.fromkeys(namer.warnings))
    return out


#: GPUs one node can hold when neither kube-state-metrics nor the inventory says: the same
#: ceiling as for Slurm (one rule for both schedulers; docs/slurm.md, sanity limits).
MAX_GPUS_PER_NODE = DEFAULT_MAX_GPUS_PER_NODE


def _utilization_parts(utilization: pl.DataFrame | SpilledFrames,
                       namer: NodeNamer) -> Iterator[pl.DataFrame]:
    if isinstance(utilization, SpilledFrames):
        for part in utilization.frames():
            yield namer.canonical_frame(part)
    else:
        yield utilization


def _within_node_capacity(con: duckdb.DuckDBPyConnection, read: _Read) -> _Read:
    """Pod intervals asking for more GPUs than their node has are rejects, not charges: the
    node's largest ``kube_node_status_capacity`` of the window, else the inventory's count,
    else ``MAX_GPUS_PER_NODE`` (issue #13: sanity limits with reasons). Only ``nvidia_com_gpu``
    is checked (its capacity counts replicas and single-strategy MIG devices too; the inventory
    and the ceiling count physical GPUs, so they bound whole-GPU requests only); other
    resources (MIG mixed, renamed replicas) have no GPU count to compare with."""
    pods = read.pods
    if pods.height == 0:
        return read
    capacity = (read.capacity.group_by("node").agg(pl.col("capacity_gpus").max().alias("_ksm"))
                if read.capacity.height else pl.DataFrame(schema={"node": pl.String,
                                                                  "_ksm": pl.Int64}))
    inventory = con.execute("SELECT node, max(gpu_count) FROM nodes GROUP BY node").pl()
    inventory.columns = ["node", "_inventory"]
    checked = (pods.join(capacity, on="node", how="left")
               .join(inventory.with_columns(pl.col("_inventory").cast(pl.Int64)), on="node",
                     how="left")
               .with_columns(_limit=pl.when(pl.col("gpu_resource") != WHOLE_GPU_RESOURCE)
                             .then(pl.lit(None, dtype=pl.Int64))
                             .when(pl.col("sharing").is_not_null()).then(pl.col("_ksm"))
                             .otherwise(pl.coalesce("_ksm", "_inventory",
                                                    pl.lit(MAX_GPUS_PER_NODE, dtype=pl.Int64))),
                             _by=pl.when(pl.col("_ksm").is_not_null())
                             .then(pl.lit("kube_node_status_capacity"))
                             .when(pl.col("_inventory").is_not_null())
                             .then(pl.lit("the node inventory"))
                             .otherwise(pl.lit("the ceiling MAX_GPUS_PER_NODE"))))
    over = (pl.col("gpus") > pl.col("_limit")).fill_null(False)
    bad = checked.filter(over)
    if bad.height == 0:
        return read
    rows = bad.select(
        pl.lit("ksm").alias("component"),
        pl.lit("kube_pod_container_resource_requests").alias("metric"),
        pl.format("expected at most the node's GPUs (from {}), found a pod holding more",
                  "_by").alias("reason"),
        pl.struct(namespace="namespace", pod="pod", uid="uid", node="node",
                  node_gpus="_limit").struct.json_encode().alias("series"),
        pl.col("start_ts").alias("ts"),
        pl.col("gpus").cast(pl.Float64).alias("value"),
    )
    kept = checked.filter(~over).select(pods.columns)
    return replace(read, pods=kept, rejects=pl.concat([read.rejects, rows],
                                                       how="vertical_relaxed"))


def _reject_counts(rejects: pl.DataFrame) -> tuple[tuple[str, str, int], ...]:
    if rejects.height == 0:
        return ()
    counts = rejects.group_by(["component", "reason"]).len().sort(["component", "reason"])
    return tuple((c, r, int(n)) for c, r, n in counts.iter_rows())


def _store_line_rejects(con: duckdb.DuckDBPyConnection, rejects: list[Reject],
                        source: MetricsSource) -> None:
    """An OpenMetrics file's unreadable lines, replacing what an earlier read of it stored."""
    path = getattr(source, "path", None)
    if path is None:
        return
    name = str(Path(path).resolve())
    replace_rows(con, schema.REJECTS, rejects_frame(rejects),
                 where="source = 'openmetrics' AND source_file = ?", params=(name,),
                 atomic=False)


def default_cluster(con: duckdb.DuckDBPyConnection) -> str:
    """The cluster name to file Kubernetes data under: the inventory's, if it names exactly one."""
    names = [r[0] for r in con.execute("SELECT DISTINCT cluster FROM nodes").fetchall()]
    return names[0] if len(names) == 1 and names[0] else "default"


# --------------------------------------------------------------------------- Workload conditions


def import_workload_conditions(
    con: duckdb.DuckDBPyConnection, path: Path, *,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> LoadResult:
    """Load a ``kubectl get workloads -A -o json`` snapshot: the same single path as
    ``service.import_workloads`` (both ``kueue_workloads_raw`` and ``kueue_workloads``, one
    transaction; connectors/kubernetes/workload_conditions.py reads the conditions). Kept under
    this name for its callers; the result is labelled ``kueue_workload_conditions``."""
    result = import_workloads(con, Path(path), gpu_resources=gpu_resources)
    return replace(result, source="kueue_workload_conditions")
