"""Ledger care: ``gpuledger backup DEST``, ``gpuledger restore FOLDER [--check]``
(gpuledger/export/backup.py) and ``gpuledger migrate [--check]`` (models/migrations.py)."""

import argparse
import sys
from pathlib import Path

from gpuledger.site.config import Settings

EXIT_OK, EXIT_FAIL = 0, 1


def _reports(settings: Settings) -> Path:
    from gpuledger.report.location import reports_dir

    return reports_dir(settings)


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.export.backup import backup

    manifest = backup(settings.db, _reports(settings), Path(args.dest), wait_s=args.wait)
    size = sum(f["bytes"] for f in manifest["files"])
    print(f"backup {args.dest}: {len(manifest['files'])} files, {size / 2**20:,.1f} MiB, "
          f"{len(manifest['closed_periods'])} closed week revision(s), in "
          f"{manifest['seconds']:.1f} s", file=sys.stderr)
    return EXIT_OK


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.export.backup import restore, verify

    folder = Path(args.folder)
    if args.check:
        checked = verify(folder)
        for problem in checked.problems:
            print(f"gpuledger restore: {problem}", file=sys.stderr)
        print(f"backup {folder}: {'whole' if checked.ok else 'NOT whole'} "
              f"({len(checked.manifest.get('files', []))} files)", file=sys.stderr)
        return EXIT_OK if checked.ok else EXIT_FAIL
    moved = restore(folder, settings.db, _reports(settings), wait_s=args.wait)
    print(f"restored {folder} into {settings.db}; moved aside: "
          f"{', '.join(moved) if moved else 'nothing (no ledger there)'}", file=sys.stderr)
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    import duckdb

    from models.migrations import SCHEMA_VERSION, applied_version, migrate, plan

    if not settings.db.is_file():
        print(f"gpuledger migrate: error: expected a ledger at {settings.db}, found no file",
              file=sys.stderr)
        return EXIT_FAIL
    if args.check:
        with duckdb.connect(str(settings.db), read_only=True) as con:
            version, pending = applied_version(con), plan(con)
        print(f"{settings.db}: schema version {version}, this release's {SCHEMA_VERSION}")
        for m, changes in pending:
            print(f"would apply {m.version} ({m.name}):"
                  + ("".join(f"\n  {c}" for c in changes) if changes else " nothing to change"))
        if not pending:
            print("up to date: nothing would change")
        return EXIT_OK
    with duckdb.connect(str(settings.db)) as con:
        applied = migrate(con)
        version = applied_version(con)
    for number, name, changes in applied:
        print(f"applied {number} ({name}): {len(changes)} change(s)")
    print(f"{settings.db}: schema version {version}")
    return EXIT_OK


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("backup", help="copy the ledger, its lake and the report history as one "
                       "verifiable set (docs/storage.md)")
    p.add_argument("dest", help="a new folder for the backup")
    p.add_argument("--wait", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for a running writer (default 600)")
    p.set_defaults(handler=cmd_backup)
    p = sub.add_parser("restore", help="check a backup and put it in place of the ledger, lake "
                       "and reports (the old ones are kept aside)")
    p.add_argument("folder", help="a folder `gpuledger backup` wrote")
    p.add_argument("--check", action="store_true",
                   help="only verify the backup (hashes, closed weeks, row counts)")
    p.add_argument("--wait", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for a running writer (default 600)")
    p.set_defaults(handler=cmd_restore)
    p = sub.add_parser("migrate", help="upgrade a ledger written by an earlier release (one "
                       "transaction; a copy kept until it succeeds)")
    p.add_argument("--check", action="store_true",
                   help="say what would change and change nothing")
    p.set_defaults(handler=cmd_migrate)
