""""Unattributed" means one thing (models/attribution.py, docs/accounting.md): no cost centre is
known, so nobody can be billed. The Chargeback page's KPI, its totals table's `unattributed`
cost centre, its Unattributed section and the weekly report show the same GPU-hours; lines
whose cost centre is known but whose team or person is not are counted apart, as incomplete."""

import re
from pathlib import Path

import polars as pl

from gpuledger.report.weekly import write_weekly_report
from models.runner import read_snapshot
from tests.dashboards.pages import frame, metrics, open_page
from tests.dashboards.test_pages import WEEK, one

DAYS = [WEEK[1], WEEK[2]]


def card_seconds(summary: Path, card: str) -> int:
    """GPU-seconds of one card of a weekly report's summary page (data-value="seconds|money")."""
    found = re.search(rf'data-card="{card}" data-value="(\d+)\|', summary.read_text())
    assert found, f"expected a card {card!r} in {summary}, found none"
    return int(found.group(1))


def test_kpi_table_and_report_agree_on_unattributed(sample_ledger: Path, monkeypatch,
                                                     tmp_path: Path):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="cb_week").value == WEEK[0]
    no_centre = one(sample_ledger, "SELECT sum(gpu_seconds) FROM allocations WHERE day >= ? "
                    "AND day < ? AND cost_centre = 'unattributed'", DAYS)
    no_person = one(sample_ledger, "SELECT sum(gpu_seconds) FROM allocations WHERE day >= ? "
                    "AND day < ? AND cost_centre <> 'unattributed' "
                    "AND 'unattributed' IN (team, person)", DAYS)
    # the sample week has both kinds, so an "any field unknown" KPI could not pass
    assert no_centre > 0
    assert no_person > 0

    shown = metrics(at)
    assert shown["Unattributed GPU-hours"] == f"{no_centre / 3600:,.1f}"
    assert shown["Incomplete GPU-hours"] == f"{no_person / 3600:,.1f}"

    table = frame(at, "cost_centre", "gpu_hours", "amount")
    row = table.filter(pl.col("cost_centre") == "unattributed")
    assert f"{row['gpu_hours'].sum():,.1f}" == shown["Unattributed GPU-hours"]

    # the Unattributed section: its table, then the incomplete lines' table (page order)
    sections = [e.value for e in at.dataframe
                if {"cost_centre", "team", "person", "domain", "gpu_hours"}
                <= set(e.value.columns) and "gpu_model" not in e.value.columns]
    assert len(sections) == 2, [list(s.columns) for s in sections]
    no_centre_table, no_person_table = sections
    assert set(no_centre_table["cost_centre"]) == {"unattributed"}
    assert f"{no_centre_table['gpu_hours'].sum():,.1f}" == shown["Unattributed GPU-hours"]
    assert "unattributed" not in set(no_person_table["cost_centre"])
    assert f"{no_person_table['gpu_hours'].sum():,.1f}" == shown["Incomplete GPU-hours"]

    with read_snapshot(sample_ledger) as con:
        report = write_weekly_report(con, WEEK[0], tmp_path)
    assert report.unattributed_gpu_seconds == no_centre
    assert card_seconds(report.folder / "summary.html", "unattributed") == no_centre
    assert card_seconds(report.folder / "summary.html", "incomplete") == no_person
