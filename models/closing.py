"""Closed periods: the weekly close freezes a week's invoice lines; late data becomes adjustments.

Closing an ISO week copies its week and day lines (``chargeback_periods``) to
``frozen_invoice_lines`` and records the close in ``closed_periods`` (who, which run, a checksum).
From then on the week's invoice (views ``invoice_lines``, ``chargeback``) is the frozen lines.
The ledger keeps being rebuilt from the sources: when late data (a runaway job fixed in slurmdbd,
a late scrape) changes a closed week's lines, :func:`settle_adjustments` (run by every
``build_chargeback``) writes the difference as ``invoice_adjustments`` lines carried by the next
open week, so

    ledger lines of a closed week - its frozen lines == its adjustments (all carrying weeks).

An explicit re-close (``close_week(..., reclose=True, reason=...)``) replaces the frozen lines
with the ledger's and records who and why. Rules: docs/accounting.md "Closed periods and
adjustments".
"""

import getpass
import hashlib
import os
import socket
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb

from models.scalars import scalar
from models.schema import (
    CHARGEBACK,
    CLOSED_PERIODS,
    FROZEN_ALLOCATION_CHARGES,
    FROZEN_INVOICE_LINES,
    INVOICE_ADJUSTMENTS,
)

LINE_KEY = ("cost_centre", "team", "person", "domain", "gpu_model", "rate_valid_from",
            "rate_per_gpu_hour", "currency")
REASON = "late data for closed week {week}"


@dataclass(frozen=True)
class ClosedWeek:
    """One close of a week, as recorded in ``closed_periods``."""

    period: str
    revision: int
    closed_at: datetime
    closed_by: str
    run_id: str
    reason: str
    lines: int
    gpu_seconds: int
    amount: Decimal
    checksum: str

    def summary(self) -> str:
        verb = "closed" if self.revision == 1 else f"re-closed (revision {self.revision})"
        return (f"week {self.period} {verb} at {self.closed_at:%Y-%m-%d %H:%M:%S} UTC by "
                f"{self.closed_by} (run {self.run_id}): {self.lines} lines frozen, "
                f"{self.gpu_seconds / 3600:.6f} GPU-hours, amount {self.amount}, "
                f"checksum {self.checksum[:12]}")


def default_actor() -> str:
    """Who closes when nobody says: the OS user and host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _week_name(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year:04d}-W{week:02d}"


def _monday(period: str) -> date:
    year, week = period.split("-W")
    return date.fromisocalendar(int(year), int(week), 1)


def current_close(con: duckdb.DuckDBPyConnection, period: str) -> ClosedWeek | None:
    """The latest close of ``period`` (``YYYY-Www``), or None while it is open."""
    row = con.execute(
        "SELECT period, revision, closed_at, closed_by, run_id, reason, lines, gpu_seconds, "
        f"amount, checksum FROM {CLOSED_PERIODS.name} WHERE period = ? "
        "ORDER BY revision DESC LIMIT 1", [period]).fetchone()
    return None if row is None else ClosedWeek(*row)


def served_close(snapshot: Path, period: str) -> tuple[int, str] | None:
    """The latest close of ``period`` as the published snapshot ``snapshot`` serves it
    (revision, checksum); None when it serves the week open (or there is no snapshot)."""
    from models.runner import CONFINED_READER

    if not snapshot.is_file():
        return None
    try:
        with duckdb.connect(str(snapshot), read_only=True, config=CONFINED_READER) as con:
            return con.execute(
                f"SELECT revision, checksum FROM {CLOSED_PERIODS.name} WHERE period = ? "
                "ORDER BY revision DESC LIMIT 1", [period]).fetchone()
    except duckdb.Error:  # a snapshot from before closes (no table)
        return None


def unpublished_close(con: duckdb.DuckDBPyConnection, snapshot: Path,
                      period: str) -> ClosedWeek | None:
    """The ledger's latest close of ``period`` when the snapshot does not serve it: a close
    whose publish failed or was killed after the ledger committed it."""
    close = current_close(con, period)
    if close is None or served_close(snapshot, period) == (close.revision, close.checksum):
        return None
    return close


def closed_weeks(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(
        f"SELECT DISTINCT period FROM {CLOSED_PERIODS.name} ORDER BY period").fetchall()]


def next_open_week(closed: set[str], period: str) -> tuple[str, date]:
    """The first week after ``period`` that is not closed: where its adjustments land."""
    monday = _monday(period) + timedelta(days=7)
    while _week_name(monday) in closed:
        monday += timedelta(days=7)
    return _week_name(monday), monday


#: invoice line columns added after closes were first frozen (NULL on older frozen lines)
LATER_LINE_COLUMNS = frozenset({"slice_hours"})


def week_checksum(con: duckdb.DuckDBPyConnection, period: str, revision: int) -> str:
    """sha256 of the frozen lines of one close and of the adjustment lines the week carries."""
    names = CHARGEBACK.column_names
    columns = ", ".join(f'"{c}"' for c in names)
    adjustment_columns = ", ".join(
        f'"{c}"' for c in INVOICE_ADJUSTMENTS.column_names if c not in ("run_id", "created_at"))
    digest = hashlib.sha256()
    for row in con.execute(
            f"SELECT {columns} FROM {FROZEN_INVOICE_LINES.name} WHERE closed_period = ? "
            "AND revision = ? ORDER BY ALL", [period, revision]).fetchall():
        # a column added later (LATER_LINE_COLUMNS) counts only where set: a close frozen
        # before it keeps its checksum
        values = [v for c, v in zip(names, row, strict=True)
                  if not (v is None and c in LATER_LINE_COLUMNS)]
        digest.update(("L|" + "|".join("" if v is None else str(v) for v in values)
                       + "\n").encode())
    for row in con.execute(
            f"SELECT {adjustment_columns} FROM {INVOICE_ADJUSTMENTS.name} WHERE period = ? "
            "ORDER BY ALL", [period]).fetchall():
        digest.update(("A|" + "|".join("" if v is None else str(v) for v in row) + "\n").encode())
    # the allocation-level charges frozen with it (models/focus.py); a close from before they
    # were frozen has none, so its checksum stays what it was
    charge_columns = ", ".join(f'"{c}"' for c in FROZEN_ALLOCATION_CHARGES.column_names)
    for row in con.execute(
            f"SELECT {charge_columns} FROM {FROZEN_ALLOCATION_CHARGES.name} "
            "WHERE closed_period = ? AND revision = ? ORDER BY ALL", [period, revision]).fetchall():
        digest.update(("C|" + "|".join("" if v is None else str(v) for v in row) + "\n").encode())
    return digest.hexdigest()


def changed_closes(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """Closed weeks whose frozen lines (or carried adjustments) no longer give the checksum
    recorded at their close: ``(period, recorded, found)``; none on an untouched ledger."""
    found = []
    for period in closed_weeks(con):
        close = current_close(con, period)
        assert close is not None
        now = week_checksum(con, period, close.revision)
        if now != close.checksum:
            found.append((period, close.checksum, now))
    return found


def _settle_sql(carry: list[tuple[str, date, str, date]]) -> tuple[str, list[object]]:
    """The outstanding difference per closed week and line key, with the week carrying it."""
    key = ", ".join(LINE_KEY)
    values = ", ".join("(?, ?, ?, ?)" for _ in carry)
    params: list[object] = [v for row in carry for v in row]
    sql = f"""
    WITH carry(original_period, original_period_start, period, period_start) AS (
        VALUES {values}
    ),
    latest AS (
        SELECT period, max(revision) AS revision FROM {CLOSED_PERIODS.name} GROUP BY period
    ),
    parts AS (
        -- + the ledger's week lines, - the frozen week lines, - what closed weeks already carry
        SELECT c.period AS original_period, {key}, gpu_seconds, amount
        FROM chargeback_periods AS c
        WHERE c.period_kind = 'week' AND c.period IN (SELECT original_period FROM carry)
        UNION ALL
        SELECT f.closed_period, {key}, -gpu_seconds, -amount
        FROM {FROZEN_INVOICE_LINES.name} AS f
        INNER JOIN latest AS l ON l.period = f.closed_period AND l.revision = f.revision
        WHERE f.period_kind = 'week'
        UNION ALL
        SELECT a.original_period, {key}, -gpu_seconds, -amount
        FROM {INVOICE_ADJUSTMENTS.name} AS a
        WHERE a.period IN (SELECT period FROM latest)
    ),
    outstanding AS (
        SELECT original_period, {key}, sum(gpu_seconds)::BIGINT AS gpu_seconds,
               sum(amount) AS amount
        FROM parts GROUP BY ALL
        HAVING sum(gpu_seconds) <> 0 OR coalesce(sum(amount), 0) <> 0
    )
    SELECT
        y.period, y.period_start, o.original_period, y.original_period_start,
        o.{", o.".join(LINE_KEY)},
        o.gpu_seconds, CAST(round(o.gpu_seconds / 3600, 6) AS DECIMAL(18, 6)) AS gpu_hours,
        CAST(o.amount AS DECIMAL(18, 2)) AS amount,
        replace('{REASON}', '{{week}}', o.original_period) AS reason
    FROM outstanding AS o
    INNER JOIN carry AS y ON y.original_period = o.original_period
    """
    return sql, params


def settle_adjustments(con: duckdb.DuckDBPyConnection, *, run: str | None = None) -> int:
    """Make the open weeks' adjustment lines equal what late data changed in closed weeks.

    For each closed week and invoice line key: the ledger's week line minus the frozen line
    minus the adjustments closed weeks already carry is outstanding, carried by the next open
    week. Lines already carried with the same figures are kept as they are (their run and time
    stay), so a rebuild with unchanged inputs changes nothing. Joins the caller's transaction.
    Returns the open adjustment lines.
    """
    closed = closed_weeks(con)
    if not closed:
        return 0
    closed_set = set(closed)
    carry = [(week, _monday(week), *next_open_week(closed_set, week)) for week in closed]
    sql, params = _settle_sql(carry)
    con.execute(f"CREATE OR REPLACE TEMP TABLE adj_outstanding AS {sql}", params)
    same = (" AND ".join(f"a.{k} IS NOT DISTINCT FROM o.{k}" for k in LINE_KEY)
            + " AND a.period = o.period "
            "AND a.original_period = o.original_period AND a.gpu_seconds = o.gpu_seconds "
            "AND a.amount IS NOT DISTINCT FROM o.amount")
    open_filter = f"a.period NOT IN (SELECT period FROM {CLOSED_PERIODS.name})"
    con.execute(
        f"DELETE FROM {INVOICE_ADJUSTMENTS.name} AS a WHERE {open_filter} "
        f"AND NOT EXISTS (SELECT 1 FROM adj_outstanding AS o WHERE {same})")
    now = datetime.now(UTC).replace(tzinfo=None)
    columns = ", ".join(c for c in INVOICE_ADJUSTMENTS.column_names
                        if c not in ("run_id", "created_at"))
    con.execute(
        f"INSERT INTO {INVOICE_ADJUSTMENTS.name} BY NAME SELECT {columns}, "
        "$run AS run_id, $now AS created_at FROM adj_outstanding AS o "
        f"WHERE NOT EXISTS (SELECT 1 FROM {INVOICE_ADJUSTMENTS.name} AS a WHERE {same})",
        {"run": run or f"build pid {os.getpid()} on {socket.gethostname()}", "now": now})
    con.execute("DROP TABLE IF EXISTS adj_outstanding")
    return int(scalar(con,
        f"SELECT count(*) FROM {INVOICE_ADJUSTMENTS.name} AS a WHERE {open_filter}"
    ))
