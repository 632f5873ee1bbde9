"""``backup_cost``: how long ``gpuledger backup``, ``restore --check`` (verify) and ``restore``
take on the sample ledger (``make demo``'s: sample_data/ loaded and built) and on a ledger of
about 100 MiB, against a plain copy of the same files (``cp -r`` of the ledger, its lake and
reports: the baseline no backup can beat).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks import results

NAME = "backup_cost"
ROOT = Path(__file__).resolve().parents[1]
TARGET_MIB = 100


def _sample(folder: Path) -> Path:
    from gpuledger.cli import main

    db = folder / "sample" / "ledger.duckdb"
    site = ROOT / "sample_data" / "gpuledger.toml"
    assert main(["--db", str(db), "--config", str(site), "load"]) == 0
    assert main(["--db", str(db), "--config", str(site), "build"]) == 0
    return db


def _big(folder: Path) -> Path:
    """A ledger grown to about TARGET_MIB with minute readings (the table that makes ledgers
    big), published."""
    import duckdb

    from models.runner import ensure_schema, publish_snapshot

    db = folder / "big" / "ledger.duckdb"
    db.parent.mkdir(parents=True)
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        day = datetime(2026, 1, 5)
        n = 0
        while db.stat().st_size < TARGET_MIB * 2**20:
            con.execute(
                "INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, bucket_start, "
                "busy_fraction, samples) SELECT 'c', 'GPU-' || (g % 4000), 'n' || (g % 500), "
                "g % 8, ?::TIMESTAMP + to_minutes(CAST(g // 4000 AS BIGINT)), random(), 1 "
                "FROM range(?, ? + 1000000) AS t(g)", [day, n, n])
            con.execute("CHECKPOINT")
            n += 1_000_000
        publish_snapshot(con, db)
    return db


def _size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _measure(name: str, db: Path, work: Path) -> dict:
    from gpuledger.export.backup import backup, restore, verify
    from models.lake import lake_root

    reports = db.parent / "reports"
    reports.mkdir(exist_ok=True)
    files = [db, lake_root(db), reports]
    def plain_copy() -> None:
        target = work / f"cp-{name}"
        target.mkdir()
        for path in files:
            if path.is_dir():
                shutil.copytree(path, target / path.name)
            else:
                shutil.copy2(path, target / path.name)

    copy_s = _time(plain_copy)
    dest = work / f"backup-{name}"
    backup_s = _time(lambda: backup(db, reports, dest))
    verify_s = _time(lambda: verify(dest))
    restore_s = _time(lambda: restore(dest, db, reports))
    return {"name": name, "bytes": _size(files), "copy_s": copy_s, "backup_s": backup_s,
            "verify_s": verify_s, "restore_s": restore_s}


def main(argv: list[str]) -> int:
    p = results.parser(NAME, __doc__.splitlines()[0])
    args = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpuledger-backup-") as tmp:
        work = Path(tmp)
        for name, make in (("sample ledger", _sample),
                           (f"{TARGET_MIB} MiB ledger file", _big)):
            print(f"backup_cost: {name} ...", flush=True)
            runs.append(_measure(name.split()[0], make(work), work) | {"label": name})
    lines = [
        "## backup_cost — `gpuledger backup`, `restore --check` and `restore`",
        "",
        f"{results.cores()} cores ({results.cpu_model()}), load {results.load_average()}. "
        "*copy*: the baseline, a plain copy of the ledger, its lake and reports; *backup*: "
        "the writer lock, a checkpoint, the copy and the manifest's sha256 of every file; "
        "*verify*: every hash again, the ledger opened, the closed weeks' checksums and row "
        "counts; *restore*: verify, the copies beside their targets, the swap and a publish. "
        "*size*: the ledger file, its lake and reports together (the lake holds the readings "
        "a second time, as Parquet).",
        "",
        "| ledger | size | copy s | backup s | backup / copy | verify s | restore s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(f"| {r['label']} | {r['bytes'] / 2**20:,.1f} MiB | {r['copy_s']:.2f} | "
                     f"{r['backup_s']:.2f} | {r['backup_s'] / r['copy_s']:.2f}× | "
                     f"{r['verify_s']:.2f} | {r['restore_s']:.2f} |")
    return results.publish(NAME, "\n".join(lines), True, write=not args.no_write)


if __name__ == "__main__":
    results.entry(main)
