"""Marking the lake partitions a write changed (``lake_changes``), in the write's transaction.

The next publish rewrites exactly the marked partitions (``models/lake_publish.py``). Marking
never scans a table: an incoming frame's partitions come from the frame, a delete's from the
rows it removes (``DELETE … RETURNING``), a SQL rebuild of a day range marks its days.
"""

from datetime import date, timedelta
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from models.lake import LAKE_BY_NAME, LakeTable
from models.schema import LAKE_CHANGES


def _frame(table: pa.Table) -> pl.DataFrame:
    """An Arrow table as a Polars frame (``pl.from_arrow`` of a table is always a frame)."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame

def lake_table(name: str) -> LakeTable | None:
    return LAKE_BY_NAME.get(name)


def mark_frame(con: duckdb.DuckDBPyConnection, table_name: str, table: pa.Table) -> None:
    """Mark the partitions of the rows of ``table`` about to be inserted into ``table_name``."""
    lake = lake_table(table_name)
    if lake is None or table.num_rows == 0:
        return
    frame = _frame(table.select(["cluster", lake.day_column]))
    day = pl.col(lake.day_column)
    if not lake.has_day:
        day = day.dt.date()
    _insert(con, lake, frame.select(pl.col("cluster"), day.alias("day")).unique())


def delete_marked(con: duckdb.DuckDBPyConnection, table_name: str, where: str,
                  params: list[Any]) -> int:
    """``DELETE FROM table_name WHERE where``, marking the partitions of the rows removed."""
    lake = lake_table(table_name)
    if lake is None:
        con.execute(f"DELETE FROM {table_name} WHERE {where}", params)
        return -1
    gone = con.execute(f"DELETE FROM {table_name} WHERE {where} RETURNING cluster, "
                       f"{lake.day_sql()} AS day", params).arrow()
    if not isinstance(gone, pa.Table):  # a RecordBatchReader on some versions
        gone = gone.read_all()
    if gone.num_rows:
        _insert(con, lake, _frame(gone).unique())
    return int(gone.num_rows)


def mark_days(con: duckdb.DuckDBPyConnection, table_name: str, first_day: date,
              end_day: date, cluster: str | None = None) -> None:
    """Mark the days ``[first_day, end_day)`` of ``table_name`` (of ``cluster``, else of every
    cluster) as rewritten; a table outside the lake is ignored."""
    lake = lake_table(table_name)
    if lake is None or end_day <= first_day:
        return
    days = [first_day + timedelta(days=n) for n in range((end_day - first_day).days)]
    _insert(con, lake, pl.DataFrame({"cluster": [cluster] * len(days), "day": days},
                                    schema={"cluster": pl.String, "day": pl.Date}))


def mark_span(con: duckdb.DuckDBPyConnection, table_name: str, cluster: str | None,
              start: Any, end: Any) -> None:
    """Mark the days a half-open time span ``[start, end)`` touches."""
    if start is None or end is None or end <= start:
        return
    last = (end - timedelta(microseconds=1)).date()
    mark_days(con, table_name, start.date(), last + timedelta(days=1), cluster)


def _insert(con: duckdb.DuckDBPyConnection, lake: LakeTable, pairs: pl.DataFrame) -> None:
    marks = pairs.select(pl.lit(lake.name).alias("table_name"),
                         pl.col("cluster").cast(pl.String), pl.col("day").cast(pl.Date))
    con.execute(LAKE_CHANGES.ddl())  # a ledger opened without ensure_schema (a copied file)
    con.from_arrow(marks.to_arrow()).insert_into(LAKE_CHANGES.name)
