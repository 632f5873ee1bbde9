from pathlib import Path

import dagster as dg
import duckdb

from tests.helpers import copy_tiny_world, materialize_world

DAY = "2026-11-30"  # the day of the real Slurm capture in the tiny world


def _run(db: Path, world: Path) -> dg.ExecuteInProcessResult:
    selection = dg.AssetSelection.assets("slurm_jobs", "slurm_steps", "sreport_gpu")
    return materialize_world(db, world, selection, partition_key=DAY)


def _dump(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("slurm_runs", "slurm_steps", "slurm_node_allocations",
                      "sreport_account_usage", "rejects")
        }


def test_daily_partition_loads_and_reconciles_and_is_idempotent(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    db = tmp_path / "ledger.duckdb"
    first = _run(db, world)
    assert first.success
    meta = {
        m.asset_key.to_user_string(): m.metadata
        for e in first.get_asset_materialization_events()
        for m in [e.event_specific_data.materialization]
    }
    assert meta["slurm_jobs"]["runs"].value == 18
    assert meta["slurm_jobs"]["rejected"].value == 0
    checks = {e.check_name: e.passed for e in first.get_asset_check_evaluations()}
    assert checks == {
        "no_duplicate_runs": True,
        "durations_are_possible": True,
        "gpu_field_parsed_on_every_gpu_job": True,
        "sacct_lines_within_sanity_limits": True,
        "slurm_reconciles_with_sreport": True,
    }
    before = _dump(db)
    assert _run(db, world).success
    assert _dump(db) == before


def test_reconciliation_check_returns_the_rows_that_differ(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    report = world / "sreport" / "account-utilization-by-user.txt"
    report.write_text(report.read_text().replace("|physics|alice||gres/gpu|34",
                                                 "|physics|alice||gres/gpu|40"))
    result = _run(tmp_path / "ledger.duckdb", world)
    evaluation = {e.check_name: e for e in result.get_asset_check_evaluations()}
    check = evaluation["slurm_reconciles_with_sreport"]
    assert check.passed is False
    assert check.metadata["offending_rows"].value == 1
    assert "physics | alice | 34 | 40 | -6" in check.metadata["sample"].value
