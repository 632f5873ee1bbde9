from datetime import date, datetime, timedelta
from decimal import Decimal

import duckdb
import pytest

from models.build import build_chargeback
from models.runner import ensure_schema
from models.schema import CHARGEBACK, Table

RATES = [
    ("a100", "", "", None, date(2026, 1, 7), Decimal("2.50"), "EUR"),
    ("a100", "", "", date(2026, 1, 7), None, Decimal("2.75"), "EUR"),
    ("h100", "", "", None, None, Decimal("4.00"), "EUR"),
    ("h100", "kubernetes", "", None, None, Decimal("4.40"), "EUR"),
    ("h100", "slurm", "high", None, None, Decimal("5.00"), "EUR"),
]


def _alloc(con, day, domain, key, model, gpus, seconds, person="ann", qos="normal"):
    start = datetime.combine(day, datetime.min.time())
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, node, gpu_model, gpus, "
        "start_ts, end_ts, gpu_seconds, qos, person, team, cost_centre, outcome) VALUES "
        "(?, ?, 'c', ?, 'n1', ?, ?, ?, ? + to_seconds(?), ?, ?, ?, 'team', 'CC-1', 'completed')",
        [day, domain, key, model, gpus, start, start, seconds, gpus * seconds, qos, person],
    )


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO rate_card VALUES (?, ?, ?, ?, ?, ?, ?)", RATES)
    yield c
    c.close()


def _lines(con, kind):
    return con.execute(
        "SELECT period, domain, gpu_model, rate_per_gpu_hour, gpu_seconds, amount "
        "FROM chargeback_periods WHERE period_kind = ? ORDER BY ALL", [kind]).fetchall()


def test_rate_change_mid_week_splits_the_line_and_rounds_once(con):
    # 1 GPU x 1,001 s on Mon 5th and Tue 6th at 2.50, and Wed 7th at 2.75
    for n, day in enumerate((date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 7))):
        _alloc(con, day, "slurm", f"j{n}", "a100", 1, 1001)
    build_chargeback(con, date(2026, 1, 5), date(2026, 1, 7))
    week = _lines(con, "week")
    assert week == [
        ("2026-W02", "slurm", "a100", Decimal("2.500000"), 2002, Decimal("1.39")),
        ("2026-W02", "slurm", "a100", Decimal("2.750000"), 1001, Decimal("0.76")),
    ]
    # per day each line is rounded on its own: 0.70 + 0.70 (not 1.39) + 0.76
    days = _lines(con, "day")
    assert [d[-1] for d in days] == [Decimal("0.70"), Decimal("0.70"), Decimal("0.76")]
    month = _lines(con, "month")
    assert [(m[0], m[4]) for m in month] == [("2026-01", 2002), ("2026-01", 1001)]


def test_the_most_specific_rate_wins(con):
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "s-normal", "h100", 2, 3600)
    _alloc(con, day, "slurm", "s-high", "h100", 1, 3600, qos="high")
    _alloc(con, day, "kubernetes", "pod", "h100", 1, 3600)
    build_chargeback(con, day, day)
    got = {(d, r): a for _, d, _, r, _, a in _lines(con, "day")}
    assert got == {
        ("kubernetes", Decimal("4.400000")): Decimal("4.40"),
        ("slurm", Decimal("4.000000")): Decimal("8.00"),
        ("slurm", Decimal("5.000000")): Decimal("5.00"),
    }


def test_an_unpriced_model_keeps_its_hours_with_no_amount(con):
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "j", "mi300", 1, 7200)
    build_chargeback(con, day, day)
    assert _lines(con, "day") == [("2026-01-05", "slurm", "mi300", None, 7200, None)]


def test_rebuilding_changes_nothing(con):
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "j", "a100", 3, 1234)
    build_chargeback(con, day, day)
    before = con.execute("SELECT * FROM chargeback_periods ORDER BY ALL").fetchall()
    build_chargeback(con, day, day)
    assert con.execute("SELECT * FROM chargeback_periods ORDER BY ALL").fetchall() == before


def test_lines_with_nothing_measured_show_zero_busy_and_idle_not_null(con):
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "j", "a100", 2, 3600)
    build_chargeback(con, day, day)
    rows = con.execute("SELECT period_kind, gpu_hours, measured_gpu_hours, busy_gpu_hours, "
                       "idle_gpu_hours FROM chargeback_periods ORDER BY period_kind").fetchall()
    assert rows == [(kind, Decimal("2.000000"), 0, 0, 0) for kind in ("day", "month", "week")]


def test_a_ledger_from_before_the_busy_columns_gets_them(con):
    old = [(c, t) for c, t in CHARGEBACK.columns
           if c not in ("measured_gpu_hours", "busy_gpu_hours", "idle_gpu_hours")]
    # the oldest layout: a table named chargeback with every period kind (now the view's name)
    con.execute("DROP VIEW chargeback")
    con.execute("DROP TABLE chargeback_periods")
    con.execute(Table("chargeback", tuple(old)).ddl())
    ensure_schema(con)  # what `connect` does on opening an old ledger
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "j", "a100", 1, 3600)
    build_chargeback(con, day, day)
    assert con.execute("SELECT gpu_seconds, busy_gpu_hours FROM chargeback_periods "
                       "WHERE period_kind = 'day'").fetchall() == [(3600, 0)]
    # and the view shows the week's line
    assert con.execute("SELECT period_kind, gpu_seconds FROM chargeback").fetchall() == [
        ("week", 3600)]


def test_the_chargeback_view_is_the_weekly_invoice(con):
    day = date(2026, 1, 5)
    _alloc(con, day, "slurm", "j", "a100", 2, 3600)
    _alloc(con, day + timedelta(days=1), "slurm", "k", "a100", 1, 3600)
    build_chargeback(con, day, day + timedelta(days=1))
    kinds = dict(con.execute("SELECT period_kind, sum(gpu_seconds) FROM chargeback_periods "
                             "GROUP BY 1").fetchall())
    assert kinds == {"day": 3 * 3600, "week": 3 * 3600, "month": 3 * 3600}
    assert con.execute("SELECT sum(gpu_seconds), count(*) FROM chargeback").fetchone() == (
        3 * 3600, 1)
