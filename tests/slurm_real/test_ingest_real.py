"""The Slurm ingest against the real Slurm: sacct in, GPU-seconds per account equal sreport's."""

from datetime import timedelta
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.slurm.commands import CommandRunner
from gpuledger.cli import main
from gpuledger.ingest.slurm import run as slurm_ingest
from models import load_sql
from models.runner import connect

pytestmark = pytest.mark.slurm


def _reconcile(con, start, end):
    return con.sql(load_sql("slurm_sreport_reconciliation"),
                   params={"window_start": start, "window_end": end}).pl()


def test_gpu_seconds_per_account_equal_sreport(real_slurm, tmp_path: Path):
    start = real_slurm.report_start.replace(tzinfo=None)
    end = real_slurm.report_end.replace(tzinfo=None)
    runner = CommandRunner(timeout_s=60)
    with connect(tmp_path / "ledger.duckdb") as con:
        load = slurm_ingest.ingest_slurm_window(con, runner, start, end,
                                                lookback=timedelta(hours=1))
        assert load.rejects == ()
        assert load.runs >= 15
        slurm_ingest.ingest_sreport(con, runner, start, end)
        table = _reconcile(con, start, end)
        assert table.height >= 3  # several accounts and users
        assert table["sreport_gpu_seconds"].sum() > 0
        assert table.filter(table["difference"] != 0).is_empty(), table
        accounts = set(table["account"])
        assert {"physics", "ml-research"} <= accounts
        # a re-ingest of the same window changes nothing
        before = con.execute("SELECT * FROM slurm_runs ORDER BY run_key").fetchall()
        slurm_ingest.ingest_slurm_window(con, runner, start, end, lookback=timedelta(hours=1))
        assert con.execute("SELECT * FROM slurm_runs ORDER BY run_key").fetchall() == before


def test_requeued_job_is_charged_per_run(real_slurm, tmp_path: Path):
    start = real_slurm.report_start.replace(tzinfo=None)
    end = real_slurm.report_end.replace(tzinfo=None)
    with connect(tmp_path / "ledger.duckdb") as con:
        slurm_ingest.ingest_slurm_window(con, CommandRunner(timeout_s=60), start, end,
                                         lookback=timedelta(hours=1))
        job = real_slurm.job_id("requeue")
        runs = con.execute(
            "SELECT state, alloc_gpus, elapsed_s FROM slurm_runs WHERE job_id = ? "
            "ORDER BY submit", [job]).fetchall()
    assert len(runs) == 2
    assert runs[0][0] == "REQUEUED"


def test_cli_ingest_slurm_runs_the_real_sacct(real_slurm, tmp_path: Path, capsys):
    db = tmp_path / "cli.duckdb"
    start = real_slurm.report_start.strftime("%Y-%m-%dT%H:%M:%S")
    end = real_slurm.report_end.strftime("%Y-%m-%dT%H:%M:%S")
    assert main(["--db", str(db), "ingest", "slurm", "--start", start, "--end", end,
                 "--lookback-hours", "1"]) == 0
    err = capsys.readouterr().err
    assert "[1/1] sacct" in err
    assert "0 rejected" in err
    assert main(["--db", str(db), "sql",
                 "SELECT count(*) AS runs FROM slurm_runs"]) == 0
    assert int(capsys.readouterr().out.splitlines()[1]) >= 15


def test_failing_sacct_writes_nothing(real_slurm, tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    runner = CommandRunner.from_prefix("env SLURM_CONF=/nonexistent/slurm.conf sh -c", retries=1,
                                       timeout_s=5, backoff_s=0.1)
    with connect(db) as con:
        with pytest.raises(SourceError, match=r"sacct.*(timed out after 5 s|exited with)"):
            slurm_ingest.ingest_slurm_window(con, runner, real_slurm.report_start,
                                             real_slurm.report_end)
        assert con.execute("SELECT count(*) FROM slurm_runs").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (0,)
