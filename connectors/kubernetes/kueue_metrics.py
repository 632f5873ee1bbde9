"""Kueue controller metrics per time window: admissions/evictions, pending, admission wait, quota.

Counters (``kueue_admitted_workloads_total``, ``kueue_evicted_workloads_total``,
``kueue_quota_reserved_workloads_total``, ``kueue_preempted_workloads_total``) and the
``kueue_admission_wait_time_seconds`` histogram are turned into increases per window by
reset-aware differencing of raw samples, series by series, in time order:

* value >= previous value: increase = value - previous;
* value < previous value (restart of the controller): increase = value (counted since the reset);
* the series was absent at scrapes where the same target (``job``/``instance``) still answered --
  a client_golang vector child only exists after its first increment, so a restarted controller
  brings a counter back only when it is incremented again -- then it restarted too: increase =
  value, even if the new value is not lower than the old one;
* first sample of a series: 0 (its earlier history is unknown), unless the same job was already
  observed earlier in the read (then the series was born in between and counts from 0).

Samples from ``lookback`` (default 1 h) before ``start`` are read for the baselines; a sample
belongs to the window containing its timestamp. Followers of a leader-elected Kueue
(``replica_role="follower"``) are excluded; extra labels (``priority_class``,
``underlying_cause``, ``replica_role`` ...) are summed over. Optional metrics that are absent
(ClusterQueue quota gauges need ``metrics.enableClusterQueueResources``) give empty frames and a
warning. Kueue keeps raw resource names: ``resource="nvidia.com/gpu"`` (KSM: ``nvidia_com_gpu``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.prometheus import MetricsSource, utc_naive
from connectors.kubernetes.records import (
    KUEUE_COUNTER_SCHEMA,
    KUEUE_PENDING_SCHEMA,
    KUEUE_QUEUE_RESOURCE_SCHEMA,
    KUEUE_WAIT_BUCKET_SCHEMA,
    KUEUE_WAIT_SUMMARY_SCHEMA,
    TS,
    conform,
    empty,
    label,
)

NOT_FOLLOWER = '{replica_role!="follower"}'
PRESENCE_METRIC = "kueue_pending_workloads"  # a gauge Kueue exports for every ClusterQueue
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_WINDOW = timedelta(hours=1)
DEFAULT_LOOKBACK = timedelta(hours=1)
WAIT_HISTOGRAM = "kueue_admission_wait_time_seconds"
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


def _series_ids(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    key = [c for c in frame.columns if c not in ("ts", "value")]
    ids = frame.select(key).unique(maintain_order=True).with_row_index("sid")
    return frame.join(ids, on=key, how="left", nulls_equal=True), key


def _group_cols(frame: pl.DataFrame, presence: pl.DataFrame, wanted: tuple[str, ...]) -> list[str]:
    return [c for c in wanted if c in frame.columns and c in presence.columns]


def window_of(start: datetime, end: datetime, window: timedelta) -> list[pl.Expr]:
    """Expressions adding window_start / window_end for column ``ts`` (windows from `start`)."""
    w = pl.lit(window).cast(pl.Duration("us"))
    offset = (pl.col("ts") - pl.lit(start).cast(TS)).dt.total_microseconds()
    n = offset // (window // timedelta(microseconds=1))
    window_start = pl.lit(start).cast(TS) + w * n
    return [
        window_start.alias("window_start"),
        pl.min_horizontal(window_start + w, pl.lit(end).cast(TS)).alias("window_end"),
    ]


def reset_aware_increases(
    samples: pl.DataFrame,
    *,
    presence: pl.DataFrame | None = None,
    scrape_interval: timedelta | None = None,
) -> pl.DataFrame:
    """Per-sample increases of counter series: samples + columns ``increase`` and ``reset``.

    `presence`: raw samples (any metric) of the same scrape targets, used to tell a counter that
    vanished while its target was scraped (restart: reset) from a target that was down, and to
    recognise series born during the read. None: only drops count as resets and every first
    sample is a baseline.
    """
    frame = samples.filter(~pl.col("value").is_nan())
    if frame.height == 0:
        return frame.with_columns(increase=pl.lit(0.0), reset=pl.lit(False))
    frame, _key = _series_ids(frame)
    if scrape_interval is None:
        intervals = infer_intervals(frame, ["sid"])
    else:
        intervals = frame.select("sid").unique().with_columns(
            interval=pl.lit(scrape_interval).cast(pl.Duration("us"))
        )
    frame = (
        frame.join(intervals, on="sid", how="left")
        .sort(["sid", "ts"])
        .with_columns(
            prev_ts=pl.col("ts").shift(1).over("sid"),
            prev_value=pl.col("value").shift(1).over("sid"),
        )
        .with_row_index("row")
    )
    forced = pl.Series("row", [], dtype=pl.UInt32)
    born = pl.Series("row", [], dtype=pl.UInt32)
    if presence is not None and presence.height:
        forced = _vanished_while_scraped(frame, presence)
        born = _born_in_read(frame, presence)
    frame = frame.with_columns(
        forced=pl.col("row").is_in(forced.implode()),
        born=pl.col("row").is_in(born.implode()),
    )
    first = pl.col("prev_value").is_null()
    reset = ~first & ((pl.col("value") < pl.col("prev_value")) | pl.col("forced"))
    increase = (
        pl.when(first & pl.col("born")).then(pl.col("value"))
        .when(first).then(0.0)
        .when(reset).then(pl.col("value"))
        .otherwise(pl.col("value") - pl.col("prev_value"))
    )
    frame = frame.with_columns(increase=increase, reset=reset)
    return frame.drop("row", "sid", "interval", "prev_ts", "prev_value", "forced", "born")


def _presence_ts(presence: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    return presence.select(
        [pl.col(c).fill_null("") for c in group] + [pl.col("ts").alias("p_ts")]
    ).unique()


def _vanished_while_scraped(frame: pl.DataFrame, presence: pl.DataFrame) -> pl.Series:
    """Rows whose series was absent at a scrape of its target between it and its predecessor."""
    group = _group_cols(frame, presence, ("cluster", "job", "instance"))
    half = pl.col("interval") / 2
    cand = (
        frame.filter(pl.col("prev_ts").is_not_null()
                     & (pl.col("ts") - pl.col("prev_ts") > pl.col("interval") * 3 / 2))
        .select(
            "row",
            *[pl.col(c).fill_null("") for c in group],
            (pl.col("prev_ts") + half + pl.duration(microseconds=1)).alias("lo"),
            (pl.col("ts") - half).alias("hi"),
        )
        .sort("lo")
    )
    if cand.height == 0:
        return pl.Series("row", [], dtype=pl.UInt32)
    pres = _presence_ts(presence, group).sort("p_ts")
    hit = cand.join_asof(pres, left_on="lo", right_on="p_ts", by=group or None,
                         strategy="forward", check_sortedness=False)
    return hit.filter(pl.col("p_ts").is_not_null() & (pl.col("p_ts") < pl.col("hi")))["row"]


def _born_in_read(frame: pl.DataFrame, presence: pl.DataFrame) -> pl.Series:
    """First rows of series whose job was already scraped (without them) earlier in the read."""
    group = _group_cols(frame, presence, ("cluster", "job"))
    pres = _presence_ts(presence, group)
    first_seen = (
        pres.group_by(group).agg(pl.col("p_ts").min()) if group
        else pres.select(pl.col("p_ts").min())
    )
    firsts = frame.filter(pl.col("prev_ts").is_null()).with_columns(
        [pl.col(c).fill_null("") for c in group]
    )
    joined = (
        firsts.join(first_seen, on=group, how="left") if group
        else firsts.join(first_seen, how="cross")
    )
    return joined.filter(
        pl.col("p_ts").is_not_null() & (pl.col("p_ts") < pl.col("ts") - pl.col("interval") / 2)
    )["row"]


def counter_increases(
    samples: pl.DataFrame,
    start: datetime,
    end: datetime,
    *,
    by: list[str],
    window: timedelta = DEFAULT_WINDOW,
    presence: pl.DataFrame | None = None,
    scrape_interval: timedelta | None = None,
) -> pl.DataFrame:
    """Sum of reset-aware increases per window and `by` labels (columns: by, window_start,
    window_end, increase, resets, samples). `samples` may start before `start` (baselines)."""
    start, end = utc_naive(start), utc_naive(end)
    schema = {**dict.fromkeys(by, pl.String), "window_start": TS, "window_end": TS,
              "increase": pl.Float64, "resets": pl.Int64, "samples": pl.Int64}
    if samples.height == 0:
        return pl.DataFrame(schema=schema)
    per_sample = reset_aware_increases(samples, presence=presence,
                                       scrape_interval=scrape_interval)
    inside = per_sample.filter((pl.col("ts") >= start) & (pl.col("ts") < end))
    if inside.height == 0:
        return pl.DataFrame(schema=schema)
    inside = inside.with_columns(
        *[label(inside, c).alias(c) for c in by], *window_of(start, end, window)
    )
    out = inside.group_by([*by, "window_start", "window_end"]).agg(
        pl.col("increase").sum(),
        pl.col("reset").sum().cast(pl.Int64).alias("resets"),
        pl.len().cast(pl.Int64).alias("samples"),
    )
    return conform(out, schema).sort(["window_start", *by], nulls_last=True)


# --------------------------------------------------------------------------- readers


def _presence(source: MetricsSource, q0: datetime, end: datetime) -> pl.DataFrame:
    return source.raw_samples(PRESENCE_METRIC + NOT_FOLLOWER, q0, end)


def kueue_workload_counters(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    lookback: timedelta = DEFAULT_LOOKBACK,
    warnings: list[str] | None = None,
    presence: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Admitted / evicted / quota-reserved / preempted increases per window
    (``KUEUE_COUNTER_SCHEMA``; ``cluster_queue`` is the preempting queue for preemptions)."""
    start, end = utc_naive(start), utc_naive(end)
    q0 = start - lookback
    if presence is None:
        presence = _presence(source, q0, end)
    parts = []
    for metric, queue_label, reason_label in COUNTERS:
        raw = source.raw_samples(metric + NOT_FOLLOWER, q0, end)
        if raw.height == 0:
            _warn(warnings, f"{metric}: no samples in [{q0}, {end})")
            continue
        family = pl.concat([presence.select("ts", *[c for c in ("cluster", "job", "instance")
                                                   if c in presence.columns]),
                            raw.select("ts", *[c for c in ("cluster", "job", "instance")
                                               if c in raw.columns])], how="diagonal_relaxed")
        raw = raw.with_columns(
            label(raw, queue_label).alias("_queue"),
            (label(raw, reason_label) if reason_label else pl.lit(None, dtype=pl.String))
            .alias("_reason"),
        )
        inc = counter_increases(raw, start, end, by=["_queue", "_reason"], window=window,
                                presence=family)
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
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Admission-wait histogram per window: (buckets ``KUEUE_WAIT_BUCKET_SCHEMA``,
    summary ``KUEUE_WAIT_SUMMARY_SCHEMA``). ``le`` is compared as a number, so ``"1"`` (3.x)
    and ``"1.0"`` (2.x stores it as exposed) are the same bucket."""
    start, end = utc_naive(start), utc_naive(end)
    q0 = start - lookback
    if presence is None:
        presence = _presence(source, q0, end)
    buckets = source.raw_samples(f"{histogram}_bucket{NOT_FOLLOWER}", q0, end)
    count = source.raw_samples(f"{histogram}_count{NOT_FOLLOWER}", q0, end)
    total = source.raw_samples(f"{histogram}_sum{NOT_FOLLOWER}", q0, end)
    if buckets.height == 0 and count.height == 0:
        _warn(warnings, f"{histogram}: no samples in [{q0}, {end})")
        return empty(KUEUE_WAIT_BUCKET_SCHEMA), empty(KUEUE_WAIT_SUMMARY_SCHEMA)

    def family(raw: pl.DataFrame) -> pl.DataFrame:
        cols = ("cluster", "job", "instance")
        return pl.concat(
            [presence.select("ts", *[c for c in cols if c in presence.columns]),
             raw.select("ts", *[c for c in cols if c in raw.columns])],
            how="diagonal_relaxed",
        )

    bucket_frame = empty(KUEUE_WAIT_BUCKET_SCHEMA)
    if buckets.height:
        # identity of a bucket series is its raw labels; grouped by the numeric bound below
        inc = reset_aware_increases(buckets, presence=family(buckets))
        inc = inc.with_columns(
            _le=label(inc, "le").cast(pl.Float64, strict=False),
            _queue=label(inc, "cluster_queue"),
        ).filter((pl.col("ts") >= start) & (pl.col("ts") < end) & pl.col("_le").is_not_null())
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
    if count.height:
        c = counter_increases(
            count.with_columns(_queue=label(count, "cluster_queue")), start, end,
            by=["_queue"], window=window, presence=family(count),
        ).select("_queue", "window_start", "window_end", pl.col("increase").alias("count"))
        if total.height:
            s = counter_increases(
                total.with_columns(_queue=label(total, "cluster_queue")), start, end,
                by=["_queue"], window=window, presence=family(total),
            ).select("_queue", "window_start", "window_end",
                     pl.col("increase").alias("sum_seconds"))
            c = c.join(s, on=["_queue", "window_start", "window_end"], how="left",
                       nulls_equal=True)
        else:
            _warn(warnings, f"{histogram}_sum: no samples; mean_seconds is null")
        c = c.with_columns(
            mean_seconds=pl.when(pl.col("count") > 0)
            .then(label(c, "sum_seconds") / pl.col("count"))
            .otherwise(None)
        )
        summary = conform(c.rename({"_queue": "cluster_queue"}), KUEUE_WAIT_SUMMARY_SCHEMA)
    return (
        bucket_frame.sort(["window_start", "cluster_queue", "le"], nulls_last=True),
        summary.sort(["window_start", "cluster_queue"], nulls_last=True),
    )


def _gauge_windows(
    frame: pl.DataFrame, by: list[str], start: datetime, end: datetime, window: timedelta
) -> pl.DataFrame:
    """Per window and `by`: mean, max, last, workload_seconds (gap-aware), samples.

    Series differing only in labels outside `by` (extra Kueue labels) are summed per timestamp.
    """
    frame = frame.filter(~pl.col("value").is_nan()).with_columns(
        [label(frame, c).alias(c) for c in by]
    )
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
    )


def kueue_pending_workloads(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    warnings: list[str] | None = None,
) -> pl.DataFrame:
    """``kueue_pending_workloads`` per window, ClusterQueue and status
    (``KUEUE_PENDING_SCHEMA``)."""
    start, end = utc_naive(start), utc_naive(end)
    raw = source.raw_samples(PRESENCE_METRIC + NOT_FOLLOWER, start, end)
    if raw.height == 0:
        _warn(warnings, f"{PRESENCE_METRIC}: no samples in [{start}, {end})")
        return empty(KUEUE_PENDING_SCHEMA)
    out = _gauge_windows(raw, ["cluster_queue", "status"], start, end, window)
    if out.height == 0:
        return empty(KUEUE_PENDING_SCHEMA)
    return conform(out, KUEUE_PENDING_SCHEMA).sort(
        ["window_start", "cluster_queue", "status"], nulls_last=True)


def kueue_cluster_queue_resources(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    window: timedelta = DEFAULT_WINDOW,
    resource: str = GPU_RESOURCE,
    warnings: list[str] | None = None,
) -> pl.DataFrame:
    """ClusterQueue usage / reservation / nominal quota / borrowing and lending limits for
    `resource` per window (``KUEUE_QUEUE_RESOURCE_SCHEMA``). Quota bookkeeping of admitted
    workloads' requests, not device utilization."""
    start, end = utc_naive(start), utc_naive(end)
    parts = []
    by = ["cohort", "cluster_queue", "flavor", "resource"]
    for short, metric in QUEUE_RESOURCE_GAUGES:
        raw = source.raw_samples(
            f'{metric}{{resource="{resource}",replica_role!="follower"}}', start, end
        )
        if raw.height == 0:
            _warn(warnings, f"{metric}{{resource={resource!r}}}: no samples in [{start}, {end}) "
                            "(needs metrics.enableClusterQueueResources)")
            continue
        out = _gauge_windows(raw, by, start, end, window)
        if out.height:
            parts.append(out.with_columns(metric=pl.lit(short)))
    if not parts:
        return empty(KUEUE_QUEUE_RESOURCE_SCHEMA)
    out = conform(pl.concat(parts, how="diagonal_relaxed"), KUEUE_QUEUE_RESOURCE_SCHEMA)
    return out.sort(["metric", "window_start", "cluster_queue", "flavor"], nulls_last=True)


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
    resource: str = GPU_RESOURCE,
    rejects: list[pl.DataFrame] | None = None,
) -> KueueMetrics:
    """Everything above for one period, sharing one read of the presence gauge."""
    start, end = utc_naive(start), utc_naive(end)
    warnings: list[str] = []
    presence = _presence(source, start - lookback, end)
    counters = kueue_workload_counters(source, start, end, window=window, lookback=lookback,
                                       warnings=warnings, presence=presence)
    buckets, summary = kueue_admission_wait(source, start, end, window=window,
                                            lookback=lookback, warnings=warnings,
                                            presence=presence)
    return KueueMetrics(
        counters=counters,
        pending=kueue_pending_workloads(source, start, end, window=window, warnings=warnings),
        wait_buckets=buckets,
        wait_summary=summary,
        queue_resources=kueue_cluster_queue_resources(source, start, end, window=window,
                                                      resource=resource, warnings=warnings),
        warnings=warnings,
    )


def _warn(warnings: list[str] | None, text: str) -> None:
    if warnings is not None:
        warnings.append(text)
