"""A pod's effective GPU request at every kube-state-metrics scrape, as the scheduler counts it.

Per container: its request (``kube_pod_container_resource_requests``), or its limit where it has
no request (for extended resources such as GPUs Kubernetes sets the request to the limit). Per
pod, at each scrape (Kubernetes "Resource sharing within containers"; KEP-753 for sidecars)::

    gpus = max( max(regular init containers), sum(containers) + sum(sidecars) )

where sidecars are init containers with ``restartPolicy: Always``: ``restart_policy="Always"`` on
``kube_pod_init_container_info`` (exported since kube-state-metrics v2.11.0; an older KSM cannot
tell them apart, they count as regular init containers). KSM gives no order of init containers,
so a regular init container is not charged for sidecars started before it (the scheduler's exact
rule adds them); this matters only when both hold GPUs.

Unusable samples go to the rejects sink (component ``ksm``) with a stable reason: no key label,
NaN/±Inf, a negative or fractional GPU count. A GPU request is immutable for a pod (Kubernetes
allows in-place resizing of CPU and memory only), so a rejected value is replaced by the same
container's value at its other samples -- a NaN does not shorten the pod by a scrape; a
container with no usable sample at all adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from connectors.gpu_sharing import (
    DEFAULT_NAMES,
    SharingNames,
    k8s_resource,
    k8s_resource_pattern,
)
from connectors.kubernetes.ksm_keys import CREATED_METRIC, attach_keys, read_by_pods, read_keys
from connectors.kubernetes.ksm_labels import node_target_jobs, with_workload
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import keep_rejects

COMPONENT = "ksm"
GPU_METRICS = (  # metric, container kind, request or limit
    ("kube_pod_container_resource_requests", "container", "request"),
    ("kube_pod_container_resource_limits", "container", "limit"),
    ("kube_pod_init_container_resource_requests", "init", "request"),
    ("kube_pod_init_container_resource_limits", "init", "limit"),
)
INIT_INFO = "kube_pod_init_container_info"
NO_KEY = "expected a uid label or namespace and pod labels, found neither"
NO_CREATED = ("expected a uid label or a kube_pod_created sample of the pod (kube-state-metrics "
              "before v2.1.0), found neither")
NO_NODE = "expected a node on a Running pod's GPU request, found none"


def bad_count_reasons(value: pl.Expr, what: str = "GPU count") -> list[tuple[pl.Expr, str]]:
    """(condition, reason) for a value that cannot be a GPU count, in the order checked."""
    return [
        (value.is_nan(), f"expected a finite {what}, found NaN"),
        (value == float("inf"), f"expected a finite {what}, found +Inf"),
        (value == float("-inf"), f"expected a finite {what}, found -Inf"),
        (value < 0, f"expected a non-negative {what}, found a negative value"),
        (value != value.round(), f"expected a whole {what}, found a fraction"),
    ]


def reject_bad_values(frame: pl.DataFrame, sink: list[pl.DataFrame] | None, component: str,
                      what: str = "GPU count") -> pl.Expr:
    """Send the rows of `frame` whose value is not a usable count to `sink`; return the
    expression that is True for those rows."""
    bad = pl.lit(False)
    for cond, reason in bad_count_reasons(pl.col("value"), what):
        keep_rejects(sink, frame.filter(~bad & cond), component, reason)
        bad = bad | cond
    return bad


@dataclass
class GpuSamples:
    """Every usable GPU request sample, keyed: one row per (key, kind, container, what, ts)."""

    rows: pl.DataFrame  # raw labels + _ns _pod _container _uid _key _kind _what value job
    node_jobs: set[str | None]  # scrape jobs whose targets carry a node label
    synthetic: int  # pods keyed by namespace/pod@created


def read_gpu_samples(source: MetricsSource, q0: datetime, q1: datetime,
                     rejects: list[pl.DataFrame] | None,
                     names: SharingNames = DEFAULT_NAMES) -> GpuSamples:
    """Read the four request/limit metrics of every GPU-like resource (``k8s_resource``: whole
    GPUs, MIG instances, renamed replicas), key every sample, reject what cannot be used.
    ``_resource`` is the KSM resource name; a pod holding two of them has rows for each."""
    parts = []
    pattern = k8s_resource_pattern(names)
    for metric, kind, what in GPU_METRICS:
        frame = source.raw_samples(f'{metric}{{resource=~"{pattern}"}}', q0, q1)
        if frame.height and "resource" in frame.columns:
            known = [r for r in frame["resource"].unique().to_list()
                     if r is not None and k8s_resource(r, names) is not None]
            frame = frame.filter(pl.col("resource").is_in(known))
        if frame.height:
            parts.append(frame.with_columns(_kind=pl.lit(kind), _what=pl.lit(what),
                                            _resource=pl.col("resource")))
    if not parts:
        return GpuSamples(pl.DataFrame(), set(), 0)
    raw = with_workload(pl.concat(parts, how="diagonal_relaxed"))
    node_jobs = node_target_jobs(raw, own_node=True)

    no_key = pl.col("_uid").is_null() & (pl.col("_ns").is_null() | pl.col("_pod").is_null())
    keep_rejects(rejects, raw.filter(no_key), COMPONENT, NO_KEY)
    raw = raw.filter(~no_key)
    bare = raw.filter(pl.col("_uid").is_null())
    created = pl.DataFrame()
    if bare.height:
        pairs = bare.select("_ns", "_pod").unique().rows()
        created = read_by_pods(source, CREATED_METRIC, pairs, q0, q1)
    raw = attach_keys(raw, created)
    keep_rejects(rejects, raw.filter(pl.col("_key").is_null()), COMPONENT, NO_CREATED)
    raw = raw.filter(pl.col("_key").is_not_null())
    synthetic = raw.filter(pl.col("_uid").is_null())["_key"].n_unique()

    bad = reject_bad_values(raw, rejects, COMPONENT)
    # an immutable request: a rejected value takes the container's value at its other samples
    series = ["_key", "_resource", "_kind", "_container", "_what"]
    raw = raw.with_columns(value=pl.when(bad).then(None).otherwise(pl.col("value"))).sort(
        [*series, "ts"]
    ).with_columns(pl.col("value").forward_fill().backward_fill().over(series))
    return GpuSamples(raw, node_jobs, synthetic)


def sidecars(source: MetricsSource, keys: list[str], q0: datetime, q1: datetime,
             notes: list[str]) -> pl.DataFrame:
    """(key, container) of the restartable init containers (sidecars) among `keys`' pods."""
    schema = {"_key": pl.String, "_container": pl.String}
    if not keys:
        return pl.DataFrame(schema=schema)
    info = read_keys(source, INIT_INFO, keys, q0, q1)
    if info.height == 0:
        notes.append(f"{INIT_INFO} absent for {len(keys)} pods whose init containers request "
                     "GPUs: each counted as a regular init container (a sidecar's GPUs, "
                     "restart_policy=\"Always\", would be added to the containers' instead)")
        return pl.DataFrame(schema=schema)
    if "restart_policy" not in info.columns:
        return pl.DataFrame(schema=schema)
    return (info.filter(pl.col("restart_policy") == "Always")
            .select("_key", "_container").unique())


def effective_gpus(samples: GpuSamples, side: pl.DataFrame) -> pl.DataFrame:
    """(uid = key, gpu_resource, ts) -> namespace, pod, node, gpus (the pod's effective
    request of that resource: each resource is counted by the scheduler on its own).

    `node` is null where the pod is not bound (see ``with_workload`` for the exported shape).
    """
    rows = with_workload(samples.rows, node_jobs=samples.node_jobs)
    rows = rows.filter(pl.col("value").is_not_null())
    key = ["_key", "_resource", "_kind", "_container", "ts"]
    per = rows.group_by([*key, "_what"]).agg(
        pl.col("value").max(), pl.col("_node").drop_nulls().max(),
        pl.col("_ns").first(), pl.col("_pod").first(),
    )
    # the request, or the limit where the container has no request at that scrape
    per = per.sort([*key, "_what"], descending=[*[False] * len(key), True]).group_by(
        key, maintain_order=True).first()
    side = side.with_columns(_sidecar=pl.lit(True))
    per = per.join(side, on=["_key", "_container"], how="left").with_columns(
        pl.col("_sidecar").fill_null(False) & (pl.col("_kind") == "init")
    )
    regular_init = (pl.col("_kind") == "init") & ~pl.col("_sidecar")
    pods = per.group_by(["_key", "_resource", "ts"]).agg(
        pl.col("_ns").drop_nulls().first().alias("namespace"),
        pl.col("_pod").drop_nulls().first().alias("pod"),
        pl.col("_node").drop_nulls().max().alias("node"),
        pl.col("value").filter(~regular_init).sum().alias("_running_sum"),
        pl.col("value").filter(regular_init).max().alias("_init_max"),
    )
    return pods.with_columns(
        gpus=pl.max_horizontal(pl.col("_running_sum"), pl.col("_init_max").fill_null(0))
        .round().cast(pl.Int64),
    ).drop("_running_sum", "_init_max").rename({"_key": "uid", "_resource": "gpu_resource"})
