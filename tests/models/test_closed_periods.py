"""Closed weeks (models/closing.py): the close freezes a week's invoice lines, late data lands as
adjustment lines in the next open week, an explicit re-close replaces the frozen lines.
A small synthetic ledger; figures computed here."""

from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from models.build import build_chargeback
from models.close_week import close_week
from models.closing import changed_closes, current_close
from models.runner import ensure_schema, publish_snapshot, read_snapshot
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER

W02, W03, W04 = date(2026, 1, 5), date(2026, 1, 12), date(2026, 1, 19)  # Mondays
AFTER = datetime(2026, 2, 2)  # every week here has ended


def _alloc(con, day: date, key: str, seconds: int, *, person: str = "ann", cc: str = "CC-1"):
    start = datetime.combine(day, time(8))
    con.execute("DELETE FROM allocations WHERE source_key = ? AND day = ?", [key, day])
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, node, gpu_model, gpus, "
        "start_ts, end_ts, gpu_seconds, qos, person, team, cost_centre, outcome) VALUES "
        "(?, 'slurm', 'c', ?, 'n1', 'a100', 1, ?, ? + to_seconds(?), ?, 'normal', ?, 'team', ?, "
        "'completed')", [day, key, start, start, seconds, seconds, person, cc])


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR')")
    _alloc(c, W02, "j1", 7200)
    _alloc(c, W02 + timedelta(days=2), "j2", 3600, person="bob", cc="CC-2")
    _alloc(c, W03, "j3", 1800)
    build_chargeback(c, W02, W03 + timedelta(days=6))
    yield c
    c.close()


def _invoice(con, week: str) -> list[tuple]:
    return con.execute("SELECT cost_centre, person, gpu_seconds, amount FROM chargeback "
                       "WHERE period = ? ORDER BY ALL", [week]).fetchall()


def _adjustments(con) -> list[tuple]:
    return con.execute(
        "SELECT period, original_period, cost_centre, person, gpu_seconds, amount, reason "
        "FROM invoice_adjustments ORDER BY ALL").fetchall()


def test_late_data_for_a_closed_week_lands_in_the_next_open_week(con):
    close = close_week(con, "2026-W02", closed_by="finance", run_id="run-1", now=AFTER)
    assert (close.revision, close.lines, close.gpu_seconds) == (1, 2, 10800)
    assert close.amount == Decimal("7.50")
    issued = _invoice(con, "2026-W02")
    assert issued == [("CC-1", "ann", 7200, Decimal("5.00")),
                      ("CC-2", "bob", 3600, Decimal("2.50"))]

    # a runaway fix in slurmdbd: j1 ran 1,001 s longer than first reported; rebuilt by a later run
    _alloc(con, W02, "j1", 8201)
    build_chargeback(con, W02, W02, run="run-2")
    assert _invoice(con, "2026-W02") == issued  # the closed invoice does not move
    assert con.execute("SELECT gpu_seconds FROM chargeback_periods WHERE period = '2026-W02' "
                       "AND person = 'ann'").fetchone() == (8201,)  # the ledger does
    # 8,201 s at 2.50 is 5.695 -> 5.70 billed in all: 0.70 more than the frozen 5.00
    assert _adjustments(con) == [("2026-W03", "2026-W02", "CC-1", "ann", 1001, Decimal("0.70"),
                                  "late data for closed week 2026-W02")]
    assert con.execute("SELECT run_id FROM invoice_adjustments").fetchall() == [("run-2",)]
    assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []
    assert changed_closes(con) == []

    # a rebuild with the same inputs changes nothing, not even the adjustment's run and time
    before = con.execute("SELECT * FROM invoice_adjustments").fetchall()
    build_chargeback(con, W02, W03, run="run-3")
    assert con.execute("SELECT * FROM invoice_adjustments").fetchall() == before


def test_adjustments_close_with_the_week_that_carries_them(con):
    close_week(con, "2026-W02", now=AFTER)
    _alloc(con, W02, "j1", 9000)  # +1,800 s
    build_chargeback(con, W02, W02)
    w03 = close_week(con, "2026-W03", now=AFTER)
    assert _adjustments(con) == [("2026-W03", "2026-W02", "CC-1", "ann", 1800, Decimal("1.25"),
                                  "late data for closed week 2026-W02")]
    # more late data: only the new difference, in the next open week (W04)
    _alloc(con, W02, "j1", 9600)  # +600 s more
    _alloc(con, W03, "j3", 0)  # and W03's own job was a phantom
    build_chargeback(con, W02, W03 + timedelta(days=6))
    assert _adjustments(con) == [
        ("2026-W03", "2026-W02", "CC-1", "ann", 1800, Decimal("1.25"),
         "late data for closed week 2026-W02"),
        ("2026-W04", "2026-W02", "CC-1", "ann", 600, Decimal("0.42"),  # 6.67 - 5.00 - 1.25
         "late data for closed week 2026-W02"),
        ("2026-W04", "2026-W03", "CC-1", "ann", -1800, Decimal("-1.25"),
         "late data for closed week 2026-W03"),
    ]
    assert current_close(con, "2026-W03").checksum == w03.checksum
    assert changed_closes(con) == []
    assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []


def test_a_recorded_reclose_replaces_the_frozen_lines(con):
    close_week(con, "2026-W02", closed_by="finance", now=AFTER)
    _alloc(con, W02, "j1", 9000)
    build_chargeback(con, W02, W02)
    with pytest.raises(ValueError, match=r"expected an open week to close, found 2026-W02 "
                                         r"closed .* by finance \(revision 1\)"):
        close_week(con, "2026-W02", now=AFTER)
    with pytest.raises(ValueError, match=r"expected a reason for re-closing 2026-W02"):
        close_week(con, "2026-W02", reclose=True, now=AFTER)
    again = close_week(con, "2026-W02", reclose=True, reason="runaway job 17 fixed",
                       closed_by="controller", now=AFTER)
    assert (again.revision, again.gpu_seconds) == (2, 12600)
    assert _invoice(con, "2026-W02")[0] == ("CC-1", "ann", 9000, Decimal("6.25"))
    assert _adjustments(con) == []  # the re-close took the difference in
    history = con.execute("SELECT revision, closed_by, reason FROM closed_periods "
                          "ORDER BY revision").fetchall()
    assert history == [(1, "finance", "weekly close"), (2, "controller", "runaway job 17 fixed")]
    assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []


def test_a_reclose_cannot_charge_an_invoiced_adjustment_twice(con):
    close_week(con, "2026-W02", now=AFTER)
    _alloc(con, W02, "j1", 9000)
    build_chargeback(con, W02, W02)
    close_week(con, "2026-W03", now=AFTER)  # W03 invoiced the +1,800 s
    with pytest.raises(ValueError, match=r"expected no adjustment of 2026-W02 already invoiced "
                                         r"by a closed week, found 1 in 2026-W03"):
        close_week(con, "2026-W02", reclose=True, reason="x", now=AFTER)


def test_a_week_closes_only_when_it_has_ended_and_has_lines(con):
    with pytest.raises(ValueError, match=r"expected a week that has ended, found 2026-W03 "
                                         r"ending 2026-01-19"):
        close_week(con, "2026-W03", now=datetime(2026, 1, 18, 23))
    with pytest.raises(ValueError, match=r"expected invoice lines for week 2026-W05"):
        close_week(con, "2026-W05", now=AFTER)
    with pytest.raises(ValueError, match=r"expected a closed week to re-close, found 2026-W03"):
        close_week(con, "2026-W03", reclose=True, reason="x", now=AFTER)
    assert con.execute("SELECT count(*) FROM closed_periods").fetchone() == (0,)


def test_a_changed_frozen_line_is_found_by_its_checksum(con):
    close_week(con, "2026-W02", now=AFTER)
    con.execute("UPDATE frozen_invoice_lines SET amount = amount + 1 WHERE person = 'bob' "
                "AND period_kind = 'week'")
    [(period, recorded, found)] = changed_closes(con)
    assert period == "2026-W02"
    assert recorded != found


def test_day_lines_of_a_closed_week_are_frozen_too_and_months_follow_the_ledger(con):
    close_week(con, "2026-W02", now=AFTER)
    _alloc(con, W02, "j1", 9000)
    build_chargeback(con, W02, W02)
    day = con.execute("SELECT gpu_seconds FROM invoice_lines WHERE period_kind = 'day' "
                      "AND period = '2026-01-05'").fetchall()
    month = con.execute("SELECT sum(gpu_seconds) FROM invoice_lines WHERE period_kind = 'month' "
                        "AND period = '2026-01'").fetchone()
    assert day == [(7200,)]
    assert month == (9000 + 3600 + 1800,)


def test_a_published_snapshot_reads_the_frozen_invoice(con, tmp_path: Path):
    close_week(con, "2026-W02", now=AFTER)
    _alloc(con, W02, "j1", 9000)
    build_chargeback(con, W02, W02)
    db = tmp_path / "ledger.duckdb"
    con.execute(f"ATTACH '{db}' AS disk")
    con.execute("COPY FROM DATABASE memory TO disk")
    con.execute("DETACH disk")
    with duckdb.connect(str(db)) as disk:
        ensure_schema(disk)
        publish_snapshot(disk, db)
    with read_snapshot(db) as reader:
        assert _invoice(reader, "2026-W02")[0] == ("CC-1", "ann", 7200, Decimal("5.00"))
        assert reader.execute("SELECT period, gpu_seconds FROM invoice_adjustments").fetchall() \
            == [("2026-W03", 1800)]
        assert reader.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []


def test_the_dashboard_invoice_reads_the_frozen_lines(con, tmp_path: Path, monkeypatch):
    import streamlit as st

    from dashboards import data

    close_week(con, "2026-W02", now=AFTER)
    _alloc(con, W02, "j1", 9000)
    build_chargeback(con, W02, W02)
    db = tmp_path / "ledger.duckdb"
    con.execute(f"ATTACH '{db}' AS disk")
    con.execute("COPY FROM DATABASE memory TO disk")
    con.execute("DETACH disk")
    with duckdb.connect(str(db)) as disk:
        publish_snapshot(disk, db)
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    st.cache_data.clear()
    week = data.chargeback_lines("week", W02, W03, [], [])
    assert sorted(week["gpu_seconds"].to_list()) == [3600, 7200]  # as issued
    days = data.chargeback_lines("day", W02, W03, [], [])
    assert sorted(days["gpu_seconds"].to_list()) == [3600, 7200]
    assert "2026-W02" in data.chargeback_periods("week")["period"].to_list()


def test_the_close_week_command_records_who_and_why(con, tmp_path: Path, capsys):
    from gpuledger.cli import main

    db = tmp_path / "ledger.duckdb"
    con.execute(f"ATTACH '{db}' AS disk")
    con.execute("COPY FROM DATABASE memory TO disk")
    con.execute("DETACH disk")
    assert main(["--db", str(db), "close-week", "2026-W02", "--by", "finance"]) == 0
    assert "week 2026-W02 closed" in capsys.readouterr().err
    assert main(["--db", str(db), "close-week", "2026-W02"]) == 1
    assert "expected an open week to close, found 2026-W02 closed" in capsys.readouterr().err
    assert main(["--db", str(db), "close-week", "2026-W02", "--reclose", "--reason",
                 "rate card fixed", "--by", "controller"]) == 0
    assert main(["--db", str(db), "sql", "SELECT revision, closed_by, reason FROM "
                 "closed_periods ORDER BY revision"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "1,finance,weekly close", "2,controller,rate card fixed"]
