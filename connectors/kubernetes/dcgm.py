"""GPU busy fractions from dcgm-exporter raw samples, with the workload that held each GPU.

Metric choice, per GPU and per scrape: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0..1 of time the
graphics/compute engine was active; DCP field, works on MIG) wherever it has a sample for that GPU
at that timestamp; otherwise ``DCGM_FI_DEV_GPU_UTIL`` / 100 (GPUs without DCP support report only
this one). Deciding per sample keeps the result independent of how a period is split into reads.

Labels (dcgm-exporter ``render_metrics`` template plus the Kubernetes / HPC mappers):

* GPU: ``UUID``, ``gpu`` (index), ``modelName``; node from a relabelled ``node`` /
  ``kubernetes_node`` label if the scrape config adds one, else ``Hostname`` (renamed ``hostname``
  in 2026); a ``Hostname`` that is the exporter's own pod name (exporter without ``NODE_NAME``) is
  mapped to the pod's node through ``kube_pod_info``. MIG instances by ``GPU_I_ID``.
* Holder: ``namespace``/``pod``/``container`` (old exporters: ``pod_namespace``/``pod_name``/
  ``container_name``), ``pod_uid`` (``--kubernetes-enable-pod-uid``), ``hpc_job`` (Slurm, from
  ``--hpc-job-mapping-dir``). When Prometheus scrapes the exporter through a ServiceMonitor
  without ``honorLabels``, the workload's labels arrive as ``exported_namespace``/
  ``exported_pod``/``exported_container`` and the unprefixed ones name the *exporter* pod. So:
  a series with any ``exported_*`` holder label takes its holder from those only; the exporter
  pod's identity learnt there (its unprefixed ``namespace``/``pod``) is no holder on any other
  series (idle GPUs carry only it); other unprefixed labels are the workload's (``honorLabels``,
  or samples from before the scrape config changed -- the change may happen mid-window).
  An unprefixed ``pod`` naming a dcgm-exporter pod is never taken as a holder.

Labels that look like holder labels but are not recognised are reported in the returned warnings
(never silently dropped); so are missing metrics and exporter-label situations.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.prometheus import MetricsSource, utc_naive
from connectors.kubernetes.records import (
    GPU_BUSY_DAILY_SCHEMA,
    GPU_UTILIZATION_SCHEMA,
    TS,
    conform,
    empty,
    label,
)

PREFERRED = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FALLBACK = "DCGM_FI_DEV_GPU_UTIL"
HOLDER_COLUMNS = ("namespace", "pod", "container", "pod_uid", "hpc_job")
GPU_COLUMNS = ("gpu_uuid", "gpu_instance")
_US = 1_000_000

# Labels with a known meaning (used, or deliberately ignored).
KNOWN_LABELS = frozenset({
    "__name__", "UUID", "gpu", "device", "modelName", "Hostname", "hostname", "node",
    "kubernetes_node",
    "pci_bus_id", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_BRAND", "DCGM_FI_DEV_SERIAL",
    "DCGM_FI_DEV_NAME", "DCGM_FI_PROCESS_NAME", "GPU_I_PROFILE", "GPU_I_ID", "err_code", "err_msg",
    "namespace", "pod", "container", "pod_namespace", "pod_name", "container_name",
    "exported_namespace", "exported_pod", "exported_container", "pod_uid", "hpc_job", "vgpu",
    "job", "instance", "service", "endpoint", "exported_job", "exported_instance",
    "prometheus", "prometheus_replica", "cluster", "cluster_id", "region", "zone",
    "dra_claim_name", "dra_claim_namespace", "dra_driver_name", "dra_pool_name",
    "dra_device_name", "dra_mig_profile", "dra_mig_device_uuid",
})
HOLDER_LIKE = re.compile(r"(?i)pod|namespace|container|hpc|slurm|job|user|uid|workload|owner")
EXPORTER_POD = re.compile(r"dcgm-exporter")


def _normalise(frame: pl.DataFrame, metric: str, scale: float,
               warnings: list[str]) -> pl.DataFrame:
    """Raw DCGM samples -> ts, value (0..1), GPU columns, holder columns, metric."""
    if frame.height == 0:
        return pl.DataFrame()
    for name in sorted(set(frame.columns) - KNOWN_LABELS - {"ts", "value"}):
        if name.startswith("label_") or HOLDER_LIKE.search(name):
            values = frame[name].drop_nulls().unique().sort().head(3).to_list()
            warnings.append(
                f"{metric}: label {name!r} looks like a holder label but is not recognised; "
                f"not used for attribution (values e.g. {values})"
            )
    frame = frame.with_columns(
        [label(frame, c).alias(c) for c in ("namespace", "pod", "container", "job", "instance")]
    )
    exported = [c for c in ("exported_namespace", "exported_pod", "exported_container")
                if c in frame.columns]
    has_exported = (pl.any_horizontal(pl.col(c).is_not_null() for c in exported) if exported
                    else pl.lit(False))
    frame = frame.with_columns(_has_exported=has_exported, _exporter=pl.lit(False))
    if exported:
        # The exporter pod's own identity: unprefixed namespace/pod on series that also carry
        # exported_* labels. Series without exported_* labels naming that pod (idle GPUs of a
        # target scraped without honorLabels) have no holder; any other unprefixed pod label is
        # the workload's (honorLabels, or samples from before the scrape config changed).
        seen = frame.filter(pl.col("_has_exported") & pl.col("pod").is_not_null())
        ids = seen.select("namespace", "pod").unique()
        for row in seen.select("job", "instance", "namespace", "pod").unique().sort(
                ["job", "instance", "namespace", "pod"], nulls_last=True).iter_rows(named=True):
            warnings.append(
                f"DCGM: target job={row['job']!r} instance={row['instance']!r} carries "
                "exported_namespace/exported_pod/exported_container: those are the workload's; "
                f"its unprefixed namespace={row['namespace']!r} pod={row['pod']!r} (the "
                "exporter pod) is not a holder"
            )
        if ids.height:
            frame = frame.drop("_exporter").join(
                ids.with_columns(_exporter=pl.lit(True)), on=["namespace", "pod"], how="left",
                nulls_equal=True,
            ).with_columns(pl.col("_exporter").fill_null(False))
    use_exported = pl.col("_has_exported")
    own = pl.col("_exporter") & ~use_exported
    namespace = (pl.when(use_exported).then(label(frame, "exported_namespace"))
                 .when(own).then(None)
                 .otherwise(pl.coalesce(pl.col("namespace"), label(frame, "pod_namespace"))))
    pod = (pl.when(use_exported).then(label(frame, "exported_pod"))
           .when(own).then(None)
           .otherwise(pl.coalesce(pl.col("pod"), label(frame, "pod_name"))))
    container = (pl.when(use_exported).then(label(frame, "exported_container"))
                 .when(own).then(None)
                 .otherwise(pl.coalesce(pl.col("container"), label(frame, "container_name"))))
    out = frame.select(
        "ts",
        (pl.col("value") / scale).alias("value"),
        label(frame, "UUID").alias("gpu_uuid"),
        label(frame, "GPU_I_ID").alias("gpu_instance"),
        label(frame, "gpu").cast(pl.Int32, strict=False).alias("gpu_index"),
        pl.coalesce(label(frame, "node"), label(frame, "kubernetes_node"),
                    label(frame, "Hostname"), label(frame, "hostname")).alias("node"),
        label(frame, "modelName").alias("gpu_model"),
        namespace.alias("namespace"),
        pod.alias("pod"),
        container.alias("container"),
        label(frame, "pod_uid").alias("pod_uid"),
        label(frame, "hpc_job").alias("hpc_job"),
        pl.lit(metric).alias("metric"),
    )
    self_pods = out.filter(
        pl.col("pod").is_not_null() & pl.col("pod").str.contains(EXPORTER_POD.pattern)
    )
    if self_pods.height:
        names = self_pods["pod"].unique().sort().head(3).to_list()
        warnings.append(
            f"{metric}: unprefixed pod label names the exporter itself (e.g. {names}); "
            "scrape without honorLabels? those samples are treated as having no pod holder"
        )
        is_self = pl.col("pod").is_not_null() & pl.col("pod").str.contains(EXPORTER_POD.pattern)
        out = out.with_columns(
            [pl.when(is_self).then(None).otherwise(pl.col(c)).alias(c)
             for c in ("namespace", "pod", "container")]
        )
    missing_uuid = out.filter(pl.col("gpu_uuid").is_null()).height
    if missing_uuid:
        warnings.append(f"{metric}: {missing_uuid} samples without a UUID label were skipped")
        out = out.filter(pl.col("gpu_uuid").is_not_null())
    nan = out.filter(pl.col("value").is_nan()).height
    if nan:
        warnings.append(f"{metric}: {nan} NaN samples skipped")
        out = out.filter(~pl.col("value").is_nan())
    if out.filter(pl.col("node").is_null()).height:
        warnings.append(f"{metric}: some series carry neither Hostname nor hostname; node is null")
    return out


def _resolve_exporter_hostnames(
    source: MetricsSource, frame: pl.DataFrame, start: datetime, end: datetime,
    warnings: list[str],
) -> pl.DataFrame:
    """Replace node values that are dcgm-exporter pod names by the pods' nodes (kube_pod_info).

    Without ``NODE_NAME`` in its environment (before dcgm-exporter PR #129, or a hand-made
    DaemonSet without hostNetwork) the exporter reports its container hostname -- its own pod
    name -- as ``Hostname``.
    """
    if frame.height == 0:
        return frame
    names = frame.filter(pl.col("node").str.contains(EXPORTER_POD.pattern))["node"]
    names = names.unique().sort().to_list()
    if not names:
        return frame
    pattern = "|".join(re.escape(n).replace("\\", "\\\\") for n in names)
    info = source.raw_samples(f'kube_pod_info{{pod=~"{pattern}"}}', start, end)
    mapping = pl.DataFrame(schema={"node": pl.String, "_node": pl.String})
    if info.height and {"pod", "node"} <= set(info.columns):
        mapping = (info.filter(pl.col("node").is_not_null()).sort("ts").group_by("pod")
                   .agg(pl.col("node").last().alias("_node")).rename({"pod": "node"}))
    unresolved = sorted(set(names) - set(mapping["node"].to_list()))
    warnings.append(
        f"DCGM Hostname is the exporter pod name for {len(names)} exporter(s) (no NODE_NAME in "
        f"its environment): node taken from kube_pod_info"
        + (f"; not found for {unresolved[:3]}, node left as the pod name" if unresolved else "")
    )
    return frame.join(mapping, on="node", how="left").with_columns(
        pl.coalesce("_node", "node").alias("node")).drop("_node")


def dcgm_samples(
    source: MetricsSource, start: datetime, end: datetime, warnings: list[str]
) -> pl.DataFrame:
    """Normalised samples with the preferred metric where present, GPU_UTIL/100 elsewhere."""
    found: list[str] = []
    preferred = _normalise(source.raw_samples(PREFERRED, start, end), PREFERRED, 1.0, found)
    fallback = _normalise(source.raw_samples(FALLBACK, start, end), FALLBACK, 100.0, found)
    preferred = _resolve_exporter_hostnames(source, preferred, start, end, found)
    fallback = _resolve_exporter_hostnames(source, fallback, start, end, found)
    warnings.extend(dict.fromkeys(w for w in found if w not in warnings))  # once each, in order
    if preferred.height == 0 and fallback.height == 0:
        warnings.append(f"neither {PREFERRED} nor {FALLBACK} has samples in [{start}, {end})")
        return pl.DataFrame()
    if preferred.height == 0:
        warnings.append(f"{PREFERRED} absent: every GPU uses {FALLBACK}/100")
        return fallback
    if fallback.height == 0:
        return preferred
    key = ["gpu_uuid", "gpu_instance", "ts"]
    filled = fallback.join(preferred.select(key).unique(), on=key, how="anti", nulls_equal=True)
    if filled.height:
        gpus = filled["gpu_uuid"].unique().sort().to_list()
        warnings.append(
            f"{PREFERRED} missing for {filled.height} samples on {len(gpus)} GPU(s) "
            f"(e.g. {gpus[:3]}): {FALLBACK}/100 used there"
        )
    return pl.concat([preferred, filled.select(preferred.columns)])


def gpu_utilization(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    grain: timedelta = timedelta(minutes=1),
    rejects: list[pl.DataFrame] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Per-GPU busy fractions per `grain` bucket and holder (``GPU_UTILIZATION_SCHEMA``).

    One row per (GPU, bucket, holder): when a pod ends inside a minute that minute has one row
    for the pod and one for the idle GPU. ``busy_fraction`` is the mean of the samples in the
    row, ``samples`` their number (an exporter outage shows as missing rows / fewer samples, never
    as zeros). Buckets are aligned to multiples of `grain` since the epoch (UTC).
    """
    start, end = utc_naive(start), utc_naive(end)
    if grain <= timedelta(0):
        msg = f"expected a positive grain, found {grain}"
        raise ValueError(msg)
    warnings: list[str] = []
    samples = dcgm_samples(source, start, end, warnings)
    if samples.height == 0:
        return empty(GPU_UTILIZATION_SCHEMA), warnings
    dedup_key = [*GPU_COLUMNS, "ts", *HOLDER_COLUMNS]
    samples = samples.unique(subset=dedup_key, keep="first", maintain_order=True)
    samples = samples.with_columns(bucket_start=pl.col("ts").dt.truncate(grain))
    key = [*GPU_COLUMNS, "bucket_start", *HOLDER_COLUMNS]
    rows = samples.group_by(key).agg(
        pl.col("node").drop_nulls().first(),
        pl.col("gpu_index").drop_nulls().first(),
        pl.col("gpu_model").drop_nulls().first(),
        pl.col("value").mean().alias("busy_fraction"),
        pl.len().cast(pl.Int64).alias("samples"),
        pl.col("metric").max(),  # "DCGM_FI_PROF..." sorts after "DCGM_FI_DEV..."
    )
    out = conform(rows, GPU_UTILIZATION_SCHEMA)
    return (
        out.sort(["node", "gpu_index", "gpu_uuid", "gpu_instance", "bucket_start",
                  *HOLDER_COLUMNS], nulls_last=True),
        warnings,
    )


def gpu_busy_seconds_daily(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    scrape_interval: timedelta | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Busy GPU-seconds per GPU per UTC day (``GPU_BUSY_DAILY_SCHEMA``), for comparison with truth.

    Each scrape of a GPU (holders de-duplicated: the same GPU at the same timestamp counts once)
    stands for ``[ts, ts + w)`` with ``w = min(interval, next ts - ts)`` (the interval for the last
    sample), clipped to ``[start, end)`` and split at UTC midnight; a gap is not bridged, so an
    exporter outage contributes nothing. ``busy_seconds = sum(value x seconds)``; the interval is
    the median spacing of the GPU's samples unless given.
    """
    start, end = utc_naive(start), utc_naive(end)
    warnings: list[str] = []
    samples = dcgm_samples(source, start, end, warnings)
    if samples.height == 0:
        return empty(GPU_BUSY_DAILY_SCHEMA), warnings
    per_ts = samples.group_by([*GPU_COLUMNS, "ts"]).agg(
        pl.col("value").max(), pl.col("node").drop_nulls().first()
    )
    if scrape_interval is None:
        intervals = infer_intervals(per_ts, list(GPU_COLUMNS))
    else:
        intervals = per_ts.select(GPU_COLUMNS).unique().with_columns(
            interval=pl.lit(scrape_interval).cast(pl.Duration("us"))
        )
    s = (
        per_ts.join(intervals, on=list(GPU_COLUMNS), how="left", nulls_equal=True)
        .sort([*GPU_COLUMNS, "ts"])
        .with_columns(next_ts=pl.col("ts").shift(-1).over(GPU_COLUMNS))
    )
    s = s.with_columns(
        seg_end=pl.min_horizontal(
            pl.col("ts") + pl.col("interval"),
            pl.col("next_ts").fill_null(pl.col("ts") + pl.col("interval")),
            pl.lit(end).cast(TS),
        ),
        midnight=pl.col("ts").dt.truncate(timedelta(days=1)) + pl.duration(days=1),
    )

    def seconds(a: pl.Expr, b: pl.Expr) -> pl.Expr:
        return ((b - a).dt.total_microseconds() / _US).clip(lower_bound=0)

    first = s.select(
        *GPU_COLUMNS, "node", pl.col("ts").dt.date().alias("day"), "value", "interval",
        seconds(pl.col("ts"), pl.min_horizontal("seg_end", "midnight")).alias("secs"),
        pl.lit(1, dtype=pl.Int64).alias("n"),
    )
    spill = s.filter(pl.col("seg_end") > pl.col("midnight")).select(
        *GPU_COLUMNS, "node", pl.col("midnight").dt.date().alias("day"), "value", "interval",
        seconds(pl.col("midnight"), pl.col("seg_end")).alias("secs"),
        pl.lit(0, dtype=pl.Int64).alias("n"),
    )
    pieces = pl.concat([first, spill])
    daily = pieces.group_by([*GPU_COLUMNS, "day"]).agg(
        pl.col("node").drop_nulls().first(),
        (pl.col("value") * pl.col("secs")).sum().alias("busy_seconds"),
        pl.col("secs").sum().alias("covered_seconds"),
        pl.col("n").sum().alias("samples"),
        (pl.col("interval").first().dt.total_microseconds() / _US).alias("scrape_interval_s"),
    )
    out = conform(daily, GPU_BUSY_DAILY_SCHEMA)
    return out.sort(["gpu_uuid", "gpu_instance", "day"], nulls_last=True), warnings

