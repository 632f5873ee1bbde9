"""The weekly report's folder holds the week's FOCUS file: `gpuledger report weekly` replaces
reports/<week>/ whole, and a re-written report must not leave the folder without the file finance
imports. The file is the one `gpuledger export focus` writes for the week."""

from pathlib import Path

import pytest

from gpuledger.cli import main
from tests.helpers import SAMPLE_SITE

WEEK = "2026-W02"


def test_report_weekly_writes_the_focus_file_export_focus_writes(
        sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = ["--db", str(sample_db), "--config", str(SAMPLE_SITE)]
    out = tmp_path / "reports"
    exported = tmp_path / "exported.csv"
    assert main([*base, "export", "focus", "--period", WEEK, "--output", str(exported)]) == 0
    assert main([*base, "report", "weekly", "--week", WEEK, "--out", str(out)]) == 0
    in_report = out / WEEK / "focus-1.2.csv"
    assert in_report.read_bytes() == exported.read_bytes()
    assert len(in_report.read_text(encoding="utf-8").splitlines()) > 100
    in_report.unlink()  # a later run of the report puts it back
    assert main([*base, "report", "weekly", "--week", WEEK, "--out", str(out)]) == 0
    assert in_report.read_bytes() == exported.read_bytes()
    assert (out / WEEK / "summary.html").exists()
