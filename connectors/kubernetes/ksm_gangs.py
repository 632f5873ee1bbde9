"""What a gang is made of, from kube-state-metrics alone: the size its owner asks for and the
members still waiting (issue #15 item 2; the detector is models/sql/detect_partial_gang.sql).

* **Job sizes**: ``kube_job_spec_parallelism`` and ``kube_job_spec_completions`` (labels
  ``namespace``, ``job_name``; kube-state-metrics internal/store/job.go). One row per Job and
  (parallelism, completions) value seen, with the first and last scrape that showed it: Kueue
  changes a Job's parallelism when it admits it partially (``podSets[].minCount``).
* **Pending GPU pods**: pods that request GPUs (``kube_pod_container_resource_requests``), show
  ``kube_pod_status_phase{phase="Pending"} == 1`` and have no node (unbound: Prometheus drops
  ``node=""``; in the exported scrape shape only ``exported_node`` names the pod's node,
  ksm_labels.py). They are a gang's missing members. Their owner (``kube_pod_owner``) and labels
  (``kube_pod_labels``: ``label_batch_kubernetes_io_job_name``, the JobSet and Kueue pod-group
  labels) say which gang they belong to.

Both scrape shapes (``honor_labels`` true or false) are read: the workload's namespace and pod
are ``exported_*`` where present. Pods are keyed by their ``uid`` (kube-state-metrics >= v2.1.0;
older pods without one are not read here and a note says so). Unusable samples (NaN, fractions)
go to the rejects sink; the connector knows nothing of storage.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.ksm_attributes import pod_attributes
from connectors.kubernetes.ksm_keys import read_keys
from connectors.kubernetes.ksm_labels import node_target_jobs, with_workload
from connectors.kubernetes.ksm_pods import COMPONENT, reject_bad_values
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS, conform, empty, label

PARALLELISM = "kube_job_spec_parallelism"
COMPLETIONS = "kube_job_spec_completions"
PENDING_SELECTOR = 'kube_pod_status_phase{phase="Pending"}'
REQUESTS = "kube_pod_container_resource_requests"

JOB_SPEC_SCHEMA: SchemaDict = {
    "namespace": pl.String,
    "job_name": pl.String,
    "parallelism": pl.Int64,
    "completions": pl.Int64,  # null: the Job has none (a work queue)
    "first_seen": TS,  # first scrape showing this (parallelism, completions)
    "last_seen": TS,  # last such scrape + one scrape interval
}

PENDING_POD_SCHEMA: SchemaDict = {
    "uid": pl.String,
    "namespace": pl.String,
    "pod": pl.String,
    "gpus": pl.Int64,  # the largest GPU request seen while Pending (sum of its containers)
    "owner_kind": pl.String,
    "owner_name": pl.String,
    "labels": pl.String,  # JSON object, as k8s_pod_allocations.labels
    "first_seen": TS,  # first Pending unbound scrape in the window
    "last_seen": TS,  # last such scrape + one scrape interval (clipped to the window)
    "samples": pl.Int64,
}


def _interval(scrape_interval: timedelta | None) -> timedelta:
    return scrape_interval or timedelta(seconds=30)


def job_specs(source: MetricsSource, start: datetime, end: datetime, *,
              scrape_interval: timedelta | None = None,
              notes: list[str] | None = None,
              rejects: list[pl.DataFrame] | None = None) -> pl.DataFrame:
    """One row per Job and (parallelism, completions) seen in ``[start, end)``
    (``JOB_SPEC_SCHEMA``)."""
    step = _interval(scrape_interval)
    frames: dict[str, pl.DataFrame | None] = {}
    for metric, what in ((PARALLELISM, "Job parallelism"), (COMPLETIONS, "Job completions")):
        raw = source.raw_samples(metric, start, end)
        if raw.height == 0:
            frames[metric] = None
            continue
        raw = with_workload(raw)
        no_name = label(raw, "job_name").is_null() | raw["_ns"].is_null()
        if raw.filter(no_name).height:
            # kube-state-metrics before v2.0 named the Job in `job`, which the scrape job
            # label overwrites: unreadable
            (notes if notes is not None else []).append(
                f"{metric}: expected job_name and namespace labels, found "
                f"{raw.filter(no_name).height} samples without; not read")
            raw = raw.filter(~no_name)
        bad = reject_bad_values(raw, rejects, COMPONENT, what)
        frames[metric] = raw.filter(~bad).select(
            pl.col("_ns").alias("namespace"), label(raw, "job_name").alias("job_name"), "ts",
            pl.col("value").round().cast(pl.Int64).alias(metric))
    par = frames[PARALLELISM]
    if par is None or par.height == 0:
        if notes is not None:
            notes.append(f"{PARALLELISM} absent: gang sizes come from Kueue Workloads only")
        return empty(JOB_SPEC_SCHEMA)
    key = ["namespace", "job_name", "ts"]
    par = par.unique(key, keep="last")
    comp = frames[COMPLETIONS]
    if comp is not None and comp.height:
        par = par.join(comp.unique(key, keep="last"), on=key, how="left")
    else:
        par = par.with_columns(pl.lit(None, dtype=pl.Int64).alias(COMPLETIONS))
    out = par.group_by(["namespace", "job_name", PARALLELISM, COMPLETIONS]).agg(
        pl.col("ts").min().alias("first_seen"),
        (pl.col("ts").max() + step).alias("last_seen"),
    ).rename({PARALLELISM: "parallelism", COMPLETIONS: "completions"})
    out = out.with_columns(pl.min_horizontal("last_seen", pl.lit(end).cast(TS)))
    return conform(out, JOB_SPEC_SCHEMA).sort(["namespace", "job_name", "first_seen"])


def pending_gpu_pods(source: MetricsSource, start: datetime, end: datetime, *,
                     scrape_interval: timedelta | None = None,
                     resource: str = "nvidia_com_gpu",
                     notes: list[str] | None = None,
                     rejects: list[pl.DataFrame] | None = None) -> pl.DataFrame:
    """GPU pods Pending without a node in ``[start, end)``, one row per pod
    (``PENDING_POD_SCHEMA``)."""
    step = _interval(scrape_interval)
    found: list[str] = [] if notes is None else notes
    phase = source.raw_samples(PENDING_SELECTOR, start, end)
    if phase.height == 0:
        return empty(PENDING_POD_SCHEMA)
    phase = with_workload(phase)
    bare = phase.filter(pl.col("_uid").is_null())
    if bare.height:
        found.append(f"{PENDING_SELECTOR}: {bare.height} samples without a uid label "
                     "(kube-state-metrics before v2.1.0): their pods are not read as pending "
                     "gang members")
    pending = phase.filter(pl.col("_uid").is_not_null() & (pl.col("value") == 1))
    if pending.height == 0:
        return empty(PENDING_POD_SCHEMA)
    uids = pending["_uid"].unique().sort().to_list()
    requests = read_keys(source, REQUESTS, uids, start, end, f'resource="{resource}"')
    if requests.height == 0:
        return empty(PENDING_POD_SCHEMA)
    jobs = node_target_jobs(phase, own_node=False) | node_target_jobs(requests, own_node=True)
    requests = with_workload(requests, node_jobs=jobs)
    bad = reject_bad_values(requests, rejects, COMPONENT)
    per_scrape = requests.filter(~bad).group_by(["_key", "ts"]).agg(
        pl.col("value").sum().round().cast(pl.Int64).alias("gpus"),
        pl.col("_node").drop_nulls().first().alias("node"),
        pl.col("_ns").first().alias("namespace"),
        pl.col("_pod").first().alias("pod"),
    ).rename({"_key": "uid"})
    waiting = per_scrape.join(
        pending.select(pl.col("_uid").alias("uid"), "ts").unique(), on=["uid", "ts"],
        how="semi").filter(pl.col("node").is_null() & (pl.col("gpus") > 0))
    if waiting.height == 0:
        return empty(PENDING_POD_SCHEMA)
    pods = waiting.group_by("uid").agg(
        pl.col("namespace").first(), pl.col("pod").first(), pl.col("gpus").max(),
        pl.col("ts").min().alias("first_seen"),
        pl.min_horizontal(pl.col("ts").max() + step, pl.lit(end).cast(TS)).alias("last_seen"),
        pl.len().cast(pl.Int64).alias("samples"),
    )
    attrs = pod_attributes(source, pods.select("uid", "namespace"), start, end, found)
    out = pods.join(attrs.select("uid", "owner_kind", "owner_name", "labels"), on="uid",
                    how="left")
    return conform(out, PENDING_POD_SCHEMA).sort(["namespace", "pod", "uid"])
