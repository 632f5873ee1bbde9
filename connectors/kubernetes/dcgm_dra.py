"""dcgm-exporter's DRA labels: which pod, ResourceClaim and DRA device a GPU reading is for.

With ``--kubernetes-enable-dra`` (``KUBERNETES_ENABLE_DRA=true``; dcgm-exporter 4.3.0-4.4.0 and
later, ``internal/pkg/transformation/kubernetes.go``) the exporter asks the kubelet's
pod-resources API for each container's dynamic resources and, for devices of the driver
``gpu.nvidia.com`` (``DRAGPUDriverName``), puts on every metric of the GPU the pod's
``namespace``/``pod``/``container`` and (``const.go``) ``dra_claim_name``,
``dra_claim_namespace``, ``dra_driver_name``, ``dra_pool_name``, ``dra_device_name``; for a MIG
device also ``dra_mig_profile`` and ``dra_mig_device_uuid`` (the mapping key is then the parent
GPU's UUID, so every series of that GPU carries them). A GPU held by several pods (a shared
claim) has one series per pod.

The labels are kept on the stored readings (``gpu_utilization``, columns ``DRA_COLUMNS``), and
``dra_series`` lists them per series (labels only, ``/api/v1/series``) so the DRA reader
(``dra_pods.py``) knows each claim's devices even where the API's claim objects were not read.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.dcgm_names import GPU_LABELS, VARIANTS, canonical_uuid, first_label
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import label

DRA_COLUMNS = ("dra_claim_namespace", "dra_claim_name", "dra_driver_name", "dra_pool_name",
               "dra_device_name", "dra_mig_profile", "dra_mig_device_uuid")

DRA_SERIES_SCHEMA: SchemaDict = {
    "namespace": pl.String,  # the pod's
    "pod": pl.String,
    "claim_namespace": pl.String,
    "claim": pl.String,
    "driver": pl.String,
    "pool": pl.String,
    "device": pl.String,
    "mig_profile": pl.String,
    "gpu_uuid": pl.String,
    "node": pl.String,
}


def _holder(frame: pl.DataFrame, name: str, old: str) -> pl.Expr:
    """The pod's label: ``exported_<name>`` (scraped without honorLabels), ``<old>``
    (``--use-old-namespace``), else the plain label."""
    return pl.coalesce(label(frame, f"exported_{name}"), label(frame, old), label(frame, name))


def dra_series(source: MetricsSource, start: datetime, end: datetime) -> pl.DataFrame:
    """One row per (pod, claim, device, GPU) that dcgm-exporter's utilization series name in
    ``[start, end)`` (``DRA_SERIES_SCHEMA``); empty without ``--kubernetes-enable-dra``."""
    parts = []
    for variant in VARIANTS:
        listed = source.series(f'{variant.name}{{dra_claim_name!=""}}', start, end)
        if listed.height == 0 or "dra_claim_name" not in listed.columns:
            continue
        parts.append(listed.select(
            _holder(listed, "namespace", "pod_namespace").alias("namespace"),
            _holder(listed, "pod", "pod_name").alias("pod"),
            pl.coalesce(label(listed, "dra_claim_namespace"),
                        _holder(listed, "namespace", "pod_namespace")).alias("claim_namespace"),
            label(listed, "dra_claim_name").alias("claim"),
            label(listed, "dra_driver_name").alias("driver"),
            label(listed, "dra_pool_name").alias("pool"),
            label(listed, "dra_device_name").alias("device"),
            label(listed, "dra_mig_profile").alias("mig_profile"),
            canonical_uuid(first_label(listed, GPU_LABELS["gpu_uuid"])).alias("gpu_uuid"),
            first_label(listed, GPU_LABELS["node"]).alias("node"),
        ))
    if not parts:
        return pl.DataFrame(schema=DRA_SERIES_SCHEMA)
    out = pl.concat(parts, how="vertical_relaxed").filter(
        pl.col("claim").is_not_null() & pl.col("device").is_not_null())
    return out.select([pl.col(c).cast(t) for c, t in DRA_SERIES_SCHEMA.items()]).unique(
        ).sort(list(DRA_SERIES_SCHEMA), nulls_last=True)
