"""Effective dating, the one rule for every history table (``node_inventory``, ``node_gpu_slices``,
``identity_candidates``): the open rows (``valid_to IS NULL``) of a scope are compared with what
the sources say now; a key whose attributes changed, or which is gone, is closed at the
observation time and the new state opened from it. A re-read with nothing changed writes
nothing."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from models.schema import Table


@dataclass(frozen=True)
class HistoryChange:
    opened: int
    closed: int


def apply_history(con: duckdb.DuckDBPyConnection, table: Table, key: Sequence[str],
                  attrs: Sequence[str], state: pl.DataFrame, at: datetime, *, scope: str,
                  params: Sequence[object], first_unbounded: bool = False) -> HistoryChange:
    """Make the open rows of `table` within `scope` say `state` as of `at` (inside the
    caller's transaction). Unchanged keys are left alone."""
    cols = [*key, *attrs]
    open_rows = con.execute(
        f"SELECT {', '.join(cols)}, valid_from FROM {table.name} "
        f"WHERE valid_to IS NULL AND ({scope})", list(params)).fetchall()
    before = {tuple(r[:len(key)]): tuple(r[len(key):len(cols)]) for r in open_rows}
    since = {tuple(r[:len(key)]): r[-1] for r in open_rows}
    now = {tuple(r[c] for c in key): tuple(r[a] for a in attrs)
           for r in state.select(cols).iter_rows(named=True)}
    gone = [k for k, v in before.items() if now.get(k) != v]
    new = [k for k, v in now.items() if before.get(k) != v]
    for k in gone:
        if since[k] is not None and since[k] >= at:  # an older reading: the open row stays
            new = [n for n in new if n != k]
            continue
        where = " AND ".join(f"{c} IS NOT DISTINCT FROM ?" for c in key)
        con.execute(f"UPDATE {table.name} SET valid_to = ? WHERE valid_to IS NULL AND {where}",
                    [at, *k])
    known: set[tuple[Any, ...]] = set()
    if first_unbounded and new:
        known = {tuple(r) for r in con.execute(
            f"SELECT DISTINCT {', '.join(key)} FROM {table.name} WHERE ({scope})",
            list(params)).fetchall()}
    for k in new:
        start = None if first_unbounded and k not in known else at
        con.execute(f"INSERT INTO {table.name} ({', '.join(cols)}, valid_from, valid_to) "
                    f"VALUES ({', '.join('?' * (len(cols) + 1))}, NULL)", [*k, *now[k], start])
    return HistoryChange(opened=len(new), closed=len(gone))
