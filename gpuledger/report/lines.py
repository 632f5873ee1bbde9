"""What a weekly report reads from the ledger: the week's invoice lines and its incidents."""

from dataclasses import dataclass
from typing import Any

import duckdb

from models.weeks import IsoWeek

# dcgm-exporter busy time beside allocated time, on every chargeback line.
USAGE_COLUMNS = ("measured_gpu_hours", "busy_gpu_hours", "idle_gpu_hours")

# Deterministic line order: the invoice key, the way finance reads it.
LINE_ORDER = ("cost_centre", "team", "person", "domain", "gpu_model", "rate_valid_from",
              "rate_per_gpu_hour", "currency")

Row = dict[str, Any]


class EmptyWeekError(ValueError):
    """The ledger holds no invoice line for the week (nothing built, or no usage)."""


@dataclass(frozen=True)
class WeekData:
    week: IsoWeek
    columns: tuple[str, ...]
    lines: tuple[Row, ...]
    # None when the ledger has no incidents table (the report says "no incident data").
    incidents: tuple[Row, ...] | None
    # GPU-seconds per raw key (user, account, namespace, ...) whose owner is unattributed
    unattributed_keys: tuple[Row, ...] = ()
    # adjustment lines the week carries (late data for closed weeks), and their columns
    adjustments: tuple[Row, ...] = ()
    adjustment_columns: tuple[str, ...] = ()
    # the week's latest close (closed_periods row), None while it is open
    close: Row | None = None
    # shared GPUs per sharing mode and MIG profile (shared_gpu_daily), whole GPUs included
    shared: tuple[Row, ...] = ()


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> tuple[str, ...] | None:
    """Columns of ``table`` in the connection's own database, or None when it does not exist."""
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = "
        "current_database() AND table_schema = 'main' AND table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()
    return tuple(r[0] for r in rows) or None


def _rows(cursor: duckdb.DuckDBPyConnection) -> tuple[Row, ...]:
    names = [d[0] for d in cursor.description]
    return tuple(dict(zip(names, values, strict=True)) for values in cursor.fetchall())


def read_week(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> WeekData:
    """The week's chargeback lines exactly as stored, and its incidents when the table exists."""
    columns = table_columns(con, "chargeback")
    if columns is None:
        msg = "expected a chargeback table in the ledger, found none: run `gpuledger build` first"
        raise EmptyWeekError(msg)
    order = ", ".join(LINE_ORDER)
    lines = _rows(con.execute(
        f"SELECT * FROM chargeback WHERE period_kind = 'week' AND period = ? "
        f"ORDER BY {order} NULLS FIRST", [week.name]))
    if not lines:
        msg = (f"expected chargeback lines for week {week} ({week.monday} .. {week.end}, end "
               f"exclusive), found none: build that week first (`gpuledger build --start "
               f"{week.monday} --end {week.end}`) or pick a week with data")
        raise EmptyWeekError(msg)
    adjustment_columns = table_columns(con, "invoice_adjustments") or ()
    return WeekData(week, columns, lines, read_incidents(con, week),
                    read_unattributed_keys(con, week), read_adjustments(con, week),
                    adjustment_columns, read_close(con, week), read_shared(con, week))


def read_shared(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...]:
    """The week's GPU-time per sharing mode and MIG profile (docs/shared-gpus.md)."""
    if table_columns(con, "shared_gpu_daily") is None:  # a snapshot from before shared GPUs
        return ()
    return _rows(con.execute(
        "SELECT sharing, slice_profile, currency, sum(allocations)::BIGINT AS allocations, "
        "sum(slice_seconds)::BIGINT AS slice_seconds, "
        "sum(physical_gpu_seconds) AS physical_gpu_seconds, "
        "sum(busy_slice_seconds) AS busy_slice_seconds, sum(amount) AS amount, "
        "count(*) FILTER (WHERE amount IS NULL) AS unpriced "
        "FROM shared_gpu_daily WHERE day >= ? AND day < ? "
        "GROUP BY sharing, slice_profile, currency "
        "ORDER BY sharing = 'whole', sharing, slice_profile NULLS FIRST, currency",
        [week.monday, week.end]))


def read_adjustments(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...]:
    """The adjustment lines the week carries, oldest original week first."""
    if table_columns(con, "invoice_adjustments") is None:  # a snapshot from before closing
        return ()
    order = ", ".join(LINE_ORDER)
    return _rows(con.execute(
        "SELECT * FROM invoice_adjustments WHERE period = ? "
        f"ORDER BY original_period, {order} NULLS FIRST", [week.name]))


def read_close(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> Row | None:
    if table_columns(con, "closed_periods") is None:
        return None
    rows = _rows(con.execute("SELECT * FROM closed_periods WHERE period = ? "
                             "ORDER BY revision DESC LIMIT 1", [week.name]))
    return rows[0] if rows else None


RAW_KEYS = ("slurm_user", "slurm_account", "k8s_namespace", "k8s_service_account",
            "kueue_queue")


def read_unattributed_keys(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...]:
    """The raw keys behind the week's unattributed GPU-seconds: what to add to the identity map."""
    grouping = ", ".join(["cost_centre", "team", "person", "domain", *RAW_KEYS])
    return _rows(con.execute(
        f"SELECT {grouping}, sum(gpu_seconds)::BIGINT AS gpu_seconds FROM allocations "
        "WHERE day >= ? AND day < ? AND 'unattributed' IN (cost_centre, team, person) "
        f"GROUP BY {grouping} ORDER BY gpu_seconds DESC, {grouping}", [week.monday, week.end]))


def read_incidents(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...] | None:
    """The week's incidents, most expensive first; None when the ledger has no incidents table."""
    if table_columns(con, "incidents") is None:  # a snapshot published before the detectors
        return None
    return _rows(con.execute(
        "SELECT * FROM incidents WHERE day >= ? AND day < ? "
        "ORDER BY cost DESC NULLS LAST, gpu_seconds DESC NULLS LAST, incident_id",
        [week.monday, week.end]))
