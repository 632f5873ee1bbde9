"""Explicit Polars schemas of every frame the Kubernetes/Prometheus connectors return.

Times are naive ``pl.Datetime("us")`` meaning UTC (docs/contracts.md). Label values are strings;
a label a series does not carry is null (Prometheus drops ``label=""`` on ingest, so "empty" and
"absent" are the same thing in stored data).
"""

from __future__ import annotations

import json

import polars as pl

from connectors.frame_types import SchemaDict

TS = pl.Datetime("us")

# --------------------------------------------------------------------------- raw samples

# Fixed leading columns of a raw-sample frame; one String column per label follows, in name order.
RAW_SAMPLE_BASE: SchemaDict = {
    "ts": TS,
    "value": pl.Float64,
    "__name__": pl.String,
}

# Fixed leading column of a series frame (``MetricsSource.series``); label columns follow.
SERIES_BASE = {"__name__": pl.String}

# --------------------------------------------------------------------------- kube-state-metrics

POD_GPU_ALLOCATION_SCHEMA: SchemaDict = {
    "namespace": pl.String,
    "pod": pl.String,
    # the pod's uid, or before kube-state-metrics v2.1.0 "<namespace>/<pod>@<created>Z"
    # (connectors/kubernetes/ksm_keys.py)
    "uid": pl.String,
    "node": pl.String,
    "gpus": pl.Int64,  # the effective request: max(max(init), sum(containers) + sum(sidecars))
    "start_ts": TS,  # kube_pod_start_time or the first Running sample (clipped to the window)
    "end_ts": TS,  # kube_pod_completion_time or last Running sample + interval (clipped), excl.
    "samples": pl.Int64,  # Running samples inside [start_ts, end_ts)
    "scrape_interval_s": pl.Float64,
    "gpu_seconds": pl.Float64,  # gpus x (end_ts - start_ts)
    "service_account": pl.String,
    "labels": pl.String,  # JSON object {"<k8s label as exported, without label_>": value}
    # LocalQueue: label_kueue_x_k8s_io_local_queue_name, else label_kueue_x_k8s_io_queue_name,
    # else the owning Job's label_kueue_x_k8s_io_queue_name (kube_job_labels)
    "queue_name": pl.String,
    "owner_kind": pl.String,
    "owner_name": pl.String,
    "cluster_queue": pl.String,  # label_kueue_x_k8s_io_cluster_queue_name (Kueue >= 0.17)
    # which time each end is: kube_pod_start_time / kube_pod_completion_time, scrape_grid, or
    # window (clipped to the read window; the pod ran on beyond it)
    "start_source": pl.String,
    "end_source": pl.String,
    # docs/shared-gpus.md: the KSM resource (nvidia_com_gpu, nvidia_com_mig_1g_10gb, ...), its
    # sharing mode (mig, time_slicing, mps; null: whole GPUs) and MIG profile (1g.10gb);
    # gpus = the request of that resource (instances, replicas)
    "gpu_resource": pl.String,
    "sharing": pl.String,
    "slice_profile": pl.String,
    # the interval's first Running scrape; [start_ts, it) is the pod's start-up (image pulls,
    # init containers: admitted, GPUs held); null: never Running in it (docs/kubernetes.md)
    "first_running_ts": TS,
}

NODE_GPU_CAPACITY_SCHEMA: SchemaDict = {
    "node": pl.String,
    "start_ts": TS,
    "end_ts": TS,
    "capacity_gpus": pl.Int64,
    "allocatable_gpus": pl.Int64,  # null: kube_node_status_allocatable absent
    "unschedulable": pl.Boolean,  # null: kube_node_spec_unschedulable absent
    "samples": pl.Int64,
    "scrape_interval_s": pl.Float64,
}

# --------------------------------------------------------------------------- dcgm-exporter

GPU_UTILIZATION_SCHEMA: SchemaDict = {
    "gpu_uuid": pl.String,
    "gpu_instance": pl.String,  # MIG GPU_I_ID; null for a whole GPU
    "node": pl.String,
    "gpu_index": pl.Int32,
    "gpu_model": pl.String,
    "bucket_start": TS,
    "busy_fraction": pl.Float64,  # mean of the samples, 0..1
    "samples": pl.Int64,
    "namespace": pl.String,
    "pod": pl.String,
    "container": pl.String,
    "pod_uid": pl.String,
    "hpc_job": pl.String,
    "metric": pl.String,  # DCGM_FI_PROF_GR_ENGINE_ACTIVE if any sample of the row came from it
    "gpu_instance_profile": pl.String,  # MIG GPU_I_PROFILE (e.g. 3g.40gb); null for a whole GPU
    # exporter_labels: the exporter's own holder labels; sole_pod_on_node: no holder labels, the
    # only pod holding every GPU of the node (dcgm_attribution); null: no holder (idle/unknown)
    "attribution": pl.String,
    # dcgm-exporter --kubernetes-enable-dra (4.3+): the pod's ResourceClaim and device, as the
    # exporter's labels name them (connectors/kubernetes/dcgm_dra.py); null without DRA
    "dra_claim_namespace": pl.String,
    "dra_claim_name": pl.String,
    "dra_driver_name": pl.String,
    "dra_pool_name": pl.String,
    "dra_device_name": pl.String,
    "dra_mig_profile": pl.String,
    "dra_mig_device_uuid": pl.String,
}

GPU_BUSY_DAILY_SCHEMA: SchemaDict = {
    "gpu_uuid": pl.String,
    "gpu_instance": pl.String,
    "node": pl.String,
    "day": pl.Date,
    "busy_seconds": pl.Float64,  # sum of value x seconds the sample stands for
    "covered_seconds": pl.Float64,  # seconds with data (gaps excluded)
    "samples": pl.Int64,
    "scrape_interval_s": pl.Float64,
    "gpu_instance_profile": pl.String,  # MIG GPU_I_PROFILE of an instance row
    # gpu | mig_instance | mig_parent (slice-weighted over the GPU's instances, dcgm_mig)
    "device_kind": pl.String,
    "mig_slices": pl.Int32,  # compute slices: the instance's, or the parent GPU's total
}

# --------------------------------------------------------------------------- Kueue

KUEUE_COUNTER_SCHEMA: SchemaDict = {
    "metric": pl.String,  # e.g. kueue_admitted_workloads_total
    "window_start": TS,
    "window_end": TS,
    "cluster_queue": pl.String,  # preempting_cluster_queue for kueue_preempted_workloads_total
    "reason": pl.String,  # null for counters without a reason label
    "increase": pl.Float64,
    "resets": pl.Int64,
    "samples": pl.Int64,
}

KUEUE_PENDING_SCHEMA: SchemaDict = {
    "window_start": TS,
    "window_end": TS,
    "cluster_queue": pl.String,
    "status": pl.String,  # active | inadmissible
    "mean": pl.Float64,
    "max": pl.Float64,
    "last": pl.Float64,
    "workload_seconds": pl.Float64,  # sum of value x seconds each sample stands for (gap-aware)
    "samples": pl.Int64,
    "pending_seconds": pl.Float64,  # seconds with value > 0 (gap-aware, like workload_seconds)
    "covered_seconds": pl.Float64,  # seconds the samples stand for (gap-aware)
}

KUEUE_WAIT_BUCKET_SCHEMA: SchemaDict = {
    "window_start": TS,
    "window_end": TS,
    "cluster_queue": pl.String,
    "le": pl.Float64,  # upper bound, +inf for the last bucket
    "cumulative_count": pl.Float64,  # admissions in the window with wait <= le
    "bucket_count": pl.Float64,  # admissions with previous le < wait <= le
}

KUEUE_WAIT_SUMMARY_SCHEMA: SchemaDict = {
    "window_start": TS,
    "window_end": TS,
    "cluster_queue": pl.String,
    "count": pl.Float64,
    "sum_seconds": pl.Float64,
    "mean_seconds": pl.Float64,  # null when count == 0
}

KUEUE_QUEUE_RESOURCE_SCHEMA: SchemaDict = {
    "metric": pl.String,  # usage | reservation | nominal_quota | borrowing_limit | lending_limit
    "window_start": TS,
    "window_end": TS,
    "cohort": pl.String,
    "cluster_queue": pl.String,
    "flavor": pl.String,
    "resource": pl.String,
    "mean": pl.Float64,
    "max": pl.Float64,
    "last": pl.Float64,
    "samples": pl.Int64,
    # time-weighted: sum of value x seconds each sample stands for (gap-aware; ±Inf kept)
    "value_seconds": pl.Float64,
    "covered_seconds": pl.Float64,  # seconds the samples stand for (gap-aware)
    # usage rows only, per scrape against the same scrape's nominal quota (else null):
    "above_nominal_seconds": pl.Float64,  # max(usage - nominal, 0) x seconds: borrowed
    "lendable_seconds": pl.Float64,  # min(max(nominal - usage, 0), lending limit) x seconds
}


# --------------------------------------------------------------------------- rejected samples

# A sample the readers could parse but cannot use (no key label, NaN or ±Inf where a count is
# needed, a histogram bucket without a numeric ``le``, a Running pod without a node …). Nothing
# is dropped silently: every reader that skips samples returns them in this shape, the ingest
# stores them in ``k8s_rejects`` and counts them per (component, reason) in its result.
SAMPLE_REJECT_SCHEMA: SchemaDict = {
    "component": pl.String,  # ksm | dcgm | kueue | prometheus
    "metric": pl.String,  # the series' __name__
    "reason": pl.String,  # short and stable, so it can be counted: "expected a uid label, …"
    "series": pl.String,  # the series' labels as a JSON object (sorted keys, nulls left out)
    "ts": TS,
    "value": pl.Float64,
}


def sample_rejects(frame: pl.DataFrame, component: str, reason: str) -> pl.DataFrame:
    """The rows of a raw-sample frame (``ts``, ``value``, label columns) as rejects.

    One reject per sample, with the series' labels folded into JSON so an operator can find the
    series again (``{__name__="…", …}``).
    """
    if frame.height == 0:
        return empty(SAMPLE_REJECT_SCHEMA)
    labels = sorted(c for c in frame.columns
                    if c not in ("ts", "value") and (c == "__name__" or not c.startswith("_")))
    # JSON per distinct label set (few), joined back: rejects are rare, series names exact
    ids = frame.select([pl.col(c).cast(pl.String) for c in labels]).unique(maintain_order=True)
    texts = [json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True)
             for row in ids.iter_rows(named=True)]
    ids = ids.with_columns(pl.Series("_series", texts, dtype=pl.String))
    frame = frame.with_columns([pl.col(c).cast(pl.String) for c in labels]).join(
        ids, on=labels, how="left", nulls_equal=True) if labels else frame.with_columns(
        _series=pl.lit("{}"))
    series = pl.col("_series")
    return frame.select(
        pl.lit(component, dtype=pl.String).alias("component"),
        (pl.col("__name__").cast(pl.String) if "__name__" in frame.columns
         else pl.lit(None, dtype=pl.String)).alias("metric"),
        pl.lit(reason, dtype=pl.String).alias("reason"),
        series.alias("series"),
        (pl.col("ts").cast(TS) if "ts" in frame.columns else pl.lit(None, dtype=TS)).alias("ts"),
        (pl.col("value").cast(pl.Float64) if "value" in frame.columns
         else pl.lit(None, dtype=pl.Float64)).alias("value"),
    )


def keep_rejects(sink: list[pl.DataFrame] | None, frame: pl.DataFrame, component: str,
                 reason: str) -> None:
    """Append `frame`'s samples to `sink` as rejects (no-op for an empty frame or no sink)."""
    if sink is not None and frame.height:
        sink.append(sample_rejects(frame, component, reason))


def empty(schema: SchemaDict) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def conform(frame: pl.DataFrame, schema: SchemaDict) -> pl.DataFrame:
    """`frame` with exactly `schema`'s columns, in order and cast (missing columns are null)."""
    return frame.select(
        [
            (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in schema.items()
        ]
    )


def label_columns(frame: pl.DataFrame) -> list[str]:
    """The label columns of a raw-sample frame (everything but ts, value), sorted."""
    return sorted(c for c in frame.columns if c not in ("ts", "value"))


def label(frame: pl.DataFrame, name: str) -> pl.Expr:
    """``pl.col(name)`` or a null String when the frame has no such label column."""
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(None, dtype=pl.String)
