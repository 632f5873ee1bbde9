"""The rate precedence is written once (models/sql/rate_for_allocation.sql): the invoice lines
and the incidents' cost pick the same rate_card row, and a changed row moves both."""

from datetime import date, datetime, time, timedelta
from decimal import Decimal

import duckdb
import pytest

from models import load_sql
from models.build import build_chargeback
from models.incidents import build_incidents
from models.pricing import create_rate_choice
from models.runner import ensure_schema

DAY = date(2026, 1, 7)
START, END = datetime.combine(DAY, time(8)), datetime.combine(DAY, time(10))
KEY = "c:7:0"


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', 'n1', 'a100', 8, ?, ?)", [(i, f"GPU-{i}") for i in range(8)])
    # a 2-GPU Slurm run (QOS high) idle for its two hours: 14,400 GPU-seconds charged and wasted
    c.execute("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw, start, \"end\", "
              "alloc_gpus, nodes, qos, source_file, line_no) VALUES (?, 'c', '7', 7, ?, ?, 2, "
              "['n1'], 'high', 'dump', 1)", [KEY, START, END])
    c.execute("INSERT INTO slurm_node_allocations (run_key, cluster, job_id, job_id_raw, node, "
              "gpus, start, \"end\") VALUES (?, 'c', '7', 7, 'n1', 2, ?, ?)", [KEY, START, END])
    c.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
              "gpu_model, gpus, start_ts, end_ts, gpu_seconds, qos, person, team, cost_centre) "
              "VALUES (?, 'slurm', 'c', ?, '7', 'job', 'n1', 'a100', 2, ?, ?, 14400, 'high', "
              "'erin', 't', 'cc')", [DAY, KEY, START, END])
    minutes = [START + timedelta(minutes=m) for m in range(120)]
    c.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, bucket_start, "
                  "busy_fraction, samples, hpc_job) VALUES ('c', ?, 'n1', ?, ?, 0.0, 1, '7')",
                  [(f"GPU-{g}", g, t) for g in (0, 1) for t in minutes])
    yield c
    c.close()


def _rates(con, rows):
    con.execute("DELETE FROM rate_card")
    con.executemany("INSERT INTO rate_card VALUES (?, ?, ?, ?, ?, ?, 'EUR')", rows)


def _invoice_and_incident(con) -> tuple[tuple, tuple]:
    build_chargeback(con, DAY, DAY)
    build_incidents(con, DAY, DAY)
    line = con.execute("SELECT rate_per_gpu_hour, amount FROM chargeback_periods "
                       "WHERE period_kind = 'day'").fetchone()
    incident = con.execute("SELECT rate_per_gpu_hour, cost FROM incidents "
                           "WHERE kind = 'idle_allocation'").fetchone()
    return line, incident


# each case: the rate card, then the rate both must pick for a slurm a100 QOS-high day
CASES = [
    ([("a100", "", "", None, None, Decimal("2.00"))], "2.00"),
    ([("a100", "", "", None, None, Decimal("2.00")),
      ("a100", "", "high", None, None, Decimal("2.50"))], "2.50"),  # qos over neither
    ([("a100", "", "high", None, None, Decimal("2.50")),
      ("a100", "slurm", "", None, None, Decimal("3.00"))], "3.00"),  # domain over qos
    ([("a100", "slurm", "", None, None, Decimal("3.00")),
      ("a100", "slurm", "high", None, None, Decimal("3.50")),
      ("a100", "kubernetes", "high", None, None, Decimal("9.00"))], "3.50"),  # domain and qos
    ([("a100", "", "", None, None, Decimal("2.00")),
      ("a100", "", "", date(2026, 1, 7), None, Decimal("2.20")),
      ("a100", "", "", date(2026, 1, 8), None, Decimal("9.00"))], "2.20"),  # latest valid
    ([("a100", "", "", None, date(2026, 1, 7), Decimal("2.00")),  # valid_to is exclusive
      ("a100", "", "low", None, None, Decimal("9.00"))], None),
]


@pytest.mark.parametrize(("card", "expected"), CASES)
def test_invoice_lines_and_incident_costs_pick_the_same_rate(con, card, expected):
    _rates(con, card)
    (line_rate, amount), (incident_rate, cost) = _invoice_and_incident(con)
    want = None if expected is None else Decimal(expected)
    assert line_rate == incident_rate == want
    if want is None:  # no valid rate: hours kept, nothing priced (never zero)
        assert amount is None
        assert cost is None
    else:  # the whole run was idle: what it was charged is what it wasted
        assert amount == cost == (want * 4).quantize(Decimal("0.01"))


def test_changing_a_rate_card_row_moves_both(con):
    _rates(con, [("a100", "slurm", "", None, None, Decimal("3.00"))])
    assert _invoice_and_incident(con) == ((Decimal("3.000000"), Decimal("12.00")),
                                          (Decimal("3.000000"), Decimal("12.00")))
    con.execute("UPDATE rate_card SET rate_per_gpu_hour = 3.125")
    assert _invoice_and_incident(con) == ((Decimal("3.125000"), Decimal("12.50")),
                                          (Decimal("3.125000"), Decimal("12.50")))


def test_one_model_picks_the_rate():
    # no other SQL model carries its own copy of the precedence
    for name in ("chargeback", "detect_incidents"):
        text = load_sql(name)
        assert "rate_choice" in text
        assert "FROM rate_card" not in text
        assert "row_number" not in text


def test_the_rate_model_reads_only_the_keys_it_is_given():
    c = duckdb.connect()
    ensure_schema(c)
    _rates(c, [("a100", "", "", None, None, Decimal("2.00"))])
    create_rate_choice(c, "SELECT DATE '2026-01-07' AS day, 'slurm' AS domain, "
                       "'a100' AS gpu_model, NULL AS qos UNION ALL SELECT DATE '2026-01-07', "
                       "'slurm', 'h100', 'high'")
    assert c.execute("SELECT gpu_model, qos, rate_per_gpu_hour FROM rate_choice "
                     "ORDER BY gpu_model").fetchall() == [
        ("a100", "", Decimal("2.000000")), ("h100", "high", None)]
