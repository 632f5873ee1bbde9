"""Per invoice line, the FOCUS rows' BilledCost summed and rounded half up to cents is the line's
amount on the invoice, exactly, and their PricingQuantity (GPU-hours) x 3,600 rounded half up is
its GPU-seconds: on the sample world's week and month, and on a line whose exact total sits on a
half cent. Figures are recomputed here from the files with Python's Decimal."""

import csv
from collections import defaultdict
from datetime import date, datetime, time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb

from models.build import build_chargeback
from models.focus import ROWS_OFF_INVOICE, build_focus_rows, parse_period
from models.runner import ensure_schema
from tests.export.conftest import export

CENT, SECOND = Decimal("0.01"), Decimal("1")


def _file_sums(path: Path) -> dict[str, tuple[Decimal, int, Decimal]]:
    """x_InvoiceLineKey -> (cost in cents, GPU-seconds, busy GPU-hours) of the usage rows."""
    cost: dict[str, Decimal] = defaultdict(Decimal)
    hours: dict[str, Decimal] = defaultdict(Decimal)
    busy: dict[str, Decimal] = defaultdict(Decimal)
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            assert row["ChargeClass"] == ""  # no correction in these worlds
            key = row["x_InvoiceLineKey"]
            cost[key] += Decimal(row["BilledCost"])
            hours[key] += Decimal(row["PricingQuantity"])
            busy[key] += Decimal(row["x_BusyGpuHours"])
    return {k: (cost[k].quantize(CENT, ROUND_HALF_UP),
                int((hours[k] * 3600).quantize(SECOND, ROUND_HALF_UP)), busy[k]) for k in cost}


def _invoice(con, kind: str, period: str) -> dict[str, tuple[Decimal, int, Decimal]]:
    rows = con.execute(
        "SELECT concat_ws('|', period, cost_centre, team, person, domain, gpu_model, "
        "coalesce(CAST(rate_valid_from AS VARCHAR), ''), "
        "coalesce(CAST(rate_per_gpu_hour AS VARCHAR), ''), currency), amount, gpu_seconds, "
        "busy_gpu_hours FROM invoice_lines WHERE period_kind = ? AND period = ?",
        [kind, period]).fetchall()
    return {k: (a, s, b) for k, a, s, b in rows}


def test_every_invoice_line_of_the_sample_world_is_the_sum_of_its_rows(sample_db: Path,
                                                                       tmp_path: Path):
    with duckdb.connect(str(sample_db), read_only=True) as con:
        for kind, period in (("week", "2026-W02"), ("month", "2026-01")):
            path = export(con, period, tmp_path / f"{period}.csv").files[0]
            ours, invoice = _file_sums(path), _invoice(con, kind, period)
            assert len(invoice) > 20
            assert set(ours) == set(invoice)
            for key, (amount, seconds, busy) in invoice.items():
                assert ours[key][:2] == (amount, seconds), key
                # busy is shown, not priced: rows keep 9 decimals, the line rounds to 6
                assert abs(ours[key][2] - busy) < Decimal("0.00001"), key
            build_focus_rows(con, parse_period(period))
            if kind == "week":  # the asset check's query agrees
                assert con.execute(ROWS_OFF_INVOICE, {"period": period}).fetchall() == []


def test_rows_of_a_half_cent_line_add_up_exactly(tmp_path: Path):
    """114,444 GPU-seconds at 2.50 is 79.475, billed 79.48 (docs/accounting.md): split into
    three runs of 38,148 s (26.4916... each, no finite decimal), the rows still add up to
    79.475 exactly."""
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR')")
    day = date(2026, 1, 6)
    for i in range(3):
        start = datetime.combine(day, time(i))
        con.execute(
            "INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
            "gpu_model, gpus, start_ts, end_ts, gpu_seconds, physical_gpu_seconds, qos, person, "
            "team, cost_centre, outcome) VALUES (?, 'slurm', 'c', ?, ?, 'train', 'n1', 'a100', "
            "1, ?, ? + to_seconds(38148), 38148, 38148, 'normal', 'ann', 't', 'CC-1', "
            "'completed')", [day, f"c:{i}:0", str(i), start, start])
    build_chargeback(con, day, day)
    assert con.execute("SELECT amount FROM chargeback WHERE period = '2026-W02'").fetchall() \
        == [(Decimal("79.48"),)]
    path = export(con, "2026-W02", tmp_path / "w02.csv").files[0]
    with path.open(newline="") as fh:
        costs = [Decimal(r["BilledCost"]) for r in csv.DictReader(fh)]
    assert len(costs) == 3
    assert all(abs(c - Decimal(38148) * Decimal("2.5") / 3600) < Decimal("1e-12") for c in costs)
    assert sum(costs) == Decimal("79.475")
    assert con.execute(ROWS_OFF_INVOICE, {"period": "2026-W02"}).fetchall() == []


def test_rows_of_a_line_of_a_half_second_round_up_like_the_line(tmp_path: Path):
    """Two time-shared pieces of 1,801.25 physical GPU-seconds: the line is 3,602.5 s, billed
    as 3,603 s (half up). Rounded half up to 1e-13 hours it would be 3,602.4999...; the rows'
    GPU-hours x 3,600 round to the same second as the line."""
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.00, 'EUR')")
    day = date(2026, 1, 6)
    for i in range(2):
        start = datetime.combine(day, time(i))
        con.execute(
            "INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
            "gpu_model, gpus, start_ts, end_ts, gpu_seconds, sharing, slices, "
            "physical_gpu_seconds, person, team, cost_centre, outcome) VALUES (?, 'kubernetes', "
            "'c', ?, ?, 'pod', 'n1', 'a100', 1, ?, ? + INTERVAL 1 HOUR, 3600, 'time_slicing', 1, "
            "1801.25, 'ann', 't', 'CC-1', 'completed')", [day, f"uid-{i}", f"w{i}", start, start])
    build_chargeback(con, day, day)
    assert con.execute("SELECT gpu_seconds FROM chargeback").fetchall() == [(3603,)]
    path = export(con, "2026-W02", tmp_path / "w02.csv").files[0]
    with path.open(newline="") as fh:
        hours = [Decimal(r["PricingQuantity"]) for r in csv.DictReader(fh)]
    assert len(hours) == 2
    assert (sum(hours) * 3600).quantize(SECOND, ROUND_HALF_UP) == 3603
    assert all(abs(h - Decimal("1801.25") / 3600) < Decimal("1e-12") for h in hours)
