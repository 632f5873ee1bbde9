"""Pod GPU allocation intervals and node GPU capacity from kube-state-metrics raw samples.

Every GPU-like resource is read (whole GPUs, MIG instances, time-slicing/MPS replicas:
``connectors/gpu_sharing.py``), one interval per pod key *and* resource; ``sharing`` and
``slice_profile`` follow the node's labels in force (``ksm_sharing.py``, docs/kubernetes.md
"Shared GPUs").

Allocation = what the scheduler gave a pod, not what it used: the pod's *effective* GPU request
(ksm_pods.py: ``max(max(init containers), sum(containers) + sum(sidecars))``, a container's limit
standing in for a missing request), counted only at samples where

* the pod is bound to a node (a non-empty ``node`` -- Prometheus drops ``node=""``, so the label
  is absent until the scheduler binds the pod; ``kube_pod_info``'s node where the request series
  have none, as in KSM v2.0's init-container metrics), and
* ``kube_pod_status_phase{phase="Running"}`` is 1 at that scrape, or ``{phase="Pending"}`` is 1
  at or after the pod's ``kube_pod_start_time`` (the kubelet admitted it and allocated its
  devices; it is pulling images or running init containers: ksm_boundaries.py).

KSM reports requests for every pod object in every phase, until deletion (Job TTL), so the phase
gate matters: a Succeeded pod that is kept for 10 minutes holds no GPU.

Every label is read as the workload's in both scrape shapes (``exported_namespace``/``_pod``/
``_container``/``_node`` without honor_labels; ksm_labels.py). A pod is keyed by its ``uid``, or
before KSM v2.1.0 by ``namespace/pod@creation time`` (ksm_keys.py); a pod recreated by a Job
retry has a new key, so its own rows.

Interval convention (per pod key, ksm_boundaries.py)::

    [kube_pod_start_time | first held sample, kube_pod_completion_time | last held sample + Δ)
    clipped to [start, end)

The exact times are used where they agree with the samples (the first scrape after the start
time shows the pod on its node, Pending or Running -- on a regular grid: within one scrape
interval Δ before it; likewise the completion after the last Running sample; never more than
2 Δ away) and with the other pods on the node; otherwise the scrape grid, and each row records
which (``start_source``, ``end_source``) and its first Running scrape (``first_running_ts``: the
start-up ends there). A new interval starts after a gap of more than 2 Δ between held samples
(no data is not "running"), or when the pod's node or GPU count changes. Δ is the median
spacing of the pod's own KSM samples unless given.

Error bound on the grid: the true start t0 lies in (first - Δ, first] and the true end t1 in
(last, last + Δ], so each grid end is off by less than one Δ, plus the delay between the
kubelet's status update and KSM's next list/watch event. Samples from 2 Δ before ``start`` (5 min
when Δ is inferred) to 2 Δ after ``end`` are read, so that an interval running across a window
bound ends exactly there and exact times just across it are seen: consecutive windows add up.

Samples that cannot be used (no key, NaN/±Inf or fractional GPU counts, a Running pod without a
node) go to the `rejects` sink with their reason; boundary and label problems to `notes`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import polars as pl

from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames, k8s_resource_pattern
from connectors.kubernetes.ksm_attributes import (
    CLUSTER_QUEUE_LABEL,
    KUEUE_QUEUE_LABELS,
    LOCAL_QUEUE_LABEL,
    QUEUE_LABEL,
    pod_attributes,
)
from connectors.kubernetes.ksm_boundaries import (
    COMPLETION_TIME,
    START_TIME,
    exact_times,
    pod_intervals,
)
from connectors.kubernetes.ksm_keys import UID_BATCH, read_for_uids, read_keys
from connectors.kubernetes.ksm_labels import node_target_jobs, with_workload
from connectors.kubernetes.ksm_pods import (
    COMPONENT,
    NO_NODE,
    effective_gpus,
    read_gpu_samples,
    reject_bad_values,
    sidecars,
)
from connectors.kubernetes.ksm_sharing import classify, node_labels
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import (
    NODE_GPU_CAPACITY_SCHEMA,
    POD_GPU_ALLOCATION_SCHEMA,
    TS,
    conform,
    empty,
    keep_rejects,
    label,
)
from connectors.times import utc_naive

__all__ = [
    "CLUSTER_QUEUE_LABEL", "GPU_RESOURCE", "KUEUE_QUEUE_LABELS", "LOCAL_QUEUE_LABEL",
    "QUEUE_LABEL", "UID_BATCH", "build_runs", "infer_intervals", "node_gpu_capacity",
    "pod_gpu_allocations", "read_for_uids",
]

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia_com_gpu"  # KSM sanitises nvidia.com/gpu
# the families this reader needs besides ksm_pods.GPU_METRICS (`gpuledger doctor` checks them)
PHASE_METRIC = "kube_pod_status_phase"
HELD_PHASES = ("Running", "Pending")  # Pending: from the pod's start time on, bound
POD_INFO_METRIC = "kube_pod_info"
NODE_CAPACITY_METRIC = "kube_node_status_capacity"
DEFAULT_INTERVAL = timedelta(seconds=30)  # only when nothing can be inferred at all
INFER_LOOKBACK = timedelta(minutes=5)
_US = 1_000_000


def _note(notes: list[str] | None, text: str) -> None:
    log.warning("%s", text)
    if notes is not None:
        notes.append(text)


def _interval_expr(interval: timedelta | None) -> pl.Expr:
    return pl.lit(interval).cast(pl.Duration("us"))


def infer_intervals(frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """Median spacing of the distinct sample timestamps of each `key` (column ``interval``).

    Keys with a single sample get the median over all keys, else ``DEFAULT_INTERVAL``.
    """
    distinct = frame.select([*key, "ts"]).unique().sort([*key, "ts"])
    diffs = distinct.with_columns(d=pl.col("ts").diff().over(key)).drop_nulls("d")
    per_key = diffs.group_by(key).agg(pl.col("d").median().alias("interval"))
    overall = diffs["d"].median() if diffs.height else None
    fallback = overall if isinstance(overall, timedelta) else DEFAULT_INTERVAL
    keys = distinct.select(key).unique()
    out = keys.join(per_key, on=key, how="left", nulls_equal=True).with_columns(
        pl.col("interval").cast(pl.Duration("us")).fill_null(fallback)
    )
    return out


def build_runs(
    samples: pl.DataFrame,
    key: list[str],
    values: list[str],
    start: datetime,
    end: datetime,
) -> pl.DataFrame:
    """Run-length encode samples (columns key, values, ts, interval) into intervals.

    A run continues while the gap to the previous sample is at most 2 x interval and no value
    column changes. Returns key + values + ``start_ts``, ``end_ts`` (last + interval), clipped to
    ``[start, end)``, ``samples`` (inside the window) and ``scrape_interval_s``; empty runs dropped.
    """
    if samples.height == 0:
        return pl.DataFrame(
            schema={**{c: samples.schema[c] for c in (*key, *values)}, "start_ts": TS,
                    "end_ts": TS, "samples": pl.Int64, "scrape_interval_s": pl.Float64}
        )
    s = samples.sort([*key, "ts"])
    first = pl.col("ts").shift(1).over(key).is_null()
    gap = (pl.col("ts") - pl.col("ts").shift(1).over(key)) > pl.col("interval") * 2
    changed = pl.lit(False)
    for c in values:
        changed = changed | pl.col(c).ne_missing(pl.col(c).shift(1).over(key))
    s = s.with_columns(run=(first | gap | changed).cum_sum())
    inside = (pl.col("ts") >= start) & (pl.col("ts") < end)
    runs = s.group_by("run", maintain_order=True).agg(
        *[pl.col(c).first() for c in (*key, *values)],
        pl.col("ts").min().alias("start_ts"),
        (pl.col("ts").max() + pl.col("interval").last()).alias("end_ts"),
        inside.sum().cast(pl.Int64).alias("samples"),
        (pl.col("interval").last().dt.total_microseconds() / _US).alias("scrape_interval_s"),
    )
    runs = runs.with_columns(
        pl.max_horizontal(pl.col("start_ts"), pl.lit(start).cast(TS)).alias("start_ts"),
        pl.min_horizontal(pl.col("end_ts"), pl.lit(end).cast(TS)).alias("end_ts"),
    ).filter(pl.col("end_ts") > pl.col("start_ts"))
    return runs.drop("run")


# --------------------------------------------------------------------------- pods

PHASE_REASONS = (
    (pl.col("value").is_nan(), "expected a phase value of 0 or 1, found NaN"),
    (~pl.col("value").is_nan() & ~pl.col("value").is_in([0.0, 1.0]),
     "expected a phase value of 0 or 1, found another number"),
)


def read_window(start: datetime, end: datetime,
                scrape_interval: timedelta | None) -> tuple[datetime, datetime]:
    """The span read for the window ``[start, end)``: 2 Δ (or 5 min) either side."""
    margin = 2 * scrape_interval if scrape_interval else INFER_LOOKBACK
    return start - margin, end + margin


def _running(phase: pl.DataFrame, rejects: list[pl.DataFrame] | None) -> pl.DataFrame:
    """(uid, ts) -> running, pending, from ``kube_pod_status_phase{phase=~"Running|Pending"}``
    samples (null where that phase's series was not scraped)."""
    bad = pl.lit(False)
    for cond, reason in PHASE_REASONS:
        keep_rejects(rejects, phase.filter(~bad & cond), COMPONENT, reason)
        bad = bad | cond
    ok = phase.filter(~bad)
    name = label(ok, "phase")
    return ok.group_by(["_key", "ts"]).agg(
        *[pl.when((name == p).any()).then(((name == p) & (pl.col("value") == 1)).any())
          .alias(p.lower()) for p in HELD_PHASES]).rename({"_key": "uid"})


def _fill_nodes(source: MetricsSource, pods: pl.DataFrame, node_jobs: set[str | None],
                q0: datetime, q1: datetime) -> pl.DataFrame:
    """Running or Pending pods whose request series have no node take ``kube_pod_info``'s at
    that scrape (KSM v2.0 init-container requests carry no node label)."""
    phase = pl.col("running").fill_null(False) | pl.col("pending").fill_null(False)
    missing = pods.filter(phase & pl.col("node").is_null() & (pl.col("gpus") > 0))
    if missing.height == 0:
        return pods
    keys = missing["uid"].unique().sort().to_list()
    info = read_keys(source, POD_INFO_METRIC, keys, q0, q1)
    if info.height == 0:
        return pods
    info = with_workload(info, node_jobs=node_jobs)
    nodes = info.filter(pl.col("_node").is_not_null()).group_by(["_key", "ts"]).agg(
        pl.col("_node").max().alias("_info_node")).rename({"_key": "uid"})
    return pods.join(nodes, on=["uid", "ts"], how="left").with_columns(
        node=pl.coalesce("node", "_info_node")).drop("_info_node")


def pod_gpu_allocations(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    scrape_interval: timedelta | None = None,
    names: SharingNames = DEFAULT_NAMES,
    notes: list[str] | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per GPU allocation interval per pod key and GPU-like resource
    (``POD_GPU_ALLOCATION_SCHEMA``): whole GPUs, MIG instances, time-slicing or MPS replicas
    (``gpu_resource``, ``sharing``, ``slice_profile``; ksm_sharing.py decides by the node's
    labels in force at each sample; `names`: the site's replica resource names).

    See the module docstring for the rules and the interval convention. Missing optional metrics
    (service account, labels, owner) leave their columns null and are reported through
    `notes` (and the log); unusable samples go to `rejects`.
    """
    start, end = utc_naive(start), utc_naive(end)
    q0, q1 = read_window(start, end, scrape_interval)
    found: list[str] = []
    try:
        out = _pod_allocations(source, start, end, q0, q1, scrape_interval, names, found,
                               rejects)
    finally:
        for text in dict.fromkeys(found):
            _note(notes, text)
    return out


def _warn_shared_mig(labels: pl.DataFrame, pods: pl.DataFrame, found: list[str]) -> None:
    """MIG instances time-sliced too (product ``...-MIG-1g.5gb-SHARED``): read as MIG, each pod
    charged a whole instance, as their replicas are not modelled yet (docs/shared-gpus.md)."""
    shared = labels.filter(pl.col("product").str.contains(r"-MIG-.+-SHARED$"))["node"]
    nodes = sorted(set(shared.to_list()) & set(pods["node"].drop_nulls().to_list()))
    if nodes:
        found.append(f"nvidia.com/gpu.product ...-MIG-...-SHARED on {', '.join(nodes)}: "
                     "time-sliced MIG instances are charged one instance per pod (their "
                     "replicas are not modelled): up to replicas x the physical share")


def _pod_allocations(source: MetricsSource, start: datetime, end: datetime, q0: datetime,
                     q1: datetime, scrape_interval: timedelta | None, names: SharingNames,
                     found: list[str], rejects: list[pl.DataFrame] | None) -> pl.DataFrame:
    match = f'{{resource=~"{k8s_resource_pattern(names)}"}}'
    samples = read_gpu_samples(source, q0, q1, rejects, names)
    if samples.rows.height == 0:
        found.append(f"kube_pod_container_resource_requests/limits{match} (and the init "
                     f"containers'): no samples in [{q0}, {q1}); no pod holds GPUs there")
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    rows = samples.rows
    if rows.filter((pl.col("_kind") == "container") & (pl.col("_what") == "request")).height \
            == 0 and rows.filter(pl.col("_kind") == "container").height:
        found.append(f"kube_pod_container_resource_requests{match} absent: using limits")
    if samples.synthetic:
        found.append(f"kube-state-metrics before v2.1.0 (pod metrics without a uid label): "
                     f"{samples.synthetic} GPU pods keyed by namespace/pod@creation time "
                     "(kube_pod_created) in the uid column")
    keys = rows["_key"].unique().sort().to_list()
    phase = read_keys(source, PHASE_METRIC, keys, q0, q1,
                      f'phase=~"{"|".join(HELD_PHASES)}"')
    if phase.height == 0:
        found.append('kube_pod_status_phase{phase="Running"}: no samples; no pod counted as '
                     "Running")
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    samples.node_jobs |= node_target_jobs(phase, own_node=False)
    init_keys = rows.filter(pl.col("_kind") == "init")["_key"].unique().sort().to_list()
    pods = effective_gpus(samples, sidecars(source, init_keys, q0, q1, found))
    pods = pods.join(_running(phase, rejects), on=["uid", "ts"], how="left")
    pods = _fill_nodes(source, pods, samples.node_jobs, q0, q1)
    lost = pods.filter(pl.col("running").fill_null(False) & pl.col("node").is_null()
                       & (pl.col("gpus") > 0)).select(pl.col("uid").alias("_key"), "ts")
    keep_rejects(rejects, rows.join(lost, on=["_key", "ts"], how="semi"), COMPONENT, NO_NODE)
    labels = node_labels(source, q0, q1, rejects)
    _warn_shared_mig(labels, pods, found)
    pods = classify(pods, labels, names)

    if scrape_interval is None:
        intervals = infer_intervals(pods, ["uid"])
    else:
        intervals = pods.select("uid").unique().with_columns(
            interval=_interval_expr(scrape_interval))
    # a bound Pending pod holds its GPUs from its start time (ksm_boundaries._holding)
    held = pods.filter(pl.col("running").fill_null(False) | (
        pl.col("pending").fill_null(False) & pl.col("node").is_not_null()
        & (pl.col("gpus") > 0)))["uid"].unique().sort().to_list()
    starts = exact_times(read_for_uids(source, START_TIME, held, q0, q1), "last")
    completions = exact_times(read_for_uids(source, COMPLETION_TIME, held, q0, q1), "max")
    runs = pod_intervals(pods, intervals, starts, completions, start, end, found)
    if runs.height == 0:
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    runs = runs.with_columns(
        gpu_seconds=pl.col("gpus")
        * (pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds()
        / _US
    )
    attrs = pod_attributes(source, runs.select("uid", "namespace"), q0, q1, found)
    out = runs.join(attrs, on="uid", how="left")
    return conform(out, POD_GPU_ALLOCATION_SCHEMA).sort(
        ["namespace", "pod", "uid", "gpu_resource", "start_ts"])

# --------------------------------------------------------------------------- nodes


NO_NODE_LABEL = "expected a node label, found none"


def _node_samples(source: MetricsSource, selector: str, q0: datetime, q1: datetime,
                  what: str | None, rejects: list[pl.DataFrame] | None) -> pl.DataFrame:
    """Usable samples of a node metric, ``node`` = the node's name in either scrape shape
    (``exported_node`` without honor_labels); a count (`what`) or a 0/1 flag (None)."""
    raw = source.raw_samples(selector, q0, q1)
    if raw.height == 0:
        return pl.DataFrame(schema={"node": pl.String, "ts": TS, "value": pl.Float64})
    raw = with_workload(raw, node_metric=True)
    keep_rejects(rejects, raw.filter(pl.col("_node").is_null()), COMPONENT, NO_NODE_LABEL)
    raw = raw.filter(pl.col("_node").is_not_null())
    if what is None:
        bad = pl.lit(False)
        for cond, reason in PHASE_REASONS:
            keep_rejects(rejects, raw.filter(~bad & cond), COMPONENT,
                         reason.replace("a phase value", "a flag"))
            bad = bad | cond
    else:
        bad = reject_bad_values(raw, rejects, COMPONENT, what)
    return raw.filter(~bad).select(pl.col("_node").alias("node"), "ts", "value")


def node_gpu_capacity(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    scrape_interval: timedelta | None = None,
    resource: str = GPU_RESOURCE,
    notes: list[str] | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """GPU capacity per node over time (``NODE_GPU_CAPACITY_SCHEMA``), same interval convention.

    From ``kube_node_status_capacity{resource=...}``, ``kube_node_status_allocatable`` and
    ``kube_node_spec_unschedulable`` (cordoned: e.g. a shared node lent to Slurm). A new interval
    starts when any of the three changes or after a gap of more than 2 scrape intervals.
    """
    start, end = utc_naive(start), utc_naive(end)
    q0, q1 = read_window(start, end, scrape_interval)
    match = f'{{resource="{resource}"}}'
    cap = _node_samples(source, f"{NODE_CAPACITY_METRIC}{match}", q0, q1, "GPU capacity",
                        rejects)
    if cap.height == 0:
        _note(notes, f"kube_node_status_capacity{match}: no samples; no GPU capacity known")
        return empty(NODE_GPU_CAPACITY_SCHEMA)
    samples = cap.group_by(["node", "ts"]).agg(pl.col("value").max().alias("capacity_gpus"))
    alloc = _node_samples(source, f"kube_node_status_allocatable{match}", q0, q1,
                          "allocatable GPU count", rejects)
    if alloc.height:
        a = alloc.group_by(["node", "ts"]).agg(pl.col("value").max().alias("allocatable_gpus"))
        samples = samples.join(a, on=["node", "ts"], how="left")
    else:
        _note(notes, f"kube_node_status_allocatable{match} absent: allocatable_gpus is null")
        samples = samples.with_columns(allocatable_gpus=pl.lit(None, dtype=pl.Float64))
    unsched = _node_samples(source, "kube_node_spec_unschedulable", q0, q1, None, rejects)
    if unsched.height:
        u = unsched.group_by(["node", "ts"]).agg((pl.col("value") == 1).any().alias(
            "unschedulable"))
        samples = samples.join(u, on=["node", "ts"], how="left")
    else:
        _note(notes, "kube_node_spec_unschedulable absent: unschedulable is null")
        samples = samples.with_columns(unschedulable=pl.lit(None, dtype=pl.Boolean))
    samples = samples.with_columns(
        pl.col("capacity_gpus").round().cast(pl.Int64),
        pl.col("allocatable_gpus").round().cast(pl.Int64),
    )
    if scrape_interval is None:
        intervals = infer_intervals(samples, ["node"])
    else:
        intervals = samples.select("node").unique().with_columns(
            interval=_interval_expr(scrape_interval)
        )
    samples = samples.join(intervals, on="node", how="left")
    runs = build_runs(
        samples, ["node"], ["capacity_gpus", "allocatable_gpus", "unschedulable"], start, end
    )
    return conform(runs, NODE_GPU_CAPACITY_SCHEMA).sort(["node", "start_ts"])
