"""Reset-aware increases of Prometheus counters, from raw samples, series by series.

Moved out of ``kueue_metrics.py`` (which re-exports it). Per series, in time order:

* value >= previous value: increase = value - previous;
* value < previous value (restart of the exporting process): increase = value (counted since
  the reset);
* the series was absent at scrapes where the same target (``job``/``instance``) still answered
  -- a client_golang vector child only exists after its first increment, so a restarted
  process brings a counter back only when it is incremented again -- then it restarted too:
  increase = value, even if the new value is not lower than the old one;
* first sample of a series: 0 (its earlier history is unknown), unless the same job was already
  observed earlier in the read (then the series was born in between and counts from 0).

Each replica of a highly available Kueue is its own target, so these rules run on each
replica's own series; ``counter_increases`` then keeps one replica per instant
(``kueue_replicas.one_replica``), so a counter is never the sum of replicas.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.kueue_replicas import one_replica
from connectors.kubernetes.records import TS, conform, label
from connectors.times import utc_naive

DEFAULT_WINDOW = timedelta(hours=1)


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
    sample is a baseline. NaN and ±Inf samples give no increase (the callers keep them as
    rejects) but show that the series was there: no reset is forced across them.
    """
    if samples.height == 0:
        return samples.with_columns(increase=pl.lit(0.0), reset=pl.lit(False))
    every, _key = _series_ids(samples)
    usable = pl.col("value").is_finite()
    unusable = every.filter(~usable).select("sid", pl.col("ts").alias("u_ts")).sort("u_ts")
    frame = every.filter(usable)
    if frame.height == 0:
        return frame.drop("sid").with_columns(increase=pl.lit(0.0), reset=pl.lit(False))
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
        if unusable.height and forced.len():
            forced = forced.filter(~forced.is_in(_unusable_between(frame, unusable).implode()))
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


def _unusable_between(frame: pl.DataFrame, unusable: pl.DataFrame) -> pl.Series:
    """Rows with a NaN/±Inf sample of their own series between them and their predecessor."""
    cand = frame.filter(pl.col("prev_ts").is_not_null()).select(
        "row", "sid", "ts", (pl.col("prev_ts") + pl.duration(microseconds=1)).alias("after")
    ).sort("after")
    hit = cand.join_asof(unusable, left_on="after", right_on="u_ts", by="sid",
                         strategy="forward", check_sortedness=False)
    return hit.filter(pl.col("u_ts").is_not_null() & (pl.col("u_ts") < pl.col("ts")))["row"]


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
    metric: str = "",
    notes: list[str] | None = None,
) -> pl.DataFrame:
    """Sum of reset-aware increases per window and `by` labels (columns: by, window_start,
    window_end, increase, resets, samples), one replica per instant. `samples` may start before
    `start` (baselines); `notes` gets what the replica choice did (several replicas)."""
    start, end = utc_naive(start), utc_naive(end)
    schema: SchemaDict = {**dict.fromkeys(by, pl.String), "window_start": TS, "window_end": TS,
              "increase": pl.Float64, "resets": pl.Int64, "samples": pl.Int64}
    if samples.height == 0:
        return pl.DataFrame(schema=schema)
    per_sample = reset_aware_increases(samples, presence=presence,
                                       scrape_interval=scrape_interval)
    per_sample = one_replica(per_sample.with_columns(*[label(per_sample, c).alias(c) for c in by]),
                             by, counter=True, metric=metric, notes=notes)
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
