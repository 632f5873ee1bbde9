"""One row or one value from the ledger: what an aggregate query returns (always one row)."""

from typing import Any

import duckdb


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> Any:
    """``SELECT count(*) …`` and its kind: the value of the one row (an aggregate always has
    one; a query that returns none is a bug, said so rather than a TypeError on ``None``)."""
    row = con.execute(sql, params).fetchone()
    if row is None:
        msg = f"expected one row from {sql.strip()[:80]!r}, found none"
        raise LookupError(msg)
    return row[0]


def one_row(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> tuple[Any, ...]:
    """The single row of an aggregate query with several columns (``SELECT min(…), max(…)``)."""
    row = con.execute(sql, params).fetchone()
    if row is None:
        msg = f"expected one row from {sql.strip()[:80]!r}, found none"
        raise LookupError(msg)
    return row
