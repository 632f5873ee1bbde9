"""Kueue controller metrics per time window: admissions/evictions, pending, admission wait, quota.

Counters (``kueue_admitted_workloads_total``, ``kueue_evicted_workloads_total``,
``kueue_quota_reserved_workloads_total``, ``kueue_preempted_workloads_total``) and the
``kueue_admission_wait_time_seconds`` histogram are turned into increases per window by
reset-aware differencing of raw samples, series by series (``counter_increases.py``). Samples
from ``lookback`` (default 1 h) before ``start`` are read for the baselines; a sample belongs to
the window containing its timestamp.

Replicas (``kueue_replicas.py``): every role is read (``replica_role`` is not a filter: some
0.16.x releases label the leader ``follower``), and one replica per instant is kept -- the
leader's where one is labelled -- never the sum of replicas. Labels are the series' own:
``exported_<label>`` where Prometheus renamed a clashing one (``honor_labels: false``); none of
the labels read here clash with a target's in any release of ``pkg/metrics/metrics.go`` (only
the LocalQueue metrics' ``namespace`` and MultiKueue's ``cluster`` do), so this is a safeguard.
Extra labels (``priority_class``, ``underlying_cause`` ...) are summed over.

Unusable samples are rejects (``rejects`` sink, component ``kueue``): NaN anywhere, ±Inf in a
counter or in the pending gauge, a bucket without a numeric ``le``. Optional metrics that are
absent (ClusterQueue quota gauges need ``metrics.enableClusterQueueResources``) give empty
frames and a warning. Kueue keeps raw resource names: ``resource="nvidia.com/gpu"`` (KSM:
``nvidia_com_gpu``); the GPU resource names are a parameter (a DRA logical name is one).

Gauges are also time-weighted (``value_seconds``, ``covered_seconds``; ``pending_seconds``: time
with > 0 pending), and the quota gauges' usage rows carry the GPU-seconds above nominal quota and
the lendable unused quota, computed scrape by scrape (docs/kubernetes.md "Kueue quota history").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.counter_increases import (  # also what callers import from here
    DEFAULT_WINDOW,
    counter_increases,
    reset_aware_increases,
    window_of,
)
from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.kueue_replicas import one_replica, series_label
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import (
    KUEUE_COUNTER_SCHEMA,
    KUEUE_PENDING_SCHEMA,
    KUEUE_QUEUE_RESOURCE_SCHEMA,
    KUEUE_WAIT_BUCKET_SCHEMA,
    KUEUE_WAIT_SUMMARY_SCHEMA,
    TS,
    conform,
    empty,
    keep_rejects,
)
from connectors.times import utc_naive

PRESENCE_METRIC = "kueue_pending_workloads"  # a gauge Kueue exports for every ClusterQueue
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_LOOKBACK = timedelta(hours=1)
WAIT_HISTOGRAM = "kueue_admission_wait_time_seconds"
TARGET = ("cluster", "job", "instance")
COMPONENT = "kueue"
# metric, label holding the ClusterQueue, reason label (or None)
COUNTERS = (
    ("kueue_admitted_workloads_total", "cluster_queue", None),
    ("kueue_evicted_workloads_total", "cluster_queue", "reason"),
    ("kueue_quota_reserved_workloads_total", "cluster_queue", None),
    ("kueue_preempted_workloads_total", "preempting_cluster_queue", "reason"),
)
QUEUE_RESOURCE_GAUGES = (
    ("usage", "kueue_cluster_queue_resource_usage"),
    ("reservation", "kueue_cluster_queue_resource_reservation"),
    ("nominal_quota", "kueue_cluster_queue_nominal_quota"),
    ("borrowing_limit", "kueue_cluster_queue_borrowing_limit"),
    ("lending_limit", "kueue_cluster_queue_lending_limit"),
)
_US = 1_000_000
NAN_REASON = "expected a number, found NaN"
INF_COUNTER_REASON = "expected a finite counter value, found ±Inf"
INF_GAUGE_REASON = "expected a finite number of workloads, found ±Inf"
LE_REASON = "expected a numeric le label on a histogram bucket, found none or text"


def _numbers(raw: pl.DataFrame, rejects: list[pl.DataFrame] | None, *,
             finite: bool, inf_reason: str = INF_COUNTER_REASON,
             keep: bool = False) -> pl.DataFrame:
    """NaN (and, with `finite`, ±Inf) samples of `raw` go to `rejects`; `raw` without them, or
    with them when `keep` (counters: ``reset_aware_increases`` skips them but needs to know the
    series was there, so the gap is no restart)."""
    if raw.height == 0:
        return raw
    nan = pl.col("value").is_nan()
    keep_rejects(rejects, raw.filter(nan), COMPONENT, NAN_REASON)
    bad = nan
    if finite:
        inf = pl.col("value").is_infinite()
        keep_rejects(rejects, raw.filter(inf), COMPONENT, inf_reason)
        bad = nan | inf
    return raw if keep else raw.filter(~bad)


def _targets(frame: pl.DataFrame) -> pl.DataFrame:
    """Scrape times of each target (replica) in `frame`, for the counters' restart rules."""
    return frame.select("ts", *[c for c in TARGET if c in frame.columns])


# --------------------------------------------------------------------------- readers


def _presence(source: MetricsSource, q0: datetime, end: datetime) -> pl.DataFrame:
    return source.raw_samples(PRESENCE_METRIC, q0, end)


def _family(presence: pl.DataFrame, raw: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([_targets(presence), _targets(raw)], how="diagonal_relaxed")


def kueue_workload_counters(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    lookback: timedelta = DEFAULT_LOOKBACK,
    warnings: list[str] | None = None,
    presence: pl.DataFrame | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Admitted / evicted / quota-reserved / preempted increases per window
    (``KUEUE_COUNTER_SCHEMA``; ``cluster_queue`` is the preempting queue for preemptions)."""
    start, end = utc_naive(start), utc_naive(end)
    q0 = start - lookback
    if presence is None:
        presence = _presence(source, q0, end)
    parts = []
    for metric, queue_label, reason_label in COUNTERS:
        raw = source.raw_samples(metric, q0, end)
        if raw.height == 0:
            _warn(warnings, f"{metric}: no samples in [{q0}, {end})")
            continue
        raw = _numbers(raw, rejects, finite=True, keep=True)
        family = _family(presence, raw)
        raw = raw.with_columns(
            series_label(raw, queue_label).alias("_queue"),
            (series_label(raw, reason_label) if reason_label
             else pl.lit(None, dtype=pl.String)).alias("_reason"),
        )
        inc = counter_increases(raw, start, end, by=["_queue", "_reason"], window=window,
                                presence=family, metric=metric, notes=warnings)
        parts.append(inc.rename({"_queue": "cluster_queue", "_reason": "reason"})
                     .with_columns(metric=pl.lit(metric)))
    if not parts:
        return empty(KUEUE_COUNTER_SCHEMA)
    out = conform(pl.concat(parts), KUEUE_COUNTER_SCHEMA)
    return out.sort(["metric", "window_start", "cluster_queue", "reason"], nulls_last=True)


def kueue_admission_wait(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    lookback: timedelta = DEFAULT_LOOKBACK,
    histogram: str = WAIT_HISTOGRAM,
    warnings: list[str] | None = None,
    presence: pl.DataFrame | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Admission-wait histogram per window: (buckets ``KUEUE_WAIT_BUCKET_SCHEMA``,
    summary ``KUEUE_WAIT_SUMMARY_SCHEMA``). ``le`` is compared as a number, so ``"1"`` (3.x)
    and ``"1.0"`` (2.x stores it as exposed) are the same bucket."""
    start, end = utc_naive(start), utc_naive(end)
    q0 = start - lookback
    if presence is None:
        presence = _presence(source, q0, end)
    buckets = source.raw_samples(f"{histogram}_bucket", q0, end)
    count = source.raw_samples(f"{histogram}_count", q0, end)
    total = source.raw_samples(f"{histogram}_sum", q0, end)
    if buckets.height == 0 and count.height == 0:
        _warn(warnings, f"{histogram}: no samples in [{q0}, {end})")
        return empty(KUEUE_WAIT_BUCKET_SCHEMA), empty(KUEUE_WAIT_SUMMARY_SCHEMA)

    bucket_frame = empty(KUEUE_WAIT_BUCKET_SCHEMA)
    buckets = _numbers(buckets, rejects, finite=True, keep=True)
    if buckets.height:
        buckets = buckets.with_columns(
            _le=series_label(buckets, "le").cast(pl.Float64, strict=False),
            _queue=series_label(buckets, "cluster_queue"),
        )
        bad = pl.col("_le").is_null() | pl.col("_le").is_nan()
        keep_rejects(rejects, buckets.filter(bad).drop("_le", "_queue"), COMPONENT, LE_REASON)
        buckets = buckets.filter(~bad)
    if buckets.height:
        # identity of a bucket series is its raw labels; grouped by the numeric bound below
        inc = reset_aware_increases(buckets, presence=_family(presence, buckets))
        inc = one_replica(inc, ["_queue", "_le"], counter=True, metric=f"{histogram}_bucket",
                          notes=warnings)
        inc = inc.filter((pl.col("ts") >= start) & (pl.col("ts") < end))
        if inc.height:
            inc = inc.with_columns(*window_of(start, end, window))
            cum = inc.group_by(["window_start", "window_end", "_queue", "_le"]).agg(
                pl.col("increase").sum().alias("cumulative_count")
            ).sort(["window_start", "_queue", "_le"])
            cum = cum.with_columns(
                bucket_count=pl.col("cumulative_count")
                - pl.col("cumulative_count").shift(1).over(["window_start", "_queue"])
                .fill_null(0.0)
            )
            bucket_frame = conform(
                cum.rename({"_queue": "cluster_queue", "_le": "le"}), KUEUE_WAIT_BUCKET_SCHEMA
            )

    summary = empty(KUEUE_WAIT_SUMMARY_SCHEMA)
    count = _numbers(count, rejects, finite=True, keep=True)
    total = _numbers(total, rejects, finite=True, keep=True)
    if count.height:
        c = counter_increases(
            count.with_columns(_queue=series_label(count, "cluster_queue")), start, end,
            by=["_queue"], window=window, presence=_family(presence, count),
            metric=f"{histogram}_count", notes=warnings,
        ).select("_queue", "window_start", "window_end", pl.col("increase").alias("count"))
        if total.height:
            s = counter_increases(
                total.with_columns(_queue=series_label(total, "cluster_queue")), start, end,
                by=["_queue"], window=window, presence=_family(presence, total),
                metric=f"{histogram}_sum", notes=warnings,
            ).select("_queue", "window_start", "window_end",
                     pl.col("increase").alias("sum_seconds"))
            c = c.join(s, on=["_queue", "window_start", "window_end"], how="left",
                       nulls_equal=True)
        else:
            _warn(warnings, f"{histogram}_sum: no samples; mean_seconds is null")
            c = c.with_columns(sum_seconds=pl.lit(None, dtype=pl.Float64))
        c = c.with_columns(
            mean_seconds=pl.when(pl.col("count") > 0)
            .then(pl.col("sum_seconds") / pl.col("count"))
            .otherwise(None)
        )
        summary = conform(c.rename({"_queue": "cluster_queue"}), KUEUE_WAIT_SUMMARY_SCHEMA)
    return (
        bucket_frame.sort(["window_start", "cluster_queue", "le"], nulls_last=True),
        summary.sort(["window_start", "cluster_queue"], nulls_last=True),
    )


def _gauge_windows(
    frame: pl.DataFrame, by: list[str], start: datetime, end: datetime, window: timedelta,
    *, metric: str = "", notes: list[str] | None = None,
) -> pl.DataFrame:
    """Per window and `by`: mean, max, last, workload_seconds (gap-aware), samples.

    One replica per instant (``one_replica``); series of that replica differing only in labels
    outside `by` (extra Kueue labels) are summed per timestamp.
    """
    frame = frame.with_columns([series_label(frame, c).alias(c) for c in by])
    frame = one_replica(frame, by, counter=False, metric=metric, notes=notes)
    per_ts = frame.group_by([*by, "ts"]).agg(pl.col("value").sum())
    key = by
    intervals = infer_intervals(per_ts, key)
    s = (
        per_ts.join(intervals, on=key, how="left", nulls_equal=True)
        .sort([*key, "ts"])
        .with_columns(next_ts=pl.col("ts").shift(-1).over(key))
        .with_columns(
            secs=(
                pl.min_horizontal(
                    pl.col("interval"),
                    (pl.col("next_ts") - pl.col("ts")).fill_null(pl.col("interval")),
                    pl.lit(end).cast(TS) - pl.col("ts"),
                ).dt.total_microseconds() / _US
            )
        )
        .filter((pl.col("ts") >= start) & (pl.col("ts") < end))
    )
    if s.height == 0:
        return pl.DataFrame()
    s = s.with_columns(*window_of(start, end, window))
    return s.group_by([*by, "window_start", "window_end"]).agg(
        pl.col("value").mean().alias("mean"),
        pl.col("value").max().alias("max"),
        pl.col("value").sort_by("ts").last().alias("last"),
        (pl.col("value") * pl.col("secs")).sum().alias("workload_seconds"),
        pl.len().cast(pl.Int64).alias("samples"),
        pl.col("secs").sum().alias("covered_seconds"),
        pl.col("secs").filter(pl.col("value") > 0).sum().alias("positive_seconds"),
    )


def kueue_pending_workloads(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    warnings: list[str] | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """``kueue_pending_workloads`` per window, ClusterQueue and status
    (``KUEUE_PENDING_SCHEMA``)."""
    start, end = utc_naive(start), utc_naive(end)
    raw = source.raw_samples(PRESENCE_METRIC, start, end)
    if raw.height == 0:
        _warn(warnings, f"{PRESENCE_METRIC}: no samples in [{start}, {end})")
        return empty(KUEUE_PENDING_SCHEMA)
    raw = _numbers(raw, rejects, finite=True, inf_reason=INF_GAUGE_REASON)
    out = _gauge_windows(raw, ["cluster_queue", "status"], start, end, window,
                         metric=PRESENCE_METRIC, notes=warnings)
    if out.height == 0:
        return empty(KUEUE_PENDING_SCHEMA)
    out = out.rename({"positive_seconds": "pending_seconds"})
    return conform(out, KUEUE_PENDING_SCHEMA).sort(
        ["window_start", "cluster_queue", "status"], nulls_last=True)


def _promql_any(values: Sequence[str]) -> str:
    """A PromQL regex string (escaped for the string literal) matching exactly `values`."""
    return "|".join(re.escape(v) for v in values).replace("\\", "\\\\")


def kueue_cluster_queue_resources(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    resource: str | Sequence[str] = GPU_RESOURCE,
    warnings: list[str] | None = None,
    rejects: list[pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """ClusterQueue usage / reservation / nominal quota / borrowing and lending limits for the
    GPU `resource` name(s) per window (``KUEUE_QUEUE_RESOURCE_SCHEMA``). Quota bookkeeping of
    admitted workloads' requests, not device utilization. ±Inf is kept (an unset limit)."""
    start, end = utc_naive(start), utc_naive(end)
    resources = (resource,) if isinstance(resource, str) else tuple(resource)
    wanted = _promql_any(resources)
    by = ["cohort", "cluster_queue", "flavor", "resource"]
    parts = []
    kept: dict[str, pl.DataFrame] = {}
    for short, metric in QUEUE_RESOURCE_GAUGES:
        # the resource may sit in exported_resource (honor_labels: false): one read for each
        reads = [source.raw_samples(f'{metric}{{{key}=~"{wanted}"}}', start, end)
                 for key in ("resource", "exported_resource")]
        mine = pl.concat([r for r in reads if r.height], how="diagonal_relaxed").unique() \
            if any(r.height for r in reads) else reads[0]
        mine = _numbers(mine, rejects, finite=False)
        if mine.height == 0:
            _warn(warnings, f"{metric}{{resource={_shown(resources)}}}: no samples in "
                            f"[{start}, {end}) (needs metrics.enableClusterQueueResources)")
            continue
        kept[short] = mine
        out = _gauge_windows(mine, by, start, end, window, metric=metric, notes=warnings)
        if out.height:
            parts.append(out.with_columns(metric=pl.lit(short)))
    if not parts:
        return empty(KUEUE_QUEUE_RESOURCE_SCHEMA)
    out = pl.concat(parts, how="diagonal_relaxed").rename({"workload_seconds": "value_seconds"})
    out = _with_quota_balance(out, kept, by, start, end, window)
    out = conform(out, KUEUE_QUEUE_RESOURCE_SCHEMA)
    return out.sort(["metric", "window_start", "cluster_queue", "flavor"], nulls_last=True)


def _with_quota_balance(
    out: pl.DataFrame, kept: dict[str, pl.DataFrame], by: list[str], start: datetime,
    end: datetime, window: timedelta,
) -> pl.DataFrame:
    """`out` with ``above_nominal_seconds`` and ``lendable_seconds`` on its usage rows.

    Both are computed per scrape, from the usage sample and the nominal quota (and lending
    limit) sample of the same scrape of the same series, before time-weighting: an hour that
    borrows for 30 min and idles for 30 min nets out in hourly means, not here. A lending limit
    of ±Inf (or none) means unset: all unused nominal quota is lendable."""
    usage, nominal = kept.get("usage"), kept.get("nominal_quota")
    if usage is None or nominal is None:
        return out
    key = sorted((set(usage.columns) & set(nominal.columns)) - {"value", "__name__"})
    both = usage.join(nominal.select(*key, pl.col("value").alias("_nominal")), on=key,
                      how="inner", nulls_equal=True)
    lending = kept.get("lending_limit")
    if lending is not None and set(key) <= set(lending.columns):
        both = both.join(lending.select(*key, pl.col("value").alias("_lending")), on=key,
                         how="left", nulls_equal=True)
    else:
        both = both.with_columns(_lending=pl.lit(None, dtype=pl.Float64))
    if both.height == 0:
        return out
    unused = pl.max_horizontal(pl.col("_nominal") - pl.col("value"), pl.lit(0.0))
    limit = pl.when(pl.col("_lending").is_finite()).then(pl.col("_lending")).otherwise(None)
    derived = {
        "above_nominal_seconds": pl.max_horizontal(pl.col("value") - pl.col("_nominal"),
                                                   pl.lit(0.0)),
        "lendable_seconds": pl.min_horizontal(unused, limit.fill_null(unused)),
    }
    for name, expr in derived.items():
        raw = both.with_columns(value=expr).drop("_nominal", "_lending")
        windows = _gauge_windows(raw, by, start, end, window)  # usage already noted
        if windows.height == 0:
            continue
        out = out.join(
            windows.select(*by, "window_start", pl.col("workload_seconds").alias(name))
            .with_columns(metric=pl.lit("usage")),
            on=["metric", *by, "window_start"], how="left", nulls_equal=True)
    return out


def _shown(resources: tuple[str, ...]) -> str:
    return repr(resources[0]) if len(resources) == 1 else repr(list(resources))


@dataclass
class KueueMetrics:
    counters: pl.DataFrame
    pending: pl.DataFrame
    wait_buckets: pl.DataFrame
    wait_summary: pl.DataFrame
    queue_resources: pl.DataFrame
    warnings: list[str] = field(default_factory=list)


def read_kueue_metrics(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    lookback: timedelta = DEFAULT_LOOKBACK,
    resource: str | Sequence[str] = GPU_RESOURCE,
    rejects: list[pl.DataFrame] | None = None,
) -> KueueMetrics:
    """Everything above for one period, sharing one read of the presence gauge."""
    start, end = utc_naive(start), utc_naive(end)
    warnings: list[str] = []
    presence = _presence(source, start - lookback, end)
    counters = kueue_workload_counters(source, start, end, window=window, lookback=lookback,
                                       warnings=warnings, presence=presence, rejects=rejects)
    buckets, summary = kueue_admission_wait(source, start, end, window=window,
                                            lookback=lookback, warnings=warnings,
                                            presence=presence, rejects=rejects)
    return KueueMetrics(
        counters=counters,
        pending=kueue_pending_workloads(source, start, end, window=window, warnings=warnings,
                                        rejects=rejects),
        wait_buckets=buckets,
        wait_summary=summary,
        queue_resources=kueue_cluster_queue_resources(source, start, end, window=window,
                                                      resource=resource, warnings=warnings,
                                                      rejects=rejects),
        warnings=list(dict.fromkeys(warnings)),
    )


def _warn(warnings: list[str] | None, text: str) -> None:
    if warnings is not None:
        warnings.append(text)
