"""What a pod's GPU resource is on its node: whole GPUs, MIG instances, time-slicing or MPS
replicas (docs/shared-gpus.md), from the node labels GPU Feature Discovery and the NVIDIA device
plugin set, as kube-state-metrics exports them (``kube_node_labels``, allow-listed:
``--metric-labels-allowlist=nodes=[nvidia.com/mig.strategy,nvidia.com/gpu.product,...]``).

* ``nvidia_com_mig_<N>g_<M>gb`` (MIG mixed strategy) is a MIG instance of that profile
  wherever it is;
* ``nvidia_com_gpu`` is a MIG instance on a node labelled ``nvidia.com/mig.strategy=single``
  whose ``nvidia.com/gpu.product`` ends in ``-MIG-<profile>`` (GFD overrides the product and
  ``nvidia.com/gpu.count`` with the MIG devices' there), a replica on a node with
  ``nvidia.com/gpu.replicas`` > 1 (``mps`` where ``nvidia.com/gpu.sharing-strategy=mps``, else
  ``time_slicing``; with the replicas unknown, the sharing-strategy label alone), and a whole
  GPU otherwise;
* a renamed resource (``nvidia_com_gpu_shared``, ``renameByDefault: true``) or another one the
  site names (``[gpuledger.sharing]``) is a replica: ``mps`` where the site lists it so or the
  node's sharing strategy is ``mps``, else ``time_slicing``.

The labels in force at a pod's sample are the node's latest ``kube_node_labels`` sample at or
before it (else the first after: a node seen only later). A node without labels leaves
``nvidia_com_gpu`` whole. Label values that are not numbers where one is needed are rejects.

Upstream shapes: tests/fixtures/kubernetes/sharing/README.md.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.gpu_sharing import (
    DEFAULT_NAMES,
    MIG,
    MPS,
    TIME_SLICING,
    WHOLE_GPU_RESOURCE,
    SharingNames,
    k8s_resource,
    mig_profile_from_product,
)
from connectors.kubernetes.ksm_labels import with_workload
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS, keep_rejects, label

COMPONENT = "ksm"
NODE_LABELS_METRIC = "kube_node_labels"
STRATEGY = "label_nvidia_com_mig_strategy"
PRODUCT = "label_nvidia_com_gpu_product"
COUNT = "label_nvidia_com_gpu_count"
REPLICAS = "label_nvidia_com_gpu_replicas"
SHARING_STRATEGY = "label_nvidia_com_gpu_sharing_strategy"
MIG_CONFIG = "label_nvidia_com_mig_config"
NO_NODE = "expected a node label, found none"

LABEL_SCHEMA: SchemaDict = {"node": pl.String, "ts": TS, "strategy": pl.String,
                            "product": pl.String,
                "count": pl.Int32, "replicas": pl.Int32, "sharing_strategy": pl.String,
                "mig_config": pl.String}


def node_labels(source: MetricsSource, q0: datetime, q1: datetime,
                rejects: list[pl.DataFrame] | None, selector: str = "") -> pl.DataFrame:
    """Every ``kube_node_labels`` sample in ``[q0, q1)`` reduced to the sharing labels
    (``LABEL_SCHEMA``); counts that are not whole numbers are rejects and read as unknown."""
    metric = f"{NODE_LABELS_METRIC}{{{selector}}}" if selector else NODE_LABELS_METRIC
    raw = source.raw_samples(metric, q0, q1)
    if raw.height == 0:
        return pl.DataFrame(schema=LABEL_SCHEMA)
    raw = with_workload(raw, node_metric=True)
    keep_rejects(rejects, raw.filter(pl.col("_node").is_null()), COMPONENT, NO_NODE)
    raw = raw.filter(pl.col("_node").is_not_null())
    for name in (COUNT, REPLICAS):
        text = label(raw, name)
        bad = raw.filter(text.is_not_null() & text.cast(pl.Int32, strict=False).is_null())
        keep_rejects(rejects, bad, COMPONENT, f"expected a whole number in {name}, found text")
    return raw.select(
        pl.col("_node").alias("node"), "ts",
        label(raw, STRATEGY).alias("strategy"), label(raw, PRODUCT).alias("product"),
        label(raw, COUNT).cast(pl.Int32, strict=False).alias("count"),
        label(raw, REPLICAS).cast(pl.Int32, strict=False).alias("replicas"),
        label(raw, SHARING_STRATEGY).alias("sharing_strategy"),
        label(raw, MIG_CONFIG).alias("mig_config"),
    ).cast(pl.Schema(LABEL_SCHEMA)).unique(["node", "ts"], keep="last").sort("ts")


def labels_in_force(frame: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """`frame` (node, ts, ...) with the node's labels at each ts (latest at or before, else
    the first after)."""
    cols = [c for c in LABEL_SCHEMA if c not in ("node", "ts")]
    if labels.height == 0:
        return frame.with_columns([pl.lit(None, dtype=LABEL_SCHEMA[c]).alias(c) for c in cols])
    right = labels.rename({"ts": "_lts"}).sort("_lts")
    left = frame.with_row_index("_i").sort("ts")
    back = left.join_asof(right, left_on="ts", right_on="_lts", by="node",
                          strategy="backward", check_sortedness=False)
    fwd = left.select("_i", "node", "ts").join_asof(
        right, left_on="ts", right_on="_lts", by="node", strategy="forward",
        check_sortedness=False)
    out = back.join(fwd.select("_i", *[pl.col(c).alias(f"_f_{c}") for c in (*cols, "_lts")]),
                    on="_i", how="left")
    missing = pl.col("_lts").is_null()
    out = out.with_columns([pl.when(missing).then(pl.col(f"_f_{c}")).otherwise(pl.col(c))
                            .alias(c) for c in cols])
    return out.sort("_i").drop("_i", "_lts", *[f"_f_{c}" for c in (*cols, "_lts")])


def classify_resource(resource: str | None, strategy: str | None, product: str | None,
                  replicas: int | None, sharing_strategy: str | None,
                  names: SharingNames) -> tuple[str | None, str | None]:
    """(sharing, slice_profile) of `resource` on a node with these labels (module docstring);
    (None, None): whole GPUs or not a GPU resource."""
    meaning = k8s_resource(resource or "", names)
    if meaning is None:
        return None, None
    mps = (sharing_strategy or "").lower() == "mps"
    if resource != WHOLE_GPU_RESOURCE:
        if meaning.sharing == TIME_SLICING and mps:
            return MPS, None
        return meaning.sharing, meaning.slice_profile
    profile = mig_profile_from_product(product)
    if (strategy or "").lower() == "single" and profile is not None:
        return MIG, profile
    shared = (sharing_strategy or "").lower() in ("time-slicing", "mps")
    if (replicas is not None and replicas > 1) or (replicas is None and shared):
        return (MPS if mps else TIME_SLICING), None
    return None, None


def classify(frame: pl.DataFrame, labels: pl.DataFrame,
             names: SharingNames = DEFAULT_NAMES) -> pl.DataFrame:
    """`frame` (node, ts, gpu_resource, ...) with ``sharing`` and ``slice_profile`` by the
    node's labels in force at each ts (module docstring)."""
    cols = ("strategy", "product", "replicas", "sharing_strategy")
    with_labels = labels_in_force(frame, labels)
    combos = with_labels.select("gpu_resource", *cols).unique()
    pairs = [classify_resource(resource, strategy, product, replicas, sharing, names)
             for resource, strategy, product, replicas, sharing in combos.iter_rows()]
    lookup = combos.with_columns(
        pl.Series("sharing", [p[0] for p in pairs], dtype=pl.String),
        pl.Series("slice_profile", [p[1] for p in pairs], dtype=pl.String))
    out = with_labels.join(lookup, on=["gpu_resource", *cols], how="left", nulls_equal=True)
    return out.drop(*[c for c in LABEL_SCHEMA if c not in ("node", "ts")])
