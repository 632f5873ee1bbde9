"""GPU busy fractions from dcgm-exporter raw samples, with the workload that held each GPU.

Which samples stand for a GPU (rules in docs/kubernetes.md, "GPU utilization metrics"): every
spelling of the two fields is read (``dcgm_names.py``: current names, ``--use-old-namespace`` /
1.x names, lower-cased labels), one spelling per GPU and instant; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
(ratio 0..1 of time the graphics/compute engine was active; DCP field, works on MIG) wins wherever
it has a sample, ``DCGM_FI_DEV_GPU_UTIL`` / 100 fills the other instants -- except on MIG devices
(not measured there) and for a GPU-day whose profiling field is stuck at 0 while GPU_UTIL reads
busy (GPU_UTIL then stands for the day): ``dcgm_metric_choice.py``. The choice is made on whole UTC
days (the readers always read the days a window touches), so it does not depend on where reads
are cut.

Unusable samples are never dropped silently: no UUID, NaN/±Inf, a ratio outside 0..1 or a
percentage outside 0..100, GPU_UTIL of a MIG device, a stuck profiling field -- each goes to the
``rejects`` sink with its reason.

Labels (dcgm-exporter ``render_metrics`` template plus the Kubernetes / HPC mappers):

* GPU: ``UUID``, ``gpu`` (index), ``modelName``; node from a relabelled ``node`` /
  ``kubernetes_node`` label if the scrape config adds one, else ``Hostname`` (renamed ``hostname``
  in 2026); a ``Hostname`` that is the exporter's own pod name (exporter without ``NODE_NAME``) is
  mapped to the pod's node through ``kube_pod_info``. MIG instances by ``GPU_I_ID`` with their
  ``GPU_I_PROFILE``, under the parent ``UUID`` (``dcgm_mig.py`` for the daily figures).
* Holder: ``namespace``/``pod``/``container`` (``--use-old-namespace``: ``pod_namespace``/
  ``pod_name``/``container_name``), ``pod_uid`` (``--kubernetes-enable-pod-uid``), ``hpc_job``
  (Slurm, from ``--hpc-job-mapping-dir``). When Prometheus scrapes the exporter through a
  ServiceMonitor without ``honorLabels``, the workload's labels arrive as ``exported_namespace``/
  ``exported_pod``/``exported_container`` and the unprefixed ones name the *exporter* pod. So:
  a series with any ``exported_*`` holder label takes its holder from those only; the exporter
  pod's identity learnt there (its unprefixed ``namespace``/``pod``) is no holder on any other
  series (idle GPUs carry only it); other unprefixed labels are the workload's (``honorLabels``,
  or samples from before the scrape config changed -- the change may happen mid-window).
  An unprefixed ``pod`` naming a dcgm-exporter pod is never taken as a holder.
* Samples without any holder label are attributed to a pod only where one pod holds every GPU of
  the node (``dcgm_attribution.py``; ``attribution`` says which rows).
* DRA (``--kubernetes-enable-dra``): ``dra_claim_name``, ``dra_claim_namespace``,
  ``dra_driver_name``, ``dra_pool_name``, ``dra_device_name``, ``dra_mig_profile``,
  ``dra_mig_device_uuid`` are kept on each row (``dcgm_dra.py``): a reading names its claim.

Labels that look like holder labels but are not recognised are reported in the returned warnings
(never silently dropped); so are missing metrics and exporter-label situations.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.dcgm_attribution import attribute_samples
from connectors.kubernetes.dcgm_dra import DRA_COLUMNS
from connectors.kubernetes.dcgm_metric_choice import choose_samples
from connectors.kubernetes.dcgm_mig import with_mig_parents
from connectors.kubernetes.dcgm_names import (
    FALLBACK,
    GPU_LABELS,
    KNOWN_LABELS,
    PREFERRED,
    VARIANTS,
    Variant,
    canonical_uuid,
    first_label,
)
from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import (
    GPU_BUSY_DAILY_SCHEMA,
    GPU_UTILIZATION_SCHEMA,
    TS,
    conform,
    empty,
    keep_rejects,
    label,
)
from connectors.times import utc_naive

__all__ = ["FALLBACK", "KNOWN_LABELS", "PREFERRED", "dcgm_samples", "gpu_busy_seconds_daily",
           "gpu_utilization"]

HOLDER_COLUMNS = ("namespace", "pod", "container", "pod_uid", "hpc_job")
GPU_COLUMNS = ("gpu_uuid", "gpu_instance")
_US = 1_000_000
_DAY = timedelta(days=1)
_EPOCH = datetime(1970, 1, 1)

HOLDER_LIKE = re.compile(r"(?i)pod|namespace|container|hpc|slurm|job|user|uid|workload|owner")
EXPORTER_POD = re.compile(r"dcgm-exporter")

NO_UUID = "expected a UUID (or uuid) label, found none"
NOT_FINITE = "expected a finite number, found NaN or ±Inf"
OUT_OF_RANGE = {PREFERRED: "expected a ratio in 0..1, found a value outside it",
                FALLBACK: "expected a percentage in 0..100, found a value outside it"}
_SLACK = 1e-6  # float noise at the range ends (1.0000001) is clipped, not rejected


def _normalise(frame: pl.DataFrame, variant: Variant, warnings: list[str],
               rejects: list[pl.DataFrame]) -> pl.DataFrame:
    """Raw samples of one spelling -> ts, value (0..1), GPU columns, holder columns, metric."""
    if frame.height == 0:
        return pl.DataFrame()
    metric = variant.name
    for name in sorted(set(frame.columns) - KNOWN_LABELS - {"ts", "value", "_sid"}):
        if name.startswith("label_") or HOLDER_LIKE.search(name):
            values = frame[name].drop_nulls().unique().sort().head(3).to_list()
            warnings.append(
                f"{metric}: label {name!r} looks like a holder label but is not recognised; "
                f"not used for attribution (values e.g. {values})"
            )
    uuid = first_label(frame, GPU_LABELS["gpu_uuid"])
    low, high = -_SLACK * variant.scale, (1 + _SLACK) * variant.scale
    keep_rejects(rejects, frame.filter(uuid.is_null()), "dcgm", NO_UUID)
    keep_rejects(rejects, frame.filter(uuid.is_not_null() & ~pl.col("value").is_finite()),
                 "dcgm", NOT_FINITE)
    keep_rejects(rejects, frame.filter(uuid.is_not_null() & pl.col("value").is_finite()
                                       & ~pl.col("value").is_between(low, high)),
                 "dcgm", OUT_OF_RANGE[variant.family])
    frame = frame.filter(uuid.is_not_null() & pl.col("value").is_between(low, high))
    if frame.height == 0:
        return pl.DataFrame()
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
    # --use-old-namespace: pod_name/pod_namespace/container_name are the workload's; plain
    # namespace/pod can then only be the scrape's target labels (the exporter pod)
    old = label(frame, "pod_name").is_not_null()
    own = pl.col("_exporter") & ~use_exported

    def holder(new: str, former: str) -> pl.Expr:
        return (pl.when(use_exported).then(label(frame, f"exported_{new}"))
                .when(old).then(label(frame, former))
                .when(own).then(None)
                .otherwise(pl.col(new)))

    model = first_label(frame, GPU_LABELS["gpu_model"])
    out = frame.select(
        "ts",
        (pl.col("value").clip(0, variant.scale) / variant.scale).alias("value"),
        canonical_uuid(first_label(frame, GPU_LABELS["gpu_uuid"])).alias("gpu_uuid"),
        first_label(frame, GPU_LABELS["gpu_instance"]).alias("gpu_instance"),
        first_label(frame, GPU_LABELS["gpu_instance_profile"]).alias("gpu_instance_profile"),
        label(frame, "gpu").cast(pl.Int32, strict=False).alias("gpu_index"),
        first_label(frame, GPU_LABELS["node"]).alias("node"),
        model.alias("gpu_model"),
        holder("namespace", "pod_namespace").alias("namespace"),
        holder("pod", "pod_name").alias("pod"),
        holder("container", "container_name").alias("container"),
        label(frame, "pod_uid").alias("pod_uid"),
        label(frame, "hpc_job").alias("hpc_job"),
        *[label(frame, c).alias(c) for c in DRA_COLUMNS],  # the pod's claim and device
        pl.lit(variant.family).alias("metric"),
        pl.lit(metric).alias("variant"),
        pl.lit(variant.rank).alias("rank"),
        "job", "instance", "_sid",
    )
    is_self = pl.col("pod").is_not_null() & pl.col("pod").str.contains(EXPORTER_POD.pattern)
    self_pods = out.filter(is_self)
    if self_pods.height:
        names = self_pods["pod"].unique().sort().head(3).to_list()
        warnings.append(
            f"{metric}: unprefixed pod label names the exporter itself (e.g. {names}); "
            "scrape without honorLabels? those samples are treated as having no pod holder"
        )
        out = out.with_columns(
            [pl.when(is_self).then(None).otherwise(pl.col(c)).alias(c)
             for c in ("namespace", "pod", "container")]
        )
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
    names = frame.filter(pl.col("node").str.contains(EXPORTER_POD.pattern))[
        "node"].unique().sort().to_list()
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


def _whole_days(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    first = _EPOCH + _DAY * ((start - _EPOCH) // _DAY)
    last = _EPOCH + _DAY * ((end - _EPOCH) // _DAY)
    return first, last if last == end else last + _DAY


def dcgm_samples(
    source: MetricsSource, start: datetime, end: datetime, warnings: list[str],
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """The samples that stand for each GPU in ``[start, end)`` (one field per GPU and instant),
    decided on the whole UTC days around the window; unusable ones (of ``[start, end)``) go to
    `rejects`."""
    d0, d1 = _whole_days(start, end)
    found: list[str] = []
    local: list[pl.DataFrame] = []
    raws: dict[str, pl.DataFrame] = {}
    parts = []
    for variant in VARIANTS:
        raw = source.raw_samples(variant.name, d0, d1)
        if raw.height == 0:
            continue
        labels = [c for c in raw.columns if c not in ("ts", "value")]
        raw = raw.with_columns(_sid=pl.struct(labels).hash())
        raws[variant.name] = raw
        part = _normalise(raw, variant, found, local)
        if part.height:
            parts.append(_resolve_exporter_hostnames(source, part, d0, d1, found))
    samples = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()
    if samples.height:
        samples, rejected = choose_samples(samples, found)
        for rows, reason in rejected:
            for (variant,), part in rows.group_by(["variant"]):
                keep_rejects(local, raws[variant].join(part.select("_sid", "ts").unique(),
                                                       on=["_sid", "ts"], how="semi"),
                             "dcgm", reason)
        samples = samples.filter(pl.col("ts").is_between(start, end, closed="left"))
    warnings.extend(dict.fromkeys(w for w in found if w not in warnings))  # once each, in order
    if rejects is not None:
        rejects.extend(r.filter(pl.col("ts").is_between(start, end, closed="left"))
                       for r in local)
    if samples.height == 0:
        if not raws:
            warnings.append(f"neither {PREFERRED} nor {FALLBACK} has samples in [{start}, {end})")
        return pl.DataFrame()
    return samples


def gpu_utilization(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    grain: timedelta = timedelta(minutes=1),
    rejects: list[pl.DataFrame] | None = None,
    pods: pl.DataFrame | None = None,
    capacity: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Per-GPU busy fractions per `grain` bucket and holder (``GPU_UTILIZATION_SCHEMA``).

    One row per (GPU, bucket, holder): when a pod ends inside a minute that minute has one row
    for the pod and one for the idle GPU. ``busy_fraction`` is the mean of the samples in the
    row, ``samples`` their number (an exporter outage shows as missing rows / fewer samples, never
    as zeros). Buckets are aligned to multiples of `grain` since the epoch (UTC). With `pods`
    (``POD_GPU_ALLOCATION_SCHEMA``) and `capacity` (``NODE_GPU_CAPACITY_SCHEMA``) samples
    without holder labels are attributed where one pod holds the whole node
    (``dcgm_attribution``).
    """
    start, end = utc_naive(start), utc_naive(end)
    if grain <= timedelta(0):
        msg = f"expected a positive grain, found {grain}"
        raise ValueError(msg)
    warnings: list[str] = []
    samples = dcgm_samples(source, start, end, warnings, rejects)
    if samples.height == 0:
        return empty(GPU_UTILIZATION_SCHEMA), warnings
    dedup_key = [*GPU_COLUMNS, "ts", *HOLDER_COLUMNS]
    samples = samples.unique(subset=dedup_key, keep="first", maintain_order=True)
    samples = attribute_samples(samples, pods, capacity, warnings, grain=grain)
    samples = samples.unique(subset=dedup_key, keep="first", maintain_order=True)
    samples = samples.with_columns(bucket_start=pl.col("ts").dt.truncate(grain))
    key = [*GPU_COLUMNS, "bucket_start", *HOLDER_COLUMNS, "attribution"]
    rows = samples.group_by(key).agg(
        pl.col("node").drop_nulls().first(),
        pl.col("gpu_index").drop_nulls().first(),
        pl.col("gpu_model").drop_nulls().first(),
        pl.col("gpu_instance_profile").drop_nulls().first(),
        pl.col("value").mean().alias("busy_fraction"),
        pl.len().cast(pl.Int64).alias("samples"),
        pl.col("metric").max(),  # "DCGM_FI_PROF..." sorts after "DCGM_FI_DEV..."
        *[pl.col(c).drop_nulls().first() for c in DRA_COLUMNS if c in samples.columns],
    )
    out = conform(rows, GPU_UTILIZATION_SCHEMA)
    return (
        out.sort(["node", "gpu_index", "gpu_uuid", "gpu_instance", "bucket_start",
                  *HOLDER_COLUMNS, "attribution"], nulls_last=True),
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
    """Busy GPU-seconds per GPU (MIG instance) per UTC day (``GPU_BUSY_DAILY_SCHEMA``).

    Each scrape of a device (holders de-duplicated: the same device at the same timestamp counts
    once) stands for ``[ts, ts + w)`` with ``w = min(interval, next ts - ts)`` (the interval for
    the last sample), clipped to ``[start, end)`` and split at UTC midnight; a gap is not bridged,
    so an exporter outage contributes nothing. ``busy_seconds = sum(value x seconds)``; the
    interval is the median spacing of the device's samples unless given. MIG instances are rows
    of their own, plus one slice-weighted parent row per GPU-day (``dcgm_mig``).
    """
    start, end = utc_naive(start), utc_naive(end)
    warnings: list[str] = []
    samples = dcgm_samples(source, start, end, warnings, rejects)
    if samples.height == 0:
        return empty(GPU_BUSY_DAILY_SCHEMA), warnings
    per_ts = samples.group_by([*GPU_COLUMNS, "ts"]).agg(
        pl.col("value").max(), pl.col("node").drop_nulls().first(),
        pl.col("gpu_model").drop_nulls().first(),
        pl.col("gpu_instance_profile").drop_nulls().first(),
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

    carried = [*GPU_COLUMNS, "node", "gpu_instance_profile"]
    first = s.select(
        *carried, pl.col("ts").dt.date().alias("day"), "value", "interval",
        seconds(pl.col("ts"), pl.min_horizontal("seg_end", "midnight")).alias("secs"),
        pl.lit(1, dtype=pl.Int64).alias("n"),
    )
    spill = s.filter(pl.col("seg_end") > pl.col("midnight")).select(
        *carried, pl.col("midnight").dt.date().alias("day"), "value", "interval",
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
        pl.col("gpu_instance_profile").drop_nulls().first(),
    )
    daily = with_mig_parents(daily, per_ts, warnings)
    out = conform(daily, GPU_BUSY_DAILY_SCHEMA)
    return out.sort(["gpu_uuid", "gpu_instance", "day"], nulls_last=True), warnings
