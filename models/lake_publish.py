"""Publishing the lake: rewrite the partitions ``lake_changes`` marks, keep the catalog.

Each partition is written from DuckDB to ``_staging/``, moved to an immutable file under
``_versions/`` and hard-linked over the Hive path ``part-0.parquet`` (``os.replace``): a
reader of the Hive layout sees the old file or the new one, never half of one; a reader of the
published snapshot reads the version files its catalog names, so its whole state stays as
published.

Retiring (``docs/storage.md``, "Readers never blocked"): a file the catalog stops naming is
first recorded in ``_retired.parquet`` (before the catalog is written), and only the publish
whose snapshot swap stopped serving it starts its grace (:func:`settle_retired`, called after
the swap): it is deleted :data:`RETIRED_GRACE` after that swap, never while the served snapshot
names it. A publish that fails or is killed before its swap starts no grace. Version files that
no catalog, retirement or served snapshot names (a writer killed between writing a partition
and writing the catalog) are adopted the same way once their writer is gone.
"""

import os
import shutil
import sys
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from connectors.processes import process_alive
from models.lake import (
    CATALOG_FILE,
    LAKE_BY_NAME,
    LAKE_TABLES,
    PART_FILE,
    RETIRED_FILE,
    STAGING,
    VERSIONS,
    LakeTable,
    columns_signature,
    partition_relpath,
    sql_string,
)
from models.scalars import scalar
from models.schema import LAKE_CHANGES

#: How long a replaced partition file stays readable after the swap that stopped serving it.
RETIRED_GRACE = timedelta(minutes=10)
#: A staging or version file nothing names whose writer cannot be told from its name (a file of
#: an older release) is left alone until it is this old: no live writer takes that long.
ORPHAN_AGE = timedelta(hours=6)

Key = tuple[str, str | None, date | None]


@dataclass(frozen=True)
class Partition:
    """One catalog row: a partition's current file and what it holds."""

    table_name: str
    cluster: str | None
    day: date | None
    rows: int
    bytes: int
    written_at: datetime
    file: str  # the version file, relative to the lake root
    path: str  # the Hive path (part-0.parquet), relative to the lake root
    columns: str

    @property
    def key(self) -> Key:
        return (self.table_name, self.cluster, self.day)


CATALOG_SCHEMA = pa.schema([
    ("table_name", pa.string()), ("cluster", pa.string()), ("day", pa.date32()),
    ("rows", pa.int64()), ("bytes", pa.int64()), ("written_at", pa.timestamp("us")),
    ("file", pa.string()), ("path", pa.string()), ("columns", pa.string()),
])
#: retired_at: when the catalog stopped naming the file; unserved_at: when a snapshot swap that
#: does not name it happened (NULL until then: the served snapshot may still name it)
RETIRED_SCHEMA = pa.schema([("file", pa.string()), ("retired_at", pa.timestamp("us")),
                            ("unserved_at", pa.timestamp("us"))])


@dataclass(frozen=True)
class LakeSync:
    """What a publish did to the lake."""

    catalog: dict[Key, Partition]
    written: int
    removed: int
    full_tables: tuple[str, ...]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def read_catalog(root: Path) -> dict[Key, Partition] | None:
    """The catalog of the lake at ``root``; None when there is none (no lake yet)."""
    path = root / CATALOG_FILE
    if not path.is_file():
        return None
    rows = pq.read_table(path, schema=CATALOG_SCHEMA).to_pylist()
    return {p.key: p for p in (Partition(**r) for r in rows)}


def catalog_table(catalog: dict[Key, Partition]) -> pa.Table:
    rows = sorted(catalog.values(), key=lambda p: (p.table_name, *_order(p.key)))
    return pa.Table.from_pylist([p.__dict__ for p in rows], schema=CATALOG_SCHEMA)


def _write_small_parquet(root: Path, name: str, table: pa.Table) -> None:
    tmp = _staging_path(root)
    pq.write_table(table, tmp)
    tmp.replace(root / name)


def _staging_path(root: Path, suffix: str = ".parquet") -> Path:
    staging = root / STAGING
    staging.mkdir(parents=True, exist_ok=True)
    return staging / f"{os.getpid()}.{uuid.uuid4().hex}{suffix}"


def sync_lake(con: duckdb.DuckDBPyConnection, root: Path,
              only: Collection[str] | None = None) -> LakeSync:
    """Rewrite the marked partitions (all of them when there is no lake yet, or a table's
    rows or columns disagree with its catalog), write the catalog, clear the marks.

    ``only`` limits it to those lake tables (the Spark engine brings its inputs up to date
    before a build reads them; the tables the build rewrites wait for the publish)."""
    con.execute(LAKE_CHANGES.ddl())  # a ledger from before the lake, opened without the schema
    tables = [t for t in LAKE_TABLES if only is None or t.name in only]
    names = [t.name for t in tables]
    catalog = read_catalog(root)
    full: list[str] = []
    if catalog is None:
        print(f"lake: no lake at {root} yet: exporting every partition once", file=sys.stderr)
        catalog = {}
        full = list(names)
        for lake in tables:  # partitions of a lake whose catalog is gone: unknown state
            if (root / lake.name).is_dir():
                aside = _staging_path(root, ".old")
                (root / lake.name).rename(aside)
                shutil.rmtree(aside, ignore_errors=True)
    listed = ", ".join(sql_string(n) for n in names) or "NULL"
    marks = con.execute(f"SELECT DISTINCT table_name, cluster, day FROM {LAKE_CHANGES.name} "
                        f"WHERE table_name IN ({listed})").fetchall()
    retired: list[str] = []
    counts = [0, 0]  # partitions written, removed
    before = dict(catalog)
    try:
        todo = _resolve(con, marks, catalog, full)
        for lake in tables:
            _write_all(con, root, lake, todo.get(lake.name, ()), catalog, retired, counts)
        # a write no mark saw (SQL outside the hooks, a schema change): resync the table whole
        for lake in tables:
            if lake.name not in full and _disagrees(con, lake, catalog):
                full.append(lake.name)
                _write_all(con, root, lake, _all_partitions(con, lake, catalog), catalog,
                           retired, counts)
    finally:  # what was written is kept, even when a later partition failed
        # the replaced files are recorded before the catalog stops naming them: a file leaves
        # the catalog only into the retired list (deleted after a swap: settle_retired)
        _record_retired(root, retired)
        if catalog != before or not (root / CATALOG_FILE).is_file():
            _write_small_parquet(root, CATALOG_FILE, catalog_table(catalog))
    if marks:
        con.execute(f"DELETE FROM {LAKE_CHANGES.name} WHERE table_name IN ({listed})")
    return LakeSync(catalog, counts[0], counts[1], tuple(full))


def _write_all(con: duckdb.DuckDBPyConnection, root: Path, lake: LakeTable, keys: Iterable[Key],
               catalog: dict[Key, Partition], retired: list[str], counts: list[int]) -> None:
    for key in sorted(keys, key=_order):
        done = _write_partition(con, root, lake, key[1], key[2], catalog, retired)
        counts[0] += done
        counts[1] += 1 - done


def _disagrees(con: duckdb.DuckDBPyConnection, lake: LakeTable, catalog: dict[Key, Partition]
               ) -> bool:
    """Whether the table's row count (from DuckDB's metadata, no scan) or columns differ from
    its partitions'."""
    signature = columns_signature(lake.table)
    mine = [p for p in catalog.values() if p.table_name == lake.name]
    count = scalar(con, f"SELECT count(*) FROM {lake.name}")
    held = sum(p.rows for p in mine)
    if count == held and all(p.columns == signature for p in mine):
        return False
    print(f"lake: {lake.name} holds {count} rows, its partitions {held} (or its columns "
          "changed): rewriting every partition of the table", file=sys.stderr)
    return True


def _order(key: Key) -> tuple[Any, ...]:
    return (key[1] or "", key[2] or date.min)


def _resolve(con: duckdb.DuckDBPyConnection, marks: Iterable[tuple[Any, ...]],
             catalog: dict[Key, Partition], full: list[str]) -> dict[str, set[Key]]:
    """Marks -> partitions per table; a mark without a cluster is every cluster of its day
    that the table or the catalog holds."""
    todo: dict[str, set[Key]] = {}
    open_days: dict[str, set[date]] = {}
    for table_name, cluster, day in marks:
        if table_name not in LAKE_BY_NAME or table_name in full:
            continue
        if cluster is None and day is not None:
            open_days.setdefault(table_name, set()).add(day)
        else:
            todo.setdefault(table_name, set()).add((table_name, cluster, day))
    for table_name, days in open_days.items():
        lake = LAKE_BY_NAME[table_name]
        first, end = min(days), max(days) + timedelta(days=1)
        listed = ", ".join(f"DATE '{d}'" for d in sorted(days))
        found = con.execute(
            f"SELECT DISTINCT cluster, {lake.day_sql()} FROM {table_name} WHERE "
            f"{lake.days_sql(first, end)} AND {lake.day_sql()} IN ({listed})").fetchall()
        keys = {(table_name, c, d) for c, d in found}
        keys |= {k for k in catalog if k[0] == table_name and k[2] in days}
        todo.setdefault(table_name, set()).update(keys)
    for table_name in full:
        todo[table_name] = _all_partitions(con, LAKE_BY_NAME[table_name], catalog)
    return todo


def _all_partitions(con: duckdb.DuckDBPyConnection, lake: LakeTable,
                    catalog: dict[Key, Partition]) -> set[Key]:
    found = con.execute(f"SELECT DISTINCT cluster, {lake.day_sql()} FROM {lake.name}").fetchall()
    return ({(lake.name, c, d) for c, d in found}
            | {k for k in catalog if k[0] == lake.name})


def _write_partition(con: duckdb.DuckDBPyConnection, root: Path, lake: LakeTable,
                     cluster: str | None, day: date | None, catalog: dict[Key, Partition],
                     retired: list[str]) -> int:
    """Write one partition (1) or remove it when it holds no row any more (0)."""
    key = (lake.name, cluster, day)
    old = catalog.get(key)
    rel = partition_relpath(lake.name, cluster, day)
    hive = root / rel / PART_FILE
    staging = _staging_path(root)
    cols = ", ".join(f'"{c}"' for c in lake.file_columns)
    literal = str(staging).replace("'", "''")
    try:
        rows = scalar(con, f"COPY (SELECT {cols} FROM {lake.name} WHERE "
                           f"{lake.partition_sql(cluster, day)}) TO '{literal}' "
                           "(FORMAT parquet)")
        if rows == 0:
            staging.unlink(missing_ok=True)
            if old is not None:
                retired.append(old.file)
                del catalog[key]
            hive.unlink(missing_ok=True)
            _remove_empty_dirs(hive.parent, root / lake.name)
            return 0
        # the writer's pid in the name: a file a killed writer left is told from one in flight
        version_rel = f"{VERSIONS}/{rel}/{os.getpid()}.{uuid.uuid4().hex}.parquet"
        version = root / version_rel
        version.parent.mkdir(parents=True, exist_ok=True)
        staging.replace(version)
        link = _staging_path(root, ".link.parquet")
        try:
            os.link(version, link)
        except OSError:  # no hard links here (some network file systems): a copy
            shutil.copyfile(version, link)
        hive.parent.mkdir(parents=True, exist_ok=True)
        link.replace(hive)  # atomic: the old file or the new, never half
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    if old is not None:
        retired.append(old.file)
    catalog[key] = Partition(lake.name, cluster, day, rows, version.stat().st_size, _now(),
                             version_rel, f"{rel}/{PART_FILE}", columns_signature(lake.table))
    return 1


def _remove_empty_dirs(path: Path, stop: Path) -> None:
    while path != stop and path.is_dir() and not any(path.iterdir()):
        path.rmdir()
        path = path.parent


def _read_retired(root: Path) -> list[dict[str, Any]]:
    path = root / RETIRED_FILE
    if not path.is_file():
        return []
    table = pq.read_table(path)  # an older release's list has no unserved_at: not yet swapped
    return [{"file": r["file"], "retired_at": r.get("retired_at"),
             "unserved_at": r.get("unserved_at")} for r in table.to_pylist()]


def _write_retired(root: Path, entries: list[dict[str, Any]]) -> None:
    _write_small_parquet(root, RETIRED_FILE, pa.Table.from_pylist(entries, schema=RETIRED_SCHEMA))


def _record_retired(root: Path, newly: list[str]) -> None:
    """Remember the files the catalog stops naming now; nothing is deleted here (the served
    snapshot may still name them)."""
    if not newly:
        return
    now = _now()
    entries = _read_retired(root)
    entries += [{"file": f, "retired_at": now, "unserved_at": None} for f in newly]
    _write_retired(root, entries)


def settle_retired(root: Path, served: Collection[str]) -> list[str]:
    """After a snapshot naming exactly the files ``served`` was swapped in: start the grace of
    every retired file it does not name, adopt the orphaned version files, and delete what has
    been unserved for :data:`RETIRED_GRACE`. Returns the files deleted (relative to ``root``).

    A file the served snapshot names is never deleted (and leaves the retired list: its catalog
    write did not happen)."""
    now = _now()
    named = set(served)
    entries = _read_retired(root)
    before = list(entries)
    known = named | {e["file"] for e in entries}
    entries += [{"file": f, "retired_at": now, "unserved_at": now}
                for f in _orphans(root, known)]
    keep: dict[str, dict[str, Any]] = {}
    deleted: list[str] = []
    for entry in entries:
        if entry["file"] in named or entry["file"] in keep:
            continue
        since = entry["unserved_at"] or now  # this swap stopped serving it
        if now - since >= RETIRED_GRACE:
            version = root / entry["file"]
            version.unlink(missing_ok=True)
            _remove_empty_dirs(version.parent, root / VERSIONS)
            deleted.append(entry["file"])
        else:
            keep[entry["file"]] = {**entry, "unserved_at": since}
    if list(keep.values()) != before:
        _write_retired(root, list(keep.values()))
    return deleted


def _writer_gone(path: Path, now: datetime) -> bool:
    """Whether the process that wrote ``path`` (``<pid>.<id>…``) cannot be writing it any
    more: its pid is gone or is ours (this process's writes are done when it asks), or the
    file is older than :data:`ORPHAN_AGE` (a name without a pid, a pid reused)."""
    pid = path.name.split(".", 1)[0]
    if (pid.isdigit() and len(pid) <= 9 and "." in path.name  # not a 32-digit file id
            and (int(pid) == os.getpid() or not process_alive(int(pid)))):
        return True
    try:
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)
    except FileNotFoundError:
        return False
    return now - modified >= ORPHAN_AGE


def _orphans(root: Path, known: set[str]) -> list[str]:
    """Version files nothing names (``known``: the catalog's, the retired list's, the served
    snapshot's) whose writer is gone."""
    versions = root / VERSIONS
    if not versions.is_dir():
        return []
    now = _now()
    found = []
    for path in versions.rglob("*.parquet"):
        rel = path.relative_to(root).as_posix()
        if rel not in known and path.is_file() and _writer_gone(path, now):
            found.append(rel)
    return sorted(found)


def remove_stale_staging(root: Path) -> list[Path]:
    """Delete the staging files and folders (a lake table set aside) whose writer is gone."""
    staging = root / STAGING
    removed: list[Path] = []
    if not staging.is_dir():
        return removed
    now = _now()
    for path in staging.iterdir():
        if path.name.split(".", 1)[0] == str(os.getpid()) or not _writer_gone(path, now):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def export_small_tables(con: duckdb.DuckDBPyConnection, root: Path, names: Iterable[str]) -> int:
    """Each small table whole as ``<table>/part-0.parquet`` (written beside, renamed)."""
    count = 0
    for name in names:
        target = root / name / PART_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = _staging_path(root)
        literal = str(staging).replace("'", "''")
        try:
            con.execute(f"COPY {name} TO '{literal}' (FORMAT parquet)")
            staging.replace(target)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        count += 1
    return count

