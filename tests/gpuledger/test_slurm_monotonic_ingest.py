"""Monotonic Slurm ingest: facts move forward (#13, item 4).

A run's record is replaced only by one observed as late or later (a dump's ``--as-of``, else its
latest instant; a live pull's time), never by one that has got less far; an older dump imported
after a newer one changes nothing for the runs it knows less about and says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

import connectors.slurm.sacct_stream as stream_module
from gpuledger.ingest.slurm import run as slurm_ingest
from models.runner import connect
from tests.connectors.slurm.dumps import T0, alloc, dump, step

EPOCH = datetime(1970, 1, 1)
SLURM_TABLES = ("slurm_runs", "slurm_steps", "slurm_node_allocations", "sacct_loads")


def at(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=T0 + seconds)


def _job(job: int, **over: str) -> list[dict[str, str]]:
    a = alloc(**{"JobID": str(job), "JobIDRaw": str(job), "Submit": str(T0 + job),
                 "Eligible": str(T0 + job), "Start": str(T0 + job + 5),
                 "End": str(T0 + job + 65), **over})
    return [a, step(a, "batch")]


def _train(state: str) -> list[dict[str, str]]:
    """Job 7 (2 GPUs), submitted at T0 + 7 and started 5 s later: going, or ended at T0 + 900."""
    going = state == "RUNNING"
    return _job(7, State=state, End="Unknown" if going else str(T0 + 900),
                ElapsedRaw="0" if going else str(900 - 12), AllocTRES="gres/gpu=2")


def _older() -> str:
    """What sacct said at T0 + 500: jobs 1 and 2 done, job 7 still going (latest instant: job
    2's end, T0 + 67)."""
    return dump([*_job(1), *_train("RUNNING"), *_job(2)])


def _newer() -> str:
    """What sacct said at T0 + 2000: job 7 has completed, job 1500 ran since (latest instant:
    its end, T0 + 1565)."""
    return dump([*_job(1), *_train("COMPLETED"), *_job(2), *_job(1500)])


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in SLURM_TABLES}


def _run7(con: duckdb.DuckDBPyConnection) -> tuple:
    return con.execute('SELECT state, "end", observed_until, source_file FROM slurm_runs '
                       "WHERE job_id = '7'").fetchone()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(params=["streamed", "whole"])
def load_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both load paths: batch by batch (small batches) and the whole-dump parse."""
    if request.param == "streamed":
        monkeypatch.setattr(stream_module, "STREAM_BATCH_BYTES", 600)
    else:
        def not_streamable(*args: object, **kw: object):
            raise slurm_ingest.NotStreamable
        monkeypatch.setattr(slurm_ingest, "stream_sacct_file", not_streamable)
    return str(request.param)


@pytest.mark.parametrize("as_of", [True, False], ids=["as_of", "latest_instant"])
def test_an_older_dump_after_a_newer_one_leaves_the_job_completed(
    tmp_path: Path, load_path: str, as_of: bool,
):
    older = _write(tmp_path, "sacct-older.txt", _older())
    newer = _write(tmp_path, "sacct-newer.txt", _newer())
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, newer, observed_until=at(2000) if as_of else None)
        before = _tables(con)
        load = slurm_ingest.import_sacct_file(con, older,
                                              observed_until=at(500) if as_of else None)
        assert _run7(con) == ("COMPLETED", at(900), at(900), str(newer))
        assert _tables(con) == before  # nothing changed: runs, their GPUs per node, steps
        steps = con.execute("SELECT state FROM slurm_steps WHERE job_id = '7'").fetchall()
        assert steps == [("COMPLETED",)]
    # every run of the older dump is one the ledger knows from a later observation
    assert (load.runs, load.kept) == (3, 3)
    assert "\n  3 runs kept: the ledger has a later observation" in load.summary()


def test_the_newer_dump_after_the_older_one_moves_the_job_forward(tmp_path: Path,
                                                                  load_path: str):
    older = _write(tmp_path, "sacct-older.txt", _older())
    newer = _write(tmp_path, "sacct-newer.txt", _newer())
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, older)
        assert _run7(con) == ("RUNNING", None, at(67), str(older))  # its latest instant
        load = slurm_ingest.import_sacct_file(con, newer)
        assert _run7(con) == ("COMPLETED", at(900), at(900), str(newer))
        assert con.execute("SELECT count(*) FROM slurm_runs").fetchone() == (4,)
        # only the loads whose rows are in the ledger are remembered, with their observation
        assert con.execute("SELECT source_file, observed_at FROM sacct_loads").fetchall() == [
            (str(newer), at(1500 + 65))]
    assert load.kept == 0
    assert "kept" not in load.summary()


def test_a_dump_that_differs_only_in_the_job_going_on_cannot_undo_its_end(
    tmp_path: Path, load_path: str,
):
    # both dumps' latest instant is job 2's end: the same observation time; the record that got
    # further (ended) stays
    done = dump([*_job(1), *_train("COMPLETED"), *_job(2000)])
    going = dump([*_job(1), *_train("RUNNING"), *_job(2000)])
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, _write(tmp_path, "done.txt", done))
        load = slurm_ingest.import_sacct_file(con, _write(tmp_path, "going.txt", going))
        assert _run7(con)[:2] == ("COMPLETED", at(900))
    assert load.kept == 1  # jobs 1 and 2000: as far, observed as late: replaced


def test_a_later_observation_replaces_an_ended_run_and_an_earlier_one_does_not(tmp_path: Path):
    # an admin fixed a runaway job's end (sacctmgr show runawayjobs): the later dump says so
    first = dump(_job(7, End=str(T0 + 4000), ElapsedRaw=str(4000 - 12)))
    fixed = dump(_job(7, End=str(T0 + 900), ElapsedRaw=str(900 - 12)))
    a, b = _write(tmp_path, "a.txt", first), _write(tmp_path, "b.txt", fixed)
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, a, observed_until=at(5000))
        assert slurm_ingest.import_sacct_file(con, b, observed_until=at(9000)).kept == 0
        assert _run7(con)[1] == at(900)
        # the first dump again: observed earlier, so the fix stays
        assert slurm_ingest.import_sacct_file(con, a, observed_until=at(5000)).kept == 1
        assert _run7(con)[1] == at(900)


def test_a_run_that_ended_is_never_replaced_by_the_same_run_going_on(tmp_path: Path):
    # a later observation of the same run still going contradicts an end Slurm recorded (a
    # requeue is another run, with a new Submit and key): the end stays
    done = _write(tmp_path, "done.txt", _newer())
    going = _write(tmp_path, "going.txt", _older())
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, done, observed_until=at(2000))
        load = slurm_ingest.import_sacct_file(con, going, observed_until=at(9000))
        assert _run7(con)[:2] == ("COMPLETED", at(900))
        # the other runs of the later dump replace the earlier ones (as far, observed later)
        assert con.execute("SELECT DISTINCT source_file FROM slurm_runs WHERE job_id <> '7' "
                           "AND job_id <> '1500'").fetchall() == [(str(going),)]
    assert load.kept == 1


def test_reimporting_a_dump_changes_nothing_not_even_the_loads(tmp_path: Path, load_path: str):
    path = _write(tmp_path, "d.txt", _older())
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, path)
        before = _tables(con)
        load = slurm_ingest.import_sacct_file(con, path)
        assert _tables(con) == before
    assert load.kept == 0


class FakeRunner:
    def __init__(self, text: str) -> None:
        self.text = text

    def run(self, command: list[str], environment: dict[str, str]) -> str:
        return self.text


def test_an_earlier_live_pull_after_a_later_one_changes_nothing(tmp_path: Path):
    day = datetime(2026, 11, 30)
    with connect(tmp_path / "l.duckdb") as con:
        later = slurm_ingest.ingest_slurm_window(con, FakeRunner(_newer()), day,
                                                 day + timedelta(days=1), now=at(2000))
        before = _tables(con)
        # a pull that was slow to arrive: sacct answered at T0 + 500, with job 7 still going
        load = slurm_ingest.ingest_slurm_window(con, FakeRunner(_older()), day,
                                                day + timedelta(days=1), now=at(500))
        assert _tables(con) == before
        assert _run7(con)[:2] == ("COMPLETED", at(900))
        # the same window again, later: what sacct says now is what the ledger has
        again = slurm_ingest.ingest_slurm_window(con, FakeRunner(_newer()), day,
                                                 day + timedelta(days=1), now=at(3000))
        assert _tables(con) == before
    # jobs 1 and 2 say the same in both pulls (same lines of the same window): left as they are
    assert (later.kept, load.kept, again.kept) == (0, 1, 0)


def test_a_run_under_the_other_key_form_is_kept_when_the_ledger_has_it_later(tmp_path: Path):
    # one array task, in a dump without JobIDRaw (key by JobID text) that saw it end, and in an
    # older dump with JobIDRaw that saw it going: imported after, the older must not win
    fields = [f for f in dump([]).split("\n")[0].split("\x1f") if f != "JobIDRaw"]
    task = alloc(JobID="11_2", JobIDRaw="31", End=str(T0 + 900), ElapsedRaw="895")
    done = _write(tmp_path, "no-jobidraw.txt", dump([task], fields=fields))
    going = _write(tmp_path, "with-jobidraw.txt",
                   dump([task | {"State": "RUNNING", "End": "Unknown", "ElapsedRaw": "0"}]))
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, done, observed_until=at(2000))
        load = slurm_ingest.import_sacct_file(con, going, observed_until=at(500))
        rows = con.execute('SELECT run_key, state, "end" FROM slurm_runs').fetchall()
        per_node = con.execute("SELECT run_key FROM slurm_node_allocations").fetchall()
    assert rows == [(f"gpulab:11_2:{T0}", "COMPLETED", at(900))]
    assert per_node == [(f"gpulab:11_2:{T0}",)]
    assert load.kept == 1


def test_a_step_whose_run_was_rejected_does_not_take_the_place_of_one_with_its_run(
    tmp_path: Path, load_path: str,
):
    good = _write(tmp_path, "good.txt", _newer())
    alloc7, step7 = _train("COMPLETED")
    broken = _write(tmp_path, "broken.txt",
                    dump([*_job(1), alloc7 | {"State": "not a state"}, step7]))
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, good)
        load = slurm_ingest.import_sacct_file(con, broken)
        steps = con.execute("SELECT run_key, source_file FROM slurm_steps "
                            "WHERE job_id = '7'").fetchall()
    assert [r.line_no for r in load.rejects] == [4]
    assert steps == [(f"gpulab:7:{T0 + 7}", str(good))]


def test_rows_written_before_loads_were_recorded_are_replaced_unless_they_got_further(
    tmp_path: Path,
):
    newer = _write(tmp_path, "sacct-newer.txt", _newer())
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, newer)
        # a ledger of an older gpuledger: no load per row, no observation
        con.execute("UPDATE slurm_runs SET load_id = NULL")
        con.execute("DELETE FROM sacct_loads")
        load = slurm_ingest.import_sacct_file(con, _write(tmp_path, "older.txt", _older()))
        assert _run7(con)[:2] == ("COMPLETED", at(900))  # ended stays ended
        assert load.kept == 1
        # the same content again: the rows now belong to a load with an observation
        slurm_ingest.import_sacct_file(con, newer)
        assert con.execute("SELECT count(*) FROM slurm_runs WHERE load_id IS NULL").fetchone() == (
            0,)
        assert con.execute("SELECT count(*) FROM sacct_loads").fetchone() == (1,)
