"""Publish cost: a small change then a publish, the lake's way against the whole-database copy.

    python -m benchmarks.publish_cost [--factors 1 8 64] [--repeat 3] [--no-write]
    python -m benchmarks.run publish_cost [-- --factors 1 8]

The demo ledger (``sample_data/gpuledger.toml``: ``load`` then ``build``) is made once under
``benchmarks/out/publish-cost/``. Each size is a copy of it whose ``gpu_utilization`` holds
FACTOR times the demo's rows: the demo's days copied FACTOR - 1 times, each copy shifted by a
further whole number of weeks (factor 64 is the issue's 5.7 M rows). It is published once
(the first publish exports the lake; timed and reported, not compared). Then each measurement
runs in its own process on that ledger: a small change, then a publish, timed:

- ``scontrol``: one ``import-scontrol`` snapshot (``import_scontrol_file``), the issue's case;
- ``day``: one cluster-day of ``gpu_utilization`` replaced (``replace_rows``, the same rows).

``old`` publishes as before issue #18 (``COPY FROM DATABASE`` of the whole ledger into a new
file, swapped in), ``new`` is ``models.runner.publish_snapshot`` (the lake). Peak RSS is the
process's ``ru_maxrss`` (``wait4``). Targets: the new publish is at least 2x cheaper than the
old at the largest size, and its time grows by less than 2x from the smallest to the largest
size while the old one's grows with the ledger.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from benchmarks import results

NAME = "publish_cost"
DESCRIPTION = "publish_cost — a small change then a publish: the lake against the whole copy"
OUT = Path(__file__).with_name("out") / "publish-cost"
SITE = Path(__file__).resolve().parents[1] / "sample_data" / "gpuledger.toml"
CHANGES = ("scontrol", "day")
METHODS = ("old", "new")
SPEEDUP = 2.0
FLAT = 2.0


def base_ledger() -> Path:
    db = OUT / "base" / "gpuledger.duckdb"
    if db.is_file():
        return db
    from gpuledger.cli import main as cli

    shutil.rmtree(db.parent, ignore_errors=True)
    for command in ("load", "build"):
        assert cli(["--db", str(db), "--config", str(SITE), command]) == 0
    return db


def sized_ledger(factor: int) -> tuple[Path, dict]:
    """A copy of the demo ledger with ``factor`` x its utilization rows, published once."""
    import duckdb

    from models.runner import connect, publish_snapshot

    folder = OUT / f"x{factor}"
    db = folder / "gpuledger.duckdb"
    meta_path = folder / "meta.json"
    if meta_path.is_file():
        return db, json.loads(meta_path.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(base_ledger(), db)
    with duckdb.connect(str(db)) as con:
        first, last = con.execute("SELECT min(bucket_start)::DATE, max(bucket_start)::DATE "
                                  "FROM gpu_utilization").fetchone()
        weeks = ((last - first).days // 7) + 1
        for n in range(1, factor):
            con.execute("INSERT INTO gpu_utilization SELECT * REPLACE (bucket_start + "
                        f"INTERVAL {7 * weeks * n} DAY AS bucket_start) FROM gpu_utilization "
                        "WHERE bucket_start < ?", [datetime.combine(last, datetime.min.time())
                                                    + timedelta(days=1)])
        rows = con.execute("SELECT count(*) FROM gpu_utilization").fetchone()[0]
        con.execute("CHECKPOINT")
    t = time.perf_counter()
    with connect(db) as con:
        publish_snapshot(con, db)
    first_s = time.perf_counter() - t
    meta = {"factor": factor, "utilization_rows": rows, "ledger_bytes": db.stat().st_size,
            "first_publish_s": round(first_s, 2), "day": first.isoformat()}
    meta_path.write_text(json.dumps(meta, indent=1))
    return db, meta


def old_publish(con, db_path: Path) -> Path:
    """The publish before issue #18: the whole ledger copied into a new file, swapped in."""
    from models.runner import snapshot_path

    target = snapshot_path(db_path).with_name("old-method.serving.duckdb")
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp.duckdb")
    alias = f"snap_{uuid.uuid4().hex[:8]}"
    source = con.execute("SELECT current_database()").fetchone()[0]
    con.execute(f"ATTACH '{tmp}' AS {alias}")
    try:
        con.execute(f'COPY FROM DATABASE "{source}" TO {alias}')
    finally:
        con.execute(f"DETACH {alias}")
    tmp.replace(target)
    return target


def _child(db: str, change: str, method: str, result: str) -> None:
    from gpuledger.ingest.slurm.scontrol import import_scontrol_file
    from models.runner import connect, publish_snapshot, replace_rows
    from models.schema import GPU_UTILIZATION

    db_path = Path(db)
    with connect(db_path) as con:
        t0 = time.perf_counter()
        if change == "scontrol":
            snapshot = sorted((SITE.parent / "slurm").glob("scontrol-*.txt"))[-1]
            import_scontrol_file(con, snapshot)
        else:
            day = date.fromisoformat(json.loads((db_path.parent / "meta.json").read_text())["day"])
            where = "cluster = ? AND bucket_start >= ? AND bucket_start < ?"
            params = ("gpulab", day, day + timedelta(days=1))
            rows = con.execute(f"SELECT * FROM gpu_utilization WHERE {where}", list(params)).pl()
            replace_rows(con, GPU_UTILIZATION, rows, where=where, params=params)
        t1 = time.perf_counter()
        (old_publish if method == "old" else publish_snapshot)(con, db_path)
        t2 = time.perf_counter()
    Path(result).write_text(json.dumps({"change_s": t1 - t0, "publish_s": t2 - t1}))


def _measure(db: Path, change: str, method: str, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "result.json"
            out, rss = results.run_child(f"benchmarks.{NAME}", [str(db), change, method,
                                                                str(result)], result,
                                         f"{method} publish after {change}")
        runs.append({**out, "rss": rss})
    return {"publish_s": statistics.median(r["publish_s"] for r in runs),
            "change_s": statistics.median(r["change_s"] for r in runs),
            "all_s": [round(r["publish_s"], 3) for r in runs],
            "rss": max(r["rss"] for r in runs)}


def main(argv: list[str]) -> int:
    p = results.parser(NAME, DESCRIPTION)
    p.add_argument("--factors", type=int, nargs="+", default=[1, 8, 64])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    started = datetime.now(UTC)
    rows = []
    for factor in args.factors:
        print(f"ledger x{factor} ...", flush=True)
        db, meta = sized_ledger(factor)
        for change in CHANGES:
            for method in METHODS:
                print(f"  {change} / {method} ...", flush=True)
                rows.append({"meta": meta, "change": change, "method": method,
                             **_measure(db, change, method, args.repeat)})
    text, ok = report(rows, args, started)
    return results.publish(NAME, text, ok, write=not args.no_write)


def report(rows: list[dict], args, started: datetime) -> tuple[str, bool]:
    lines = [
        f"## {DESCRIPTION}", "",
        f"Run {started:%Y-%m-%d %H:%M:%S} UTC with `python -m benchmarks.run {NAME} -- "
        f"--factors {' '.join(map(str, args.factors))} --repeat {args.repeat}`: **{{status}}**.",
        "",
        f"- Machine: {results.cpu_model()}, {results.cores()} cores, "
        f"{results.memory_gib() or 0:.0f} GiB; load average at the end {results.load_average()}.",
        "- Ledgers: the demo ledger (`load` + `build` of sample_data) with gpu_utilization's days "
        "copied (factor x its rows); each published once before (first publish = the lake's "
        "one-time export). Each run in its own process: the change, then the publish timed "
        "(median of the runs); peak RSS = `ru_maxrss` of the process, highest of the runs.",
        "- `old`: `COPY FROM DATABASE` of the whole ledger (the publish before issue #18); "
        "`new`: `publish_snapshot` (changed partitions to Parquet, small tables copied, lake "
        "tables as views).", "",
        "| factor | utilization rows | ledger | first publish s | change | old s | new s | "
        "old / new | old peak RSS | new peak RSS |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    table: dict[tuple, dict] = {(r["meta"]["factor"], r["change"], r["method"]): r for r in rows}
    for factor in args.factors:
        for change in CHANGES:
            old, new = table[(factor, change, "old")], table[(factor, change, "new")]
            m = old["meta"]
            lines.append(
                f"| {factor} | {m['utilization_rows']:,} | {results.mib(m['ledger_bytes'])} | "
                f"{m['first_publish_s']:.2f} | {change} | {old['publish_s']:.2f} | "
                f"{new['publish_s']:.2f} | {old['publish_s'] / new['publish_s']:.1f}x | "
                f"{results.mib(old['rss'])} | {results.mib(new['rss'])} |")
    checks = []
    big, small = max(args.factors), min(args.factors)
    for change in CHANGES:
        old, new = table[(big, change, "old")], table[(big, change, "new")]
        ratio = old["publish_s"] / new["publish_s"]
        checks.append((f"{change}: new publish >= {SPEEDUP}x cheaper than old at x{big}",
                       f"{ratio:.1f}x", ratio >= SPEEDUP))
        if big != small:
            growth = new["publish_s"] / table[(small, change, "new")]["publish_s"]
            checks.append((f"{change}: new publish x{big} / x{small} < {FLAT}",
                           f"{growth:.2f}", growth < FLAT))
    lines += ["", "| target | measured | met |", "|---|---:|---|"]
    lines += [f"| {name} | {value} | {'yes' if ok else 'NO'} |" for name, value, ok in checks]
    ok = all(c[2] for c in checks)
    text = "\n".join(lines).replace("{status}", "every target met" if ok else "a target missed")
    return text + "\n", ok


if __name__ == "__main__":
    results.entry(main, _child, child_args=4)
    sys.exit(0)
