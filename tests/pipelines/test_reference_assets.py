from pathlib import Path

import dagster as dg
import duckdb

from tests.helpers import copy_tiny_world, materialize_world


def _materialize(db: Path, world: Path) -> dg.ExecuteInProcessResult:
    selection = dg.AssetSelection.groups("reference", "kubernetes", "serving")
    return materialize_world(db, world, selection)


def _table_counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        names = [r[0] for r in con.execute("SHOW TABLES").fetchall()]
        return {
            n: con.execute(f"SELECT count(*) FROM {n}").fetchone()[0]
            for n in names if n not in {"ingest_runs", "source_files"}
        }


def test_raw_assets_load_the_world_and_a_rerun_changes_nothing(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    db = tmp_path / "ledger.duckdb"
    first = _materialize(db, world)
    assert first.success
    counts = _table_counts(db)
    assert counts["nodes"] == 5
    assert counts["identity_map"] == 4
    assert counts["rate_card"] == 3
    assert counts["kueue_workloads_raw"] == 2
    assert counts["rejects"] == 0
    second = _materialize(db, world)
    assert second.success
    assert _table_counts(db) == counts
    snapshot = db.with_name("ledger.serving.duckdb")
    assert snapshot.exists()
    checks = {e.check_name: e.passed for e in second.get_asset_check_evaluations()}
    assert checks["gpu_inventory_is_consistent"] is True
    assert checks["identity_map_has_no_rejects"] is True


def test_bad_rows_are_kept_counted_and_flagged_by_checks(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    with (world / "identity_map.csv").open("a", encoding="utf-8") as fh:
        fh.write("unix_group,staff,,ops,CC-2,,\n")
    with (world / "nodes.csv").open("a", encoding="utf-8") as fh:
        fh.write("gpu-shr-01,shared,h100,1,1,GPU-00000000-0000-0000-0000-000000000006,shared\n")
    db = tmp_path / "ledger.duckdb"
    result = _materialize(db, world)
    assert result.success
    mats = {
        m.asset_key.to_user_string(): m.metadata
        for m in result.get_asset_materialization_events()
        for m in [m.event_specific_data.materialization]
    }
    assert mats["identity_map"]["rejected"].value == 1
    assert mats["identity_map"]["rows"].value == 4
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["identity_map_has_no_rejects"].passed is False
    assert "identity_map.csv:6 field source_kind" in checks[
        "identity_map_has_no_rejects"].metadata["offending_rows"].value
    assert checks["gpu_inventory_is_consistent"].passed is False
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(
            "SELECT line_no, field FROM rejects WHERE source = 'identity_map'"
        ).fetchall() == [(6, "source_kind")]
