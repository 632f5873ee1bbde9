"""The README's ``duckdb -readonly data/gpuledger.serving.duckdb "SELECT …"`` works after set-up:
``scripts/bootstrap-venv.sh`` installs the DuckDB CLI (PyPI ``duckdb-cli``, pinned in
constraints.txt) as ``.venv/bin/duckdb``, the same DuckDB version as the Python package, and it
reads a snapshot the CLI published while that snapshot is served."""

import csv
import io
import subprocess
import sys
from pathlib import Path

import duckdb

from gpuledger.cli import main
from models.runner import read_snapshot, snapshot_path
from tests.helpers import TINY_WORLD

ROOT = Path(__file__).resolve().parents[2]
DUCKDB_CLI = Path(sys.executable).with_name("duckdb")


def _cli(*args: str) -> str:
    assert DUCKDB_CLI.is_file(), (f"expected the duckdb CLI at {DUCKDB_CLI} (scripts/"
                                  "bootstrap-venv.sh installs duckdb-cli), found none")
    done = subprocess.run([str(DUCKDB_CLI), *args], capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_is_the_python_packages_duckdb():
    assert _cli("--version").split()[0] == f"v{duckdb.__version__}"


def test_constraints_pin_the_cli_to_the_python_package():
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split()
                if "==" in line)
    assert pins["duckdb-cli"] == pins["duckdb"] == duckdb.__version__


def test_readonly_query_on_a_published_snapshot(tmp_path: Path):
    db = tmp_path / "data" / "gpuledger.duckdb"
    assert main(["--db", str(db), "import-identity", str(TINY_WORLD / "identity_map.csv")]) == 0
    serving = snapshot_path(db)
    with read_snapshot(db) as con:
        expected = con.execute("SELECT source_kind, count(*) FROM identity_map "
                               "GROUP BY ALL ORDER BY ALL").fetchall()
    assert expected
    query = ("SELECT version() AS v, source_kind, count(*) AS n FROM identity_map "
             "GROUP BY ALL ORDER BY ALL")
    # the README's form: the query as the argument after the file
    out = _cli("-readonly", "-csv", str(serving), query)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["v"] for r in rows} == {f"v{duckdb.__version__}"}
    assert [(r["source_kind"], int(r["n"])) for r in rows] == expected
    # and with -c, while a Python reader holds the same snapshot open
    with read_snapshot(db) as con:
        assert con.execute("SELECT count(*) FROM identity_map").fetchone()[0] > 0
        out = _cli("-readonly", "-csv", "-noheader", str(serving), "-c",
                   "SELECT count(*) FROM identity_map")
    assert int(out.strip()) == sum(n for _, n in expected)
