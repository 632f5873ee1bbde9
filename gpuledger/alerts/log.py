"""The alert log (``alert_log``, ``alert_deliveries``): what was sent to whom, so nobody gets the
same warning twice.

Each write is its own short transaction on a connection the caller opens for it: the intent is
recorded (status ``pending``), the connection is closed, the message is sent, and the outcome is
recorded on a new connection. What counts as already sent (docs/alerts.md, "The log"):

* a real run skips alerts whose key the log holds as ``sent`` or ``pending`` (at most once: a
  ``pending`` row is an interrupted delivery that may have reached the owner; the asset check
  lists it for a person to look at); ``failed`` ones are tried again at the next tick;
* a dry run logs ``dry_run`` rows and also skips what earlier dry runs logged, so a dry run
  does not log the same alert every tick; a later real run ignores ``dry_run`` rows and sends.
"""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import duckdb

from gpuledger.alerts.evaluate import Logged
from models.runner import transaction
from models.schema import ALERT_DELIVERIES, ALERT_LOG

REAL_SEEN = ("sent", "pending")
DRY_SEEN = ("sent", "pending", "dry_run")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def logged(con: duckdb.DuckDBPyConnection, *, dry_run: bool,
           family: str | None = None) -> list[Logged]:
    """The entries that count as sent for a real run (or a dry run)."""
    statuses = DRY_SEEN if dry_run else REAL_SEEN
    marks = ", ".join("?" for _ in statuses)
    sql = (f"SELECT alert_key, family, kind, domain, cluster, allocation, node, incident_start, "
           f"as_of FROM {ALERT_LOG.name} WHERE status IN ({marks})")
    params: list[object] = list(statuses)
    if family is not None:
        sql += " AND family = ?"
        params.append(family)
    return [Logged(*row) for row in con.execute(sql, params).fetchall()]


def keys_seen(con: duckdb.DuckDBPyConnection, keys: Sequence[str], *, dry_run: bool) -> set[str]:
    if not keys:
        return set()
    statuses = DRY_SEEN if dry_run else REAL_SEEN
    rows = con.execute(
        f"SELECT DISTINCT alert_key FROM {ALERT_LOG.name} WHERE list_contains(?, alert_key) "
        f"AND list_contains(?, status)", [list(keys), list(statuses)]).fetchall()
    return {r[0] for r in rows}


def record_intent(con: duckdb.DuckDBPyConnection, row: dict[str, object]) -> str:
    """Insert one attempt (``row``: alert_log columns) as pending, or as dry_run when
    ``row['dry_run']``; returns its attempt id."""
    attempt = uuid.uuid4().hex
    values = {**row, "attempt_id": attempt, "logged_at": now(),
              "status": "dry_run" if row.get("dry_run") else "pending"}
    if values["status"] == "dry_run":
        values["finished_at"] = values["logged_at"]
    cols = [c for c in ALERT_LOG.column_names if c in values]
    unknown = set(values) - set(ALERT_LOG.column_names)
    if unknown:
        msg = f"expected alert_log columns, found {sorted(unknown)}"
        raise KeyError(msg)
    with transaction(con):
        con.execute(
            f"INSERT INTO {ALERT_LOG.name} ({', '.join(cols)}) VALUES "
            f"({', '.join('?' for _ in cols)})", [values[c] for c in cols])
    return attempt


def record_outcome(con: duckdb.DuckDBPyConnection, attempt: str, key: str,
                   results: Sequence[object]) -> str:
    """Store each channel's result (``DeliveryResult``) and the attempt's status: sent when
    any channel delivered, failed otherwise (also with no channel configured)."""
    at = now()
    ok = any(getattr(r, "ok", False) for r in results)
    status = "sent" if ok else "failed"
    detail = "; ".join(f"{r.channel}: {'ok' if r.ok else 'failed'} {r.detail}"  # type: ignore
                       for r in results) or "no delivery channel configured"
    with transaction(con):
        for r in results:
            con.execute(f"INSERT INTO {ALERT_DELIVERIES.name} VALUES (?, ?, ?, ?, ?, ?)",
                        [attempt, key, r.channel, r.ok, r.detail, at])  # type: ignore
        con.execute(f"UPDATE {ALERT_LOG.name} SET status = ?, detail = ?, finished_at = ? "
                    "WHERE attempt_id = ?", [status, detail, at, attempt])
    return status
