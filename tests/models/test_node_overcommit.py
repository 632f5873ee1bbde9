from datetime import date, datetime

import duckdb
import pytest

from models import load_sql
from models.runner import ensure_schema

DAY = date(2026, 1, 5)


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_count, gpu_index) VALUES (?, ?, ?, ?)",
                  [("c", "n1", 8, i) for i in range(8)])
    yield c
    c.close()


def _add(con, domain, key, gpus, start, end):
    con.execute("INSERT INTO allocations (day, domain, source_key, node, gpus, start_ts, end_ts) "
                "VALUES (?, ?, ?, 'n1', ?, ?, ?)", [DAY, domain, key, gpus, start, end])


def _sweep(con, min_seconds=0):
    return con.sql(load_sql("node_overcommit"),
                   params={"day": DAY, "min_seconds": min_seconds}).fetchall()


def test_a_clean_handover_at_one_instant_is_not_overcommitted(con):
    _add(con, "slurm", "a", 8, _at(0), _at(8))
    _add(con, "kubernetes", "b", 8, _at(8), _at(20))
    assert _sweep(con) == []


def test_overlap_is_reported_with_its_excess(con):
    _add(con, "slurm", "a", 6, _at(0), _at(9))
    _add(con, "kubernetes", "b", 4, _at(8), _at(20))
    assert _sweep(con) == [("n1", _at(8), _at(9), 10, 8, 2)]


def test_short_overlaps_within_the_tolerance_are_left_out(con):
    _add(con, "slurm", "a", 8, _at(0), _at(8, 5))
    _add(con, "kubernetes", "b", 8, _at(8), _at(20))
    assert _sweep(con, min_seconds=600) == []
    assert _sweep(con, min_seconds=0) == [("n1", _at(8), _at(8, 5), 16, 8, 8)]
