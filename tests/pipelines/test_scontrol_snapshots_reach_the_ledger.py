"""`scontrol show job -d` snapshots reach slurm_gpu_indices through Dagster as they do through
`gpuledger import-scontrol` / `load-world`: the site's snapshot folder (dump mode), or a live
snapshot the sensor takes through the cluster's prefix and the import run stores.

Fixtures: sample_data/slurm/scontrol-*.txt (the sample world's snapshots) and
tests/fixtures/real_slurm/scontrol-show-job-d-running-gpu.txt (a real Slurm 22.05 capture, see
that folder's README)."""

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb

from gpuledger.cli import main
from tests.helpers import FIXTURES, SAMPLE_SITE, load_definitions, site_environment

DAY = "2026-01-05"
REAL_SNAPSHOT = FIXTURES / "real_slurm" / "scontrol-show-job-d-running-gpu.txt"


def _materialize(site: Path, db: Path, day: str) -> dg.ExecuteInProcessResult:
    defs = load_definitions(site)
    from pipelines.defs.resources import LedgerResource

    with site_environment(site):
        return dg.materialize(
            [*defs.assets, *(defs.asset_checks or [])],
            resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
            selection=dg.AssetSelection.assets("slurm_gpu_indices"), partition_key=day)


def _rows(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT * EXCLUDE (source_file) FROM slurm_gpu_indices "
                           "ORDER BY ALL").fetchall()


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    (event,) = result.get_asset_materialization_events()
    return event.event_specific_data.materialization.metadata


def test_the_days_snapshot_files_load_as_import_scontrol_loads_them(tmp_path: Path):
    db = tmp_path / "dagster.duckdb"
    first = _materialize(SAMPLE_SITE, db, DAY)
    assert first.success
    files = sorted((SAMPLE_SITE.parent / "slurm").glob("scontrol-20260105T*.txt"))
    assert len(files) == 12  # every two hours
    meta = _metadata(first)
    assert meta["files"].value == 12
    assert meta["gpu_rows"].value > 0
    assert meta["per_cluster"].value["gpulab"]["rejected"] == 0

    cli_db = tmp_path / "cli.duckdb"
    for path in files:
        assert main(["--db", str(cli_db), "import-scontrol", str(path)]) == 0
    assert _rows(db) == _rows(cli_db)
    assert len(_rows(db)) == meta["gpu_rows"].value

    again = _materialize(SAMPLE_SITE, db, DAY)  # the same files: nothing read again
    assert _metadata(again)["files"].value == 0
    assert _metadata(again)["per_cluster"].value["gpulab"]["skipped_unchanged"] == 12
    assert _rows(db) == _rows(cli_db)


def test_a_live_snapshot_goes_through_the_prefix_and_the_import_run(tmp_path: Path):
    # the "login node": a prefix that answers every command with a real scontrol capture
    prefix = tmp_path / "login-node"
    prefix.write_text(f"#!/bin/sh\ncase \"$1\" in *scontrol*) cat {REAL_SNAPSHOT};; "
                      "*) exit 2;; esac\n", encoding="utf-8")
    prefix.chmod(0o755)
    site = tmp_path / "gpuledger.toml"
    site.write_text(f"""
[gpuledger]
first_day = "2026-11-30"
db = "data/gpuledger.duckdb"
[gpuledger.clusters.gpuledger.slurm]
mode = "sacct"
prefix = "{prefix}"
scontrol_every_minutes = 2
""", encoding="utf-8")
    defs = load_definitions(site)
    sensor = defs.resolve_sensor_def("scontrol_snapshot_sensor")
    assert sensor.minimum_interval_seconds == 120
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING  # schedules on by default
    with site_environment(site), dg.instance_for_test() as instance:
        result = sensor.evaluate_tick(dg.build_sensor_context(
            instance=instance, definitions=defs))
    (request,) = result.run_requests
    today = datetime.now(UTC)
    assert request.partition_key == f"{today:%Y-%m-%d}"
    (saved,) = (tmp_path / "data" / "spool" / "scontrol" / "gpuledger").iterdir()
    assert saved.read_text(encoding="utf-8") == REAL_SNAPSHOT.read_text(encoding="utf-8")

    db = tmp_path / "data" / "gpuledger.duckdb"
    run = _materialize(site, db, request.partition_key)
    assert run.success
    assert _metadata(run)["files"].value == 1
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT job_id_raw, node, gpu_index FROM slurm_gpu_indices "
                           "ORDER BY ALL").fetchall()
    assert rows == [(19, "a100-01", 0), (19, "a100-01", 1)]  # GRES=gpu:a100:2(IDX:0-1)
