"""``gpuledger backup`` and ``restore``: the ledger, its lake and the report history as one
consistent, verifiable set (docs/storage.md, "Backup and restore"; issue #28).

A backup folder holds:

* ``ledger.duckdb``: the ledger as of one instant. It is copied while this process holds the
  ledger's writer lock (DuckDB allows one read-write connection per file: a build, ingest or
  close holding it makes the backup wait, up to ``wait_s``), after a ``CHECKPOINT``, so no write
  is half in the copy. Readers are never blocked: they read the published snapshot.
* ``lake/``: the ledger's lake as the last publish left it (written under the same lock, so it
  is the lake of that ledger); ``reports/``: the report history (weekly folders: the issued
  invoice lines, FOCUS files), when the folder exists.
* ``manifest.json``: every file with its size and sha256, the ledger's closed weeks with their
  checksums and the row count of every table: what ``verify`` checks before anything trusts the
  copy.

``restore`` verifies the backup (every hash, the ledger opens, every closed week's frozen lines
still give its checksum), takes the writer lock of the live ledger so no writer is mid-way, moves
the live ledger, lake and reports aside (``*.pre-restore-<UTC time>``, kept), puts the backup's
in place (each copied beside its target and renamed into it) and publishes the snapshot readers
use. A failure before the swap changes nothing; the set moved aside is named in the message.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from models.closing import changed_closes
from models.lake import lake_root
from models.runner import publish_snapshot

MANIFEST = "manifest.json"
LEDGER = "ledger.duckdb"
LAKE = "lake"
REPORTS = "reports"
FORMAT = 1
CHUNK = 1 << 20


class BackupError(ValueError):
    """A backup or restore that cannot be done; the message says what was expected."""


@dataclass
class Verified:
    """What ``verify`` found: problems (empty: the backup is whole) and the manifest."""

    problems: list[str] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    """Regular files under `root` (symlinks are not followed or kept), sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def writer_lock(db: Path, wait_s: float) -> duckdb.DuckDBPyConnection:
    """A read-write connection to `db`: while it is open no other process writes the ledger.
    Waits up to `wait_s` for a writer (a build, an ingest) to finish."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(db))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                msg = (f"{db}: expected the ledger's writer lock within {wait_s:g} s, found it "
                       "held by another process (a build, ingest or close still running): run "
                       "again when it is done, or give --wait more seconds")
                raise BackupError(msg) from None
            time.sleep(0.2)


def _facts(con: duckdb.DuckDBPyConnection) -> dict:
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND NOT temporary ORDER BY table_name").fetchall()]
    rows = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    closes = []
    if "closed_periods" in tables:
        closes = [list(map(str, r)) for r in con.execute(
            "SELECT period, revision, checksum FROM closed_periods ORDER BY period, revision"
        ).fetchall()]
    return {"rows": rows, "closed_periods": closes}


def backup(db: Path, reports: Path | None, dest: Path, *, wait_s: float = 600.0) -> dict:
    """Write the backup folder `dest` (which must not exist); returns its manifest."""
    if dest.exists():
        msg = f"{dest}: expected a new backup folder, found one already there"
        raise BackupError(msg)
    if not db.is_file():
        msg = f"{db}: expected a ledger to back up, found no file"
        raise BackupError(msg)
    work = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    try:
        con = writer_lock(db, wait_s)
        try:
            con.execute("CHECKPOINT")
            facts = _facts(con)
            shutil.copy2(db, work / LEDGER)
            lake = lake_root(db)
            if lake.is_dir():
                shutil.copytree(lake, work / LAKE, symlinks=False,
                                ignore=shutil.ignore_patterns("_staging"))
            if reports is not None and reports.is_dir():
                shutil.copytree(reports, work / REPORTS, symlinks=True)
        finally:
            con.close()
        manifest = {
            "format": FORMAT,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "ledger": str(db), "reports": str(reports) if reports else None,
            "seconds": round(time.monotonic() - started, 3),
            **facts,
            "files": [{"path": str(p.relative_to(work)), "bytes": p.stat().st_size,
                       "sha256": _sha256(p)} for p in _files(work)],
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        work.rename(dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def verify(folder: Path) -> Verified:
    """Check a backup folder: its manifest, every file's size and hash, no file missing or
    added, the ledger opens, every closed week still gives its checksum, the row counts."""
    out = Verified()
    try:
        out.manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        out.problems.append(f"{folder / MANIFEST}: expected the backup's manifest, found {exc}")
        return out
    listed = {f["path"]: f for f in out.manifest.get("files", [])}
    present = {str(p.relative_to(folder)) for p in _files(folder)} - {MANIFEST}
    for path in sorted(set(listed) - present):
        out.problems.append(f"{path}: expected by the manifest, found missing")
    for path in sorted(present - set(listed)):
        out.problems.append(f"{path}: expected no file the manifest does not list, found one")
    for path in sorted(set(listed) & present):
        entry, file = listed[path], folder / path
        if file.stat().st_size != entry["bytes"] or _sha256(file) != entry["sha256"]:
            out.problems.append(f"{path}: expected sha256 {entry['sha256'][:12]}…, found "
                                "other bytes")
    if out.problems or LEDGER not in listed:
        if LEDGER not in listed:
            out.problems.append(f"{LEDGER}: expected in the manifest, found it not listed")
        return out
    try:
        with duckdb.connect(str(folder / LEDGER), read_only=True) as con:
            facts = _facts(con)
            changed = changed_closes(con) if facts["closed_periods"] else []
    except duckdb.Error as exc:
        out.problems.append(f"{LEDGER}: expected a ledger DuckDB opens, found {exc}")
        return out
    for period, was, now in changed:
        out.problems.append(f"closed week {period}: expected checksum {was[:12]}…, its frozen "
                            f"lines give {now[:12]}…")
    if facts["closed_periods"] != out.manifest.get("closed_periods"):
        out.problems.append("closed_periods: expected the closes the manifest lists, found others")
    if facts["rows"] != out.manifest.get("rows"):
        out.problems.append("rows: expected the row counts the manifest lists, found others")
    return out


def _aside(path: Path, stamp: str) -> Path | None:
    if not path.exists():
        return None
    target = path.with_name(f"{path.name}.pre-restore-{stamp}")
    path.rename(target)
    return target


def _copy_beside(source: Path, target: Path) -> Path:
    """`source` copied next to `target` (same file system: the rename into place is atomic)."""
    tmp = target.with_name(f".{target.name}.restoring-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    if source.is_dir():
        shutil.copytree(source, tmp, symlinks=True)
    else:
        shutil.copy2(source, tmp)
    return tmp


def restore(folder: Path, db: Path, reports: Path | None, *, wait_s: float = 600.0) -> list[str]:
    """Put the backup `folder` in place of the ledger `db`, its lake and `reports`; returns
    what was moved aside. Refuses (BackupError, nothing changed) a backup that fails
    ``verify``."""
    checked = verify(folder)
    if not checked.ok:
        msg = (f"{folder}: expected a whole backup, found {len(checked.problems)} problem(s): "
               + "; ".join(checked.problems[:5]))
        raise BackupError(msg)
    db.parent.mkdir(parents=True, exist_ok=True)
    parts = [(folder / LEDGER, db), (folder / LAKE, lake_root(db))]
    if reports is not None and (folder / REPORTS).is_dir():
        parts.append((folder / REPORTS, reports))
    staged = [(_copy_beside(src, dst), dst) for src, dst in parts if src.exists()]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    moved: list[str] = []
    con = writer_lock(db, wait_s) if db.exists() else None
    try:
        if con is not None:
            con.close()  # no writer was mid-way; the swap follows at once
        for tmp, dst in staged:
            aside = _aside(dst, stamp)
            if aside is not None:
                moved.append(str(aside))
            tmp.rename(dst)
        if not any(dst == lake_root(db) for _, dst in staged):
            aside = _aside(lake_root(db), stamp)  # a lake of the old ledger is not this one's
            if aside is not None:
                moved.append(str(aside))
    finally:
        for tmp, _ in staged:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink()
    with duckdb.connect(str(db)) as con:
        publish_snapshot(con, db)
    return moved
