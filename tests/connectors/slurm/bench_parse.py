"""Throughput of ``parse_sacct`` against DuckDB's bare ``read_csv`` on a synthetic dump.

    .venv/bin/python -m tests.connectors.slurm.bench_parse [LINES] [--keep DIR]

Writes a ``LINES``-line (default 2,000,000) unit-separator/epoch dump into a temporary folder,
reads it with DuckDB (``CREATE TABLE AS SELECT * FROM read_csv(…, all_varchar)``), then parses it
with :func:`connectors.slurm.parse.parse_sacct`; prints wall time, rows/s, the ratio, and the peak
RSS of each (each in its own process, so the numbers do not mix). Not collected by pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
kind, path = sys.argv[1], sys.argv[2]
t = time.perf_counter(); c = time.process_time()
if kind == "duckdb":
    import duckdb
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM read_csv(?, delim='\x1f', header=true, "
                "quote='', escape='', all_varchar=true)", [path])
    rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
else:
    from connectors.slurm.parse import parse_sacct
    r = parse_sacct(Path(path), source_file=Path(path).name)
    r.check_counts()
    rows = r.lines_read
wall = time.perf_counter() - t
print(json.dumps({"rows": rows, "wall": wall, "cpu": time.process_time() - c,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(kind: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    from tests.connectors.slurm.synthetic import write_dump

    n = int(argv[0]) if argv and argv[0].isdigit() else 2_000_000
    keep = Path(argv[argv.index("--keep") + 1]) if "--keep" in argv else None
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        path = folder / f"sacct-synthetic-{n}.txt"
        if not path.is_file():
            t = time.perf_counter()
            write_dump(path, n)
            print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t:.1f} s")
        for attempt in range(2):
            duck, ours = _run("duckdb", path), _run("parse_sacct", path)
            print(f"[{attempt + 1}] duckdb read_csv {duck['wall']:.2f} s "
                  f"({duck['rows'] / duck['wall']:,.0f} rows/s, {duck['rss_mb']:.0f} MB) | "
                  f"parse_sacct {ours['wall']:.2f} s wall, {ours['cpu']:.2f} s cpu "
                  f"({ours['rows'] / ours['wall']:,.0f} rows/s, peak RSS {ours['rss_mb']:.0f} MB)"
                  f" | ratio {ours['wall'] / duck['wall']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
