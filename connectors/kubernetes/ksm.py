"""Pod GPU allocation intervals and node GPU capacity from kube-state-metrics raw samples.

Allocation = what the scheduler gave a pod, not what it used: the GPU *request* of the pod
(``kube_pod_container_resource_requests{resource="nvidia_com_gpu"}`` summed over its containers;
the limit for a container that has no request; ``max(sum, largest init-container request)`` when
init containers request GPUs -- the Kubernetes effective request), counted only at samples where

* the pod is bound to a node (the ``node`` label is non-empty -- Prometheus drops ``node=""``, so
  the label is absent while the pod is Pending), and
* ``kube_pod_status_phase{phase="Running"}`` is 1 at that scrape.

KSM reports requests for every pod object in every phase, until deletion (Job TTL), so the phase
gate matters: a Succeeded pod that is kept for 10 minutes holds no GPU.

Interval convention (per pod ``uid``; a pod recreated by a Job retry has a new uid, own rows)::

    [first Running sample, last Running sample + scrape interval)   clipped to [start, end)

A new interval starts after a gap of more than 2 x the scrape interval between Running samples (no
data is not "running"), or when the pod's node or GPU count changes. The scrape interval is the
median spacing of the pod's own KSM samples unless given.

Error bound: with scrape interval Δ, the true start t0 lies in (first - Δ, first] and the true end
t1 in (last, last + Δ], so each interval end is off by less than one Δ (both ends are biased the
same way, late, so the duration error is within (-Δ, +Δ) per interval), plus the delay between the
kubelet's status update and KSM's next list/watch event (not measurable from metrics). Samples
before ``start`` (a look-back of 2 Δ, or 5 min when Δ is inferred) are read so that an interval
running across ``start`` begins exactly at ``start`` -- consecutive windows add up to the whole.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.prometheus import MetricsSource, utc_naive
from connectors.kubernetes.records import (
    NODE_GPU_CAPACITY_SCHEMA,
    POD_GPU_ALLOCATION_SCHEMA,
    TS,
    conform,
    empty,
    label,
)

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia_com_gpu"  # KSM sanitises nvidia.com/gpu
DEFAULT_INTERVAL = timedelta(seconds=30)  # only when nothing can be inferred at all
INFER_LOOKBACK = timedelta(minutes=5)
QUEUE_LABEL = "label_kueue_x_k8s_io_queue_name"
_NONE = "<none>"  # KSM's owner_kind/owner_name for pods without an owner
_US = 1_000_000


UID_BATCH = 100  # uids per regex matcher (~4 KB of URL)


def _regex_literal(value: str) -> str:
    """`value` as an exact-match RE2 pattern inside a PromQL double-quoted string."""
    if re.fullmatch(r"[A-Za-z0-9_.:-]*", value):
        return value.replace(".", "\\\\.")
    return re.escape(value).replace("\\", "\\\\").replace('"', '\\"')


def read_for_uids(
    source: MetricsSource, metric: str, uids: list[str], start: datetime, end: datetime,
    matchers: str = "",
) -> pl.DataFrame:
    """Raw samples of `metric` for the given pod uids only (batched ``uid=~"a|b|..."``).

    Per-pod KSM metrics exist for every pod of the cluster; reading only the GPU pods' series
    keeps a read of a big cluster proportional to its GPU pods.
    """
    parts = []
    extra = f",{matchers}" if matchers else ""
    for i in range(0, len(uids), UID_BATCH):
        batch = "|".join(_regex_literal(u) for u in uids[i : i + UID_BATCH])
        frame = source.raw_samples(f'{metric}{{uid=~"{batch}"{extra}}}', start, end)
        if frame.height:
            parts.append(frame)
    if not parts:
        return pl.DataFrame(schema={"ts": TS, "value": pl.Float64, "__name__": pl.String})
    return pl.concat(parts, how="diagonal_relaxed")


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


def _per_container(requests: pl.DataFrame, limits: pl.DataFrame) -> pl.DataFrame:
    """(uid, container, ts) -> GPUs: the request, or the limit where no request was sampled."""

    def shape(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select(
            label(frame, "uid").alias("uid"),
            label(frame, "namespace").alias("namespace"),
            label(frame, "pod").alias("pod"),
            label(frame, "container").alias("container"),
            label(frame, "node").alias("node"),
            "ts",
            "value",
        ).filter(pl.col("uid").is_not_null() & pl.col("value").is_not_nan())

    req = shape(requests)
    lim = shape(limits)
    key = ["uid", "container", "ts"]
    req = req.group_by(key).agg(pl.all().exclude(key).sort_by("value").last())
    lim = lim.group_by(key).agg(pl.all().exclude(key).sort_by("value").last())
    lim = lim.join(req.select(key), on=key, how="anti", nulls_equal=True)
    return pl.concat([req, lim.select(req.columns)])


def _pod_samples(
    source: MetricsSource, q0: datetime, end: datetime, resource: str, notes: list[str] | None
) -> pl.DataFrame:
    """(uid, ts) -> namespace, pod, node, gpus for every KSM scrape of a GPU-requesting pod."""
    match = f'{{resource="{resource}"}}'
    requests_ = source.raw_samples(f"kube_pod_container_resource_requests{match}", q0, end)
    limits = source.raw_samples(f"kube_pod_container_resource_limits{match}", q0, end)
    if requests_.height == 0 and limits.height == 0:
        _note(notes, f"kube_pod_container_resource_requests/limits{match}: no samples in "
                     f"[{q0}, {end}); no pod holds GPUs there")
        return pl.DataFrame()
    if requests_.height == 0:
        _note(notes, f"kube_pod_container_resource_requests{match} absent: using limits")
    per_container = _per_container(requests_, limits)
    pods = per_container.group_by(["uid", "ts"]).agg(
        pl.col("namespace").drop_nulls().first(),
        pl.col("pod").drop_nulls().first(),
        pl.col("node").drop_nulls().max(),
        pl.col("value").sum().alias("gpus"),
    )
    init = source.raw_samples(f"kube_pod_init_container_resource_requests{match}", q0, end)
    if init.height and "uid" in init.columns:
        init_max = init.group_by(["uid", "ts"]).agg(pl.col("value").max().alias("init_gpus"))
        pods = pods.join(init_max, on=["uid", "ts"], how="left").with_columns(
            pl.max_horizontal("gpus", pl.col("init_gpus").fill_null(0)).alias("gpus")
        ).drop("init_gpus")
    if "node" not in requests_.columns and "node" not in limits.columns:
        # Older KSM without the node label on requests: take it from kube_pod_info.
        info = read_for_uids(source, "kube_pod_info", _uids(per_container), q0, end)
        if info.height and "node" in info.columns:
            nodes = info.group_by(["uid", "ts"]).agg(pl.col("node").drop_nulls().max())
            pods = pods.drop("node").join(nodes, on=["uid", "ts"], how="left")
    return pods


def _latest_per_uid(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    if frame.height == 0 or "uid" not in frame.columns:
        return pl.DataFrame(schema={"uid": pl.String, **dict.fromkeys(cols, pl.String)})
    return (
        frame.sort("ts")
        .group_by("uid")
        .agg([label(frame, c).last().alias(c) for c in cols])
    )


def _uids(frame: pl.DataFrame) -> list[str]:
    return frame["uid"].drop_nulls().unique().sort().to_list()


def _pod_attributes(
    source: MetricsSource, uids: list[str], q0: datetime, end: datetime,
    notes: list[str] | None,
) -> pl.DataFrame:
    """uid -> service_account, labels (JSON), queue_name, owner_kind, owner_name."""
    sa = read_for_uids(source, "kube_pod_service_account", uids, q0, end)
    if sa.height == 0:
        _note(notes, "kube_pod_service_account absent: service_account is null")
    out = _latest_per_uid(sa, ["service_account"])

    owner = read_for_uids(source, "kube_pod_owner", uids, q0, end)
    if owner.height == 0:
        _note(notes, "kube_pod_owner absent: owner_kind/owner_name are null")
    else:
        owner = owner.with_columns(
            controller=(label(owner, "owner_is_controller") == "true").fill_null(False)
        ).sort(["controller", "ts"])
    owners = _latest_per_uid(owner, ["owner_kind", "owner_name"]).with_columns(
        pl.when(pl.col(c) == _NONE).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("owner_kind", "owner_name")
    )
    out = out.join(owners, on="uid", how="full", coalesce=True)

    labels = read_for_uids(source, "kube_pod_labels", uids, q0, end)
    if labels.height == 0 or "uid" not in labels.columns:
        _note(notes, "kube_pod_labels absent (KSM exports pod labels only when allow-listed with "
                     "--metric-labels-allowlist): labels and queue_name are null")
        rows = pl.DataFrame(schema={"uid": pl.String, "labels": pl.String,
                                    "queue_name": pl.String})
    else:
        label_cols = sorted(c for c in labels.columns if c.startswith("label_"))
        latest = _latest_per_uid(labels, label_cols)
        records = []
        for row in latest.iter_rows(named=True):
            found = {c[len("label_"):]: row[c] for c in label_cols if row[c] is not None}
            records.append((row["uid"], json.dumps(found, sort_keys=True),
                            row.get(QUEUE_LABEL)))
        rows = pl.DataFrame(records, schema={"uid": pl.String, "labels": pl.String,
                                             "queue_name": pl.String}, orient="row")
    return out.join(rows, on="uid", how="full", coalesce=True)


def pod_gpu_allocations(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    scrape_interval: timedelta | None = None,
    resource: str = GPU_RESOURCE,
    notes: list[str] | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per GPU allocation interval per pod uid (``POD_GPU_ALLOCATION_SCHEMA``).

    See the module docstring for the rules and the interval convention. Missing optional metrics
    (service account, labels, owner) leave their columns null and are reported through
    `notes` (and the log).
    """
    start, end = utc_naive(start), utc_naive(end)
    margin = 2 * scrape_interval if scrape_interval else INFER_LOOKBACK
    q0 = start - margin
    pods = _pod_samples(source, q0, end, resource, notes)
    if pods.height == 0:
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    phase = read_for_uids(source, "kube_pod_status_phase", _uids(pods), q0, end,
                          'phase="Running"')
    if phase.height == 0 or "uid" not in phase.columns:
        _note(notes, 'kube_pod_status_phase{phase="Running"}: no samples; no pod counted as '
                     "Running")
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    running = phase.group_by(["uid", "ts"]).agg((pl.col("value") == 1).any().alias("running"))

    if scrape_interval is None:
        intervals = infer_intervals(pods, ["uid"])
    else:
        intervals = pods.select("uid").unique().with_columns(
            interval=_interval_expr(scrape_interval)
        )
    held = (
        pods.join(running, on=["uid", "ts"], how="inner")
        .filter(
            pl.col("running")
            & pl.col("node").is_not_null()
            & (pl.col("node") != "")
            & (pl.col("gpus") > 0)
        )
        .join(intervals, on="uid", how="left")
        .with_columns(pl.col("gpus").round().cast(pl.Int64))
    )
    runs = build_runs(held, ["uid"], ["namespace", "pod", "node", "gpus"], start, end)
    if runs.height == 0:
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    runs = runs.with_columns(
        gpu_seconds=pl.col("gpus")
        * (pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds()
        / _US
    )
    attrs = _pod_attributes(source, _uids(runs), q0, end, notes)
    out = runs.join(attrs, on="uid", how="left")
    return conform(out, POD_GPU_ALLOCATION_SCHEMA).sort(["namespace", "pod", "uid", "start_ts"])


# --------------------------------------------------------------------------- nodes


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
    margin = 2 * scrape_interval if scrape_interval else INFER_LOOKBACK
    q0 = start - margin
    match = f'{{resource="{resource}"}}'
    cap = source.raw_samples(f"kube_node_status_capacity{match}", q0, end)
    if cap.height == 0 or "node" not in cap.columns:
        _note(notes, f"kube_node_status_capacity{match}: no samples; no GPU capacity known")
        return empty(NODE_GPU_CAPACITY_SCHEMA)
    samples = cap.group_by(["node", "ts"]).agg(pl.col("value").max().alias("capacity_gpus"))
    alloc = source.raw_samples(f"kube_node_status_allocatable{match}", q0, end)
    if alloc.height and "node" in alloc.columns:
        a = alloc.group_by(["node", "ts"]).agg(pl.col("value").max().alias("allocatable_gpus"))
        samples = samples.join(a, on=["node", "ts"], how="left")
    else:
        _note(notes, f"kube_node_status_allocatable{match} absent: allocatable_gpus is null")
        samples = samples.with_columns(allocatable_gpus=pl.lit(None, dtype=pl.Float64))
    unsched = source.raw_samples("kube_node_spec_unschedulable", q0, end)
    if unsched.height and "node" in unsched.columns:
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
