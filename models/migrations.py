"""Versioned upgrades of a ledger written by an earlier release (issue #28 item 3; docs/storage.md
"Upgrades").

The ledger records the migrations applied to it in ``schema_migrations`` (version, name, when,
what changed); its schema version is the highest. ``MIGRATIONS`` are ordered; each says what it
would change in a ledger (``plan``: empty when nothing) and does it (``apply``). A ledger opened
for writing (``models.runner.ensure_schema``) runs the pending ones in one transaction: all land
or none do, so an upgrade killed mid-way leaves the old ledger as it was. A file-backed ledger
with migrations pending is first copied beside itself (``<name>.pre-migrate-v<N>``) and the copy
removed once they succeeded; when they fail the copy is kept and named in the error.
``gpuledger migrate --check`` lists the plan without changing anything.

A new ledger gets every migration recorded as applied: it is born at the current version.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from models.scalars import scalar
from models.schema import (
    ALL_TABLES,
    ALL_VIEWS,
    CHARGEBACK,
    CHARGEBACK_VIEW,
    Table,
    View,
)
from models.schema import (
    SCHEMA_MIGRATIONS as MIGRATIONS_TABLE,
)


class MigrationFailed(RuntimeError):
    """An upgrade that did not complete; nothing of it was committed."""


def _kind(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    row = con.execute(
        "SELECT table_type FROM information_schema.tables WHERE table_name = ? "
        "AND table_schema = current_schema() AND table_catalog = current_database()",
        [name]).fetchone()
    return row[0] if row else None


# --------------------------------------------------------------------------- 1: the invoice view


def _plan_invoice_view(con: duckdb.DuckDBPyConnection) -> list[str]:
    if _kind(con, CHARGEBACK_VIEW.name) == "BASE TABLE" and _kind(con, CHARGEBACK.name) is None:
        return [f"rename table {CHARGEBACK_VIEW.name} (every period kind) to {CHARGEBACK.name}; "
                f"{CHARGEBACK_VIEW.name} becomes the weekly view"]
    return []


def rename_invoice_table(con: duckdb.DuckDBPyConnection) -> None:
    if _plan_invoice_view(con):
        con.execute(f"ALTER TABLE {CHARGEBACK_VIEW.name} RENAME TO {CHARGEBACK.name}")


# --------------------------------------------------------------------------- 2: declared schema


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    present: dict[str, set[str]] = {}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = current_schema()"
    ).fetchall():
        present.setdefault(table, set()).add(column)
    return present


def _plan_declared(con: duckdb.DuckDBPyConnection) -> list[str]:
    present = _columns(con)
    changes = []
    for t in ALL_TABLES:
        if t.name not in present:
            changes.append(f"create table {t.name}")
            continue
        changes += [f"add column {t.name}.{c} {kind}" for c, kind in t.columns
                    if c not in present[t.name]]
    return changes


def declare(con: duckdb.DuckDBPyConnection, tables: Sequence[Table],
            views: Sequence[View] = ()) -> None:
    """Create the `tables` that do not exist and add the columns declared since an older
    release created one (one catalog read; an ALTER only for what is missing), then `views`."""
    for t in tables:
        con.execute(t.ddl())
    present = _columns(con)
    for t in tables:
        for column, column_type in t.columns:
            if column not in present.get(t.name, ()):
                con.execute(f'ALTER TABLE {t.name} ADD COLUMN "{column}" {column_type}')
    for v in views:
        con.execute(v.ddl())


def _apply_declared(con: duckdb.DuckDBPyConnection) -> None:
    declare(con, ALL_TABLES, ALL_VIEWS)


def _plan_built_days(con: duckdb.DuckDBPyConnection) -> list[str]:
    """A ledger from before built_days: the days its allocations hold were built."""
    if applied_version(con) >= 3 or _kind(con, "allocations") is None:
        return []
    n = scalar(con, "SELECT count(DISTINCT day) FROM allocations")
    if not n:
        return []
    return [f"built_days: record as built the {n} day(s) the ledger's allocations hold"]


def _apply_built_days(con: duckdb.DuckDBPyConnection) -> None:
    if applied_version(con) >= 3 or _kind(con, "allocations") is None:
        return
    con.execute("INSERT INTO built_days SELECT DISTINCT day, current_localtimestamp() "
                "FROM allocations WHERE day NOT IN (SELECT day FROM built_days)")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    plan: Callable[[duckdb.DuckDBPyConnection], list[str]]
    apply: Callable[[duckdb.DuckDBPyConnection], None]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "invoice lines: chargeback_periods and the weekly chargeback view",
              _plan_invoice_view, rename_invoice_table),
    # the tables and columns of this release (the per-GPU conservation table, the DRA
    # ResourceSlices, …): every later release re-plans it, so a ledger of any age gets them
    Migration(2, "tables and columns this release declares", _plan_declared, _apply_declared),
    # built days widen later builds by their neighbours (models/build.py days_to_build)
    Migration(3, "built days: the days an older ledger already built", _plan_built_days,
              _apply_built_days),
)
SCHEMA_VERSION = max(m.version for m in MIGRATIONS)


def applied_version(con: duckdb.DuckDBPyConnection) -> int:
    """The ledger's schema version (0: written before versions were recorded, or new)."""
    if _kind(con, MIGRATIONS_TABLE.name) is None:
        return 0
    return int(scalar(con, f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE.name}"))


def is_new(con: duckdb.DuckDBPyConnection) -> bool:
    """No table of the ledger yet: a file just created."""
    return bool(scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                            "current_database() AND NOT temporary") == 0)


def plan(con: duckdb.DuckDBPyConnection) -> list[tuple[Migration, list[str]]]:
    """The migrations this ledger still needs, each with what it would change: every migration
    above its version, and any whose plan finds something to change (each is idempotent: a
    ledger restored or copied from an older layout is brought up again)."""
    version = applied_version(con)
    out = []
    for m in MIGRATIONS:
        changes = m.plan(con)
        if m.version > version or changes:
            out.append((m, changes))
    return out


def database_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = "
                      "current_database()").fetchone()
    return Path(row[0]) if row and row[0] else None


def migrate(con: duckdb.DuckDBPyConnection) -> list[tuple[int, str, list[str]]]:
    """Run the pending migrations in one transaction of their own (call it outside any);
    returns (version, name, changes) of each applied."""
    new = is_new(con)
    pending = plan(con)
    if not pending and applied_version(con) == SCHEMA_VERSION:
        return []
    copy = None
    path = database_file(con)
    if not new and path is not None and path.is_file():
        con.execute("CHECKPOINT")
        copy = path.with_name(f"{path.name}.pre-migrate-v{SCHEMA_VERSION}")
        shutil.copy2(path, copy)
    now = datetime.now(UTC).replace(tzinfo=None)
    applied = []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(MIGRATIONS_TABLE.ddl())
        for m, changes in pending:
            m.apply(con)
            applied.append((m.version, m.name, changes))
        done = {v for v, in con.execute(f"SELECT version FROM {MIGRATIONS_TABLE.name}")
                .fetchall()}
        for m in MIGRATIONS:
            if m.version not in done:
                changes = next((c for v, _, c in applied if v == m.version), [])
                con.execute(f"INSERT INTO {MIGRATIONS_TABLE.name} VALUES (?, ?, ?, ?)",
                            [m.version, m.name, now, ["new ledger"] if new else changes])
        con.execute("COMMIT")
    except BaseException as exc:
        con.execute("ROLLBACK")
        if copy is not None:
            msg = (f"{path}: expected the upgrade to schema version {SCHEMA_VERSION} to "
                   f"complete, found {type(exc).__name__}: {exc}; nothing was changed, and a "
                   f"copy of the ledger as it was is kept at {copy}")
            raise MigrationFailed(msg) from exc
        raise
    if copy is not None:
        copy.unlink(missing_ok=True)
    return applied
