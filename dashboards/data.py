"""The dashboards' only query layer.

Every query opens the published read-only snapshot, runs with bound parameters and closes the
connection, so no DuckDB handle outlives a rerun and the pipeline can keep writing the ledger.
"""

import os
from pathlib import Path

import duckdb
import polars as pl
import streamlit as st

from models.runner import read_snapshot, snapshot_path


def ledger_path() -> Path:
    return Path(os.environ.get("GPULEDGER_DB", "data/gpuledger.duckdb"))


def _version(db: Path) -> float:
    target = snapshot_path(db)
    return target.stat().st_mtime if target.exists() else 0.0


@st.cache_data(ttl=60, show_spinner=False)
def _query(db: str, version: float, sql: str, params: tuple[object, ...]) -> pl.DataFrame:
    with read_snapshot(Path(db)) as con:
        return con.sql(sql, params=list(params)).pl()


def query(sql: str, params: tuple[object, ...] = ()) -> pl.DataFrame:
    """Run a read-only query; results are cached per snapshot version."""
    db = ledger_path()
    return _query(str(db), _version(db), sql, params)


def freshness() -> pl.DataFrame:
    """Last successful load per source."""
    return query(
        "SELECT source, max(finished_at) AS last_success, sum(rows_loaded) AS rows_loaded, "
        "sum(rows_rejected) AS rows_rejected FROM ingest_runs GROUP BY source ORDER BY source"
    )


def ledger_available() -> bool:
    return snapshot_path(ledger_path()).exists()


def is_lock_error(exc: Exception) -> bool:
    return isinstance(exc, duckdb.IOException)
