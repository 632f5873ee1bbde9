"""Attribute dcgm-exporter samples without pod labels where kube-state-metrics leaves no doubt.

dcgm-exporter labels a GPU's series with the pod holding it only with the kubelet pod-resources
mapping (``--kubernetes`` / ``DCGM_EXPORTER_KUBERNETES=true`` and the kubelet's
``/var/lib/kubelet/pod-resources`` mounted); without it, or for GPUs handed out through DRA
without ``--kubernetes-enable-dra``, or in the moments the mapping lags, the samples carry no
holder (dcgm-exporter#342, #411, #277, #363). They stay measured-but-unattributed
(``attribution`` null) except where exactly one pod holds every GPU of the node at that instant:

* at the sample's timestamp one pod uid is Running on the node (``k8s_pod_allocations``
  intervals of the window) and holds at least the node's GPU capacity
  (``kube_node_status_capacity``; capacity, not allocatable, so an unhealthy GPU nobody holds is
  never given to the pod);
* the exporter reports no more devices on the node at that instant than the capacity counts
  (a node whose MIG instances are not ``nvidia.com/gpu`` resources -- the ``mixed`` strategy --
  is never attributed through whole-GPU requests);
* no sample of the node carries a Slurm job (``hpc_job``) in the same minute.

Such samples take the pod's namespace, name and uid (``container`` stays null) and
``attribution = 'sole_pod_on_node'``; samples with the exporter's own holder labels are
``'exporter_labels'``. Every exporter (job, instance, node) whose samples had to be attributed,
or could not be while pods held GPUs on its node, gets a warning naming it, the GPU-minutes
attributed and not, and the fix.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.records import TS

EXPORTER_LABELS = "exporter_labels"
SOLE_POD = "sole_pod_on_node"
FIX = ("fix: run dcgm-exporter with the kubelet pod-resources mapping (--kubernetes / -k, env "
       "DCGM_EXPORTER_KUBERNETES=true; the Helm chart sets it) and mount the kubelet's "
       "/var/lib/kubelet/pod-resources (socket --pod-resources-kubelet-socket); for GPUs "
       "allocated through DRA also --kubernetes-enable-dra (KUBERNETES_ENABLE_DRA=true)")

_SEGMENT_SCHEMA: SchemaDict = {"node": pl.String, "seg_start": TS, "seg_end": TS, "why": pl.String,
                   "uid": pl.String, "a_namespace": pl.String, "a_pod": pl.String,
                   "capacity": pl.Int64}


def holder_segments(pods: pl.DataFrame, capacity: pl.DataFrame) -> pl.DataFrame:
    """Per node, the periods in which pods hold GPUs: ``why`` = 'sole' (one pod holds at least
    the capacity), 'several pods', 'part of the node' or 'capacity unknown'."""
    caps: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for r in capacity.iter_rows(named=True):
        if r["node"] is not None and r["capacity_gpus"] is not None:
            caps[r["node"]].append((r["start_ts"], r["end_ts"], r["capacity_gpus"]))
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in pods.filter(pl.col("node").is_not_null() & (pl.col("gpus") > 0)).iter_rows(
            named=True):
        by_node[r["node"]].append(r)
    rows = []
    for node, held in by_node.items():
        # sweep over start/end events: O(events log events) per node, however many pods
        events: dict[datetime, list[tuple[int, str, Any]]] = defaultdict(list)
        for i, r in enumerate(held):
            events[r["start_ts"]].append((+1, "pod", i))
            events[r["end_ts"]].append((-1, "pod", i))
        for j, (a, b, c) in enumerate(caps[node]):
            events[a].append((+1, "cap", (j, c)))
            events[b].append((-1, "cap", (j, c)))
        active: set[int] = set()
        open_caps: set[tuple[int, int]] = set()
        for a, b in pairwise(sorted(events)):
            for sign, kind, item in events[a]:
                target = active if kind == "pod" else open_caps
                (target.add if sign > 0 else target.discard)(item)
            if not active:
                continue
            now = [held[i] for i in sorted(active)]
            uids = {r["uid"] for r in now}
            cap = max((c for _, c in open_caps), default=None)
            gpus = sum(r["gpus"] for r in now)
            if len(uids) > 1:
                why = "several pods"
            elif cap is None or cap <= 0:
                why = "capacity unknown"
            elif gpus < cap:
                why = "part of the node"
            else:
                why = "sole"
            one = now[0] if why == "sole" else {"uid": None, "namespace": None, "pod": None}
            rows.append((node, a, b, why, one["uid"], one["namespace"], one["pod"], cap))
    return pl.DataFrame(rows, schema=_SEGMENT_SCHEMA, orient="row")


def attribute_samples(samples: pl.DataFrame, pods: pl.DataFrame | None,
                      capacity: pl.DataFrame | None, warnings: list[str], *,
                      grain: timedelta = timedelta(minutes=1)) -> pl.DataFrame:
    """`samples` (one row per GPU, timestamp and holder) with ``attribution`` set and the
    unlabelled samples of sole-pod nodes given to that pod (see the module docstring)."""
    labelled = pl.col("pod").is_not_null() | pl.col("hpc_job").is_not_null()
    samples = samples.with_columns(
        attribution=pl.when(labelled).then(pl.lit(EXPORTER_LABELS)).otherwise(pl.lit(None)))
    if pods is None or samples.height == 0 or pods.height == 0:
        return samples
    segments = holder_segments(pods, capacity if capacity is not None else pl.DataFrame(
        schema={"node": pl.String, "start_ts": TS, "end_ts": TS, "capacity_gpus": pl.Int64}))
    if segments.height == 0:
        return samples
    samples = samples.with_row_index("_row")
    free = samples.filter(~labelled & pl.col("node").is_not_null()).select(
        "_row", "node", "ts", "gpu_uuid", "gpu_instance", "job", "instance").sort("ts")
    # both sides sorted by time overall, hence within every node
    hit = free.join_asof(segments.sort("seg_start"), left_on="ts", right_on="seg_start",
                         by="node", strategy="backward", check_sortedness=False,
                         ).filter(pl.col("ts") < pl.col("seg_end"))
    if hit.height == 0:
        return samples.drop("_row")
    bucket = pl.col("ts").dt.truncate(grain)
    devices = samples.group_by("node", "ts").agg(
        pl.struct("gpu_uuid", "gpu_instance").n_unique().alias("_devices"))
    slurm = samples.filter(pl.col("hpc_job").is_not_null()).select(
        "node", bucket.alias("_bucket")).unique().with_columns(_slurm=pl.lit(True))
    hit = (hit.join(devices, on=["node", "ts"], how="left")
           .with_columns(_bucket=bucket)
           .join(slurm, on=["node", "_bucket"], how="left")
           .with_columns(
               why=pl.when(pl.col("why") != "sole").then(pl.col("why"))
               .when(pl.col("_slurm").fill_null(False)).then(pl.lit("a Slurm job on the node"))
               .when(pl.col("_devices") > pl.col("capacity"))
               .then(pl.lit("more devices than GPUs (MIG)"))
               .otherwise(pl.lit("sole"))))
    given = hit.filter(pl.col("why") == "sole").select("_row", "uid", "a_namespace", "a_pod")
    out = samples.join(given, on="_row", how="left").with_columns(
        namespace=pl.coalesce("namespace", "a_namespace"),
        pod=pl.coalesce("pod", "a_pod"),
        pod_uid=pl.coalesce("pod_uid", "uid"),
        attribution=pl.when(pl.col("uid").is_not_null()).then(pl.lit(SOLE_POD))
        .otherwise(pl.col("attribution")),
    ).drop("uid", "a_namespace", "a_pod")
    _warn(out, hit, warnings)
    return out.sort("_row").drop("_row")


def _warn(out: pl.DataFrame, hit: pl.DataFrame, warnings: list[str]) -> None:
    exporter = ["job", "instance", "node"]
    minute = pl.struct("gpu_uuid", "gpu_instance", pl.col("ts").dt.truncate(timedelta(minutes=1)))
    with_pods = set(out.filter(pl.col("attribution") == EXPORTER_LABELS)
                    .filter(pl.col("pod").is_not_null())
                    .select(exporter).unique().iter_rows())
    counts = hit.group_by([*exporter, "why"]).agg(minute.n_unique().alias("minutes"))
    per: dict[tuple[Any, ...], dict[str, int]] = defaultdict(dict)
    for r in counts.iter_rows(named=True):
        per[(r["job"], r["instance"], r["node"])][r["why"]] = r["minutes"]
    for key in sorted(per, key=lambda k: tuple("" if v is None else v for v in k)):
        whys = per[key]
        given = whys.pop("sole", 0)
        labelled = key in with_pods
        if labelled and not given:
            continue  # unlabelled GPUs of an exporter with the mapping: free GPUs
        job, instance, node = key
        who = (f"dcgm-exporter job={job!r} instance={instance!r} node/Hostname={node!r}"
               if job or instance else f"dcgm-exporter of node/Hostname {node!r}")
        state = ("shows pod labels for some GPUs but not for every GPU a pod held"
                 if labelled else "carries no pod labels (namespace/pod/container)")
        lost = sum(whys.values())
        why = ", ".join(f"{n} with {w}" for w, n in sorted(whys.items()))
        warnings.append(
            f"{who} {state} while pods held GPUs on its node: {given} GPU-minute(s) attributed "
            f"to the only pod holding every GPU of the node (attribution='{SOLE_POD}')"
            + (f", {lost} GPU-minute(s) could not be attributed ({why}) and stay without a "
               "holder (busy/idle of those pods unknown, no idle detection)" if lost else "")
            + f"; {FIX}"
        )
