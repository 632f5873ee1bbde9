"""Same inputs, same figures (issue #18): a simulated world built on the DuckDB engine and on the
Spark engine (the heavy models on the cluster of ``spark_master``) has the same rows in every
table those models feed: invoice lines to the cent and GPU-seconds to the second, incidents in
every column (floats to 1e-9 relative: a mean summed in another order), hourly and daily usage
GPU-seconds to 1e-6.

Worlds: seed 5 of tests/models/test_incidents.py (3 days built at once, so incidents and
allocations cross midnight), a shared-GPU world (MIG, time-slicing; 300 s scrapes) and a realistic
one (many planted incidents, the low-efficiency ones included).
"""

import math
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from models.engines import DUCKDB_ENGINE
from models.engines.spark import SparkEngine
from simulator import NodeCounts, SimConfig
from tests.models.engines.worlds import build_copy, loaded_world

pytestmark = pytest.mark.spark

WORLDS = {
    "seed5_across_midnight": SimConfig(seed=5, days=3, nodes=NodeCounts(hpc=1, k8s=4, shared=2)),
    "shared_gpus": SimConfig(seed=9162, days=2, step_seconds=300, shared_gpus=True),
    "realistic": SimConfig(seed=3, days=2, realistic=True),
}
# table -> absolute tolerance of its DECIMAL columns (None: exact), relative one of its DOUBLEs
TABLES = {
    "allocation_usage_hourly": (Decimal("0.000001"), 0.0),
    "gpu_usage_hourly": (Decimal("0.000001"), 0.0),
    "node_usage_hourly": (Decimal("0.000001"), 0.0),
    "gpu_usage_daily": (Decimal("0.000001"), 0.0),
    "node_usage_daily": (Decimal("0.000001"), 0.0),
    "chargeback_periods": (None, 0.0),
    "incidents": (None, 1e-9),
    "bridge_pairs": (None, 0.0),
}


def _rows(con: duckdb.DuckDBPyConnection, db: str, table: str
          ) -> tuple[list[str], list[str], list[tuple]]:
    described = con.execute(f"DESCRIBE {db}.{table}").fetchall()
    names, types = [r[0] for r in described], [r[1] for r in described]
    return names, types, con.execute(f"SELECT * FROM {db}.{table}").fetchall()


def _differences(duck: tuple, ours: tuple, names: list[str], types: list[str],
                 decimal_tol: Decimal | None, rel_tol: float) -> list[str]:
    found = []
    for name, kind, a, b in zip(names, types, duck, ours, strict=True):
        if a is None or b is None or not (kind == "DOUBLE" or kind.startswith("DECIMAL")):
            same = a == b
        elif kind == "DOUBLE":
            same = math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0) if rel_tol else a == b
        else:
            same = abs(a - b) <= decimal_tol if decimal_tol is not None else a == b
        if not same:
            found.append(f"{name}: duckdb {a!r}, spark {b!r}")
    return found


@pytest.fixture(scope="module", params=sorted(WORLDS))
def both(request: pytest.FixtureRequest, spark, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp(request.param)
    db, first, last = loaded_world(WORLDS[request.param], folder)
    duck = build_copy(db, folder / "duckdb.duckdb", first, last, DUCKDB_ENGINE)
    ours = build_copy(db, folder / "spark.duckdb", first, last,
                      SparkEngine(spark, folder / "scratch"))
    return duck, ours


@pytest.mark.parametrize("table", sorted(TABLES))
def test_spark_engine_writes_the_rows_the_duckdb_engine_writes(both: tuple[Path, Path],
                                                                table: str) -> None:
    duck_db, spark_db = both
    con = duckdb.connect()
    con.execute(f"ATTACH '{duck_db}' AS duck (READ_ONLY)")
    con.execute(f"ATTACH '{spark_db}' AS ours (READ_ONLY)")
    names, types, duck = _rows(con, "duck", table)
    assert _rows(con, "ours", table)[:2] == (names, types)
    ours = _rows(con, "ours", table)[2]
    decimal_tol, rel_tol = TABLES[table]
    # pair the rows by their exact columns (floats and decimals are compared after)
    exact = [i for i, t in enumerate(types) if t != "DOUBLE" and not t.startswith("DECIMAL")]

    def key(row: tuple) -> tuple:
        return tuple(repr(row[i]) for i in exact) + tuple(repr(v) for v in row)

    duck.sort(key=key)
    ours.sort(key=key)
    assert len(ours) == len(duck)
    assert duck, f"expected rows in {table} of the world, found none"
    for a, b in zip(duck, ours, strict=True):
        assert not _differences(a, b, names, types, decimal_tol, rel_tol), (a, b)
    if table == "incidents":  # the detectors run on Spark did find something
        kinds = {row[names.index("kind")] for row in duck}
        assert {"double_scheduled", "idle_allocation"} <= kinds


def test_spark_engine_read_the_minute_samples_from_the_ledgers_lake(both: tuple[Path, Path]
                                                                     ) -> None:
    """The Spark build read gpu_utilization from the Parquet partitions beside its ledger
    (models/lake.py), brought up to date first, not from an export of the DuckDB table; the
    tables the build rewrote wait for the publish."""
    from models.lake import lake_root
    from models.lake_publish import read_catalog

    _, spark_db = both
    catalog = read_catalog(lake_root(spark_db))
    assert catalog is not None, f"expected a lake beside {spark_db}, found none"
    held = sum(p.rows for p in catalog.values() if p.table_name == "gpu_utilization")
    con = duckdb.connect(str(spark_db), read_only=True)
    try:
        rows = con.execute("SELECT count(*) FROM gpu_utilization").fetchone()[0]
    finally:
        con.close()
    assert rows > 0
    assert held == rows
    assert {p.table_name for p in catalog.values()} == {"gpu_utilization"}
