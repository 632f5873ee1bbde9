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
