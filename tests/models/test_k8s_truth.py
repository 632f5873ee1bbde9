"""The Kubernetes ledger against the simulator's truth.

Prometheus samples a pod's phase once per scrape interval Δ; the truth is exact to the second. An
interval [first Running sample, last Running sample + Δ) has each end late by less than Δ, so a
pod's GPU-seconds are within GPUs x Δ per interval end of the truth (ends the window clips are
exact), and an (identity, day) total within the sum of that over the pod interval ends falling
in (or within Δ of) the day. Measured (the tests assert the bounds):

* sample_data (Δ = 600 s, 707 pods, 52 identity-days): per pod |error| at most 0.99 x GPUs x Δ
  (mean 0.33; at most 3,480 GPU-seconds); per (identity, day) at most 9,151 GPU-seconds, 0.41 of
  its bound; sum of |error| 0.70 % of the 14.5 M Kubernetes GPU-seconds, net +0.008 %;
* seed 7, 2 days, Δ = 60 s (139 pods, 15 identity-days): per pod at most 0.95 x GPUs x Δ (at most
  164 GPU-seconds); per (identity, day) at most 357 GPU-seconds, 0.5 of its bound; sum of |error|
  0.069 % of 2.3 M GPU-seconds, net -0.013 %.
"""

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = ["person", "team", "cost_centre"]
KEY = ["day", "domain", *IDENTITY]


@pytest.fixture(scope="module")
def fresh_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seed7-60s")
    simulate(SimConfig(seed=7, days=2, nodes=NodeCounts(hpc=2, k8s=3, shared=1),
                       step_seconds=60), out)
    return out


@pytest.fixture(scope="module", params=["sample", "seed7"])
def built(request, fresh_world: Path, tmp_path_factory: pytest.TempPathFactory):
    world = ROOT / "sample_data" if request.param == "sample" else fresh_world
    db = tmp_path_factory.mktemp(f"ledger-{request.param}") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    w = json.loads((world / "world.json").read_text())
    assert main(["--db", str(db), "build", "--start", w["window"]["start"],
                 "--end", w["window"]["end"]]) == 0
    return world, db, w


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def _truth_pods(world: Path, w: dict) -> pl.DataFrame:
    """Truth pod intervals clipped to the window, with GPU-seconds."""
    w0, w1 = _iso(w["window"]["start"]), _iso(w["window"]["end"])
    rows = pl.read_csv(world / "truth" / "allocations.csv", try_parse_dates=True)
    rows = rows.filter(pl.col("domain") == "kubernetes").with_columns(
        pl.col("start").clip(w0, w1), pl.col("end").clip(w0, w1))
    return rows.filter(pl.col("end") > pl.col("start")).with_columns(
        truth=pl.col("gpus") * (pl.col("end") - pl.col("start")).dt.total_seconds())


def _bounds(pods: pl.DataFrame, w: dict) -> pl.DataFrame:
    """(identity, day) -> GPUs x Δ summed over the pod interval ends in or within Δ of the day
    (the window's clipped end is exact)."""
    step = timedelta(seconds=w["scrape"]["step_seconds"])
    w1 = _iso(w["window"]["end"])
    ends = pl.concat([pods.select(*IDENTITY, "gpus", ts=pl.col(c)) for c in ("start", "end")])
    ends = ends.filter(pl.col("ts") < w1)
    days = pl.concat([
        ends.with_columns(day=(pl.col("ts") + shift).dt.date())
        for shift in (-step, timedelta(0), step)
    ]).unique()
    return days.group_by("day", *IDENTITY).agg(
        (pl.col("gpus").sum() * step.total_seconds()).alias("bound"))


def _ledger(db: Path, query: str) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.sql(query).pl()


def test_per_pod_gpu_seconds_within_one_scrape_interval_per_interval_end(built):
    world, db, w = built
    step = w["scrape"]["step_seconds"]
    w1 = _iso(w["window"]["end"])
    truth = _truth_pods(world, w).with_columns(
        ends=2 - (pl.col("end") == w1).cast(pl.Int64)
    ).group_by("source_key").agg(pl.col("truth").sum(), pl.col("gpus").max(),
                                 pl.col("ends").sum())
    ours = _ledger(db, "SELECT k8s_namespace || '/' || name AS source_key, "
                       "sum(gpu_seconds)::BIGINT AS ours FROM allocations "
                       "WHERE domain = 'kubernetes' GROUP BY ALL")
    both = truth.join(ours, on="source_key", how="full", coalesce=True).with_columns(
        error=(pl.col("ours").fill_null(0) - pl.col("truth").fill_null(0)).abs())
    unknown = both.filter(pl.col("truth").is_null())
    assert unknown.is_empty(), unknown  # every charged pod exists in the truth
    over = both.filter(pl.col("error") > pl.col("gpus") * step * pl.col("ends"))
    assert over.is_empty(), over
    missed = both.filter(pl.col("ours").is_null())
    # a pod we never saw Running lived less than one scrape interval
    assert (missed["truth"] <= missed["gpus"] * step).all(), missed
    assert missed.height <= 0.01 * both.height
    assert ours.height > 100


def test_identity_day_gpu_seconds_equal_truth_within_the_bound(built):
    world, db, w = built
    truth = pl.read_csv(world / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True)
    ours = _ledger(db, "SELECT day, domain, person, team, cost_centre, "
                       "sum(gpu_seconds)::BIGINT AS ours FROM allocations GROUP BY ALL")
    joined = truth.join(ours, on=KEY, how="full", coalesce=True).with_columns(
        diff=pl.col("ours").fill_null(0) - pl.col("gpu_seconds").fill_null(0))

    slurm = joined.filter(pl.col("domain") == "slurm")
    assert slurm.filter(pl.col("diff") != 0).is_empty()  # untouched by the Kubernetes side

    k8s = joined.filter(pl.col("domain") == "kubernetes").join(
        _bounds(_truth_pods(world, w), w), on=["day", *IDENTITY], how="left"
    ).with_columns(pl.col("bound").fill_null(0))
    over = k8s.filter(pl.col("diff").abs() > pl.col("bound"))
    assert over.is_empty(), over
    total = k8s["gpu_seconds"].sum()
    assert total > 0
    step = w["scrape"]["step_seconds"]
    # relative error over all identity-days: about 1 % at a 10-minute scrape, 0.1 % at 1 minute
    assert k8s["diff"].abs().sum() / total < 0.01 * step / 600
    assert abs(k8s["diff"].sum()) / total < 0.001  # both ends are late: the errors cancel


def test_people_using_both_schedulers_aggregate_across_domains(built):
    world, db, w = built
    truth = pl.read_csv(world / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True)
    people = truth.group_by("person").agg(pl.col("domain").n_unique().alias("domains")).filter(
        (pl.col("domains") == 2) & (pl.col("person") != "unattributed"))["person"].to_list()
    assert people, "the world has people on both schedulers"
    ours = _ledger(db, "SELECT day, person, list(DISTINCT domain ORDER BY domain) AS domains, "
                       "sum(gpu_seconds)::BIGINT AS ours FROM allocations GROUP BY ALL")
    for person in people:
        domains = ours.filter(pl.col("person") == person)["domains"].explode().unique()
        assert sorted(domains.to_list()) == ["kubernetes", "slurm"], person
    per_day = truth.group_by("day", "person").agg(pl.col("gpu_seconds").sum())
    bound = _bounds(_truth_pods(world, w), w).group_by("day", "person").agg(pl.col("bound").sum())
    joined = per_day.join(ours.drop("domains"), on=["day", "person"], how="full",
                          coalesce=True).join(bound, on=["day", "person"], how="left")
    joined = joined.filter(pl.col("person").is_in(people)).with_columns(
        diff=(pl.col("ours").fill_null(0) - pl.col("gpu_seconds").fill_null(0)).abs())
    assert joined.height >= len(people)
    assert joined.filter(pl.col("diff") > pl.col("bound").fill_null(0)).is_empty(), joined


def test_outcomes_gpus_and_queues_follow_the_truth(built):
    world, db, w = built
    truth = _truth_pods(world, w).group_by("source_key").agg(
        pl.col("outcome").first(), pl.col("gpu_uuids").first(), pl.col("gpus").first())
    ours = _ledger(db, """
        SELECT k8s_namespace || '/' || name AS source_key, any_value(outcome) AS ours_outcome,
               list_sort(flatten(list(DISTINCT gpu_uuids))) AS ours_uuids,
               any_value(kueue_queue) AS queue, any_value(kueue_cluster_queue) AS cq
        FROM allocations WHERE domain = 'kubernetes' GROUP BY ALL""")
    both = truth.join(ours, on="source_key", how="inner")
    expected = {"succeeded": "succeeded", "failed": "failed", "running": "running",
                "evicted_preempted": "preempted", "evicted_pods_ready_timeout": "evicted"}
    wrong = both.filter(pl.col("outcome").replace_strict(expected) != pl.col("ours_outcome"))
    assert wrong.is_empty(), wrong
    assert both.filter(pl.col("ours_outcome") == "preempted").height >= 1
    assert both.filter(pl.col("ours_outcome") == "evicted").height >= 1
    # dcgm-exporter's pod labels name the GPUs (the sorted truth list)
    with_uuids = both.filter(pl.col("ours_uuids").list.len() > 0)
    assert with_uuids.height >= 0.95 * both.height
    mismatch = with_uuids.filter(
        pl.col("gpu_uuids").str.split(";").list.sort() != pl.col("ours_uuids"))
    assert mismatch.is_empty(), mismatch
    # Kueue-managed pods carry their LocalQueue and the ClusterQueue of their Workload;
    # slurm-bridge pods (research/bridge-eval-*) are not managed by Kueue
    bridge = pl.col("source_key").str.contains("/bridge-eval-")
    managed = both.filter(~bridge)
    assert managed.filter(pl.col("queue").is_null() | pl.col("cq").is_null()).is_empty()
    assert both.filter(bridge & pl.col("queue").is_not_null()).is_empty()
