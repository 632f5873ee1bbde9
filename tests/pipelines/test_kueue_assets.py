"""The Dagster Kueue assets go through the CLI's one Workload import: both tables from one read,
GPU resource names from the settings, bad items reported by the check, not a failed run."""

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from tests.helpers import FIXTURES, copy_tiny_world, materialize_world

KUEUE = FIXTURES / "kueue"


def _world(tmp_path: Path, snapshot: str) -> Path:
    world = copy_tiny_world(tmp_path)
    shutil.copy(KUEUE / snapshot, world / "kueue" / "workloads.json")
    return world


def _materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {m.asset_key.to_user_string(): m.metadata
            for m in (e.event_specific_data.materialization
                      for e in result.get_asset_materialization_events())}


def test_one_import_fills_both_tables_with_the_configured_gpu_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # no gpuledger.toml here
    monkeypatch.setenv("GPULEDGER_GPU_RESOURCES", "nvidia.com/gpu,example.com/gpu")
    world = _world(tmp_path, "dra-resource-claim-template.json")
    db = tmp_path / "ledger.duckdb"
    result = materialize_world(
        db, world, dg.AssetSelection.assets("kueue_workload_snapshot", "kueue_workloads"))
    assert result.success
    meta = _materializations(result)
    assert set(meta) == {"kueue_workload_snapshot", "kueue_workloads"}
    assert meta["kueue_workloads"]["gpu_resources"].value == "nvidia.com/gpu, example.com/gpu"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT gpus_per_pod, gpus_admitted, gpu_resource FROM "
                           "kueue_workloads").fetchall() == [(1, 1, "example.com/gpu")]
        assert con.execute("SELECT count(*) FROM kueue_workloads_raw").fetchone() == (1,)
        # one read for both assets
        assert con.execute("SELECT count(*) FROM ingest_runs WHERE source = 'kueue_workloads'"
                           ).fetchone() == (1,)


def test_bad_items_fail_the_check_and_the_good_ones_load(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_GPU_RESOURCES", raising=False)
    world = _world(tmp_path, "bad-items-one-defect-each.json")
    db = tmp_path / "ledger.duckdb"
    result = materialize_world(db, world, dg.AssetSelection.assets("kueue_workloads"))
    assert result.success
    assert set(_materializations(result)) == {"kueue_workloads"}  # the asset selected
    (check,) = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed) == ("every_workload_read", False)
    assert check.metadata["offending_rows"].value == 11
    assert "items[1].status: expected an object or no field, found null" in \
        check.metadata["sample"].value
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM kueue_workloads").fetchone() == (2,)
        assert con.execute("SELECT count(*) FROM kueue_workloads_raw").fetchone() == (2,)
