"""The Dagster asset ``weekly_report``: ISO-weekly, after chargeback, in the Monday close."""

import csv
import shutil
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from tests.helpers import SAMPLE_SITE, load_definitions, materialize_world

MONDAY = "2026-01-05"  # 2026-W02, which the simulated world of tests/reports/conftest.py touches


def test_asset_writes_the_weeks_report_with_the_models_totals(
        sim_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "ledger.duckdb"
    shutil.copyfile(sim_db, db)  # a private copy: the run rewrites the week's chargeback
    monkeypatch.setenv("GPULEDGER_REPORTS", str(tmp_path / "reports"))
    result = materialize_world(db, tmp_path,
                               dg.AssetSelection.assets("chargeback", "weekly_report"),
                               partition_key=MONDAY)
    assert result.success
    (event,) = [e for e in result.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey("weekly_report")]
    meta = event.event_specific_data.materialization.metadata
    folder = tmp_path / "reports" / "2026-W02"
    assert meta["path"].value == str(folder.resolve())
    assert meta["week"].value == "2026-W02"
    with duckdb.connect(str(db), read_only=True) as con:
        lines, seconds = con.execute(
            "SELECT count(*), sum(gpu_seconds) FROM chargeback WHERE period_kind = 'week' "
            "AND period = '2026-W02'").fetchone()
        incidents = con.execute("SELECT count(*) FROM incidents WHERE day >= '2026-01-05' "
                                "AND day < '2026-01-12'").fetchone()[0]
        amounts = dict(con.execute(
            "SELECT currency, CAST(sum(amount) AS VARCHAR) FROM chargeback WHERE period_kind = "
            "'week' AND period = '2026-W02' GROUP BY currency").fetchall())
    assert lines > 0
    assert meta["invoice_lines"].value == lines
    assert Decimal(str(meta["gpu_hours"].value)) == round(Decimal(seconds) / 3600, 6)
    assert meta["amounts"].value == amounts
    assert meta["incidents"].value == incidents > 0
    with (folder / "invoice-lines.csv").open(encoding="utf-8", newline="") as fh:
        assert len(list(csv.reader(fh))) == lines + 1


def test_weekly_report_is_iso_weekly_after_chargeback_and_in_the_monday_close():
    defs = load_definitions(SAMPLE_SITE)  # Dagster is built from a site file
    from pipelines.defs.partitions import weekly_partitions  # as the site made them

    graph = defs.resolve_asset_graph()
    node = graph.get(dg.AssetKey("weekly_report"))
    assert node.partitions_def == weekly_partitions
    assert dg.AssetKey("chargeback") in node.parent_keys
    job = defs.resolve_job_def("weekly_close")
    assert {"chargeback", "weekly_report"} <= {
        k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    schedule = defs.resolve_schedule_def("weekly_close_schedule")
    assert schedule.cron_schedule == "0 6 * * 1"
    assert schedule.execution_timezone == "UTC"
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 1, 12, 6, 0, tzinfo=UTC))
    assert schedule(context).partition_key == "2026-01-05"  # 2026-W02, the week that ended
