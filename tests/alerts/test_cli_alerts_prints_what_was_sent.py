"""``gpuledger alerts run --as-of … [--dry-run]`` and ``gpuledger alerts digest --week …``
print what was (or would be) sent."""

from datetime import date
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from tests.alerts.helpers_world import at, write_world


def test_alerts_run_dry_run_prints_the_warnings(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    site = write_world(tmp_path)
    code = main(["--config", str(site), "alerts", "run", "--as-of",
                 at(61).isoformat() + "Z", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert "2 dry run: would send" in out
    assert "idle_first hybrid job 5001 (train-5001) on hpc-01" in out
    assert "to alice@example.org cc ops@example.org" in out
    assert "pod research/train-0" in out
    assert "[team]" in out


def test_alerts_run_rejects_a_bad_time(tmp_path: Path, capsys: pytest.CaptureFixture,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    site = write_world(tmp_path)
    assert main(["--config", str(site), "alerts", "run", "--as-of", "yesterday"]) != 0
    assert "expected an ISO 8601 time" in capsys.readouterr().err


def test_alerts_digest_lists_people_above_the_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    site = write_world(tmp_path)
    con = duckdb.connect(str(tmp_path / "ledger.duckdb"))
    try:  # idle_allocation incidents as the detectors file them (models/incidents.py)
        for i, (person, hours, day) in enumerate([("alice", 8, 5), ("alice", 4, 6),
                                                  ("bob", 3, 7), ("alice", 30, 12)]):
            con.execute(
                "INSERT INTO incidents (incident_id, day, kind, domain, cluster, node, "
                "gpu_seconds, cost, currency, slurm_job, person, team, cost_centre) VALUES "
                "(?, ?, 'idle_allocation', 'slurm', 'hybrid', 'hpc-01', ?, ?, 'EUR', ?, ?, "
                "'physics', 'cc-phys')",
                [f"i{i}", date(2026, 1, day), hours * 3600, hours * 2.5, f"70{i}", person])
    finally:
        con.close()
    assert main(["--config", str(site), "alerts", "digest", "--week", "2026-W02",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    # alice: 12 idle GPU-h in 2026-W02 (the 30 h on 2026-01-12 are W03); bob 3 h, below 10
    assert "digest 2026-W02: 1 dry run: would send, 1 person(s) below the threshold" in out
    assert "alice 12.0 idle GPU-h -> alice@example.org" in out
    assert main(["--config", str(site), "alerts", "digest", "--week", "2026-W02",
                 "--dry-run"]) == 0
    assert "0 dry run" in capsys.readouterr().out  # logged once, not repeated
