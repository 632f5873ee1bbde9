"""Downloads: CSV and Excel files of what a page shows (no queries here)."""

import io

import polars as pl
import xlsxwriter

from models.cells import safe_text_columns


def csv_bytes(frame: pl.DataFrame) -> bytes:
    """UTF-8 CSV with a header; lists (GPU UUIDs) joined with ';' since CSV has no lists; text
    a spreadsheet would evaluate (``=…``, ``@…``) starts with an apostrophe (models.cells)."""
    flat = frame.with_columns(
        pl.col(c).list.join(";") for c, t in frame.schema.items() if isinstance(t, pl.List)
    )
    return safe_text_columns(flat).write_csv().encode("utf-8")


def excel_bytes(sheets: dict[str, pl.DataFrame]) -> bytes:
    """One workbook with a worksheet per frame (names cut to Excel's 31 characters). Text is
    written as text, never as a formula (xlsxwriter would make ``=…`` one), and starts with an
    apostrophe where a spreadsheet would evaluate it, as in the CSV."""
    buffer = io.BytesIO()
    options = {"remove_timezone": True, "strings_to_formulas": False, "strings_to_urls": False}
    with xlsxwriter.Workbook(buffer, options) as workbook:
        for name, frame in sheets.items():
            flat = safe_text_columns(frame.with_columns(
                pl.col(c).list.join(";") for c, t in frame.schema.items()
                if isinstance(t, pl.List)
            ))
            flat.write_excel(workbook=workbook, worksheet=name[:31], autofit=True)
    return buffer.getvalue()
