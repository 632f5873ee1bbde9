"""Dagster: the weekly close job (groups chargeback and reports) closes the week, writes its
report and then its FOCUS file into reports/<YYYY-Www>/; the asset check next to it passes when
the rows add up to the invoice and returns the offending lines when they do not."""

import csv
import shutil
from pathlib import Path

import dagster as dg
import duckdb

from tests.helpers import SAMPLE_SITE, load_definitions, materialize_world

PARTITION = "2026-01-05"


def _check(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [evaluation] = [e for e in result.get_asset_check_evaluations()
                    if e.check_name == "focus_rows_sum_to_invoice"]
    return evaluation


def test_the_weekly_close_writes_the_weeks_focus_file_and_checks_it(
        sample_db: Path, tmp_path: Path, monkeypatch):
    db = tmp_path / "ledger.duckdb"
    shutil.copy(sample_db, db)
    monkeypatch.setenv("GPULEDGER_REPORTS", str(tmp_path / "reports"))
    job = load_definitions(SAMPLE_SITE).resolve_job_def("weekly_close")
    assert "focus_export" in {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    selection = dg.AssetSelection.assets("chargeback", "weekly_report", "focus_export")
    result = materialize_world(db, SAMPLE_SITE.parent, selection, PARTITION)
    assert result.success
    folder = tmp_path / "reports" / "2026-W02"
    assert (folder / "summary.html").is_file()  # the report's swap kept the FOCUS file
    with (folder / "focus-1.2.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) > 1000
    assert {r["x_Source"] for r in rows} == {"frozen"}
    [event] = result.asset_materializations_for_node("focus_export")
    assert event.metadata["rows"].value == len(rows)
    assert _check(result).passed

    # a frozen piece changed behind the close's back: the check names the line it breaks
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE frozen_allocation_charges SET charged_ms = charged_ms + 3600000 "
                    "WHERE rowid = (SELECT min(rowid) FROM frozen_allocation_charges)")
    again = materialize_world(db, SAMPLE_SITE.parent, dg.AssetSelection.assets("focus_export"),
                              PARTITION)
    check = _check(again)
    assert not check.passed
    assert check.metadata["offending_lines"].value == 1
