"""Checks of the REAL Slurm service (tests/services/slurm): the output formats and numbers
gpuledger's sacct/sreport ingest relies on, as Slurm 22.05 really produces them."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

pytestmark = pytest.mark.slurm

SEP = "\x1f"
GPU_TRES = ("gres/gpu", "gres/gpu:a100", "gres/gpu:h100")


def _unitsep_rows(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    lines = text.splitlines()
    assert lines[0].split(SEP) == list(fields)
    return [dict(zip(fields, ln.split(SEP), strict=True)) for ln in lines[1:] if ln]


def _allocation_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Job (allocation) rows; step rows are N.batch, N.extern, N.0, ..."""
    return [r for r in rows if "." not in r["JobID"]]


def _tres(value: str) -> dict[str, int]:
    pairs = (item.split("=", 1) for item in value.split(",") if "=" in item)
    return {k: int(v) for k, v in pairs if v.isdigit()}


def _sreport_table(text: str) -> list[dict[str, str]]:
    """Rows of an `sreport -P` report, after its banner (dashes, title, 'Usage reported in')."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Cluster|"))
    header = lines[start].split("|")
    return [dict(zip(header, ln.split("|"), strict=True)) for ln in lines[start + 1 :] if ln]


def test_sacct_header_is_the_contract_field_list(real_slurm, sacct_fields):
    header = real_slurm.sacct_unitsep().splitlines()[0]
    assert header.split(SEP) == list(sacct_fields)


def test_unitsep_lines_have_exactly_every_field(real_slurm, sacct_fields):
    lines = real_slurm.sacct_unitsep().splitlines()
    assert len(lines) > 40  # the job set: ~18 runs, each with batch/extern/srun steps
    for ln in lines[1:]:
        assert len(ln.split(SEP)) == len(sacct_fields), ln
    rows = _allocation_rows(_unitsep_rows("\n".join(lines), sacct_fields))
    names = {r["JobIDRaw"]: r["JobName"] for r in rows}
    assert names[real_slurm.job_id("name-pipe")] == "train|resnet50"
    assert names[real_slurm.job_id("name-unicode")] == "モデル学習-ü-🚀"
    for r in rows:  # SLURM_TIME_FORMAT=%s: epoch seconds
        for col in ("Submit", "Eligible", "Start", "End"):
            assert r[col].isdigit(), r


def test_pipe_in_job_name_shifts_plain_parsable2(real_slurm, classic_fields, sacct_fields):
    berlin = ZoneInfo("Europe/Berlin")
    fmt = "%Y-%m-%dT%H:%M:%S"
    plain = real_slurm.sacct(
        ["--allusers", "--duplicates", "--parsable2", "--noconvert",
         "-S", real_slurm.window_start.astimezone(berlin).strftime(fmt),
         "-E", real_slurm.window_end.astimezone(berlin).strftime(fmt),
         f"--format={','.join(classic_fields)}"],
        env={"TZ": "Europe/Berlin"},
    )
    lines = plain.splitlines()
    assert lines[0].split("|") == list(classic_fields)
    pipe_id = real_slurm.job_id("name-pipe")
    widths = {}
    for ln in lines[1:]:
        cols = ln.split("|")
        widths[cols[0]] = len(cols)
    assert widths.pop(pipe_id) == len(classic_fields) + 1  # 'train|resnet50' is split
    assert set(widths.values()) == {len(classic_fields)}  # its steps are named batch/extern

    # the same event: local ISO time without offset vs epoch seconds
    epoch = {
        r["JobIDRaw"]: r["Start"]
        for r in _allocation_rows(_unitsep_rows(real_slurm.sacct_unitsep(), sacct_fields))
    }
    gpu1 = real_slurm.job_id("gpu-1-typed")
    start_col = classic_fields.index("Start")
    local = next(ln.split("|")[start_col] for ln in lines[1:] if ln.split("|")[0] == gpu1)
    expected = datetime.fromtimestamp(int(epoch[gpu1]), tz=UTC).astimezone(berlin)
    assert local == expected.strftime(fmt)


def test_requeued_job_has_two_runs_with_the_same_jobid(real_slurm, sacct_fields):
    rq = real_slurm.job_id("requeue")
    runs = [
        r for r in _allocation_rows(_unitsep_rows(real_slurm.sacct_unitsep(), sacct_fields))
        if r["JobID"] == rq
    ]
    assert [r["State"] for r in runs] == ["REQUEUED", "COMPLETED"]
    assert {r["JobIDRaw"] for r in runs} == {rq}
    assert int(runs[1]["Start"]) >= int(runs[0]["End"])
    assert all(_tres(r["AllocTRES"])["gres/gpu"] == 1 for r in runs)

    without_dup = real_slurm.sacct(["-X", "-n", "-P", "-j", rq, "--format=JobID,State"])
    assert without_dup.splitlines() == [f"{rq}|COMPLETED"]


def test_job_set_reached_its_end_states(real_slurm, sacct_fields):
    rows = _unitsep_rows(real_slurm.sacct_unitsep(), sacct_fields)
    alloc = {r["JobID"]: r for r in _allocation_rows(rows) if r["State"] != "REQUEUED"}
    m = real_slurm.manifest

    assert alloc[m["timeout"]]["State"] == "TIMEOUT"
    failed = alloc[m["fail-exit1"]]
    assert (failed["State"], failed["ExitCode"]) == ("FAILED", "1:0")
    assert alloc[m["cancel-running"]]["State"].startswith("CANCELLED by ")
    for kind in ("gpu-1-typed", "gpu-2-untyped", "gpu-3-untyped-gres", "gpu-4-h100",
                 "gpu-8-a100", "two-node", "name-pipe", "name-unicode"):
        assert alloc[m[kind]]["State"] == "COMPLETED", kind
    gpus = {k: _tres(alloc[m[k]]["AllocTRES"]) for k in ("gpu-2-untyped", "gpu-4-h100")}
    gpus["gpu-8-a100"] = _tres(alloc[m["gpu-8-a100"]]["AllocTRES"])
    assert gpus["gpu-2-untyped"]["gres/gpu"] == 2
    assert gpus["gpu-4-h100"]["gres/gpu:h100"] == 4
    assert gpus["gpu-8-a100"]["gres/gpu:a100"] == 8
    assert alloc[m["two-node"]]["AllocNodes"] == "2"

    tasks = {k: v for k, v in alloc.items() if k.startswith(f"{m['array']}_")}
    assert len(tasks) == 4
    assert [k for k, v in tasks.items() if v["State"] == "FAILED"] == [f"{m['array']}_2"]
    assert tasks[f"{m['array']}_2"]["ExitCode"] == "2:0"

    ms = m["multistep"]
    assert (alloc[ms]["State"], alloc[ms]["DerivedExitCode"]) == ("COMPLETED", "3:0")
    evaluate = [r for r in rows if r["JobID"].startswith(f"{ms}.") and r["JobName"] == "evaluate"]
    assert [(r["State"], r["ExitCode"]) for r in evaluate] == [("FAILED", "3:0")]

    # a job cancelled while pending never started: absent from time-window queries,
    # visible with -j
    assert m["cancel-pending"] not in alloc
    held = real_slurm.sacct(
        ["-X", "-n", "-P", "-j", m["cancel-pending"], "--format=State,ElapsedRaw,AllocTRES"]
    )
    state, elapsed, alloc_tres = held.strip().split("|")
    assert state.startswith("CANCELLED by ")
    assert (elapsed, alloc_tres) == ("0", "")
    assert {r["Account"] for r in alloc.values()} == {"physics", "ml-research", "ops"}


def test_sreport_has_gpu_seconds_after_rollup(real_slurm):
    out = real_slurm.sreport(
        ["-P", "-t", "seconds", "-T", "gres/gpu", "cluster", "utilization",
         *real_slurm.report_args()]
    )
    rows = _sreport_table(out)
    assert [r["TRES Name"] for r in rows] == ["gres/gpu"]
    assert rows[0]["Cluster"] == real_slurm.cluster
    assert int(rows[0]["Allocated"]) > 0
    assert int(rows[0]["Reported"]) >= int(rows[0]["Allocated"])


def test_sreport_reconciles_with_sacct_to_the_gpu_second(real_slurm, sacct_fields):
    """Every run (including the REQUEUED one) is charged GPUs x ElapsedRaw; sreport agrees."""
    runs = _allocation_rows(_unitsep_rows(real_slurm.sacct_unitsep(), sacct_fields))
    by_tres: Counter[str] = Counter()
    by_assoc: Counter[tuple[str, str]] = Counter()
    for r in runs:
        tres = _tres(r["AllocTRES"])
        for name in GPU_TRES:
            by_tres[name] += tres.get(name, 0) * int(r["ElapsedRaw"])
        by_assoc[(r["Account"], r["User"])] += tres.get("gres/gpu", 0) * int(r["ElapsedRaw"])

    types = ",".join(GPU_TRES)
    util = _sreport_table(real_slurm.sreport(
        ["-P", "-t", "seconds", "-T", types, "cluster", "utilization", *real_slurm.report_args()]
    ))
    assert {r["TRES Name"]: int(r["Allocated"]) for r in util} == dict(by_tres)

    users = _sreport_table(real_slurm.sreport(
        ["-P", "-t", "seconds", "-T", "gres/gpu", "cluster", "AccountUtilizationByUser",
         *real_slurm.report_args()]
    ))
    sreport_assoc = {(r["Account"], r["Login"]): int(r["Used"]) for r in users if r["Login"]}
    assert {k: v for k, v in sreport_assoc.items() if v} == {k: v for k, v in by_assoc.items() if v}
