"""Shared GPUs on each node, from kube-state-metrics, as of one moment (``node_gpu_slices``;
docs/shared-gpus.md). One row per node, sharing mode and MIG profile:

* MIG mixed strategy: ``kube_node_status_capacity{resource="nvidia_com_mig_1g_10gb"}`` = the
  instances of that profile; ``physical_gpus`` = GFD's ``nvidia.com/gpu.count`` (left at the
  physical count with the mixed strategy, k8s-device-plugin#1501), else unknown;
* MIG single strategy (``nvidia.com/mig.strategy=single``, product ``…-MIG-1g.10gb``): the
  ``nvidia_com_gpu`` capacity = the instances; GFD overrides ``nvidia.com/gpu.count`` with the
  MIG devices there (docs/gfd_labels.md: 56 for 8 GPUs of 7), so ``physical_gpus`` = instances
  / instances per GPU (``gpu_slices // profile slices``: all GPUs split alike, as that strategy
  requires), rounded up;
* time-slicing / MPS: the ``nvidia_com_gpu`` capacity on a node with ``nvidia.com/gpu.replicas``
  > 1 (count x replicas), or a renamed replica resource's (``nvidia_com_gpu_shared``);
  ``units_per_gpu`` = the replicas, ``physical_gpus`` = ``nvidia.com/gpu.count``, else capacity
  / replicas.

``gpu_slices`` (MIG only) = the physical GPU's compute slices, 7, or 4 on an A30 (from the
product); ``mig_config`` = ``nvidia.com/mig.config`` (the MIG manager's layout name). Whole GPUs
have no row (``node_inventory`` holds them). For each node the latest samples in
``[at - lookback, at)`` count; unusable samples are rejects (``SAMPLE_REJECT_SCHEMA``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.gpu_sharing import (
    DEFAULT_NAMES,
    MIG,
    Sharing,
    SharingNames,
    gpu_slices,
    k8s_resource,
    k8s_resource_pattern,
)
from connectors.kubernetes.ksm_labels import with_workload
from connectors.kubernetes.ksm_nodes import COMPONENT, NO_NODE, matcher, short_model
from connectors.kubernetes.ksm_pods import reject_bad_values
from connectors.kubernetes.ksm_sharing import classify_resource, node_labels
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS, keep_rejects
from connectors.times import utc_naive

NODE_SLICE_SCHEMA: SchemaDict = {
    "node": pl.String,
    "sharing": pl.String,
    "slice_profile": pl.String,
    "units": pl.Int32,
    "physical_gpus": pl.Int32,
    "units_per_gpu": pl.Int32,
    "gpu_slices": pl.Int32,
    "mig_config": pl.String,
    "gpu_resource": pl.String,  # the KSM resource the capacity is of
    "observed_at": TS,
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _row(node: str, resource: str, units: int, lab: dict[str, Any], names: SharingNames,
         at: datetime) -> dict[str, Any] | None:
    sharing, profile = classify_resource(resource, lab.get("strategy"), lab.get("product"),
                                     lab.get("replicas"), lab.get("sharing_strategy"), names)
    if sharing is None:
        return None
    count, replicas = lab.get("count"), lab.get("replicas")
    row = {"node": node, "sharing": sharing, "slice_profile": profile, "units": units,
           "mig_config": lab.get("mig_config"), "gpu_resource": resource, "observed_at": at,
           "physical_gpus": None, "units_per_gpu": None, "gpu_slices": None}
    if sharing == MIG:
        total = gpu_slices(short_model(lab.get("product")))
        slices = Sharing(MIG, profile).compute_slices or 1
        row.update(units_per_gpu=slices, gpu_slices=total)
        if resource == "nvidia_com_gpu":  # single strategy: gpu.count counts MIG devices
            row["physical_gpus"] = _ceil_div(units, max(total // slices, 1))
        else:
            row["physical_gpus"] = count
        return row
    per = replicas if replicas is not None and replicas > 1 else (
        units // count if count else None)
    row.update(units_per_gpu=per,
               physical_gpus=count if count is not None else (
                   _ceil_div(units, per) if per else None))
    return row


def ksm_node_slices(
    source: MetricsSource, at: datetime, *, lookback: timedelta = timedelta(hours=1),
    selector: str = "", names: SharingNames = DEFAULT_NAMES,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per node, sharing mode and MIG profile (``NODE_SLICE_SCHEMA``) as of `at`."""
    at = utc_naive(at)
    q0 = at - lookback
    cap = source.raw_samples(matcher("kube_node_status_capacity",
                                     f'resource=~"{k8s_resource_pattern(names)}"', selector),
                             q0, at)
    if cap.height == 0 or "resource" not in cap.columns:
        return pl.DataFrame(schema=NODE_SLICE_SCHEMA)
    cap = with_workload(cap, node_metric=True)
    keep_rejects(rejects, cap.filter(pl.col("_node").is_null()), COMPONENT, NO_NODE)
    cap = cap.filter(pl.col("_node").is_not_null()
                     & pl.col("resource").map_elements(
                         lambda r: k8s_resource(r, names) is not None, return_dtype=pl.Boolean))
    cap = cap.filter(~reject_bad_values(cap, rejects, COMPONENT, "GPU capacity"))
    latest = cap.sort("ts").group_by("_node", "resource", maintain_order=True).last()
    labels = node_labels(source, q0, at, rejects, selector)
    by_node = {r["node"]: r for r in
               labels.sort("ts").group_by("node", maintain_order=True).last()
               .iter_rows(named=True)}
    rows = []
    for r in latest.sort("_node", "resource").iter_rows(named=True):
        units = round(r["value"])
        if units <= 0:
            continue
        row = _row(r["_node"], r["resource"], units, by_node.get(r["_node"], {}), names, at)
        if row is not None:
            rows.append(row)
    return pl.DataFrame(rows, schema=NODE_SLICE_SCHEMA) if rows else pl.DataFrame(
        schema=NODE_SLICE_SCHEMA)
