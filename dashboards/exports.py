"""Downloads: CSV and Excel files of what a page shows (no queries here)."""

import io

import polars as pl
import xlsxwriter


def csv_bytes(frame: pl.DataFrame) -> bytes:
    """UTF-8 CSV with a header; lists (GPU UUIDs) joined with ';' since CSV has no lists."""
    flat = frame.with_columns(
        pl.col(c).list.join(";") for c, t in frame.schema.items() if isinstance(t, pl.List)
    )
    return flat.write_csv().encode("utf-8")


def excel_bytes(sheets: dict[str, pl.DataFrame]) -> bytes:
    """One workbook with a worksheet per frame (names cut to Excel's 31 characters)."""
    buffer = io.BytesIO()
    with xlsxwriter.Workbook(buffer, {"remove_timezone": True}) as workbook:
        for name, frame in sheets.items():
            flat = frame.with_columns(
                pl.col(c).list.join(";") for c, t in frame.schema.items()
                if isinstance(t, pl.List)
            )
            flat.write_excel(workbook=workbook, worksheet=name[:31], autofit=True)
    return buffer.getvalue()
