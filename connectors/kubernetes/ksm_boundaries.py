"""Pod allocation intervals from held samples, with exact ends where kube-state-metrics has them.

A pod *holds* its GPUs at a scrape where it requests GPUs (> 0), is bound to a node, and is either
Running or Pending at or after its ``kube_pod_start_time`` -- the kubelet's admission, when the
device manager allocated the GPUs: image pulls and init containers are start-up, not free GPUs
(docs/kubernetes.md, "Pod boundaries"). A bound Pending pod without a start time (not admitted
yet, or the metric not scraped), an unbound Pending pod and a pod in a terminal phase hold nothing.

A *run* is a stretch of a pod's held samples without a gap of more than 2 scrape intervals Δ and
without a change of namespace, pod, node or GPUs. On the scrape grid a run is ``[first sample,
last sample + Δ)``. Exact ends replace the grid where they are consistent with the samples:

* start = ``kube_pod_start_time`` (unix seconds; the pod's ``status.startTime``) for the pod's
  first run when ``first - 2 Δ < start_time <= first`` (the first scrape after the admission
  showed the pod on its node, allowing one missed scrape as runs do; every scrape from there to
  the first Running one showed it held, by the run), no scrape after it showed the pod neither
  Running nor Pending on a node, and it does not lie in the scrape-grid end of another pod on
  the node (``_shared_grid_ends``);
* end = ``kube_pod_completion_time`` (the last container's finish, unix seconds) for the pod's
  last run when ``last < completion <= last + 2 Δ`` and no later scrape showed the pod before it
  (on a regular grid: within the next scrape interval).

Otherwise the grid end stands, and a start/completion time that was there but failed the test
is reported (how many, and why). Each row says which end it used: ``start_source`` /
``end_source`` in ``kube_pod_start_time``, ``kube_pod_completion_time``, ``scrape_grid``, or
``window`` where the row is clipped to the read window (the pod ran on beyond it), and
``first_running_ts``: the run's first Running scrape (null: the pod never ran in it, e.g. an image
that never pulled; the time before it is the pod's start-up), given only where it lies at or after
the window's start (an earlier one is a window before this one's to name).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.records import TS

START_TIME = "kube_pod_start_time"
COMPLETION_TIME = "kube_pod_completion_time"
GRID = "scrape_grid"
WINDOW = "window"
_US = 1_000_000

_START_WHY = (
    ("late", "after the first Running sample"),
    ("early", "more than 2 scrape intervals before the first scrape that shows the pod on its "
              "node"),
    ("unbound", "before a scrape that shows the pod neither Running nor Pending on a node"),
    ("shared", "inside the scrape-grid end of another pod on the node"),
)
_END_WHY = (
    ("early", "at or before the last Running sample (a container ended while the pod ran on)"),
    ("late", "more than 2 scrape intervals after the last Running sample"),
    ("after", "after a scrape that shows the pod no longer Running"),
)


def _from_unix(value: pl.Expr) -> pl.Expr:
    return pl.from_epoch((value * _US).round().cast(pl.Int64), time_unit="us")


def exact_times(frame: pl.DataFrame, how: str) -> pl.DataFrame:
    """uid -> one exact time from raw ``kube_pod_*_time`` samples (``uid`` = key, finite values):
    the start time last shown (`how` = "last"), or the latest completion shown ("max")."""
    schema: SchemaDict = {"uid": pl.String, "exact": TS}
    if frame.height == 0 or "uid" not in frame.columns:
        return pl.DataFrame(schema=schema)
    rows = frame.filter(pl.col("value").is_finite() & (pl.col("value") > 0)).sort("ts")
    agg = pl.col("value").last() if how == "last" else pl.col("value").max()
    out = rows.group_by("uid").agg(agg.alias("v"))
    return out.select("uid", _from_unix(pl.col("v")).alias("exact"))


#: a pod's GPU-like resources are intervals of their own (a pod holding a whole GPU and a MIG
#: instance has two rows); the exact start/completion times are the pod's, for each of them
KEY = ["uid", "gpu_resource"]
#: a change of any of these starts a new interval (a node relabelled from whole GPUs to MIG)
VALUES = ["namespace", "pod", "node", "gpus", "sharing", "slice_profile"]


def _runs(held: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    s = held.sort([*KEY, "ts"])
    prev = pl.col("ts").shift(1).over(KEY)
    brk = prev.is_null() | ((pl.col("ts") - prev) > pl.col("interval") * 2)
    for c in VALUES:
        brk = brk | pl.col(c).ne_missing(pl.col(c).shift(1).over(KEY))
    s = s.with_columns(run=brk.cum_sum())
    inside = (pl.col("ts") >= start) & (pl.col("ts") < end)
    running = pl.col("running").fill_null(False)
    runs = s.group_by("run", maintain_order=True).agg(
        *[pl.col(c).first() for c in (*KEY, *VALUES)],
        pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"),
        pl.col("ts").filter(running).min().alias("first_running"),
        pl.col("interval").last(), (inside & running).sum().cast(pl.Int64).alias("samples"),
    )
    return runs.with_columns(
        is_first=pl.col("run") == pl.col("run").min().over(KEY),
        is_last=pl.col("run") == pl.col("run").max().over(KEY),
    )


def _neighbours(runs: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """Per run: ``prev_other`` (last scrape before the run showing the pod neither Running nor
    Pending on a node after its admission) and ``next_any`` (the pod's first scrape after the
    run)."""
    other = (samples.filter(pl.col("_seen") & ~pl.col("_active"))
             .select("uid", pl.col("ts").alias("prev_other"), pl.col("ts").alias("_t"))
             .unique().sort("_t"))
    runs = runs.sort("first").join_asof(
        other, left_on="first", right_on="_t", by="uid", strategy="backward",
        allow_exact_matches=False, check_sortedness=False).drop("_t")
    later = samples.select("uid", pl.col("ts").alias("next_any"), pl.col("ts").alias("_t")
                           ).unique().sort("_t")
    return runs.sort("last").join_asof(
        later, left_on="last", right_on="_t", by="uid", strategy="forward",
        allow_exact_matches=False, check_sortedness=False).drop("_t")


def _holding(samples: pl.DataFrame, starts: pl.DataFrame) -> pl.DataFrame:
    """`samples` with ``st`` (the pod's start time), ``_seen`` (a phase was scraped),
    ``_active`` (Running, or Pending on a node at or after the start time) and ``_hold``
    (active with GPUs > 0)."""
    if "pending" not in samples.columns:
        samples = samples.with_columns(pending=pl.lit(None, dtype=pl.Boolean))
    samples = samples.join(starts.rename({"exact": "st"}), on="uid", how="left")
    running, pending = pl.col("running"), pl.col("pending")
    admitted = pl.col("node").is_not_null() & pl.col("st").is_not_null() & (
        pl.col("ts") >= pl.col("st"))
    active = running.fill_null(False) | (pending.fill_null(False) & admitted)
    return samples.with_columns(
        _seen=running.is_not_null() | pending.is_not_null(), _active=active,
        _hold=active & pl.col("node").is_not_null() & (pl.col("gpus") > 0),
    )


def _shared_grid_ends(runs: pl.DataFrame) -> pl.DataFrame:
    """``_shared``: the run's start time lies inside the grid end ``(last, last + Δ]`` of
    another pod's run on the same node.

    A pod ended on the grid is charged up to ``last + Δ``, the latest it can have ended; a pod
    the kubelet admitted in that slack may hold the GPUs it freed. Taking that admission time as
    exact would count those GPUs twice for the overlap (a rolling update on a full node), so
    such a start stays on the grid too: grid ends and grid starts of one KSM never overlap.
    """
    grid_ends = runs.filter(~pl.col("_end_ok")).select(
        "node", pl.col("uid").alias("_a"), pl.col("last").alias("_a_last"),
        (pl.col("last") + pl.col("interval")).alias("_a_end"))
    hits = (runs.filter(pl.col("st").is_not_null()).select("run", "uid", "node", "st")
            .join(grid_ends, on="node")
            .filter((pl.col("uid") != pl.col("_a")) & (pl.col("_a_last") < pl.col("st"))
                    & (pl.col("st") < pl.col("_a_end")))
            .select("run").unique().with_columns(_shared=pl.lit(True)))
    return runs.join(hits, on="run", how="left").with_columns(
        pl.col("_shared").fill_null(False))


def pod_intervals(samples: pl.DataFrame, intervals: pl.DataFrame, starts: pl.DataFrame,
                  completions: pl.DataFrame, start: datetime, end: datetime,
                  notes: list[str]) -> pl.DataFrame:
    """Allocation rows from pod samples (uid, gpu_resource, ts, namespace, pod, node, gpus,
    sharing, slice_profile, running, pending: the phase at that scrape, null where none was
    scraped).

    `intervals`: uid -> interval (Δ); `starts` / `completions`: uid -> exact (``exact_times``).
    Returns uid, namespace, pod, node, gpus, start_ts, end_ts, samples (Running samples inside
    the window), scrape_interval_s, start_source, end_source, first_running_ts; rows clipped to
    ``[start, end)``, empty ones dropped.
    """
    samples = _holding(samples, starts)
    held = samples.filter(pl.col("_hold")).join(intervals, on="uid", how="left")
    if held.height == 0:
        return pl.DataFrame()
    runs = _neighbours(_runs(held, start, end), samples)
    runs = runs.join(starts.rename({"exact": "st"}), on="uid", how="left").join(
        completions.rename({"exact": "ct"}), on="uid", how="left")
    d, first, last = pl.col("interval"), pl.col("first"), pl.col("last")
    st, ct = pl.col("st"), pl.col("ct")
    end_why = {
        "early": ct <= last,
        "late": ct > last + 2 * d,
        "after": pl.col("next_any").is_not_null() & (ct > pl.col("next_any")),
    }
    end_ok = pl.col("is_last") & ct.is_not_null() & ~pl.any_horizontal(end_why.values())
    runs = _shared_grid_ends(runs.with_columns(_end_ok=end_ok))
    start_why = {
        "late": st > first,
        "early": st <= first - 2 * d,
        "unbound": pl.col("prev_other").is_not_null() & (st <= pl.col("prev_other")),
        "shared": pl.col("_shared"),
    }
    start_ok = pl.col("is_first") & st.is_not_null() & ~pl.any_horizontal(start_why.values())
    end_ok = pl.col("_end_ok")
    runs = runs.with_columns(
        s0=pl.when(start_ok).then(st).otherwise(first),
        e0=pl.when(end_ok).then(ct).otherwise(last + d),
        start_source=pl.when(start_ok).then(pl.lit(START_TIME)).otherwise(pl.lit(GRID)),
        end_source=pl.when(end_ok).then(pl.lit(COMPLETION_TIME)).otherwise(pl.lit(GRID)),
    )
    _report(runs, start_why, end_why, start, end, notes)
    lo, hi = pl.lit(start).cast(TS), pl.lit(end).cast(TS)
    out = runs.with_columns(
        start_ts=pl.max_horizontal("s0", lo), end_ts=pl.min_horizontal("e0", hi),
        start_source=pl.when(pl.col("s0") < lo).then(pl.lit(WINDOW))
        .otherwise(pl.col("start_source")),
        end_source=pl.when(pl.col("e0") > hi).then(pl.lit(WINDOW))
        .otherwise(pl.col("end_source")),
        scrape_interval_s=d.dt.total_microseconds() / _US,
        # one seen before the window is an earlier window's (the pod was Running at its start)
        first_running_ts=pl.when(pl.col("first_running") >= lo).then(pl.col("first_running")),
    ).filter(pl.col("end_ts") > pl.col("start_ts"))
    return out.select(*KEY, *VALUES, "start_ts", "end_ts", "samples", "scrape_interval_s",
                      "start_source", "end_source", "first_running_ts")


def _report(runs: pl.DataFrame, start_why: dict[str, Any], end_why: dict[str, Any], start: datetime,
            end: datetime, notes: list[str]) -> None:
    """Count the exact times that were there but not used, for rows inside the window."""
    lo, hi = pl.lit(start).cast(TS), pl.lit(end).cast(TS)
    checks = []
    for key, text in _START_WHY:
        cond = (pl.col("is_first") & pl.col("st").is_not_null() & (pl.col("first") > lo)
                & (pl.col("first") < hi) & start_why[key])
        checks.append((cond.alias(f"s_{key}"), START_TIME, "pod starts", text))
    for key, text in _END_WHY:
        cond = (pl.col("is_last") & pl.col("ct").is_not_null()
                & (pl.col("last") + pl.col("interval") < hi)
                & (pl.col("last") + pl.col("interval") > lo) & end_why[key])
        checks.append((cond.alias(f"e_{key}"), COMPLETION_TIME, "pod ends", text))
    counts = runs.select([c.sum() for c, *_ in checks]).row(0)
    for (_, metric, what, text), n in zip(checks, counts, strict=True):
        if n:
            notes.append(f"{metric}: {n} {what} kept on the scrape grid: the time is {text}")
