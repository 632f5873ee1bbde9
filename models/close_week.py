"""The weekly close: freeze an ISO week's invoice lines as the ledger has them now (rebuilt
first), or re-close a closed week with a reason. What a closed week is, and how late data
becomes adjustments, is ``models/closing.py``; rules: docs/accounting.md "Closed periods and
adjustments"."""

import os
import socket
from datetime import UTC, datetime, timedelta

import duckdb

from models.build import build_chargeback
from models.closing import ClosedWeek, current_close, default_actor, week_checksum
from models.focus import freeze_charges
from models.runner import transaction, unfinished_builds
from models.scalars import one_row
from models.schema import CHARGEBACK, CLOSED_PERIODS, FROZEN_INVOICE_LINES, INVOICE_ADJUSTMENTS
from models.weeks import parse_iso_week


def close_week(
    con: duckdb.DuckDBPyConnection,
    period: str,
    *,
    closed_by: str | None = None,
    run_id: str | None = None,
    reclose: bool = False,
    reason: str = "",
    now: datetime | None = None,
) -> ClosedWeek:
    """Freeze the invoice lines of the ISO week ``period`` (``YYYY-Www``) as the ledger has
    them now (rebuilt first), or, with ``reclose``, replace a closed week's frozen lines,
    recording ``reason``. The week must have ended (``now``, default the clock) and have lines.
    """
    week = parse_iso_week(period)
    monday, end = week.monday, week.end
    now = now or datetime.now(UTC).replace(tzinfo=None)
    if datetime.combine(end, datetime.min.time()) > now:
        msg = (f"expected a week that has ended, found {week} ending {end} 00:00 UTC "
               f"(now {now:%Y-%m-%d %H:%M:%S} UTC): close it on or after {end}")
        raise ValueError(msg)
    existing = current_close(con, week.name)
    if existing is not None and not reclose:
        msg = (f"expected an open week to close, found {week} closed at "
               f"{existing.closed_at:%Y-%m-%d %H:%M:%S} UTC by {existing.closed_by} (revision "
               f"{existing.revision}); late data lands as adjustments in the next open week, or "
               f"re-close it: gpuledger close-week {week} --reclose --reason \"...\"")
        raise ValueError(msg)
    if reclose and existing is None:
        msg = f"expected a closed week to re-close, found {week} open: close it without --reclose"
        raise ValueError(msg)
    if reclose and not reason.strip():
        msg = f"expected a reason for re-closing {week} (--reason \"...\"), found none"
        raise ValueError(msg)
    for first, last, started, pid, host in unfinished_builds(con):
        if first < end and last >= monday:
            msg = (f"expected a finished build of {week}, found a build of {first} .. {last} "
                   f"started at {started:%Y-%m-%d %H:%M:%S} UTC (pid {pid} on {host}) that did "
                   f"not finish: run `gpuledger build --start {first}` first")
            raise ValueError(msg)
    if reclose:
        carried = con.execute(
            f"SELECT period, count(*) FROM {INVOICE_ADJUSTMENTS.name} WHERE original_period = ? "
            f"AND period IN (SELECT period FROM {CLOSED_PERIODS.name}) GROUP BY period "
            "ORDER BY period", [week.name]).fetchall()
        if carried:
            listed = ", ".join(f"{n} in {p}" for p, n in carried)
            msg = (f"expected no adjustment of {week} already invoiced by a closed week, found "
                   f"{listed}: a re-close would charge that difference twice")
            raise ValueError(msg)
    closed_by = closed_by or default_actor()
    run_id = run_id or f"close-week pid {os.getpid()} on {socket.gethostname()}"
    build_chargeback(con, monday, end - timedelta(days=1), run=run_id)
    revision = 1 if existing is None else existing.revision + 1
    names = CHARGEBACK.column_names
    columns = ", ".join(f'"{c}"' for c in names)
    with transaction(con):
        lines, gpu_seconds, amount = one_row(
            con, "SELECT count(*), coalesce(sum(gpu_seconds), 0)::BIGINT, "
            "coalesce(sum(amount), 0) "
            "FROM chargeback_periods WHERE period_kind = 'week' AND period = ?",
            [week.name])
        if lines == 0:
            msg = (f"expected invoice lines for week {week} ({monday} .. {end}, end exclusive) "
                   f"to close, found none: build that week first (`gpuledger build --start "
                   f"{monday} --end {end}`)")
            raise ValueError(msg)
        if reclose:  # the new lines take in what was still outstanding
            con.execute(f"DELETE FROM {INVOICE_ADJUSTMENTS.name} WHERE original_period = ?",
                        [week.name])
        con.execute(
            f"INSERT INTO {FROZEN_INVOICE_LINES.name} (closed_period, revision, {columns}) "
            f"SELECT ?, ?, {columns} FROM chargeback_periods WHERE period_kind IN ('day', 'week') "
            "AND period_start >= ? AND period_start < ?", [week.name, revision, monday, end])
        # and the allocation pieces they charge, for the week's FOCUS file (docs/focus.md)
        freeze_charges(con, week.name, revision, monday, end)
        con.execute(
            f"INSERT INTO {CLOSED_PERIODS.name} BY NAME SELECT ? AS period, ? AS period_start, "
            "? AS period_end, ? AS revision, ? AS closed_at, ? AS closed_by, ? AS run_id, "
            "? AS reason, ? AS lines, ? AS gpu_seconds, ? AS amount, '' AS checksum",
            [week.name, monday, end, revision, now, closed_by, run_id,
             reason.strip() or "weekly close", lines, gpu_seconds, amount])
        # the adjustments of earlier weeks this week carried are frozen with it from now on
        checksum = week_checksum(con, week.name, revision)
        con.execute(f"UPDATE {CLOSED_PERIODS.name} SET checksum = ? WHERE period = ? "
                    "AND revision = ?", [checksum, week.name, revision])
    close = current_close(con, week.name)
    assert close is not None
    return close
