"""Incremental Slurm ingest: lookback re-pulls, upserts, running jobs charged up to the window."""

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpuledger.ingest.slurm import run as slurm_ingest
from models.build import build_allocations
from models.runner import connect

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_slurm"
RUNNING = (REAL / "sacct-running-unitsep-epoch.txt").read_text(encoding="utf-8")
START = datetime(2026, 11, 30, 0, 0)  # the capture day (job 19 RUNNING since 05:54:47 UTC)


def _finished(text: str, end_epoch: int, elapsed: int) -> str:
    out = []
    for line in text.splitlines():
        f = line.split("\x1f")
        if f[0].startswith("19"):
            f[7] = "COMPLETED"
            f[13] = str(end_epoch)
            f[15] = str(elapsed)
        out.append("\x1f".join(f))
    return "\n".join(out) + "\n"


class FakeRunner:
    """Answers sacct with canned text and remembers the commands."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.commands: list[list[str]] = []

    def run(self, command: list[str], environment: dict[str, str]) -> str:
        self.commands.append(list(command))
        return self.text


def _run19(con):
    return con.execute(
        'SELECT state, "end", observed_until FROM slurm_runs WHERE job_id = \'19\'').fetchone()


def test_running_job_is_charged_to_the_window_then_finished(tmp_path: Path):
    day_end = START + timedelta(days=1)
    with connect(tmp_path / "l.duckdb") as con:
        runner = FakeRunner(RUNNING)
        slurm_ingest.ingest_slurm_window(con, runner, START, day_end,
                                         lookback=timedelta(hours=48), now=day_end)
        assert "--starttime=2026-11-28T00:00:00" in runner.commands[0]
        assert "--endtime=2026-12-01T00:00:00" in runner.commands[0]
        assert _run19(con) == ("RUNNING", None, day_end)
        build_allocations(con, START.date(), START.date())
        end_ts, outcome, seconds = con.execute(
            "SELECT end_ts, outcome, gpu_seconds FROM allocations WHERE job_id = '19'").fetchone()
        assert (end_ts, outcome) == (day_end, "running")
        started = datetime(2026, 11, 30, 5, 54, 47)  # Start=1796018087
        assert seconds == 2 * int((day_end - started).total_seconds())

        # re-ingesting an older, shorter window must not shorten what was already seen
        slurm_ingest.ingest_slurm_window(con, FakeRunner(RUNNING), START, START + timedelta(
            hours=12), lookback=timedelta(hours=48), now=day_end)
        assert _run19(con)[2] == day_end

        # the next day's lookback re-pulls the job, now finished: it is updated in place
        done = _finished(RUNNING, 1796018087 + 600, 600)
        slurm_ingest.ingest_slurm_window(con, FakeRunner(done), day_end, day_end + timedelta(
            days=1), lookback=timedelta(hours=48))
        state, end, until = _run19(con)
        assert state == "COMPLETED"
        assert end == started + timedelta(seconds=600)
        assert until == end
        assert con.execute("SELECT count(*) FROM slurm_runs WHERE job_id = '19'").fetchone() == (1,)
        build_allocations(con, START.date(), START.date())
        assert con.execute("SELECT outcome, gpu_seconds FROM allocations WHERE job_id = '19'"
                           ).fetchone() == ("completed", 1200)

        before = con.execute("SELECT * FROM slurm_runs ORDER BY ALL").fetchall()
        slurm_ingest.ingest_slurm_window(con, FakeRunner(done), day_end, day_end + timedelta(
            days=1), lookback=timedelta(hours=48))
        assert con.execute("SELECT * FROM slurm_runs ORDER BY ALL").fetchall() == before


def test_daily_windows_split_at_utc_midnight():
    windows = slurm_ingest.daily_windows(datetime(2026, 1, 5, 12), datetime(2026, 1, 7))
    assert windows == [
        (datetime(2026, 1, 5, 12), datetime(2026, 1, 6)),
        (datetime(2026, 1, 6), datetime(2026, 1, 7)),
    ]
    with pytest.raises(ValueError, match="expected an end after the start"):
        slurm_ingest.daily_windows(datetime(2026, 1, 7), datetime(2026, 1, 5))


def test_broken_dump_loads_good_rows_reports_bad_and_reimport_changes_nothing(tmp_path: Path):
    lines = (REAL / "sacct-unitsep-epoch.txt").read_text(encoding="utf-8").splitlines()
    broken = list(lines)
    broken[3] = broken[3].replace("\x1f", "", 1)  # one field short
    fields = broken[5].split("\x1f")
    fields[12] = "yesterday"  # Start
    broken[5] = "\x1f".join(fields)
    fields = broken[8].split("\x1f")
    fields[20] = "gres/gpu=two"  # AllocTRES
    broken[8] = "\x1f".join(fields)
    dump = tmp_path / "broken.txt"
    dump.write_text("\n".join(broken) + "\n", encoding="utf-8")
    with connect(tmp_path / "l.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, dump)
        where = {(r.line_no, r.field) for r in load.rejects}
        assert where == {(4, "line"), (6, "Start"), (9, "AllocTRES")}
        assert load.runs + load.steps + 3 == len(lines) - 1
        stored = con.execute("SELECT line_no, field, reason FROM rejects ORDER BY line_no"
                             ).fetchall()
        assert [r[0] for r in stored] == [4, 6, 9]
        assert all("expected" in r[2] for r in stored)
        snapshot = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                    for t in ("slurm_runs", "slurm_steps", "rejects", "slurm_node_allocations")}
        slurm_ingest.import_sacct_file(con, dump)
        assert snapshot == {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                            for t in snapshot}
