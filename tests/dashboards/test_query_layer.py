"""The query layer's speed paths give the same figures as the plain ones.

* Per-day buckets read the daily rollups; the same calls forced onto the hourly tables (and a
  ledger whose rollups miss days) must give equal frames.
* One script run shares one snapshot connection, closed when the run ends.
"""

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import duckdb
import polars as pl
import pytest
import streamlit as st
from polars.testing import assert_frame_equal

from dashboards import data
from models.runner import publish_snapshot, read_snapshot, snapshot_path

WEEK = (date(2026, 1, 5), date(2026, 1, 12))


@pytest.fixture
def ledger(sample_ledger: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPULEDGER_DB", str(sample_ledger))
    st.cache_data.clear()
    return sample_ledger


def per_day(first: date, end: date) -> dict[str, pl.DataFrame]:
    """Every usage figure the utilization page can draw per day."""
    frames = {f"fractions by {g}": data.fractions_over_time(first, end, "day", g)
              for g in data.USAGE_GROUPS}
    frames |= {f"own usage by {g}": data.own_usage_over_time(first, end, "day", g)
               for g in data.USAGE_GROUPS}
    frames["node heatmap"] = data.node_heatmap(first, end, "day")
    return frames


def tables_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every query the layer runs from now on."""
    seen: list[str] = []
    query = data.query
    monkeypatch.setattr(data, "query", lambda sql, params=None: seen.append(sql)
                        or query(sql, params))
    return seen


def test_day_buckets_from_the_rollups_equal_the_hourly_tables(ledger: Path, monkeypatch):
    seen = tables_read(monkeypatch)
    rolled = per_day(*WEEK)
    assert all(f.height > 0 for f in rolled.values())
    assert any("node_usage_daily" in s for s in seen)
    assert any("gpu_usage_daily" in s for s in seen)

    monkeypatch.setattr(data, "_daily_rollups_cover", lambda first, end: False)
    seen.clear()
    hourly = per_day(*WEEK)
    assert not any("_daily" in s for s in seen)
    for name, frame in rolled.items():
        assert_frame_equal(frame, hourly[name], check_exact=False, rel_tol=1e-12)


def test_rollups_missing_days_fall_back_to_the_hourly_tables(ledger: Path, tmp_path: Path,
                                                           monkeypatch):
    expected = per_day(*WEEK)
    # a ledger built before the rollups existed: their tables are there but lack days
    copy = tmp_path / "old.duckdb"
    shutil.copyfile(snapshot_path(ledger), copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM node_usage_daily WHERE day = DATE '2026-01-07'")
        publish_snapshot(con, copy)
    monkeypatch.setenv("GPULEDGER_DB", str(copy))
    assert not data._daily_rollups_cover(*WEEK)
    assert data._daily_rollups_cover(date(2026, 1, 8), WEEK[1])
    got = per_day(*WEEK)
    for name, frame in expected.items():
        assert_frame_equal(got[name], frame, check_exact=False, rel_tol=1e-12)


def test_a_script_run_shares_one_connection_and_closes_it(ledger: Path, monkeypatch):
    opened: list[duckdb.DuckDBPyConnection] = []

    @contextmanager
    def counting(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
        with read_snapshot(db) as con:
            opened.append(con)
            yield con

    monkeypatch.setattr(data, "read_snapshot", counting)
    with data.one_connection_per_run():
        days = data.allocation_days()
        data.freshness()
        data.gpu_hours_by_domain()
        assert len(opened) == 1
    assert days is not None
    with pytest.raises(duckdb.ConnectionException):
        opened[0].execute("SELECT 1")
    # outside a run each query opens and closes its own
    st.cache_data.clear()
    data.freshness()
    data.gpu_hours_by_domain()
    assert len(opened) == 3
