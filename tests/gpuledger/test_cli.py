import csv
import io
from pathlib import Path

import pytest

from gpuledger.cli import main
from tests.helpers import TINY_WORLD, copy_tiny_world


def test_load_world_then_sql_answers_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    err = capsys.readouterr().err
    assert "[1/6] loading nodes" in err
    assert "sacct: 59 lines read: 18 runs, 41 steps" in err
    assert "identity_map: 4 rows loaded, 0 rejected" in err
    assert main(["--db", str(db), "sql",
                 "SELECT pool, count(*) AS gpus FROM nodes GROUP BY pool ORDER BY pool"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["pool", "gpus"], ["kubernetes", "2"], ["shared", "1"], ["slurm", "2"]]


def test_db_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    assert main(["import-identity", str(TINY_WORLD / "identity_map.csv")]) == 0
    assert db.exists()
    assert db.with_name("env.serving.duckdb").exists()


def test_import_identity_reports_rejects(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    world = copy_tiny_world(tmp_path)
    path = world / "identity_map.csv"
    with path.open("a", encoding="utf-8") as fh:
        fh.write("slurm_user,zed,zed,ops,CC-1,yesterday,\n")
    assert main(["--db", str(tmp_path / "l.duckdb"), "import-identity", str(path)]) == 0
    err = capsys.readouterr().err
    assert "4 rows loaded, 1 rejected" in err
    assert f"rejected {path}:6: field valid_from" in err


def test_sql_without_a_ledger_is_a_clear_error(tmp_path: Path, capsys):
    assert main(["--db", str(tmp_path / "none.duckdb"), "sql", "SELECT 1"]) == 1
    assert "expected a published ledger" in capsys.readouterr().err
