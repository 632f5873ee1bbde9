"""One Kueue replica per instant: never the sum of replicas, and the series' own labels.

A highly available Kueue runs several controller-manager replicas behind one Service, and
Prometheus scrapes each as its own target (``job`` = the Service, ``instance`` = the pod's
IP:port). Which of them to read (docs/kubernetes.md, "Kueue replicas and replica_role"):

* **Roles.** Kueue >= 0.16 labels every metric ``replica_role`` = ``leader``, ``follower`` or
  ``standalone`` (leader election off). Some 0.16.x releases label the leader ``follower``
  (kueue#9288: gauges set before the election keep the follower child; kueue#8713: components
  without their own election report ``follower``); before 0.16 there is no label and every
  replica may emit (kueue#6772). So a ``follower`` label does not mean "not the leader".
* **Rank** of a replica at one scrape: the best role among its series of the metric at that
  scrape: leader, then standalone, then no label, then follower.
* **Choice.** For each group of series the reader reports (a ClusterQueue, a reason, a bucket)
  and each sample time, the sample is kept only if no better replica "covers" that time with
  the same group: a replica covers ``[first, last]`` sample of each run of its samples (a gap
  of more than two of its scrape intervals ends a run). Better = lower rank, then the run that
  started earlier (the replica that has been serving), then the lower ``cluster``/``job``/
  ``instance``. A leader that disappears stops covering at its last sample, so the next
  leader's samples count from there (leader election failover).
* **Counters** keep per-series reset handling (``reset_aware_increases`` runs on each
  replica's own series before the choice), and within the chosen replica every role child is
  kept: each increment lands in exactly one child, so their sum never doubles.
  **Gauges**: within a replica and scrape, a child of a worse role than another child of the
  same series is a stale leftover (kueue#9288) and is dropped.

``series_label``: with ``honor_labels: false`` (Kueue's own ServiceMonitor sets none) Prometheus
keeps a series label that clashes with a target label as ``exported_<label>``; the series'
value is read from there wherever present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from connectors.kubernetes.ksm import infer_intervals
from connectors.kubernetes.records import label

REPLICA_LABELS = ("cluster", "job", "instance")  # the target: one scraped replica
ROLE_LABEL = "replica_role"
ROLE_RANK = {"leader": 0, "standalone": 1, "follower": 3}
NO_ROLE = 2
_FOLLOWER = ROLE_RANK["follower"]
_HELPERS = ("_replica", "_rank", "_ev", "_grp")
_EARLIEST, _LATEST = datetime(1970, 1, 1), datetime(9999, 1, 1)


def series_label(frame: pl.DataFrame, name: str) -> pl.Expr:
    """The series' own value of label `name`: ``exported_<name>`` where Prometheus moved it
    (``honor_labels: false``), else `name` (null when the frame has neither)."""
    exported = f"exported_{name}"
    if exported in frame.columns:
        return pl.coalesce(pl.col(exported), label(frame, name)).alias(name)
    return label(frame, name).alias(name)


def _rank(frame: pl.DataFrame) -> pl.Expr:
    role = series_label(frame, ROLE_LABEL)
    return role.replace_strict(ROLE_RANK, default=NO_ROLE, return_dtype=pl.Int8)


def _replica(frame: pl.DataFrame) -> pl.Expr:
    parts = [label(frame, c).fill_null("") for c in REPLICA_LABELS]
    return pl.concat_str(parts, separator="/")


@dataclass
class ReplicaReport:
    """What the choice did for one metric (for the readers' warnings)."""

    metric: str
    replicas: list[str] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0
    follower_only: bool = False

    def notes(self) -> list[str]:
        out = []
        if len(self.replicas) > 1:
            shown = ", ".join(r.rsplit("/", 1)[-1] or r for r in self.replicas)
            out.append(
                f"{self.metric}: {len(self.replicas)} Kueue replicas exported it ({shown}); "
                "read one per instant (the leader's where replica_role says so, else the one "
                f"serving longest), {self.dropped} samples of the others not added")
        if self.follower_only:
            out.append(
                f"{self.metric}: every series says replica_role=\"follower\" (Kueue 0.16.x "
                "labels the leader so, kueue#9288 and #8713): read as the leader's")
        return out


def one_replica(
    frame: pl.DataFrame, group: list[str], *, counter: bool, metric: str = "",
    notes: list[str] | None = None,
) -> pl.DataFrame:
    """`frame` (raw samples or per-sample increases; `group` columns already the series' own
    values) keeping, per group and time, the samples of one replica (module docstring)."""
    if frame.height == 0:
        return frame
    f = frame.with_columns(_replica=_replica(frame), _rank=_rank(frame))
    if not counter:
        roles = {ROLE_LABEL, f"exported_{ROLE_LABEL}"}
        same = [c for c in f.columns
                if c not in roles and c not in ("value", "increase", "reset", "_rank")]
        f = f.filter(pl.col("_rank") == pl.col("_rank").min().over(same))
    report = ReplicaReport(metric, sorted(f["_replica"].unique().to_list()))
    report.follower_only = bool((f["_rank"] == _FOLLOWER).all())
    if len(report.replicas) > 1:
        before = f.height
        f = _choose(f, group)
        report.dropped = before - f.height
    report.kept = f.height
    if notes is not None:
        notes.extend(report.notes())
    return f.drop([c for c in _HELPERS if c in f.columns])


def _choose(f: pl.DataFrame, group: list[str]) -> pl.DataFrame:
    keys = [pl.col(c).cast(pl.String).fill_null("\x00") for c in group]
    f = f.with_columns(
        _grp=pl.concat_str(keys, separator="\x1f") if keys else pl.lit(""),
        _ev=pl.col("_rank").min().over("_replica", "ts"),
    )
    inst = f.select("_grp", "_replica", "ts", "_ev").unique()
    first, last = pl.lit(inst["ts"].min()), pl.lit(inst["ts"].max())
    spacing = infer_intervals(inst.select("_replica", "ts"), ["_replica"])
    inst = (
        inst.join(spacing, on="_replica", how="left")
        .sort("_grp", "_replica", "ts")
        .with_columns(_gap=pl.col("ts").diff().over("_grp", "_replica"))
        .with_columns(_run=(pl.col("_gap").is_null() | (pl.col("_gap") > 2 * pl.col("interval")))
                      .cum_sum().over("_grp", "_replica"))
        .with_columns(_start=pl.col("ts").min().over("_grp", "_replica", "_run"),
                      _end=pl.col("ts").max().over("_grp", "_replica", "_run"))
        # a run that reaches the read's first or last sample went on beyond it: it covers
        # from the start and to the end (both replicas up since before the read: a tie)
        .with_columns(
            _start=pl.when(pl.col("_start") - first <= pl.col("interval"))
            .then(pl.lit(_EARLIEST)).otherwise(pl.col("_start")),
            _end=pl.when(last - pl.col("_end") <= pl.col("interval"))
            .then(pl.lit(_LATEST)).otherwise(pl.col("_end")),
        )
        .drop("_gap", "interval", "_run")
        .sort("ts")
    )
    lost = pl.Series("lost", [False] * inst.height)
    mine_ev, mine_start, mine_rep = pl.col("_ev"), pl.col("_start"), pl.col("_replica")
    for q in inst["_replica"].unique().sort().to_list():
        theirs = inst.filter(pl.col("_replica") == q).select(
            "_grp", pl.col("ts").alias("_q_ts"), pl.col("_ev").alias("_q_ev"),
            pl.col("_start").alias("_q_start"), pl.col("_end").alias("_q_end"))
        # q's latest sample at or before t and whether its run reaches t; before q's first
        # sample, whether that run is open from the read's start (join_asof keeps the left
        # order, so the flags line up with `inst`)
        back = inst.join_asof(theirs, left_on="ts", right_on="_q_ts", by="_grp",
                              strategy="backward", check_sortedness=False)
        ahead = inst.join_asof(theirs, left_on="ts", right_on="_q_ts", by="_grp",
                               strategy="forward", check_sortedness=False)
        hit = back.with_columns(
            [pl.when(pl.col("_q_ts").is_null()).then(ahead[c]).otherwise(pl.col(c)).alias(c)
             for c in ("_q_ev", "_q_start", "_q_end")],
            _covers=pl.when(pl.col("_q_ts").is_not_null()).then(pl.col("_q_end") >= pl.col("ts"))
            .otherwise(ahead["_q_start"] <= ahead["ts"]),
        )
        same_ev = pl.col("_q_ev") == mine_ev
        better = ((pl.col("_q_ev") < mine_ev)
                  | (same_ev & (pl.col("_q_start") < mine_start))
                  | (same_ev & (pl.col("_q_start") == mine_start) & (pl.lit(q) < mine_rep)))
        beats = ((mine_rep != q) & pl.col("_covers") & better).fill_null(False)
        lost = lost | hit.select(beats.alias("lost"))["lost"]
    kept = inst.with_columns(lost).filter(~pl.col("lost")).select("_grp", "_replica", "ts")
    return f.join(kept, on=["_grp", "_replica", "ts"], how="semi")
