"""Write helpers: schema creation, partition-scoped replace, and the read-only snapshot.

DuckDB allows one writing process or many readers, never both. The pipeline writes the ledger
file; readers (dashboards, ``gpuledger sql``, operators' duckdb CLI) open a published snapshot
that is swapped in atomically after each successful write.
"""

import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from connectors.processes import process_alive
from models.lake_changes import delete_marked, mark_frame
from models.schema import (
    ALL_TABLES,
    BUILDS_UNFINISHED,
    INGEST_RUNS,
    Table,
)


def snapshot_path(db_path: Path) -> Path:
    """Where the read-only published copy of ``db_path`` lives."""
    return db_path.with_name(f"{db_path.stem}.serving.duckdb")


#: DuckDB settings of every reader we open: the snapshot and nothing else, settings locked.
# a served reader's settings (typed as duckdb.connect's config)
CONFINED_READER: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False, "lock_configuration": True}


@contextmanager
def connect(db_path: Path, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the ledger (creating its folder and schema when writable) and always close it."""
    if not read_only:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(db_path), read_only=read_only)
    try:
        if not read_only:
            ensure_schema(con)
        yield con
    finally:
        con.close()


def ensure_schema(con: duckdb.DuckDBPyConnection, tables: Sequence[Table] = ALL_TABLES) -> None:
    """Bring the ledger to this release's schema: the pending versioned migrations
    (models/migrations.py: one transaction, a copy of the file kept until they succeed), or for
    a subset of tables, create those that do not exist and add their missing columns.

    One transaction: all of it or nothing, and one commit (on a new file each DDL statement
    committed alone cost a sync each: 0.1–0.45 s against 0.05 s).
    """
    if tables is ALL_TABLES:
        from models.migrations import migrate

        migrate(con)
        return
    from models.migrations import declare, rename_invoice_table

    with transaction(con):
        rename_invoice_table(con)
        declare(con, tables)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block in one transaction: all of its writes land, or none do."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def replace_rows(
    con: duckdb.DuckDBPyConnection,
    target: Table,
    frame: pl.DataFrame,
    *,
    where: str = "TRUE",
    params: Sequence[Any] = (),
    atomic: bool = True,
) -> int:
    """Delete the rows of ``target`` matching ``where`` and insert ``frame``, in one transaction.

    ``where`` scopes the replacement (a partition); its values are bound from ``params``. Running
    the same call twice leaves the table unchanged. ``atomic=False`` joins the caller's
    :func:`transaction` instead of opening one.
    """
    table = ledger_arrow(target, frame)  # a frame missing columns fails before the delete
    with transaction(con) if atomic else nullcontext(con):
        if where.strip().upper() != "FALSE":  # a lake table's removed partitions are marked
            delete_marked(con, target.name, where, list(params))
        return append_rows(con, target, table)


def append_rows(con: duckdb.DuckDBPyConnection, target: Table,
                frame: pl.DataFrame | pa.Table) -> int:
    """Insert ``frame`` (the columns of ``target``, by name) as it is: one Arrow scan, no delete.

    ``frame`` may already be :func:`ledger_arrow` of the frame (made in another thread). Joins
    whatever transaction is open on ``con``.
    """
    table = frame if isinstance(frame, pa.Table) else ledger_arrow(target, frame)
    if table.num_rows == 0:
        return 0
    mark_frame(con, target.name, table)  # a lake table's partitions, before the rows land
    # the relation API, not a registered view: DuckDB keeps a registered Arrow table alive until
    # the transaction ends, so a long transaction of many appends would hold them all
    con.from_arrow(table).insert_into(target.name)
    return int(table.num_rows)


def ledger_arrow(target: Table, frame: pl.DataFrame) -> pa.Table:
    """``frame``'s columns of ``target``, as the Arrow table :func:`append_rows` inserts."""
    missing = [c for c in target.column_names if c not in frame.columns]
    if missing:
        msg = (f"expected columns {target.column_names} for {target.name} (missing {missing}), "
               f"found {frame.columns}")
        raise ValueError(msg)
    return _row_group_batches(frame.select(target.column_names))


#: DuckDB's row group size: one Arrow record batch per row group lets its threads scan, compress
#: and write row groups in parallel (a single-chunk table is scanned by one thread).
ROW_GROUP_ROWS = 122_880


def _row_group_batches(frame: pl.DataFrame) -> pa.Table:
    table = frame.to_arrow()
    if table.num_rows <= ROW_GROUP_ROWS:
        return table
    # slices of the existing chunks (zero-copy): no chunk longer than a row group
    return pa.Table.from_batches(table.to_batches(max_chunksize=ROW_GROUP_ROWS),
                                 schema=table.schema)


def is_empty(con: duckdb.DuckDBPyConnection, target: Table) -> bool:
    """Whether ``target`` has no row (as the open transaction sees it)."""
    return con.execute(f"SELECT 1 FROM {target.name} LIMIT 1").fetchone() is None


def upsert_rows(
    con: duckdb.DuckDBPyConnection,
    target: Table,
    frame: pl.DataFrame,
    *,
    key: Sequence[str],
    atomic: bool = True,
) -> int:
    """Replace the rows of ``target`` whose ``key`` appears in ``frame``, then insert ``frame``.

    The match is a hash semi-join against the incoming rows, so it stays linear in size.
    """
    if atomic:
        with transaction(con):
            return upsert_rows(con, target, frame, key=key, atomic=False)
    if frame.height == 0:
        return 0
    if is_empty(con, target):  # nothing to replace: skip the semi-join
        return append_rows(con, target, frame)
    view = f"_keys_{uuid.uuid4().hex}"
    quoted = ", ".join(f'"{c}"' for c in key)
    con.register(view, frame.select(list(key)).to_arrow())
    try:
        return replace_rows(
            con, target, frame,
            where=f"({quoted}) IN (SELECT DISTINCT {quoted} FROM {view})",
            atomic=False,
        )
    finally:
        con.unregister(view)


def record_ingest(
    con: duckdb.DuckDBPyConnection,
    *,
    source: str,
    partition_key: str,
    window_start: datetime | None,
    window_end: datetime | None,
    rows_loaded: int,
    rows_rejected: int = 0,
    detail: str = "",
    atomic: bool = True,
) -> None:
    """Remember a successful load (the freshness line reads this)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    frame = pl.DataFrame(
        {
            "source": [source],
            "partition_key": [partition_key],
            "window_start": [window_start],
            "window_end": [window_end],
            "finished_at": [now],
            "rows_loaded": [rows_loaded],
            "rows_rejected": [rows_rejected],
            "detail": [detail],
        },
        schema={
            "source": pl.String,
            "partition_key": pl.String,
            "window_start": pl.Datetime("us"),
            "window_end": pl.Datetime("us"),
            "finished_at": pl.Datetime("us"),
            "rows_loaded": pl.Int64,
            "rows_rejected": pl.Int64,
            "detail": pl.String,
        },
    )
    replace_rows(
        con,
        INGEST_RUNS,
        frame,
        where="source = ? AND partition_key = ?",
        params=(source, partition_key),
        atomic=atomic,
    )


class PublishFailed(RuntimeError):
    """The copy for readers could not be made (full disk, …): the previous snapshot stays."""


class LedgerIncomplete(RuntimeError):
    """The ledger holds a build that did not finish: publishing it would serve invoices that
    disagree with the allocations."""


def unfinished_builds(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return con.execute(
        f"SELECT first_day, last_day, started_at, pid, host FROM {BUILDS_UNFINISHED.name} "
        "ORDER BY started_at").fetchall()


def publish_snapshot(con: duckdb.DuckDBPyConnection, db_path: Path) -> Path:
    """Publish the ledger to readers: sync the lake, then swap in a new serving snapshot.

    The lake (``models/lake_publish.py``, ``docs/storage.md``) gets only the partitions
    ``lake_changes`` marks since the last publish (everything, once, when there is no lake
    yet) and its small tables whole; the snapshot gets the small tables and, for each lake
    table, a view over that table's current partition files. Refused
    (:class:`LedgerIncomplete`) while a build is unfinished: the previous snapshot stays.
    A publish that fails leaves readers on the previous snapshot (whose partition files stay
    readable) and raises :class:`PublishFailed`; copies and staging files left by killed
    publishes (their process is gone) are removed first. Lake files the new snapshot no longer
    names are deleted only :data:`models.lake_publish.RETIRED_GRACE` after this swap
    (``settle_retired``): a file the served snapshot names is never deleted.
    """
    from models.lake import lake_root
    from models.lake_publish import (
        export_small_tables,
        remove_stale_staging,
        settle_retired,
        sync_lake,
    )
    from models.lake_serving import copy_serving, small_tables

    target = snapshot_path(db_path)
    unfinished = unfinished_builds(con)
    if unfinished:
        first, last, started, pid, host = unfinished[0]
        msg = (f"expected a complete ledger to publish, found a build of {first} .. {last} "
               f"started at {started:%Y-%m-%d %H:%M:%S} UTC (pid {pid} on {host}) that did not "
               f"finish; the published snapshot was left as it was: run `gpuledger build` for "
               f"those days (it repairs them)")
        raise LedgerIncomplete(msg)
    remove_stale_copies(target)
    root = lake_root(db_path)
    remove_stale_staging(root)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp.duckdb")
    alias = f"snap_{uuid.uuid4().hex[:8]}"
    try:
        synced = sync_lake(con, root)
        export_small_tables(con, root, small_tables(con))
        # small tables: small blocks (a third of the file and time of the default 256 kB)
        con.execute(f"ATTACH '{_sql_literal(tmp)}' AS {alias} (BLOCK_SIZE 16384)")
        try:
            copy_serving(con, alias, synced.catalog, root)
        finally:
            con.execute(f"DETACH {alias}")
        tmp.replace(target)
    except (duckdb.Error, OSError) as exc:
        _remove_copy(tmp)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        msg = (f"the ledger was updated but not published ({first}); readers keep the "
               f"previous snapshot {target}: free the cause and run any command that publishes "
               "(`gpuledger build`)")
        raise PublishFailed(msg) from exc
    except BaseException:
        _remove_copy(tmp)
        raise
    # only now do the files the previous snapshot named stop being served: their grace starts
    try:
        settle_retired(root, [p.file for p in synced.catalog.values()])
    except OSError as exc:  # published; the files wait for the next publish
        print(f"publish: retired lake files were not settled ({exc}); the next publish "
              "deletes them", file=sys.stderr)
    return target


def _sql_literal(path: Path) -> str:
    return str(path).replace("'", "''")


def _remove_copy(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)


def remove_stale_copies(target: Path) -> list[Path]:
    """Delete temporary copies of ``target`` whose publishing process is gone."""
    removed = []
    prefix = f".{target.stem}."
    for path in target.parent.glob(f"{prefix}*.tmp.duckdb*"):
        pid = path.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextmanager
def read_snapshot(db_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived read-only connection to the published snapshot (never the live ledger),
    confined to it: no file access (``COPY … TO``, ``read_text``, ``glob``, ``ATTACH``,
    ``INSTALL``/``LOAD``) and no setting changes, whatever SQL a reader sends. An operator who
    needs files uses the ``duckdb`` CLI on the snapshot, deliberately."""
    target = snapshot_path(db_path)
    if not target.exists():
        msg = (
            f"expected a published ledger at {target}, found none: "
            "run `gpuledger build` (or `make demo`) first"
        )
        raise FileNotFoundError(msg)
    con = duckdb.connect(str(target), read_only=True, config=CONFINED_READER)
    try:
        from models.lake_serving import register_lake

        register_lake(con, db_path)  # the lake tables: the snapshot's files, through pyarrow
        yield con
    finally:
        con.close()
