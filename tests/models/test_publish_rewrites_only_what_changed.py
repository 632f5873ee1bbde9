"""Publishing costs what changed (issue #18 item 2): a publish rewrites the partitions a write
marked in lake_changes and no other; the lake always equals the ledger."""

from datetime import date
from pathlib import Path

import pytest

from models import lake_publish
from models.lake import lake_root
from models.runner import (
    PublishFailed,
    connect,
    publish_snapshot,
    read_snapshot,
    replace_rows,
    transaction,
)
from models.schema import GPU_UTILIZATION, LAKE_CHANGES
from tests.models.lake_helpers import lake_differences, part_stats, utilization

DAYS = (date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 7))
CLUSTERS = ("east", "west")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        for cluster in CLUSTERS:
            for day in DAYS:
                replace_rows(con, GPU_UTILIZATION, utilization(cluster, day, 0.5), where="FALSE")
        publish_snapshot(con, db)
    return db


def _busy(db: Path) -> list[tuple]:
    with read_snapshot(db) as con:
        return con.execute("SELECT cluster, CAST(bucket_start AS DATE), sum(busy_fraction) "
                           "FROM gpu_utilization GROUP BY ALL ORDER BY ALL").fetchall()


def test_the_first_publish_exports_every_partition(ledger: Path):
    assert sorted(part_stats(ledger)) == sorted(
        f"gpu_utilization/cluster={c}/day={d}/part-0.parquet" for c in CLUSTERS for d in DAYS)
    assert all(v == {"rows": 360, "snapshot": 0, "duckdb_hive": 0, "pyarrow_hive": 0}
               for t, v in lake_differences(ledger).items() if t == "gpu_utilization")


def test_replacing_one_day_of_one_cluster_rewrites_that_partition_alone(ledger: Path):
    before = part_stats(ledger)
    with connect(ledger) as con:
        replace_rows(con, GPU_UTILIZATION, utilization("east", DAYS[1], 0.25),
                     where="cluster = ? AND CAST(bucket_start AS DATE) = ?",
                     params=("east", DAYS[1]))
        assert con.execute(f"SELECT DISTINCT table_name, cluster, day FROM {LAKE_CHANGES.name}"
                           ).fetchall() == [("gpu_utilization", "east", DAYS[1])]
        publish_snapshot(con, ledger)
        assert con.execute(f"SELECT count(*) FROM {LAKE_CHANGES.name}").fetchone()[0] == 0
    after = part_stats(ledger)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {f"gpu_utilization/cluster=east/day={DAYS[1]}/part-0.parquet"}
    assert ("east", DAYS[1], pytest.approx(60 * 0.25)) in _busy(ledger)
    assert lake_differences(ledger)["gpu_utilization"]["snapshot"] == 0


def test_a_publish_with_nothing_marked_rewrites_nothing(ledger: Path):
    before = part_stats(ledger)
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    assert part_stats(ledger) == before


def test_a_day_range_rewrite_without_a_cluster_rewrites_every_cluster_of_those_days(
        ledger: Path):
    from models.lake_changes import mark_days

    before = part_stats(ledger)
    with connect(ledger) as con, transaction(con):
        con.execute("DELETE FROM gpu_utilization WHERE bucket_start >= ? AND bucket_start < ?",
                    [DAYS[2], date(2026, 1, 8)])
        mark_days(con, "gpu_utilization", DAYS[2], date(2026, 1, 8))
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    after = part_stats(ledger)
    assert set(before) - set(after) == {
        f"gpu_utilization/cluster={c}/day={DAYS[2]}/part-0.parquet" for c in CLUSTERS}
    assert all(after[k] == before[k] for k in after)
    assert not (lake_root(ledger) / f"gpu_utilization/cluster=east/day={DAYS[2]}").exists()
    assert {d for _, d, _ in _busy(ledger)} == set(DAYS[:2])


def test_a_write_no_hook_saw_is_caught_by_the_row_count_and_republished(ledger: Path, capfd):
    with connect(ledger) as con:
        con.execute("DELETE FROM gpu_utilization WHERE cluster = 'west'")  # bypasses the hooks
        publish_snapshot(con, ledger)
    assert "rewriting every partition of the table" in capfd.readouterr().err
    assert {c for c, _, _ in _busy(ledger)} == {"east"}
    assert lake_differences(ledger)["gpu_utilization"] == {
        "rows": 180, "snapshot": 0, "duckdb_hive": 0, "pyarrow_hive": 0}


def test_a_failed_publish_keeps_readers_on_the_previous_state(ledger: Path, monkeypatch):
    before = _busy(ledger)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("models.lake_serving.copy_serving", broken)
    with connect(ledger) as con:
        replace_rows(con, GPU_UTILIZATION, utilization("west", DAYS[0], 1.0),
                     where="cluster = ? AND CAST(bucket_start AS DATE) = ?",
                     params=("west", DAYS[0]))
        with pytest.raises(PublishFailed, match="No space left"):
            publish_snapshot(con, ledger)
    assert _busy(ledger) == before  # the previous snapshot and the files it names
    monkeypatch.undo()
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    assert ("west", DAYS[0], pytest.approx(60.0)) in _busy(ledger)


def test_replaced_files_are_deleted_after_the_grace(ledger: Path, monkeypatch):
    versions = lake_root(ledger) / "_versions"
    count = len(list(versions.rglob("*.parquet")))
    with connect(ledger) as con:
        replace_rows(con, GPU_UTILIZATION, utilization("east", DAYS[0], 0.1),
                     where="cluster = ? AND CAST(bucket_start AS DATE) = ?",
                     params=("east", DAYS[0]))
        publish_snapshot(con, ledger)
        assert len(list(versions.rglob("*.parquet"))) == count + 1  # the old one, in grace
        monkeypatch.setattr(lake_publish, "RETIRED_GRACE", lake_publish.timedelta(0))
        replace_rows(con, GPU_UTILIZATION, utilization("east", DAYS[0], 0.2),
                     where="cluster = ? AND CAST(bucket_start AS DATE) = ?",
                     params=("east", DAYS[0]))
        publish_snapshot(con, ledger)
    assert len(list(versions.rglob("*.parquet"))) == count


def test_staging_files_of_dead_publishers_are_removed(ledger: Path):
    staging = lake_root(ledger) / "_staging"
    dead = staging / "999999999.0123abcd.parquet"
    dead.write_bytes(b"half a partition")
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    assert not dead.exists()


def test_partitions_written_under_other_columns_are_rewritten(ledger: Path, capfd):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    catalog = lake_root(ledger) / "_catalog.parquet"
    table = pq.read_table(catalog)
    older = pc.replace_substring(table["columns"], ",attribution VARCHAR", "")
    pq.write_table(table.set_column(table.schema.get_field_index("columns"), "columns", older),
                   catalog)
    before = part_stats(ledger)
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    assert "rewriting every partition of the table" in capfd.readouterr().err
    after = part_stats(ledger)
    assert set(after) == set(before)
    assert all(after[k] != before[k] for k in after)
    assert "attribution VARCHAR" in pq.read_table(catalog)["columns"][0].as_py()
