"""What a GPU pod belongs to: service account, owner, labels and its Kueue queues.

Queues, newest Kueue first (label keys from kubernetes-sigs/kueue pkg/constants/constants.go):

* ``queue_name`` (the LocalQueue): the pod label ``kueue.x-k8s.io/local-queue-name`` (Kueue
  >= v0.17.0, PR #9348: set on the pods of admitted Workloads, feature AssignQueueLabelsForPods,
  on by default), else the pod label ``kueue.x-k8s.io/queue-name`` (Kueue's pod integration and
  users who label pod templates), else the ``kueue.x-k8s.io/queue-name`` label of the Job
  owning the pod (``kube_pod_owner{owner_kind="Job"}`` -> ``kube_job_labels``);
* ``cluster_queue``: the pod label ``kueue.x-k8s.io/cluster-queue-name`` (Kueue >= v0.17.0;
  only set when the ClusterQueue's name is a valid label value).

kube-state-metrics exports labels only when allow-listed: ``--metric-labels-allowlist=pods=[
kueue.x-k8s.io/local-queue-name,kueue.x-k8s.io/cluster-queue-name,kueue.x-k8s.io/queue-name],
jobs=[kueue.x-k8s.io/queue-name]``.
"""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl

from connectors.kubernetes.ksm_keys import UID_BATCH, read_for_uids, regex_literal
from connectors.kubernetes.ksm_labels import with_workload
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import label

QUEUE_LABEL = "label_kueue_x_k8s_io_queue_name"
LOCAL_QUEUE_LABEL = "label_kueue_x_k8s_io_local_queue_name"
CLUSTER_QUEUE_LABEL = "label_kueue_x_k8s_io_cluster_queue_name"
KUEUE_QUEUE_LABELS = (QUEUE_LABEL, LOCAL_QUEUE_LABEL, CLUSTER_QUEUE_LABEL)
JOB_LABELS = "kube_job_labels"
_NONE = "<none>"  # KSM's owner_kind/owner_name for pods without an owner


def _latest_per_uid(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    if frame.height == 0 or "uid" not in frame.columns:
        return pl.DataFrame(schema={"uid": pl.String, **dict.fromkeys(cols, pl.String)})
    return (
        frame.sort("ts")
        .group_by("uid")
        .agg([label(frame, c).last().alias(c) for c in cols])
    )


def _job_queues(source: MetricsSource, jobs: pl.DataFrame, q0: datetime, end: datetime
                ) -> pl.DataFrame:
    """(namespace, job name) -> the Job's kueue.x-k8s.io/queue-name label, latest shown."""
    schema = {"namespace": pl.String, "owner_name": pl.String, "job_queue": pl.String}
    pairs = sorted(set(jobs.rows()))
    parts = []
    for i in range(0, len(pairs), UID_BATCH):
        names = "|".join(regex_literal(n) for n in sorted({j for _, j in pairs[i:i + UID_BATCH]}))
        frame = source.raw_samples(f'{JOB_LABELS}{{job_name=~"{names}"}}', q0, end)
        if frame.height:
            parts.append(frame)
    if not parts:
        return pl.DataFrame(schema=schema)
    frame = with_workload(pl.concat(parts, how="diagonal_relaxed"))
    if QUEUE_LABEL not in frame.columns:
        return pl.DataFrame(schema=schema)
    latest = frame.sort("ts").group_by(["_ns", "job_name"]).agg(
        pl.col(QUEUE_LABEL).drop_nulls().last())
    return latest.select(pl.col("_ns").alias("namespace"), pl.col("job_name").alias(
        "owner_name"), pl.col(QUEUE_LABEL).alias("job_queue")).filter(
        pl.col("job_queue").is_not_null())


def pod_attributes(
    source: MetricsSource, pods: pl.DataFrame, q0: datetime, end: datetime,
    notes: list[str],
) -> pl.DataFrame:
    """uid -> service_account, labels (JSON), queue_name, cluster_queue, owner_kind,
    owner_name, for the pods (uid, namespace) given."""
    uids = pods["uid"].drop_nulls().unique().sort().to_list()
    sa = read_for_uids(source, "kube_pod_service_account", uids, q0, end)
    if sa.height == 0:
        notes.append("kube_pod_service_account absent: service_account is null")
    out = _latest_per_uid(sa, ["service_account"])

    owner = read_for_uids(source, "kube_pod_owner", uids, q0, end)
    if owner.height == 0:
        notes.append("kube_pod_owner absent: owner_kind/owner_name are null")
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
    row_schema = {"uid": pl.String, "labels": pl.String, "pod_local_queue": pl.String,
                  "pod_queue": pl.String, "cluster_queue": pl.String}
    if labels.height == 0 or "uid" not in labels.columns:
        notes.append("kube_pod_labels absent (KSM exports pod labels only when allow-listed with "
                     "--metric-labels-allowlist): labels and queue_name are null")
        rows = pl.DataFrame(schema=row_schema)
    else:
        label_cols = sorted(c for c in labels.columns if c.startswith("label_"))
        latest = _latest_per_uid(labels, label_cols)
        records = []
        for row in latest.iter_rows(named=True):
            found = {c[len("label_"):]: row[c] for c in label_cols if row[c] is not None}
            records.append((row["uid"], json.dumps(found, sort_keys=True),
                            row.get(LOCAL_QUEUE_LABEL), row.get(QUEUE_LABEL),
                            row.get(CLUSTER_QUEUE_LABEL)))
        rows = pl.DataFrame(records, schema=row_schema, orient="row")
    out = out.join(rows, on="uid", how="full", coalesce=True)

    # older Kueue: the queue is a label of the Job that owns the pod
    out = out.join(pods.select("uid", "namespace").unique("uid"), on="uid", how="left")
    need = out.filter(pl.col("pod_local_queue").is_null() & pl.col("pod_queue").is_null()
                      & (pl.col("owner_kind") == "Job") & pl.col("owner_name").is_not_null())
    jobs = _job_queues(source, need.select("namespace", "owner_name").unique(), q0, end) \
        if need.height else pl.DataFrame(schema={"namespace": pl.String,
                                                 "owner_name": pl.String,
                                                 "job_queue": pl.String})
    out = out.join(jobs, on=["namespace", "owner_name"], how="left", nulls_equal=False)
    out = out.with_columns(
        queue_name=pl.coalesce("pod_local_queue", "pod_queue",
                               pl.when(pl.col("owner_kind") == "Job").then(pl.col("job_queue")))
    )
    return out.drop("pod_local_queue", "pod_queue", "job_queue", "namespace")
