"""The lake's layout and its readers (issue #18 item 3): Hive paths and escaping, empty tables,
the snapshot's views for the duckdb CLI, and confined readers that read the lake and nothing
else."""

from datetime import date
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from models.lake import (
    LAKE_TABLES,
    hive_escape,
    hive_unescape,
    lake_root,
    lake_table_glob,
    partition_paths,
)
from models.runner import connect, publish_snapshot, read_snapshot, replace_rows, snapshot_path
from models.schema import GPU_UTILIZATION
from tests.models.lake_helpers import utilization


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        for day in (date(2026, 1, 5), date(2026, 1, 6)):
            replace_rows(con, GPU_UTILIZATION, utilization("c1", day, 0.5), where="FALSE")
        publish_snapshot(con, db)
    return db


@pytest.mark.parametrize(("value", "segment"), [
    ("gpulab", "gpulab"), ("a/b", "a%2Fb"), ("k=v", "k%3Dv"), ("50%", "50%25"),
    ("with space", "with space"), ("zürich", "zürich"), (None, "__HIVE_DEFAULT_PARTITION__"),
    ("x:y?*", "x%3Ay%3F%2A"), ("tab\there", "tab%09here"),
])
def test_partition_values_are_escaped_as_hive_escapes_them(value, segment):
    assert hive_escape(value) == segment
    assert hive_unescape(segment) == value


def test_partitions_sit_at_the_hive_paths_the_interface_names(ledger: Path):
    root = lake_root(ledger)
    assert root == ledger.with_name("ledger.lake")
    assert partition_paths(root, "gpu_utilization", date(2026, 1, 6), date(2026, 1, 9)) == [
        root / "gpu_utilization/cluster=c1/day=2026-01-06/part-0.parquet"]
    glob = lake_table_glob(root, "gpu_utilization")
    got = duckdb.connect().execute(
        f"SELECT cluster, day, count(*) FROM read_parquet('{glob}', hive_partitioning = true) "
        "GROUP BY ALL ORDER BY ALL").fetchall()
    assert got == [("c1", date(2026, 1, 5), 60), ("c1", date(2026, 1, 6), 60)]
    # partition columns are in the path only; the small tables sit whole beside them
    inside = pq.read_schema(root / "gpu_utilization/cluster=c1/day=2026-01-05/part-0.parquet")
    assert {"cluster", "day"} & set(inside.names) == set()
    assert (root / "rate_card" / "part-0.parquet").is_file()
    assert (root / "_catalog.parquet").is_file()


def test_every_lake_table_reads_even_without_a_partition(ledger: Path):
    with read_snapshot(ledger) as con:
        for lake in LAKE_TABLES:
            rows = con.execute(f"SELECT * FROM {lake.name}").fetchall()
            assert (len(rows) > 0) == (lake.name == "gpu_utilization"), lake.name
            names = [d[0] for d in con.execute(f"SELECT * FROM {lake.name} LIMIT 0").description]
            assert names == lake.table.column_names


def test_the_snapshot_views_serve_the_duckdb_cli_unconfined(ledger: Path):
    with duckdb.connect(str(snapshot_path(ledger)), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(busy_fraction) FROM gpu_utilization"
                           ).fetchone() == (120, 60.0)
        assert con.execute("SELECT typeof(bucket_start) FROM gpu_utilization LIMIT 1"
                           ).fetchone() == ("TIMESTAMP",)
        assert con.execute("SELECT count(*) FROM k8s_pod_allocations").fetchone() == (0,)


@pytest.mark.parametrize("query", [
    "COPY (SELECT 1) TO '{root}/gpu_utilization/cluster=c1/day=2026-01-05/part-0.parquet'",
    "COPY (SELECT 1) TO '{root}/evil.csv'",
    "SELECT * FROM read_parquet('{root}/gpu_utilization/*/*/*.parquet')",
    "SELECT * FROM glob('{root}/**')",
    "SELECT * FROM read_text('/etc/hostname')",
])
def test_a_confined_reader_reads_the_lake_tables_and_no_file(ledger: Path, query: str):
    root = lake_root(ledger)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with read_snapshot(ledger) as con:
        assert con.execute("SELECT count(*) FROM gpu_utilization").fetchone() == (120,)
        with pytest.raises(duckdb.PermissionException):
            con.execute(query.format(root=root))
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
