"""A simulated world through `gpuledger load-world` and `gpuledger build`: the weekly share of
quota used per ClusterQueue equals the share computed here, independently, from the Kueue gauges
the simulator wrote (its OpenMetrics file), and the cohort's from the sum of its queues'.

The simulator plants every queue's nominal quota (world.json) and emits usage and nominal quota
at each Kueue scrape; each scrape stands for the same interval, so the time-weighted share is
the sum of usage over the sum of nominal quota of the week's scrapes.
"""

import gzip
import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

SAMPLE = re.compile(r'^(kueue_cluster_queue_(?:resource_usage|nominal_quota))\{([^}]*)\} '
                    r"(\S+) (\d+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')


@pytest.fixture(scope="module")
def world_and_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("kueue-quota-world")
    world, db = tmp / "world", tmp / "ledger.duckdb"
    simulate(SimConfig(seed=11, days=3, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=300), world)
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return world, db


def emitted_sums(world: Path) -> dict[tuple[str, str, str], list[float]]:
    """(ISO week, cohort, queue) -> [usage, nominal] GPU-seconds of the scrapes in the file
    (flavors summed).

    A scrape stands for the time until the next one, at most the scrape interval, and never past
    the UTC midnight after it (the ingest reads a day at a time)."""
    points: dict[tuple[str, ...], list[tuple[int, float]]] = defaultdict(list)
    files = sorted(world.rglob("*.om.gz")) + sorted(world.rglob("*.om"))
    assert files, f"expected the simulator's OpenMetrics file under {world}, found none"
    for path in files:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                m = SAMPLE.match(line.strip())
                if m:
                    labels = dict(LABEL.findall(m.group(2)))
                    key = (m.group(1), labels.get("cohort", ""), labels["cluster_queue"],
                           labels["flavor"])
                    points[key].append((int(m.group(4)), float(m.group(3))))
    steps = {b[0] - a[0] for series in points.values()
             for a, b in zip(sorted(series), sorted(series)[1:], strict=False)}
    interval = min(steps)
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (metric, cohort, queue, _flavor), series in points.items():
        series.sort()
        for i, (ts, value) in enumerate(series):
            following = series[i + 1][0] if i + 1 < len(series) else ts + interval
            midnight = (ts // 86400 + 1) * 86400
            span = min(interval, following - ts, midnight - ts)
            day = datetime.fromtimestamp(ts, UTC).isocalendar()
            week = f"{day.year}-W{day.week:02d}"
            sums[(week, cohort, queue)][0 if metric.endswith("usage") else 1] += value * span
    return dict(sums)


def weekly(db: Path, scope: str) -> dict[tuple[str, str], float | None]:
    name = "cluster_queue" if scope == "queue" else "cohort"
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute(
            f"SELECT week, {name}, sum(usage_gpu_hours) / nullif(sum(nominal_gpu_hours), 0) "
            "FROM kueue_quota_weekly WHERE scope = ? GROUP BY ALL", [scope]).fetchall()
    return {(w, n): s for w, n, s in got}


def test_weekly_share_of_each_queue_equals_the_emitted_gauges(world_and_ledger):
    world, db = world_and_ledger
    planted = json.loads((world / "world.json").read_text())
    emitted = emitted_sums(world)
    assert {q for _, _, q in emitted} == set(planted["kueue"]["cluster_queues"])
    got = weekly(db, "queue")
    assert got, "expected kueue_quota_weekly rows"
    expected = {(w, q): u / n for (w, _, q), (u, n) in emitted.items() if n}
    assert set(got) == set(expected)
    for key, share in expected.items():
        assert got[key] == pytest.approx(share, rel=1e-9), key


def test_weekly_share_of_the_cohort_is_its_queues_summed(world_and_ledger):
    world, db = world_and_ledger
    per_cohort: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (week, cohort, _), (u, n) in emitted_sums(world).items():
        per_cohort[(week, cohort)][0] += u
        per_cohort[(week, cohort)][1] += n
    got = weekly(db, "cohort")
    assert set(got) == set(per_cohort)
    for key, (u, n) in per_cohort.items():
        assert got[key] == pytest.approx(u / n, rel=1e-9), key


def test_every_hour_of_the_built_days_has_a_row_and_unknown_hours_are_marked(world_and_ledger):
    _, db = world_and_ledger
    with duckdb.connect(str(db), read_only=True) as con:
        per_day = con.execute(
            "SELECT cluster_queue, flavor, day, count(*), count(*) FILTER (WHERE known) "
            "FROM kueue_quota_hourly WHERE scope = 'queue' GROUP BY ALL").fetchall()
        unknown_with_figures = con.execute(
            "SELECT count(*) FROM kueue_quota_hourly WHERE NOT known "
            "AND (quota_used_share IS NOT NULL OR usage_gpu_hours IS NOT NULL)").fetchone()[0]
    assert per_day
    assert {hours for *_, hours, _ in per_day} == {24}
    assert all(known > 0 for *_, known in per_day)
    assert unknown_with_figures == 0


def test_nominal_gpu_hours_are_the_planted_quota_over_the_covered_time(world_and_ledger):
    world, db = world_and_ledger
    planted = json.loads((world / "world.json").read_text())["kueue"]["cluster_queues"]
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute(
            "SELECT cluster_queue, flavor, sum(nominal_gpu_hours), sum(covered_seconds) / 3600 "
            "FROM kueue_quota_hourly WHERE scope = 'queue' AND known GROUP BY ALL").fetchall()
    assert {(q, f) for q, f, *_ in got} == {(q, f) for q, flavors in planted.items()
                                           for f in flavors}
    for queue, flavor, nominal_hours, covered_hours in got:
        assert nominal_hours == pytest.approx(planted[queue][flavor] * covered_hours), queue


def test_the_daily_dagster_job_builds_the_same_quota_rows_as_the_cli(world_and_ledger, tmp_path):
    import dagster as dg

    from pipelines.defs.resources import LedgerResource
    from pipelines.defs.schedules import daily_ingest
    from tests.helpers import SAMPLE_SITE, load_definitions

    _, built = world_and_ledger
    every = ("SELECT * EXCLUDE (week_start) FROM kueue_quota_weekly ORDER BY ALL",
             "SELECT * FROM kueue_quota_hourly WHERE day = DATE '2026-01-06' ORDER BY ALL")
    with duckdb.connect(str(built), read_only=True) as con:
        expected = [con.execute(sql).fetchall() for sql in every]
    db = tmp_path / "ledger.duckdb"
    db.write_bytes(built.read_bytes())
    with duckdb.connect(str(db)) as con:  # the asset alone must write them back
        con.execute("DELETE FROM kueue_quota_hourly WHERE day = DATE '2026-01-06'")
        con.execute("DELETE FROM kueue_quota_weekly")
    defs = load_definitions(SAMPLE_SITE)  # the model asset reads only the ledger
    job = defs.resolve_job_def(daily_ingest.name)
    assert dg.AssetKey("kueue_quota") in job.asset_layer.executable_asset_keys
    result = dg.materialize(
        [*defs.assets], resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=dg.AssetSelection.assets("kueue_quota"), partition_key="2026-01-06")
    assert result.success
    with duckdb.connect(str(db), read_only=True) as con:
        got = [con.execute(sql).fetchall() for sql in every]
    assert [len(rows) for rows in got] == [len(rows) for rows in expected]
    for rows, want in zip(got, expected, strict=True):
        for row, wanted in zip(rows, want, strict=True):  # sums may add in another order
            assert row == tuple(pytest.approx(v, rel=1e-12) if isinstance(v, float) else v
                                for v in wanted)
