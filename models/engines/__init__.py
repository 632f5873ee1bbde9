"""Where a model's SQL runs: DuckDB on the ledger connection (the default) or Spark.

A step is one SELECT of ``models/sql`` written for DuckDB. The build functions hand their heavy
steps (whose input grows with the minute samples) to an :class:`Engine`; everything else runs on
the DuckDB connection as before. An engine either makes a temp table (``create_temp``) that later
steps read from ``con`` by name, or inserts rows into a ledger table (``insert``) inside the
caller's open DuckDB transaction. ``drop_temps`` ends a group of steps (a build function's run).
"""

from collections.abc import Iterable, Mapping
from typing import Protocol

import duckdb

from models.engines.transpile import parameter_names


class Engine(Protocol):
    name: str

    def create_temp(self, con: duckdb.DuckDBPyConnection, name: str, sql: str,
                    params: Mapping[str, object]) -> None:
        """What ``CREATE OR REPLACE TEMP TABLE name AS <sql>`` does on DuckDB: afterwards
        ``name`` is readable from ``con``."""

    def insert(self, con: duckdb.DuckDBPyConnection, table: str, sql: str,
               params: Mapping[str, object]) -> None:
        """What ``INSERT INTO table BY NAME <sql>`` does, in the caller's open transaction."""

    def drop_temps(self, con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
        """Drop the temps ``names`` made by this engine; the group of steps is over."""


def bound(sql: str, params: Mapping[str, object]) -> dict[str, object]:
    """The values of the ``$parameters`` ``sql`` names (DuckDB refuses unused ones)."""
    names = parameter_names(sql)
    missing = names - params.keys()
    if missing:
        msg = f"expected values for the parameters {sorted(names)}, found none for {missing}"
        raise ValueError(msg)
    return {k: params[k] for k in names}


def drop_temp(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop the temp table or temp view ``name`` if there is one."""
    kind = con.execute(
        "SELECT 'TABLE' FROM duckdb_tables() WHERE temporary AND table_name = $n UNION ALL "
        "SELECT 'VIEW' FROM duckdb_views() WHERE temporary AND view_name = $n",
        {"n": name}).fetchall()
    for (what,) in kind:
        con.execute(f"DROP {what} IF EXISTS {name}")


class DuckDBEngine:
    """Every step on the ledger's own DuckDB connection (the default engine)."""

    name = "duckdb"

    def create_temp(self, con: duckdb.DuckDBPyConnection, name: str, sql: str,
                    params: Mapping[str, object]) -> None:
        drop_temp(con, name)  # a Spark run may have left a view of that name
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", bound(sql, params))

    def insert(self, con: duckdb.DuckDBPyConnection, table: str, sql: str,
               params: Mapping[str, object]) -> None:
        con.execute(f"INSERT INTO {table} BY NAME {sql}", bound(sql, params))

    def drop_temps(self, con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
        for name in names:
            drop_temp(con, name)


DUCKDB_ENGINE: Engine = DuckDBEngine()
