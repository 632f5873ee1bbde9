"""``import_sacct_file`` loads a dump batch by batch; the result is the whole-dump path's, always.

The streamed load (``iter_sacct_batches`` + per-batch appends in one transaction) must leave the
ledger exactly as ``store_sacct(parse_sacct(...))`` does, and fall back to that path when the
batches are not independent (a step away from its allocation line, requeued runs sharing a key in
two batches, a step key repeated across batches on a ledger that already has rows).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import connectors.slurm.sacct_stream as stream_module
from connectors.slurm.parse import SacctFormatError, iter_sacct_batches, parse_sacct
from gpuledger.ingest.slurm import run as slurm_ingest
from models.runner import connect
from tests.connectors.slurm.dumps import T0, US, alloc, dump, step

TABLES = ("slurm_runs", "slurm_steps", "slurm_node_allocations", "rejects", "ingest_runs")


def _job(job: int, **over: str) -> list[dict[str, str]]:
    a = alloc(JobID=str(job), JobIDRaw=str(job), Submit=str(T0 + job), Eligible=str(T0 + job),
              Start=str(T0 + job + 5), End=str(T0 + job + 65), **over)
    return [a, step(a, "batch"), step(a, "extern"), step(a, "0")]


def _mixed_dump() -> str:
    """Jobs with rejects, stray separators (loaded and rejected), blank lines, a running job,
    two-node GPU jobs, array tasks and a requeue within one second (#2 keys)."""
    rows: list[dict[str, str] | str] = []
    for j in range(1000, 1060):
        over: dict[str, str] = {}
        if j % 7 == 0:
            over["NodeList"] = "a100-[01-02]"
            over["AllocNodes"] = "2"
        if j % 11 == 0:
            over["JobName"] = f"name{US}with{US}separators"  # one free-text field near the end
        rows += _job(j, **over)
        if j % 13 == 0:
            rows.append("")  # a blank line
        if j % 17 == 0:
            rows.append(dump([alloc(JobID=str(j + 5000), State="not a state")]).split("\n")[1])
    running = alloc(JobID="2000", JobIDRaw="2000", State="RUNNING", End="Unknown")
    rows += [running, step(running, "batch")]
    requeued = [alloc(JobID="2001", JobIDRaw="2001", Start=str(T0 + s), End=str(T0 + s + 9))
                for s in (30, 10)]
    rows += requeued
    array = alloc(JobID="2002_3", JobIDRaw="2005")
    rows += [array, step(array, "batch", raw_step="batch")]
    return dump(rows)


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    out = {}
    for t in TABLES:
        frame = con.execute(f"SELECT * FROM {t}").pl()
        out[t] = frame.drop("finished_at") if t == "ingest_runs" else frame
    return out


def _whole(con: duckdb.DuckDBPyConnection, path: Path, **kw: object) -> slurm_ingest.SlurmLoad:
    parsed = parse_sacct(path, source_file=str(path), timezone=str(kw.get("timezone", "UTC")))
    return slurm_ingest.store_sacct(con, parsed, source_file=str(path),
                                    observed_until=kw.get("observed_until"),  # type: ignore[arg-type]
                                    partition_key=str(path))


def _both(tmp_path: Path, texts: list[str], monkeypatch: pytest.MonkeyPatch,
          batch_bytes: int = 700) -> tuple[dict, dict, list, list]:
    """Load ``texts`` one after the other, streamed and whole; the tables and loads of each."""
    monkeypatch.setattr(stream_module, "STREAM_BATCH_BYTES", batch_bytes)
    paths = []
    for i, text in enumerate(texts):
        p = tmp_path / f"dump{i}.txt"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    with connect(tmp_path / "streamed.duckdb") as con:
        streamed_loads = [slurm_ingest.import_sacct_file(con, p) for p in paths]
        streamed = _tables(con)
    with connect(tmp_path / "whole.duckdb") as con:
        whole_loads = [_whole(con, p) for p in paths]
        whole = _tables(con)
    return streamed, whole, streamed_loads, whole_loads


def _assert_same(streamed: dict, whole: dict, streamed_loads: list, whole_loads: list) -> None:
    # a table's row order means nothing (runs still going are appended last when streamed):
    # compare in one order, every column
    for t in TABLES:
        assert_frame_equal(_ordered(streamed[t]), _ordered(whole[t]), check_row_order=True)
    assert streamed_loads == whole_loads


def _ordered(frame: pl.DataFrame) -> pl.DataFrame:
    sortable = [c for c, d in frame.schema.items() if not isinstance(d, (pl.List, pl.Struct))]
    return frame.sort(sortable, nulls_last=True, maintain_order=True)


def _spy_fallback(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = slurm_ingest.parse_sacct

    def spy(*args: object, **kw: object):
        calls.append(str(args[0]))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(slurm_ingest, "parse_sacct", spy)
    return calls


def test_streamed_load_equals_the_whole_dump_load(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    calls = _spy_fallback(monkeypatch)
    text = _mixed_dump()
    streamed, whole, s_loads, w_loads = _both(tmp_path, [text], monkeypatch)
    assert calls == []  # the streamed path ran (the spy also sees the whole path's own calls)
    _assert_same(streamed, whole, s_loads, w_loads)
    load = s_loads[0]
    assert load.rejects
    assert load.runs > 60
    assert load.steps > 180
    assert streamed["slurm_runs"].filter(pl.col("run_key").str.ends_with("#2")).height == 1
    assert streamed["slurm_steps"]["run_key"].null_count() == 0


def test_batches_are_whole_jobs(tmp_path: Path):
    path = tmp_path / "d.txt"
    path.write_text(_mixed_dump(), encoding="utf-8")
    batches = list(iter_sacct_batches(path, source_file="d", batch_bytes=700))
    assert len(batches) > 10
    assert all(b.complete for b in batches)
    runs = pl.concat([b.runs for b in batches])
    whole = parse_sacct(path, source_file="d")
    assert_frame_equal(runs, whole.runs)
    assert_frame_equal(pl.concat([b.steps for b in batches]), whole.steps)
    assert sum(b.lines_read for b in batches) == whole.lines_read
    assert [r for b in batches for r in b.rejects] == whole.rejects


def test_batches_grow_from_a_small_first_batch(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch):
    # the first batch is small (a loader starts sooner) and each next one doubles to the target
    monkeypatch.setattr(stream_module, "FIRST_STREAM_BATCH_BYTES", 300)
    path = tmp_path / "d.txt"
    path.write_text(_mixed_dump(), encoding="utf-8")
    batches = list(iter_sacct_batches(path, source_file="d", batch_bytes=4_000))
    sizes = [b.lines_read for b in batches]
    assert sizes[0] < sizes[2] < max(sizes)
    whole = parse_sacct(path, source_file="d")
    assert_frame_equal(pl.concat([b.runs for b in batches]), whole.runs)
    assert_frame_equal(pl.concat([b.steps for b in batches]), whole.steps)
    assert [r for b in batches for r in b.rejects] == whole.rejects


def test_running_runs_are_charged_to_the_dumps_latest_instant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # into a fresh ledger a run still going is held back and appended last: its observed_until is
    # the latest instant of the whole dump, also when that comes in a later batch
    monkeypatch.setattr(stream_module, "STREAM_BATCH_BYTES", 700)
    running = alloc(JobID="7", JobIDRaw="7", State="RUNNING", End="Unknown")
    rows = [*_job(1), running, step(running, "batch"), *_job(2), *_job(3000)]
    path = tmp_path / "d.txt"
    path.write_text(dump(rows), encoding="utf-8")
    with connect(tmp_path / "l.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, path)
        until = con.execute("SELECT observed_until FROM slurm_runs WHERE job_id = '7'").fetchone()
        n = con.execute("SELECT count(*) FROM slurm_runs").fetchone()
    assert load.runs == 4
    assert n == (4,)
    assert until == (datetime(1970, 1, 1) + timedelta(seconds=T0 + 3000 + 65),)


def test_reingest_over_a_ledger_with_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    calls = _spy_fallback(monkeypatch)
    first = _mixed_dump()
    # the same jobs seen later: the running job has finished, one job changed state
    second = first.replace("RUNNING", "COMPLETED").replace(f"{US}Unknown{US}", f"{US}{T0 + 99}{US}")
    streamed, whole, s_loads, w_loads = _both(tmp_path, [first, second, first], monkeypatch)
    assert calls == []
    _assert_same(streamed, whole, s_loads, w_loads)


def test_running_runs_keep_the_longest_observed_until(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(stream_module, "STREAM_BATCH_BYTES", 700)
    running = alloc(JobID="7", JobIDRaw="7", State="RUNNING", End="Unknown")
    late = [*_job(1), running, step(running, "batch"), *_job(2)]
    path = tmp_path / "d.txt"
    path.write_text(dump(late), encoding="utf-8")
    with connect(tmp_path / "l.duckdb") as con:
        slurm_ingest.import_sacct_file(con, path, observed_until=datetime(2026, 12, 5))
        slurm_ingest.import_sacct_file(con, path)  # an older view must not shorten it
        until = con.execute("SELECT observed_until FROM slurm_runs WHERE job_id = '7'").fetchone()
    assert until == (datetime(2026, 12, 5),)


@pytest.mark.parametrize("case", ["requeue_across_batches", "reordered", "step_key_repeated"])
def test_falls_back_to_the_whole_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str):
    calls = _spy_fallback(monkeypatch)
    a = alloc(JobID="500", JobIDRaw="500")
    if case == "requeue_across_batches":
        # two runs of job 500 submitted in the same second, far apart in the dump
        later = alloc(JobID="500", JobIDRaw="500", Start=str(T0 + 100), End=str(T0 + 160))
        rows = [a, step(a, "batch")]
        for j in range(1000, 1030):
            rows += _job(j)
        rows += [later, step(later, "batch")]
        texts = [dump(rows)]
    elif case == "reordered":
        rows = []
        for j in range(1000, 1030):
            rows += _job(j)
        rows += [step(a, "batch"), a]  # the step before its allocation line
        texts = [dump(rows)]
    else:
        rows = [a, step(a, "batch")]
        for j in range(1000, 1030):
            rows += _job(j)
        rows += [a | {"JobID": "501", "JobIDRaw": "501"}, step(a, "batch")]  # 500.batch again
        texts = [dump(_job(1)), dump(rows)]  # the second load finds a ledger with rows
    streamed, whole, s_loads, w_loads = _both(tmp_path, texts, monkeypatch)
    assert str(tmp_path / f"dump{len(texts) - 1}.txt") in calls
    _assert_same(streamed, whole, s_loads, w_loads)


def test_settings_are_restored_also_when_the_load_fails(tmp_path: Path):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(_mixed_dump(), encoding="utf-8")
    bad.write_text("not a sacct header\n1\n", encoding="utf-8")
    with connect(tmp_path / "l.duckdb") as con:
        con.execute("SET threads = 2")
        before = con.execute("SELECT current_setting('threads'), "
                             "current_setting('write_buffer_row_group_memory_limit')").fetchone()
        slurm_ingest.import_sacct_file(con, good)
        with pytest.raises(SacctFormatError):
            slurm_ingest.import_sacct_file(con, bad)
        after = con.execute("SELECT current_setting('threads'), "
                            "current_setting('write_buffer_row_group_memory_limit')").fetchone()
        assert after == before
        assert con.execute("SELECT count(*) FROM ingest_runs").fetchone() == (1,)
