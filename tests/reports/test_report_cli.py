"""`gpuledger report weekly`: writes the folder from the published ledger; clear errors."""

import csv
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot


def _run(db: Path, *args: str) -> int:
    return main(["--db", str(db), "report", "weekly", *args])


def test_writes_the_week_where_asked_and_says_what_it_wrote(
        synthetic_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "out"
    assert _run(synthetic_db, "--week", "2026-W02", "--out", str(out)) == 0
    err = capsys.readouterr().err
    assert "weekly report 2026-W02: 5 invoice lines, 4 cost centres" in err
    with (out / "2026-W02" / "invoice-lines.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    with read_snapshot(synthetic_db) as con:
        count = con.execute("SELECT count(*) FROM chargeback WHERE period_kind = 'week' "
                            "AND period = '2026-W02'").fetchone()[0]
    assert len(rows) - 1 == count == 5
    assert (out / "2026-W02" / "summary.html").is_file()


def test_the_folder_comes_from_the_environment_without_out(
        synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_REPORTS", raising=False)
    monkeypatch.setenv("GPULEDGER_REPORTS_DIR", str(tmp_path / "from-setting"))
    assert _run(synthetic_db, "--week", "2026-W02") == 0
    assert (tmp_path / "from-setting" / "2026-W02" / "summary.html").is_file()
    monkeypatch.setenv("GPULEDGER_REPORTS", str(tmp_path / "from-env"))
    assert _run(synthetic_db, "--week", "2026-W02") == 0
    assert (tmp_path / "from-env" / "2026-W02" / "summary.html").is_file()


@pytest.mark.parametrize(("week", "message"), [
    ("2026-W2", "expected an ISO week YYYY-Www (e.g. 2026-W02), found '2026-W2'"),
    ("week 2", "expected an ISO week YYYY-Www (e.g. 2026-W02), found 'week 2'"),
    ("2025-W53", "expected an ISO week YYYY-Www with week 01..52 in 2025, found '2025-W53'"),
])
def test_a_bad_week_string_is_an_error(synthetic_db: Path, tmp_path: Path, week: str,
                                       message: str, capsys: pytest.CaptureFixture[str]):
    assert _run(synthetic_db, "--week", week, "--out", str(tmp_path / "out")) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_week_without_chargeback_lines_is_an_error(
        synthetic_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert _run(synthetic_db, "--week", "2026-W05", "--out", str(tmp_path / "out")) == 1
    err = capsys.readouterr().err
    assert "expected chargeback lines for week 2026-W05" in err
    assert "gpuledger build --start 2026-01-26 --end 2026-02-02" in err
    assert not (tmp_path / "out" / "2026-W05").exists()


def test_without_a_published_ledger_it_says_what_to_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert _run(tmp_path / "none.duckdb", "--week", "2026-W02", "--out", str(tmp_path)) == 1
    assert "expected a published ledger" in capsys.readouterr().err
