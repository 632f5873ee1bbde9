"""Sanity limits at load (#13, item 2): impossible sacct lines go to rejects with the rule they
broke, against the ledger's node inventory and the dump's observation time; the load says how
many per rule; the invoice never carries them."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from connectors.slurm.sanity import SanityLimits
from gpuledger.cli import main
from gpuledger.ingest.slurm import run as slurm_ingest
from models.runner import connect, snapshot_path
from tests.helpers import copy_tiny_world

US = "\x1f"
DAY = "2026-11-30"  # the tiny world's day (a real Slurm capture)


def _dump_lines(world: Path) -> list[str]:
    return (world / "sacct" / "sacct-unitsep-epoch.txt").read_text(encoding="utf-8").splitlines()


def _line_of(lines: list[str], job: str, **changes: str) -> str:
    """The allocation line of ``job`` in the tiny world's dump, with fields changed."""
    header = lines[0].split(US)
    fields = next(line.split(US) for line in lines[1:] if line.split(US)[0] == job)
    for name, value in changes.items():
        fields[header.index(name)] = value
    return US.join(fields)


def _append(world: Path, *new_lines: str) -> None:
    path = world / "sacct" / "sacct-unitsep-epoch.txt"
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(f"{line}\n" for line in new_lines))


def _add_gpu_node(world: Path, node: str, gpus: int, model: str = "a100") -> None:
    with (world / "nodes.csv").open("a", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        for i in range(gpus):
            writer.writerow([node, "slurm", model, gpus, i,
                             f"GPU-{node}-{i:02d}", "gpu"])


def _invoice(db: Path) -> list[tuple]:
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as con:
        return con.execute("SELECT period, cost_centre, gpu_model, gpu_seconds, amount "
                           "FROM chargeback ORDER BY ALL").fetchall()


def _load_and_build(tmp_path: Path, world: Path, name: str) -> Path:
    db = tmp_path / f"{name}.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db


def test_a_99_billion_gpu_line_on_an_8_gpu_node_never_reaches_the_invoice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
):
    # the inventory says a100-01 has 8 GPUs; job 5 ran there with 1 GPU, its copy claims
    # gres/gpu=99999999999 (once a line of EUR 564,166,666,898.81 on the week's invoice)
    good = copy_tiny_world(tmp_path / "good")
    _add_gpu_node(good, "a100-01", 8)
    bad = copy_tiny_world(tmp_path / "bad")
    _add_gpu_node(bad, "a100-01", 8)
    lines = _dump_lines(bad)
    tres = "billing=16,cpu=4,gres/gpu:a100=99999999999,gres/gpu=99999999999,mem=8192M,node=1"
    _append(bad, _line_of(lines, "5", JobID="99", JobIDRaw="99", AllocTRES=tres))
    expected = _invoice(_load_and_build(tmp_path, good, "good"))
    capsys.readouterr()
    db = _load_and_build(tmp_path, bad, "bad")
    err = capsys.readouterr().err
    assert _invoice(db) == expected
    assert max(amount for *_, amount in expected) < 1_000
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as con:
        for table in ("slurm_runs", "allocations"):
            assert con.execute(f"SELECT count(*) FROM {table} WHERE job_id = '99'"
                               ).fetchone() == (0,)
        rejects = con.execute("SELECT line_no, field, reason FROM rejects "
                              "WHERE source = 'sacct'").fetchall()
    assert rejects == [(len(lines) + 1, "AllocTRES",
                        "sanity limit gpus_per_job: expected at most 100,000 GPUs per job "
                        "(max_gpus_per_job), found 99,999,999,999 GPUs in AllocTRES")]
    assert "1 rejected (1 by sanity limits: gpus_per_job 1)" in err


def test_more_gpus_than_the_inventory_gives_the_node_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
):
    world = copy_tiny_world(tmp_path)
    _add_gpu_node(world, "a100-01", 8)
    lines = _dump_lines(world)
    _append(world,
            _line_of(lines, "5", JobID="98", JobIDRaw="98", AllocTRES="gres/gpu=9"),
            # a node the inventory does not list is fine (held to max_gpus_per_node only)
            _line_of(lines, "5", JobID="97", JobIDRaw="97", NodeList="a100-77",
                     AllocTRES="gres/gpu=12"),
            # the same machine under its full name: the inventory's a100-01
            _line_of(lines, "5", JobID="96", JobIDRaw="96", NodeList="a100-01.cluster.example",
                     AllocTRES="gres/gpu=10"))
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert "2 rejected (2 by sanity limits: gpus_per_node 2)" in capsys.readouterr().err
    with connect(db) as con:
        rejects = con.execute("SELECT line_no, field, reason FROM rejects WHERE source = 'sacct' "
                              "ORDER BY line_no").fetchall()
        loaded = con.execute("SELECT job_id, nodes FROM slurm_runs WHERE job_id IN "
                             "('96', '97', '98')").fetchall()
    n = len(lines)
    assert rejects == [
        (n + 1, "AllocTRES", "sanity limit gpus_per_node: expected at most 8 GPUs on a100-01 "
                             "(its gpu_count in the nodes inventory), found 9 GPUs in AllocTRES"),
        (n + 3, "AllocTRES", "sanity limit gpus_per_node: expected at most 8 GPUs on "
                             "a100-01.cluster.example (its gpu_count in the nodes inventory), "
                             "found 10 GPUs in AllocTRES"),
    ]
    assert loaded == [("97", ["a100-77"])]


def test_end_before_start_goes_to_rejects_instead_of_being_charged_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
):
    world = copy_tiny_world(tmp_path)
    lines = _dump_lines(world)
    # job 14 ran 1796018005..1796018008; a copy whose End is 100 s before its Start
    _append(world, _line_of(lines, "14", JobID="95", JobIDRaw="95", End="1796017905",
                            ElapsedRaw="0"))
    db = _load_and_build(tmp_path, world, "l")
    assert "1 rejected (1 by sanity limits: end_before_start 1)" in capsys.readouterr().err
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as con:
        runs = con.execute("SELECT count(*) FROM slurm_runs WHERE job_id = '95'").fetchone()
        rejects = con.execute("SELECT field, reason FROM rejects WHERE source = 'sacct'"
                              ).fetchall()
    assert runs == (0,)
    assert rejects == [
        ("End", "sanity limit end_before_start: expected End at or after Start (2026-11-30 "
                "05:53:25 UTC), found End 2026-11-30 05:51:45 UTC, 100 s before it")]


def test_times_after_the_dump_was_taken_are_rejected(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    lines = _dump_lines(world)
    path = world / "sacct" / "sacct-unitsep-epoch.txt"
    _append(world, _line_of(lines, "14", JobID="94", JobIDRaw="94", Start="1796018400",
                            End="1796018460", ElapsedRaw="60"))  # 06:00:00 .. 06:01:00
    with connect(tmp_path / "a.duckdb") as con:
        # --as-of 05:54:00: 06:00 is 6 minutes later, beyond the 5 minutes of clock skew
        load = slurm_ingest.import_sacct_file(con, path, observed_until=datetime(2026, 11, 30,
                                                                                 5, 54))
    assert [(r.field, r.reason) for r in load.rejects] == [
        ("Start", "sanity limit time_in_future: expected Start no later than the dump's --as-of "
                  "time (2026-11-30 05:54:00 UTC, 300 s of clock skew allowed), found "
                  "2026-11-30 06:00:00 UTC")]
    with connect(tmp_path / "b.duckdb") as con:
        # the clock skew is a setting
        limits = SanityLimits.from_config({"clock_skew_seconds": 3600})
        assert slurm_ingest.import_sacct_file(con, path, limits=limits, observed_until=datetime(
            2026, 11, 30, 5, 54)).rejects == ()
    # no --as-of: the dump was taken before it is imported
    _append(world, _line_of(lines, "14", JobID="93", JobIDRaw="93", Submit="4102444800"))
    with connect(tmp_path / "c.duckdb") as con:
        load = slurm_ingest.import_sacct_file(con, path)
    assert [r.field for r in load.rejects] == ["Submit"]
    assert load.rejects[0].reason.startswith(
        "sanity limit time_in_future: expected Submit no later than the time of the import (no "
        "--as-of given) (2026-")  # today
    assert load.rejects[0].reason.endswith("found 2100-01-01 00:00:00 UTC")
    assert load.rejected_by_rule["time_in_future"] == 1


class FakeRunner:
    def __init__(self, text: str) -> None:
        self.text = text

    def run(self, command: list[str], environment: dict[str, str]) -> str:
        return self.text


def test_a_live_pull_holds_times_to_the_time_of_the_query(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    lines = _dump_lines(world)
    text = "\n".join([*lines, _line_of(lines, "14", JobID="92", JobIDRaw="92",
                                       Start="1796018400", End="1796018460")]) + "\n"
    start = datetime(2026, 11, 30)
    with connect(tmp_path / "l.duckdb") as con:
        load = slurm_ingest.ingest_slurm_window(
            con, FakeRunner(text), start, start + timedelta(days=1),
            now=datetime(2026, 11, 30, 5, 54))
        assert con.execute("SELECT count(*) FROM rejects").fetchone() == (1,)
    assert [(r.line_no, r.field) for r in load.rejects] == [(len(lines) + 1, "Start")]
    assert "than the time of the sacct query (2026-11-30 05:54:00 UTC" in load.rejects[0].reason


def test_limits_come_from_the_settings_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    world = copy_tiny_world(tmp_path)
    dump_path = world / "sacct" / "sacct-unitsep-epoch.txt"
    config = tmp_path / "gpuledger.toml"
    config.write_text("[gpuledger.slurm_limits]\nmax_gpus_per_node = 4\n", encoding="utf-8")
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "--config", str(config), "import-sacct", str(dump_path),
                 "--as-of", "2026-12-01T00:00:00"]) == 0
    err = capsys.readouterr().err
    # job 9 held 8 GPUs on a100-02, a node no inventory lists: now above the site's ceiling
    assert "1 rejected (1 by sanity limits: gpus_per_node 1)" in err
    assert ("field AllocTRES: sanity limit gpus_per_node: expected at most 4 GPUs on a100-02 (it "
            "is not in the nodes inventory: max_gpus_per_node), found 8 GPUs in AllocTRES") in err
    # a mistyped limit is one line and nothing is written
    config.write_text("[gpuledger.slurm_limits]\nmax_gpus_per_nod = 4\n", encoding="utf-8")
    other = tmp_path / "other.duckdb"
    assert main(["--db", str(other), "--config", str(config), "import-sacct",
                 str(dump_path)]) == 1
    err = capsys.readouterr().err
    assert err == ("gpuledger import-sacct: error: expected slurm_limits keys among "
                   "max_gpus_per_node, max_gpus_per_job, max_elapsed_days, clock_skew_seconds, "
                   "found max_gpus_per_nod\n")
    assert not other.exists()
