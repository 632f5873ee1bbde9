"""Text cells safe to open in a spreadsheet (issue #28, the probe's formula injection).

A job name, pod label or identity such as ``=HYPERLINK("https://…"&A1,"Open invoice")`` would be
a live formula when a CSV file or workbook is opened in Excel, LibreOffice or Google Sheets.
OWASP's rule: a text cell that starts with ``=``, ``+``, ``-``, ``@`` or a control character
(tab, carriage return …) gets a leading apostrophe, which spreadsheets show as text and never
evaluate. Only text is changed; numbers and times are written as they are. One rule, three
forms: Python values (csv.writer), DuckDB SQL (COPY … TO csv) and Polars columns (dashboards).
"""

import re
from typing import Any

import polars as pl

#: what makes a spreadsheet read a text cell as a formula (or hide what follows)
FORMULA_START = r"^[=+\-@\x00-\x1f\x7f]"
_FORMULA_START = re.compile(FORMULA_START)


def safe_cell(value: Any) -> Any:
    """``value`` with a leading apostrophe if it is text a spreadsheet would evaluate."""
    if isinstance(value, str) and _FORMULA_START.match(value):
        return "'" + value
    return value


def safe_cell_sql(expr: str) -> str:
    """DuckDB SQL of the same rule for the VARCHAR expression ``expr``."""
    return (f"CASE WHEN regexp_matches({expr}, '{FORMULA_START}') THEN '''' || {expr} "
            f"ELSE {expr} END")


def safe_text_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every String column's cells made safe (other columns as they are)."""
    return frame.with_columns(
        pl.when(pl.col(c).str.contains(FORMULA_START)).then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c)).alias(c)
        for c, t in frame.schema.items() if t == pl.String
    )
