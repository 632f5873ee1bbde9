"""The lake equals the ledger on the sample world (issue #18 items 2 and 3): every row of every
lake table, read from the published snapshot, by DuckDB over the Hive layout and by pyarrow
over it, after load + build, and after re-ingesting one day with changed data; and that
re-ingest rewrites only the partitions around that day."""

import gzip
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
from tests.helpers import SAMPLE_SITE
from tests.models.lake_helpers import lake_differences, part_stats

DAY = date(2026, 1, 7)
SAME = {"snapshot": 0, "duckdb_hive": 0, "pyarrow_hive": 0}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("lake_world") / "data" / "gpuledger.duckdb"
    site = ["--db", str(db), "--config", str(SAMPLE_SITE)]
    assert main([*site, "load"]) == 0
    assert main([*site, "build"]) == 0
    return db


def _halved_dcgm(source: Path, out: Path, day: date) -> Path:
    """The OpenMetrics file with every dcgm-exporter value of ``day`` halved."""
    start = int(datetime.combine(day, datetime.min.time(), UTC).timestamp())
    with gzip.open(source, "rt") as src, out.open("w") as dst:
        for line in src:
            if line.startswith("DCGM_"):
                head, value, ts = line.rsplit(" ", 2)
                if start <= int(ts) < start + 86400:
                    line = f"{head} {float(value) / 2:g} {ts}"
            dst.write(line)
    return out


def _unequal(found: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The tables some reader of the lake sees differently from the ledger."""
    return {t: d for t, d in found.items() if any(d[k] != v for k, v in SAME.items())}


def _reaches_into(db: Path, part: str, day: date) -> bool:
    table, _, day_part = part.split("/")[:3]
    if table not in ("k8s_pod_allocations", "k8s_pod_allocation_pieces"):
        return False
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f"SELECT count(*) FROM {table} WHERE CAST(start_ts AS DATE) = ? "
                           "AND end_ts > ?", [date.fromisoformat(day_part.removeprefix("day=")),
                                              day]).fetchone()[0] > 0


def _lake_busy(db: Path, day: date) -> float:
    with read_snapshot(db) as con:
        return con.execute("SELECT sum(busy_fraction) FROM gpu_utilization "
                           "WHERE CAST(bucket_start AS DATE) = ?", [day]).fetchone()[0]


def test_every_lake_table_equals_the_ledger_after_load_and_build(world: Path):
    found = lake_differences(world)
    assert _unequal(found) == {}
    assert all(found[t]["rows"] > 0 for t in (
        "gpu_utilization", "k8s_pod_allocations", "k8s_pod_allocation_pieces",
        "allocation_usage_hourly", "gpu_usage_hourly")), found


def test_reingesting_a_day_rewrites_its_partitions_and_keeps_the_lake_equal(
        world: Path, tmp_path: Path):
    before = part_stats(world)
    busy_before = _lake_busy(world, DAY)
    metrics = _halved_dcgm(SAMPLE_SITE.parent / "prometheus" / "metrics.om.gz",
                           tmp_path / "metrics.om", DAY)
    site = ["--db", str(world), "--config", str(SAMPLE_SITE)]
    assert main([*site, "ingest", "kubernetes", "--openmetrics", str(metrics), "--cluster",
                 "gpulab", "--start", DAY.isoformat(),
                 "--end", (DAY + timedelta(days=1)).isoformat()]) == 0
    assert main([*site, "build", "--start", DAY.isoformat(),
                 "--end", (DAY + timedelta(days=1)).isoformat()]) == 0  # end exclusive
    assert _lake_busy(world, DAY) == pytest.approx(busy_before / 2, rel=0.02)
    found = lake_differences(world)
    assert _unequal(found) == {}
    after = part_stats(world)
    changed = {k for k in after if after[k] != before.get(k)} | (set(before) - set(after))
    near = {(DAY + timedelta(days=n)).isoformat() for n in (-1, 0, 1)}
    assert f"gpu_utilization/cluster=gpulab/day={DAY}/part-0.parquet" in changed
    assert f"gpu_usage_hourly/cluster=gpulab/day={DAY}/part-0.parquet" in changed
    far = sorted(k for k in changed if k.split("/day=")[1].split("/")[0] not in near)
    # only pod intervals that started earlier and reach into the day (merged rows rewritten)
    assert [k for k in far if not _reaches_into(world, k, DAY)] == []
    assert len(changed) < len(after) / 3, (len(changed), len(after))
    shutil.rmtree(tmp_path, ignore_errors=True)
