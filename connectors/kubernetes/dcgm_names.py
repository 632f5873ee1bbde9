"""The spellings dcgm-exporter has used for the two utilization fields and their labels.

Metric names, read in this order of precedence inside each family (rule: docs/kubernetes.md,
"GPU utilization metrics"). Where two spellings of one family have a sample for the same GPU (MIG
instance) at the same instant -- two exporters during a migration, or a recording rule that
copies one name to the other -- only the first spelling's samples are used, so nothing is
counted twice:

* graphics-engine activity, a ratio 0..1 (DCGM field 1001):
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (2.x and later), then ``dcgm_fi_prof_gr_engine_active``
  (the 1.x-compatibility counters, ``etc/1.x-compatibility-metrics.csv``, typically run with
  ``--use-old-namespace``; dcgm-exporter#272);
* GPU utilization in percent (DCGM field 203): ``DCGM_FI_DEV_GPU_UTIL``, then
  ``dcgm_fi_dev_gpu_util`` (the same name lower-cased by a store that lower-cases names, e.g.
  go-dcgm#75), then the 1.x name ``dcgm_gpu_utilization`` (dcgm-exporter#188).

Labels (first one present wins): GPU ``UUID`` / ``uuid`` (``--use-old-namespace``); MIG
``GPU_I_ID`` / ``gpu_i_id`` and ``GPU_I_PROFILE`` / ``gpu_i_profile`` (lower-cased by a
store, dcgm-exporter#577); model ``modelName`` / ``modelname``; host: a relabelled ``node`` /
``kubernetes_node``, else ``Hostname`` (until 2026-05) / ``hostname`` (dcgm-exporter PR #655).
Pod labels ``namespace``/``pod``/``container`` or, with ``--use-old-namespace``,
``pod_namespace``/``pod_name``/``container_name``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

PREFERRED = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FALLBACK = "DCGM_FI_DEV_GPU_UTIL"


@dataclass(frozen=True)
class Variant:
    name: str  # the metric name as stored
    family: str  # PREFERRED or FALLBACK: what the value measures (stored as `metric`)
    scale: float  # value / scale is the busy fraction 0..1
    rank: int  # precedence inside the family: lower wins at one GPU and instant
    source: str  # which exporters write it


VARIANTS = (
    Variant(PREFERRED, PREFERRED, 1.0, 0, "dcgm-exporter 2.x and later"),
    Variant("dcgm_fi_prof_gr_engine_active", PREFERRED, 1.0, 1,
            "1.x-compatibility counters / --use-old-namespace (dcgm-exporter#272)"),
    Variant(FALLBACK, FALLBACK, 100.0, 0, "dcgm-exporter 2.x and later"),
    Variant("dcgm_fi_dev_gpu_util", FALLBACK, 100.0, 1, "lower-cased by the store"),
    Variant("dcgm_gpu_utilization", FALLBACK, 100.0, 2, "dcgm-exporter 1.x (dcgm-exporter#188)"),
)

# canonical column -> label spellings, first present wins
GPU_LABELS = {
    "gpu_uuid": ("UUID", "uuid"),
    "gpu_instance": ("GPU_I_ID", "gpu_i_id"),
    "gpu_instance_profile": ("GPU_I_PROFILE", "gpu_i_profile"),
    "gpu_model": ("modelName", "modelname"),
    "node": ("node", "kubernetes_node", "Hostname", "hostname"),
}
OLD_HOLDER_LABELS = ("pod_namespace", "pod_name", "container_name")

# Labels with a known meaning (used, or deliberately ignored).
KNOWN_LABELS = frozenset({
    "__name__", "gpu", "device", "pci_bus_id", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_BRAND",
    "DCGM_FI_DEV_SERIAL", "DCGM_FI_DEV_NAME", "DCGM_FI_PROCESS_NAME", "err_code", "err_msg",
    *(name for names in GPU_LABELS.values() for name in names),
    "namespace", "pod", "container", *OLD_HOLDER_LABELS,
    "exported_namespace", "exported_pod", "exported_container", "pod_uid", "hpc_job", "vgpu",
    "job", "instance", "service", "endpoint", "exported_job", "exported_instance",
    "exported_node", "exported_service", "exported_endpoint",
    "prometheus", "prometheus_replica", "cluster", "cluster_id", "region", "zone",
    "podname",  # the exporter's own pod, added by AKS' managed scrape (dcgm-exporter#577)
    "dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name",
    "dra_device_name", "dra_mig_profile", "dra_mig_device_uuid",
})


def first_label(frame: pl.DataFrame, names: tuple[str, ...]) -> pl.Expr:
    """The first of `names` the series carries (null where it carries none)."""
    present = [pl.col(n) for n in names if n in frame.columns]
    if not present:
        return pl.lit(None, dtype=pl.String)
    return present[0] if len(present) == 1 else pl.coalesce(present)


def canonical_uuid(expr: pl.Expr) -> pl.Expr:
    """``gpu-…``/``mig-…`` (a store that lower-cases values) back to nvidia-smi's ``GPU-…``."""
    return (pl.when(expr.str.starts_with("gpu-") | expr.str.starts_with("mig-"))
            .then(expr.str.slice(0, 3).str.to_uppercase() + expr.str.slice(3))
            .otherwise(expr))
