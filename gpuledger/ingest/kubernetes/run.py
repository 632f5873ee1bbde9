"""Kubernetes ingest: Prometheus raw samples (or their OpenMetrics fixture twin) into the ledger.

One call of :func:`ingest_kubernetes_window` handles one window ``[start, end)`` (the CLI and the
Dagster assets use UTC days) and shares every line with both sources (``MetricsSource``):

1. **Read everything first** (``k8s_window_read.py``). Pod GPU allocation intervals and node GPU
   capacity (kube-state-metrics, ``connectors/kubernetes/ksm.py``), terminal pod phases, per-GPU
   busy fractions per minute and busy seconds per UTC day (dcgm-exporter, ``dcgm.py``) and
   Kueue's counters, pending gauges, admission-wait histogram and quota gauges
   (``kueue_metrics.py``). Identical raw reads inside one call are served once (utilization and
   busy seconds read the same DCGM series). Bounded memory (issue #18): by default GPU pods are
   read a group of nodes at a time (``k8s_ksm_stream.py``) and dcgm-exporter a group of GPUs at
   a time (``k8s_dcgm_stream.py``, GPU-minute rows spilled to Parquet), with the same rows,
   rejects and warnings as one whole read (``gpus_per_group=None``, the former path).
2. **Write in one transaction** (here; each table's merge rule in ``k8s_window_store.py``). If
   the source fails at any point (Prometheus killed, a timeout after the retries) nothing of the
   window is written and the exception propagates; re-running the window completes it. A metric
   that is absent is no failure: its tables get nothing for the window and a warning is returned
   (and stored in ``k8s_ingest_warnings``).

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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Unpack

import duckdb
import polars as pl

from connectors.gpu_sharing import WHOLE_GPU_RESOURCE
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.workload_conditions import DEFAULT_GPU_RESOURCES
from connectors.slurm.sanity import DEFAULT_MAX_GPUS_PER_NODE
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.kubernetes.dcgm_stream import SpilledFrames
from gpuledger.ingest.kubernetes.dra import store_claims
from gpuledger.ingest.kubernetes.window_read import (
    DEFAULT_LOOKBACK,
    WindowRead,
    WindowReadOptions,
    check_window,
    read_kubernetes_window,
)
from gpuledger.ingest.kubernetes.window_store import (
    conform,
    pod_gpus_seen,
    replace_window_intervals,
    store_line_rejects,
    store_phases,
    store_seen,
)
from gpuledger.ingest.loads import LoadResult
from gpuledger.ingest.nodenames import NodeNamer, load_namer, record_names
from gpuledger.ingest.service import import_workloads
from models import schema
from models.build import mark_days_to_rebuild
from models.lake_changes import mark_span
from models.runner import record_ingest, replace_rows, transaction

INGEST_SOURCE = "kubernetes"

# a pod's GPU-like resources (whole GPUs, MIG instances, replicas) are merged apart
POD_ENTITY = ("uid", "gpu_resource")
POD_SAME = ("namespace", "pod", "node", "gpus", "sharing", "slice_profile")
# the last non-null in time order; start_source stays the first piece's (coalesce_intervals)
POD_ATTRIBUTES = ("service_account", "labels", "queue_name", "owner_kind", "owner_name",
                  "cluster_queue", "end_source", "dra_claims", "dra_devices")
NODE_ENTITY = ("node",)
NODE_SAME = ("capacity_gpus", "allocatable_gpus", "unschedulable")



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


def ingest_kubernetes_window(
    con: duckdb.DuckDBPyConnection,
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    cluster: str = "default",
    **options: Unpack[WindowReadOptions],
) -> KubernetesLoad:
    """Read ``[start, end)`` from `source` and replace what the ledger holds for it, atomically;
    `options` are :func:`read_kubernetes_window`'s.

    Holds `con` while the source is read: callers that can open the ledger themselves use
    :func:`read_kubernetes_window` then :func:`write_kubernetes_window` (the CLI, Dagster).

    See the module docstring. Returns what was loaded and the warnings (absent metrics,
    unrecognised label spellings, exporter label situations).
    """
    start, end = check_window(start, end, options.get("lookback", DEFAULT_LOOKBACK))
    read = read_kubernetes_window(source, start, end, **options)
    return write_kubernetes_window(con, read, source, start, end, cluster=cluster)



K8S_WINDOW_READ = "kubernetes: a window of the day read again after the day was built"


def write_kubernetes_window(
    con: duckdb.DuckDBPyConnection, read: WindowRead, source: MetricsSource, start: datetime,
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
        # built days of the window read again: the next build rebuilds them (and their
        # neighbours), whichever days it was asked for
        mark_days_to_rebuild(con, "SELECT $start::TIMESTAMP AS start_ts, $end::TIMESTAMP "
                             "AS end_ts", K8S_WINDOW_READ, {"start": start, "end": end})
        replace_window_intervals(
            con, schema.K8S_POD_ALLOCATION_PIECES, schema.K8S_POD_ALLOCATIONS, read.pods,
            cluster=cluster, start=start, end=end, entity=POD_ENTITY, same=POD_SAME,
            attributes=POD_ATTRIBUTES,
        )
        store_phases(con, read.phases, cluster)
        store_claims(con, read.claims, cluster)  # DRA ResourceClaims read for the window
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
                         conform(part, schema.GPU_UTILIZATION, cluster=cluster),
                         where="FALSE", atomic=False)
            pod_gpus.append(pod_gpus_seen(part))
        if pod_gpus:  # one row per (pod, GPU, day): a GPU's rows are all in one part
            store_seen(con, schema.K8S_POD_GPUS, pl.concat(pod_gpus, how="vertical_relaxed"),
                       cluster)
        store_seen(con, schema.K8S_JOB_SPECS, read.job_specs, cluster)
        store_seen(con, schema.K8S_PENDING_PODS, read.pending_pods, cluster)
        first_day, last_day = read.busy_days
        replace_rows(con, schema.GPU_BUSY_DAILY,
                     conform(read.busy, schema.GPU_BUSY_DAILY, cluster=cluster),
                     where="cluster = ? AND day >= ? AND day <= ?",
                     params=(cluster, first_day, last_day), atomic=False)
        k0, k1 = read.kueue_span
        for table, frame in kueue_frames:
            replace_rows(con, table, conform(frame, table, cluster=cluster),
                         where="cluster = ? AND window_start >= ? AND window_start < ?",
                         params=(cluster, k0, k1), atomic=False)
        replace_rows(con, schema.K8S_INGEST_WARNINGS,
                     conform(warning_rows, schema.K8S_INGEST_WARNINGS, cluster=cluster,
                              window_start=start, window_end=end),
                     where="cluster = ? AND window_start = ? AND window_end = ?",
                     params=(cluster, start, end), atomic=False)
        replace_rows(con, schema.K8S_REJECTS,
                     conform(read.rejects, schema.K8S_REJECTS, cluster=cluster,
                              window_start=start, window_end=end),
                     where="cluster = ? AND window_start = ? AND window_end = ?",
                     params=(cluster, start, end), atomic=False)
        store_line_rejects(con, read.line_rejects, source)
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


def _canonical_nodes(read: WindowRead, namer: NodeNamer) -> WindowRead:
    """Every node name of the window in its canonical form (gpuledger/ingest/nodenames.py), before
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


def _within_node_capacity(con: duckdb.DuckDBPyConnection, read: WindowRead) -> WindowRead:
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
