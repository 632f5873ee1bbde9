"""The usage tables are built a day per pass (bounded memory, time linear in the days: issue #18);
a pass over the whole range gives the same rows in every usage table, to the last digit.

Worlds: the sample week (allocations crossing midnight, an exporter outage, requeued runs) and a
shared-GPU world (MIG, time-slicing; 300 s scrapes, so readings span minutes across midnight).
"""

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.build import USAGE_TABLES, build_allocations, build_gpu_usage_hourly, data_days
from simulator import SimConfig, simulate

ROOT = Path(__file__).resolve().parents[2]


def _world(name: str, folder: Path) -> Path:
    if name == "sample":
        return ROOT / "sample_data"
    world = folder / "world"
    simulate(SimConfig(seed=9162, days=3, step_seconds=300, shared_gpus=True), world)
    return world


@pytest.fixture(scope="module", params=["sample", "shared_gpus"])
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp(f"usage-chunks-{request.param}")
    db = folder / "loaded.duckdb"
    assert main(["--db", str(db), "load-world", str(_world(request.param, folder))]) == 0
    with duckdb.connect(str(db)) as con:
        if request.param == "shared_gpus":
            # 300 s scrapes off the 5-minute grid: a reading late in a day stands for minutes
            # of the next (the pass of that day must read the hour before it)
            con.execute("UPDATE gpu_utilization SET bucket_start = bucket_start + "
                        "INTERVAL 2 MINUTE")
        first, last = data_days(con)
        build_allocations(con, first, last)
    return db


def _built(loaded: Path, target: Path, chunk_days: int) -> tuple[Path, int, int]:
    shutil.copyfile(loaded, target)
    with duckdb.connect(str(target)) as con:
        first, last = data_days(con)
        rows = build_gpu_usage_hourly(con, first, last, chunk_days=chunk_days)
    return target, rows, (last - first).days + 1


def test_a_day_per_pass_gives_the_rows_of_one_pass(loaded: Path, tmp_path: Path) -> None:
    one_pass, rows_once, days = _built(loaded, tmp_path / "once.duckdb", chunk_days=10_000)
    by_day, rows_by_day, _ = _built(loaded, tmp_path / "by-day.duckdb", chunk_days=1)
    assert days >= 3, f"expected a world of several days, found {days}"
    assert rows_once == rows_by_day > 0
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{one_pass}' AS once (READ_ONLY)")
        con.execute(f"ATTACH '{by_day}' AS by_day (READ_ONLY)")
        for table, _ in USAGE_TABLES:
            n = con.execute(f"SELECT count(*) FROM once.{table}").fetchone()[0]
            assert n > 0, f"expected rows in {table}, found none"
            differ = con.execute(
                f"SELECT count(*) FROM ((SELECT * FROM once.{table} EXCEPT ALL "
                f"SELECT * FROM by_day.{table}) UNION ALL (SELECT * FROM by_day.{table} "
                f"EXCEPT ALL SELECT * FROM once.{table}))").fetchone()[0]
            assert differ == 0, f"expected {table} the same by day, found {differ} rows differ"
        # days whose readings span midnight are the case a pass must read an hour beyond
        crossing = con.execute(
            "SELECT count(*) FROM once.allocations WHERE end_ts = CAST(day AS TIMESTAMP) + "
            "INTERVAL 1 DAY").fetchone()[0]
        assert crossing > 0, "expected allocations cut at midnight in the world"


def test_chunk_days_below_one_is_refused(loaded: Path) -> None:
    with duckdb.connect(str(loaded)) as con:
        first, _ = data_days(con)
        with pytest.raises(ValueError, match="expected chunk_days of 1 or more, found 0"):
            build_gpu_usage_hourly(con, first, first + timedelta(days=1), chunk_days=0)
