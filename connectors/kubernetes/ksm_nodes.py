"""The GPU nodes Kubernetes knows, from kube-state-metrics, as of one moment.

* ``kube_node_status_capacity{resource="nvidia_com_gpu",unit="integer"}``: the device plugin's
  GPUs (KSM sanitises ``nvidia.com/gpu`` to ``nvidia_com_gpu``).
* ``kube_node_labels`` with GPU Feature Discovery's labels, sanitised the same way:
  ``label_nvidia_com_gpu_product`` (``NVIDIA-A100-SXM4-80GB``), ``label_nvidia_com_gpu_count``
  and ``label_nvidia_com_gpu_replicas`` (time-slicing). KSM exports node labels only when
  allow-listed (``--metric-labels-allowlist=nodes=[nvidia.com/gpu.product,nvidia.com/gpu.count,
  nvidia.com/gpu.replicas]``); without them the model is '' and the count is the capacity.

The count is GFD's physical ``gpu.count`` when present: with time-slicing the capacity counts
replicas (4 GPUs x 4 replicas = capacity 16). With the MIG single strategy both count MIG
devices, so the physical GPUs are derived from the profile (``_single_strategy_gpus``).
The model is the product shortened to what a rate card names (``NVIDIA-A100-SXM4-80GB`` ->
``a100``, ``NVIDIA-H100-80GB-HBM3`` -> ``h100``); the product is kept as read. For each node
the latest sample in ``[at - lookback, at)`` counts.
A node whose ``nvidia_com_gpu`` capacity is 0 but whose ``gpu.count`` is not (MIG mixed
strategy, renamed replicas) is listed with that count.
Samples that cannot be used (no node label, NaN, a fraction, a count label that is not a
number) are rejects (``SAMPLE_REJECT_SCHEMA``), never dropped.

Fixture: tests/fixtures/expositions/kube-state-metrics-v2.20.0-node_test.prom (KSM's own
node_test.go); label names from NVIDIA/gpu-feature-discovery's README.
"""

from datetime import datetime, timedelta

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.gpu_sharing import gpu_slices, mig_profile_from_product
from connectors.kubernetes.ksm_labels import with_workload
from connectors.kubernetes.ksm_pods import reject_bad_values
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import TS, keep_rejects, label
from connectors.times import utc_naive

COMPONENT = "ksm"
GPU_RESOURCE = "nvidia_com_gpu"
PRODUCT = "label_nvidia_com_gpu_product"
COUNT = "label_nvidia_com_gpu_count"
REPLICAS = "label_nvidia_com_gpu_replicas"
NO_NODE = "expected a node label, found none"

KSM_NODE_SCHEMA: SchemaDict = {
    "node": pl.String,
    "gpu_model": pl.String,
    "gpu_product": pl.String,
    "gpu_count": pl.Int32,
    "capacity_gpus": pl.Int32,
    "replicas": pl.Int32,
    "mig": pl.Boolean,
    "observed_at": TS,
}
_PREFIXES = ("NVIDIA-", "TESLA-", "GEFORCE-", "QUADRO-")


def short_model(product: str | None) -> str:
    """``NVIDIA-A100-SXM4-80GB`` -> ``a100``; ``Tesla-V100-SXM2-16GB`` -> ``v100``;
    ``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`` -> ``a100``; '' for none."""
    text = (product or "").strip()
    for prefix in _PREFIXES:
        if text.upper().startswith(prefix):
            text = text[len(prefix):]
    return text.split("-", 1)[0].lower()


def matcher(metric: str, *matchers: str) -> str:
    """``metric{a="b",c="d"}`` from the non-empty matchers (a site selector among them)."""
    inner = ",".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def _latest(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("ts").group_by("_node", maintain_order=True).last()


def ksm_node_inventory(
    source: MetricsSource, at: datetime, *, lookback: timedelta = timedelta(hours=1),
    selector: str = "", resource: str = GPU_RESOURCE,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per node with GPU capacity (``KSM_NODE_SCHEMA``) as of `at`."""
    at = utc_naive(at)
    q0 = at - lookback
    cap = source.raw_samples(matcher("kube_node_status_capacity", f'resource="{resource}"',
                                     selector), q0, at)
    if cap.height == 0:
        return pl.DataFrame(schema=KSM_NODE_SCHEMA)
    cap = with_workload(cap, node_metric=True)
    keep_rejects(rejects, cap.filter(pl.col("_node").is_null()), COMPONENT, NO_NODE)
    cap = cap.filter(pl.col("_node").is_not_null())
    cap = cap.filter(~reject_bad_values(cap, rejects, COMPONENT, "GPU capacity"))
    cap = _latest(cap).select("_node", pl.col("value").round().cast(pl.Int32).alias("capacity"),
                              pl.col("ts").alias("observed_at"))
    labels = source.raw_samples(matcher("kube_node_labels", selector), q0, at)
    if labels.height:
        labels = with_workload(labels, node_metric=True)
        keep_rejects(rejects, labels.filter(pl.col("_node").is_null()), COMPONENT, NO_NODE)
        labels = labels.filter(pl.col("_node").is_not_null())
        labels = _latest(labels).select(
            "_node", label(labels, PRODUCT).alias("product"),
            label(labels, COUNT).alias("count_text"),
            label(labels, REPLICAS).alias("replicas_text"), "ts", "value", "__name__",
            *[c for c in labels.columns if c.startswith("label_") and c not in
              (PRODUCT, COUNT, REPLICAS)])
        for col, what in (("count_text", COUNT), ("replicas_text", REPLICAS)):
            bad = labels.filter(pl.col(col).is_not_null()
                                & pl.col(col).cast(pl.Int32, strict=False).is_null())
            keep_rejects(rejects, bad.drop("count_text", "replicas_text", "product"), COMPONENT,
                         f"expected a whole number in {what}, found text")
        labels = labels.select(
            "_node", "product",
            pl.col("count_text").cast(pl.Int32, strict=False).alias("label_count"),
            pl.col("replicas_text").cast(pl.Int32, strict=False).alias("replicas"))
        cap = cap.join(labels, on="_node", how="left")
    else:
        cap = cap.with_columns(product=pl.lit(None, pl.String),
                               label_count=pl.lit(None, pl.Int32),
                               replicas=pl.lit(None, pl.Int32))
    # nvidia_com_gpu 0 but GFD counts GPUs: they are handed out under other names (MIG mixed
    # strategy instances, renamed replicas such as nvidia_com_gpu_shared; ksm_slices.py)
    out = cap.filter((pl.col("capacity") > 0) | (pl.col("label_count").fill_null(0) > 0)).select(
        pl.col("_node").alias("node"),
        pl.col("product").map_elements(short_model, return_dtype=pl.String)
        .fill_null("").alias("gpu_model"),
        pl.col("product").fill_null("").alias("gpu_product"),
        # time-slicing: capacity counts replicas, so physical GPUs = capacity / replicas
        pl.coalesce("label_count", pl.col("capacity") // pl.col("replicas").fill_null(1)
                    .clip(lower_bound=1)).cast(pl.Int32).alias("gpu_count"),
        pl.col("capacity").cast(pl.Int32).alias("capacity_gpus"),
        pl.col("replicas").fill_null(1).cast(pl.Int32),
        pl.col("product").fill_null("").str.contains("(?i)-MIG-").alias("mig"),
        "observed_at",
    )
    return _single_strategy_gpus(out).sort("node")


def _single_strategy_gpus(out: pl.DataFrame) -> pl.DataFrame:
    """MIG single strategy (product ``…-MIG-1g.10gb``): capacity and GFD's overridden
    ``gpu.count`` both count MIG devices; the physical GPUs are devices / devices per GPU
    (every GPU split alike, as that strategy requires; ksm_slices.py), rounded up."""
    per_gpu: dict[str, int] = {}
    for product in out.filter(pl.col("mig"))["gpu_product"].unique().to_list():
        profile = mig_profile_from_product(product)
        if profile is not None:
            slices = int(profile.split("g.", 1)[0])
            per_gpu[product] = max(gpu_slices(short_model(product)) // slices, 1)
    if not per_gpu:
        return out
    per = pl.col("gpu_product").replace_strict(per_gpu, default=None, return_dtype=pl.Int32)
    return out.with_columns(
        pl.when(per.is_not_null()).then((pl.col("capacity_gpus") + per - 1) // per)
        .otherwise(pl.col("gpu_count")).cast(pl.Int32).alias("gpu_count"))
