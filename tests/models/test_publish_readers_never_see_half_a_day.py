"""Readers are never blocked and never see half a day (issue #18 items 2 and 3): while a writer
replaces partitions and publishes in a loop, readers of the published snapshot and readers of
the Hive layout (DuckDB, pyarrow) always see each day whole, as one of its published states."""

import threading
import time
from datetime import date
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest

from models.lake import lake_root, lake_table_glob
from models.runner import connect, publish_snapshot, read_snapshot, replace_rows
from models.schema import GPU_UTILIZATION
from tests.models.lake_helpers import utilization

DAYS = (date(2026, 1, 5), date(2026, 1, 6))
STATES = (0.25, 0.75)  # every row of a day holds one of these; a day has 60 rows
ROUNDS = 12


def _whole(per_day: dict) -> None:
    for day, (rows, low, high) in per_day.items():
        assert rows == 60, (day, rows)
        assert low == high, (day, low, high)
        assert low in STATES, (day, low)


def test_readers_see_whole_days_while_partitions_are_replaced(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        for day in DAYS:
            replace_rows(con, GPU_UTILIZATION, utilization("c1", day, STATES[0]), where="FALSE")
        publish_snapshot(con, db)
    glob = lake_table_glob(lake_root(db), "gpu_utilization")
    done = threading.Event()
    seen = {"snapshot": 0, "duckdb_hive": 0, "pyarrow_hive": 0}
    errors: list[BaseException] = []

    def snapshot_reader():
        with read_snapshot(db) as con:  # one connection across publishes, as a page run is
            while not done.is_set():
                _whole({d: (n, lo, hi) for d, n, lo, hi in con.execute(
                    "SELECT CAST(bucket_start AS DATE), count(*), min(busy_fraction), "
                    "max(busy_fraction) FROM gpu_utilization GROUP BY ALL").fetchall()})
                seen["snapshot"] += 1

    def hive_reader():
        con = duckdb.connect()
        while not done.is_set():
            _whole({d: (n, lo, hi) for d, n, lo, hi in con.execute(
                "SELECT day, count(*), min(busy_fraction), max(busy_fraction) FROM "
                f"read_parquet('{glob}', hive_partitioning = true) GROUP BY ALL").fetchall()})
            seen["duckdb_hive"] += 1

    def arrow_reader():
        while not done.is_set():
            table = ds.dataset(str(lake_root(db) / "gpu_utilization"), format="parquet",
                               partitioning="hive").to_table(columns=["day", "busy_fraction"])
            per_day: dict = {}
            for row in table.to_pylist():
                n, lo, hi = per_day.get(row["day"], (0, 9.0, -9.0))
                b = row["busy_fraction"]
                per_day[row["day"]] = (n + 1, min(lo, b), max(hi, b))
            _whole(per_day)
            seen["pyarrow_hive"] += 1

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)
                done.set()
        return run

    threads = [threading.Thread(target=guarded(f)) for f in
               (snapshot_reader, hive_reader, arrow_reader)]
    for t in threads:
        t.start()
    try:
        with connect(db) as con:
            for n in range(ROUNDS):
                if done.is_set():
                    break
                for day in DAYS:
                    replace_rows(con, GPU_UTILIZATION,
                                 utilization("c1", day, STATES[(n + 1) % 2]),
                                 where="cluster = 'c1' AND CAST(bucket_start AS DATE) = ?",
                                 params=(day,))
                publish_snapshot(con, db)
                time.sleep(0.02)
    finally:
        done.set()
        for t in threads:
            t.join(timeout=60)
    if errors:
        raise errors[0]
    assert all(n > 0 for n in seen.values()), seen
    with read_snapshot(db) as con:
        assert con.execute("SELECT DISTINCT busy_fraction FROM gpu_utilization").fetchall() == [
            (STATES[ROUNDS % 2],)]


@pytest.mark.parametrize("cluster", ["gpu lab", "a/b", "k=v", "zürich-α", "100%", "it's"])
def test_odd_cluster_names_round_trip(tmp_path: Path, cluster: str):
    from tests.models.lake_helpers import lake_differences

    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        replace_rows(con, GPU_UTILIZATION, utilization(cluster, DAYS[0], 0.5), where="FALSE")
        publish_snapshot(con, db)
    assert lake_differences(db)["gpu_utilization"] == {
        "rows": 60, "snapshot": 0, "duckdb_hive": 0, "pyarrow_hive": 0}
    (folder,) = (lake_root(db) / "gpu_utilization").iterdir()
    assert "/" not in folder.name.removeprefix("cluster=")
    assert "=" not in folder.name.removeprefix("cluster=")
