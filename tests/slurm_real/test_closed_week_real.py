"""A closed week against the REAL slurmdbd: import a week while a job runs, close it, let the job
end (sacct now says it ended later than the closed invoice knew), re-import and rebuild: the
closed invoice is unchanged and the next week carries the adjustment with the job's GPU-seconds.

`sacctmgr modify job` cannot set a job's end on Slurm 22.05 (EndTime there only selects jobs that
ended before it; man sacctmgr), and a runaway fix needs slurmctld to lose a job; a job that runs
past the import is the same late data through the same sacct path.
"""

import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from connectors.slurm.commands import CommandRunner
from gpuledger.ingest import service
from gpuledger.ingest.slurm import run as slurm_ingest
from models.build import build_allocations, build_chargeback
from models.close_week import close_week
from models.closing import changed_closes
from models.runner import connect
from models.weeks import IsoWeek
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER

pytestmark = [pytest.mark.slurm, pytest.mark.submits_slurm_jobs]

WAIT_S = 120
RUN_S = 30
CENTRE = "CC-OPS-CLOSE"


def _sacct_times(job: str) -> tuple[str, int, int | None]:
    """State, Start and End (epoch seconds; End None while running) as slurmdbd has them."""
    out = subprocess.run(
        ["sacct", "-j", job, "-X", "-n", "-P", "-o", "State,Start,End"], capture_output=True,
        text=True, check=True, timeout=60, env={"TZ": "UTC", "SLURM_TIME_FORMAT": "%s",
                                                "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
    ).stdout.strip().splitlines()
    if not out:  # not in slurmdbd yet
        return "", 0, None
    state, start, end = out[0].split("|")
    return state, int(start) if start.isdigit() else 0, int(end) if end.isdigit() else None


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"expected {what} within {WAIT_S} s, found it not")
        time.sleep(1)


def _import_and_build(con, day_start: datetime) -> None:
    slurm_ingest.ingest_slurm_window(con, CommandRunner(timeout_s=60), day_start,
                                     day_start + timedelta(days=1), lookback=timedelta(hours=2))
    build_allocations(con, day_start.date(), day_start.date())
    build_chargeback(con, day_start.date(), day_start.date(), run="rebuild-after-late-data")


def test_late_sacct_data_for_a_closed_week_becomes_an_adjustment(real_slurm, tmp_path: Path):
    jobs = real_slurm.state_dir / "jobs"
    job = subprocess.run(
        ["runuser", "-u", "carol", "--", "sbatch", "--parsable", f"--chdir={jobs}",
         "--output=/dev/null", "-A", "ops", "-p", "gpu", "--gres=gpu:a100:1", "-c", "1",
         "-t", "5", "-J", "closed-week-late", "--wrap", f"sleep {RUN_S}"],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL, timeout=60,
    ).stdout.strip().split(";")[0]
    _wait(lambda: _sacct_times(job)[0] == "RUNNING", f"job {job} running")
    time.sleep(5)  # the first import sees it running: charged up to the query only

    identity = tmp_path / "identity.csv"
    identity.write_text("source_kind,key,person,team,cost_centre,valid_from,valid_to\n"
                        f"slurm_account,ops,carol,ops,{CENTRE},,\n")
    now = datetime.now(UTC).replace(tzinfo=None)
    day_start = datetime.combine(now.date(), datetime.min.time())
    week = IsoWeek.containing(now.date())
    with connect(tmp_path / "ledger.duckdb") as con:
        con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.00, 'EUR')")
        service.import_identity_map(con, identity)
        _import_and_build(con, day_start)
        first = con.execute("SELECT sum(gpu_seconds) FROM allocations WHERE job_id = ?",
                            [job]).fetchone()[0]
        assert first
        assert first > 0
        # the weekly close (the week is still going on the real clock: close it as if it ended)
        close = close_week(con, week.name, closed_by="test", run_id="weekly-close",
                           now=datetime.combine(week.end, datetime.min.time()))
        issued = con.execute("SELECT * FROM chargeback WHERE period = ? ORDER BY ALL",
                             [week.name]).fetchall()

        _wait(lambda: _sacct_times(job)[2] is not None, f"job {job} ended in slurmdbd")
        state, start, end = _sacct_times(job)
        assert state == "COMPLETED"
        _import_and_build(con, day_start)  # the daily run again: sacct now has the end

        whole = con.execute("SELECT sum(gpu_seconds) FROM allocations WHERE job_id = ?",
                            [job]).fetchone()[0]
        assert whole == end - start  # 1 GPU from Start to End, as slurmdbd now says
        assert whole > first
        # the closed invoice is as issued
        assert con.execute("SELECT * FROM chargeback WHERE period = ? ORDER BY ALL",
                           [week.name]).fetchall() == issued
        assert changed_closes(con) == []
        # the next week carries exactly the late GPU-seconds, for the job's owner
        following = IsoWeek.containing(week.end)
        adjustments = con.execute(
            "SELECT period, original_period, person, gpu_seconds, reason, run_id "
            "FROM invoice_adjustments WHERE cost_centre = ?", [CENTRE]).fetchall()
        assert adjustments == [(following.name, week.name, "carol", whole - first,
                                f"late data for closed week {week.name}",
                                "rebuild-after-late-data")]
        assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []
        assert close.revision == 1
