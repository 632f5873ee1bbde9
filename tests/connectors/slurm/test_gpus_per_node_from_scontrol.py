"""GPUs per node of a multi-node run: sacct's total split evenly at load (marked estimated), and
replaced at build time by an `scontrol show job -d` snapshot of the run where one was loaded,
whichever of the two was loaded first (models/sql/stg_slurm_allocations.sql)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.slurm.fields import SACCT_FIELDS
from connectors.slurm.parse import allocations_per_node, parse_sacct
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from models.build import build_allocations
from models.runner import connect
from tests.connectors.slurm.dumps import T0, alloc, dump, step

DAY = datetime.fromtimestamp(T0, UTC).date()
START, END = T0 + 5, T0 + 65  # the runs of alloc(): 60 s


def _run(job: str = "200", gpus: int = 5, nodes: str = "a100-[01-02]", n: int = 2,
         **over: str) -> dict[str, str]:
    return alloc(JobID=job, JobIDRaw=job, NodeList=nodes, AllocNodes=str(n),
                 AllocTRES=f"billing=54,cpu=4,gres/gpu:a100={gpus},gres/gpu={gpus},mem=4000M,"
                 f"node={n}", **over)


def _block(job: str, start: int, per_node: list[tuple[str, str]], *, seen: int = START + 10,
           head: str = "") -> str:
    """A job as `TZ=UTC SLURM_TIME_FORMAT=%s scontrol show job -d` prints it at ``seen``."""
    run = seen - start
    lines = [f"JobId={job} {head}JobName=train",
             "   JobState=RUNNING Reason=None Dependency=(null)",
             f"   RunTime=00:{run // 60:02d}:{run % 60:02d} TimeLimit=00:05:00 TimeMin=N/A",
             f"   StartTime={start} EndTime={start + 300} Deadline=N/A",
             f"   NodeList={','.join(n for n, _ in per_node)}"]
    for node, gres in per_node:
        lines.append(f"     Nodes={node} CPU_IDs=0-1 Mem=2000 GRES={gres}")
    return "\n".join([*lines, "   MinCPUsNode=1", "", ""])


def _ledger(tmp_path: Path, rows: list[dict[str, str]], snapshots: list[str], *,
            order: str = "sacct-first", fields: tuple[str, ...] = SACCT_FIELDS,
            name: str = "l") -> list[tuple]:
    """Load the dump and the snapshots in ``order``, build, and return the staged Slurm rows
    (job_id, node, gpus, gpus_source, evidence, gpu_seconds) in node order."""
    dump_path = tmp_path / f"{name}-sacct.txt"
    dump_path.write_text(dump(rows, fields), encoding="utf-8")
    snap_paths = []
    for i, text in enumerate(snapshots):
        p = tmp_path / f"{name}-scontrol-{i}.txt"
        p.write_text(text, encoding="utf-8")
        snap_paths.append(p)
    with connect(tmp_path / f"{name}-{order}.duckdb") as con:
        if order == "scontrol-first":
            for p in snap_paths:
                assert scontrol_ingest.import_scontrol_file(con, p).rejects == ()
        assert slurm_ingest.import_sacct_file(con, dump_path, cluster=None if "Cluster" in fields
                                              else "gpulab").rejects == ()
        if order == "sacct-first":
            for p in snap_paths:
                assert scontrol_ingest.import_scontrol_file(con, p).rejects == ()
        build_allocations(con, DAY, DAY)
        staged = con.execute(
            "SELECT job_id, node, gpus, gpus_source, evidence FROM stg_allocations "
            "ORDER BY job_id, start_ts, node").fetchall()
        charged = {(j, n, s): g for j, n, s, g in con.execute(
            "SELECT job_id, node, start_ts, gpu_seconds FROM allocations").fetchall()}
    return [(*row, charged.get((row[0], row[1], datetime.fromtimestamp(START, UTC)
                                .replace(tzinfo=None)))) for row in staged]


# ------------------------------------------------------------------------------ at sacct load


@pytest.mark.parametrize(("gpus", "nodes", "n", "expected"), [
    (5, "a100-[01-02]", 2, [("a100-01", 3), ("a100-02", 2)]),
    (4, "a100-[01-02]", 2, [("a100-01", 2), ("a100-02", 2)]),
    (1, "a100-[01-02]", 2, [("a100-01", 1), ("a100-02", 0)]),
    (7, "a100-[01-03]", 3, [("a100-01", 3), ("a100-02", 2), ("a100-03", 2)]),
])
def test_multi_node_runs_are_split_evenly_at_load_and_marked_estimated(gpus, nodes, n, expected):
    r = parse_sacct(dump([_run(gpus=gpus, nodes=nodes, n=n)]), source_file="d")
    per = allocations_per_node(r.runs)
    assert per.select("node", "gpus").rows() == expected
    assert set(per["gpus_source"]) == {"even_split"}
    assert sum(g for _, g in expected) == gpus


def test_a_single_node_run_holds_its_total_exactly():
    per = allocations_per_node(parse_sacct(dump([alloc()]), source_file="d").runs)
    assert per.select("node", "gpus", "gpus_source").rows() == [("a100-01", 1, "single_node")]


# ------------------------------------------------------------------------------ at build time


SNAP_4_1 = _block("200", START, [("a100-01", "gpu:a100:4(IDX:0-3)"),
                                 ("a100-02", "gpu:a100:1(IDX:5)")])


@pytest.mark.parametrize("order", ["sacct-first", "scontrol-first"])
def test_the_snapshot_gives_each_node_its_count_whichever_was_loaded_first(tmp_path, order):
    rows = _ledger(tmp_path, [_run(), step(_run(), "batch")], [SNAP_4_1], order=order)
    assert [r[1:4] for r in rows] == [("a100-01", 4, "scontrol"), ("a100-02", 1, "scontrol")]
    assert [r[5] for r in rows] == [4 * 60, 1 * 60]
    sacct_file = tmp_path / "l-sacct.txt"
    assert rows[0][4] == (f"{sacct_file}:2; GPUs per node from scontrol "
                          f"{tmp_path / 'l-scontrol-0.txt'}:6: 4 of the run's 5 "
                          "(indices 0,1,2,3)")
    assert rows[1][4].endswith(":7: 1 of the run's 5 (indices 5)")


def test_without_a_snapshot_the_even_split_stays_and_the_evidence_says_so(tmp_path):
    rows = _ledger(tmp_path, [_run()], [])
    assert [r[1:4] for r in rows] == [("a100-01", 3, "even_split"), ("a100-02", 2, "even_split")]
    assert sum(r[5] for r in rows) == 5 * 60  # the total is sacct's either way
    assert rows[0][4].endswith("-sacct.txt:2; GPUs per node estimated: 5 GPUs split evenly "
                               "over 2 nodes, 2 each and 1 more on the first 1 in hostlist order "
                               "(no scontrol snapshot of the run)")
    even = _ledger(tmp_path, [_run(gpus=4)], [], name="even")
    assert even[0][4].endswith("; GPUs per node estimated: 4 GPUs split evenly over 2 nodes, 2 "
                               "each (no scontrol snapshot of the run)")


@pytest.mark.parametrize(("snapshot", "why"), [
    (_block("200", START, [("a100-01", "gpu:a100:3(IDX:0-2)"), ("a100-02", "gpu:a100:1(IDX:0)")]),
     "shows 4 GPUs, sacct 5: not used)"),
    (_block("200", START, [("a100-01", "gpu:a100:4(IDX:0-3)"), ("h100-01", "gpu:h100:1(IDX:0)")]),
     "names other nodes: not used)"),
])
def test_a_snapshot_that_disagrees_with_sacct_is_not_used(tmp_path, snapshot: str, why: str):
    rows = _ledger(tmp_path, [_run()], [snapshot])
    assert [r[1:4] for r in rows] == [("a100-01", 3, "even_split"), ("a100-02", 2, "even_split")]
    assert rows[0][4].endswith(why)
    assert "(scontrol " in rows[0][4]


def test_a_snapshot_of_another_start_is_another_run(tmp_path):
    """A requeued job keeps its JobIDRaw: the snapshot of its first run (its StartTime) leaves
    the second run's split alone."""
    first = _run(State="REQUEUED", End=str(T0 + 35), ElapsedRaw="30")
    second = _run(Submit=str(T0 + 35), Eligible=str(T0 + 35), Start=str(T0 + 40),
                  End=str(T0 + 100))
    rows = _ledger(tmp_path, [first, second], [SNAP_4_1])
    assert [r[1:4] for r in rows] == [
        ("a100-01", 4, "scontrol"), ("a100-02", 1, "scontrol"),
        ("a100-01", 3, "even_split"), ("a100-02", 2, "even_split")]


def test_a_node_the_snapshot_does_not_name_held_no_gpu(tmp_path):
    run = _run(gpus=5, nodes="a100-[01-03]", n=3)
    rows = _ledger(tmp_path, [run], [SNAP_4_1])
    assert [r[1:4] for r in rows] == [("a100-01", 4, "scontrol"), ("a100-02", 1, "scontrol"),
                                      ("a100-03", 0, "scontrol")]
    assert rows[2][4].endswith(": 0 of the run's 5")
    assert sum(r[5] for r in rows) == 5 * 60


def test_the_latest_usable_snapshot_is_the_one_cited(tmp_path):
    later = _block("200", START, [("a100-01", "gpu:a100:4(IDX:0-3)"),
                                  ("a100-02", "gpu:a100:1(IDX:5)")], seen=START + 40)
    rows = _ledger(tmp_path, [_run()], [SNAP_4_1, later])
    assert [r[1:4] for r in rows] == [("a100-01", 4, "scontrol"), ("a100-02", 1, "scontrol")]
    assert f"{tmp_path / 'l-scontrol-1.txt'}:6:" in rows[0][4]


def test_an_array_task_of_a_dump_without_jobidraw_is_matched_by_its_jobid(tmp_path):
    fields = tuple(f for f in SACCT_FIELDS if f not in {"JobIDRaw", "Cluster"})
    task = _run(job="300_1")
    snap = _block("301", START, [("a100-01", "gpu:a100:4(IDX:0-3)"),
                                 ("a100-02", "gpu:a100:1(IDX:5)")],
                  head="ArrayJobId=300 ArrayTaskId=1 ")
    for order in ("sacct-first", "scontrol-first"):
        rows = _ledger(tmp_path, [task], [snap], order=order, fields=fields, name=order)
        assert [r[:4] for r in rows] == [("300_1", "a100-01", 4, "scontrol"),
                                         ("300_1", "a100-02", 1, "scontrol")]


def test_a_single_node_run_holds_sacct_s_total_whatever_a_snapshot_says(tmp_path):
    snap = _block("100", START, [("a100-01", "gpu:a100:2(IDX:6-7)")])
    rows = _ledger(tmp_path, [alloc()], [snap])
    [(job, node, gpus, source, evidence, seconds)] = rows
    assert (job, node, gpus, source, seconds) == ("100", "a100-01", 1, "single_node", 60)
    assert evidence == f"{tmp_path / 'l-sacct.txt'}:2"
