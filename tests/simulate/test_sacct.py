"""The sacct dumps look exactly like what Slurm 22.05 prints (see slurm-lab.md)."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from connectors.slurm.fields import SACCT_FIELDS, UNIT_SEPARATOR
from simulator.sacct_writer import CLASSIC_FIELDS

STEP_SUFFIX = re.compile(r"\.(batch|extern|\d+)$")
ISO_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")


@pytest.fixture(scope="module")
def epoch_rows(world_dir: Path) -> list[dict[str, str]]:
    lines = (world_dir / "sacct" / "sacct-unitsep-epoch.txt").read_text(
        encoding="utf-8").splitlines()
    assert lines[0].split(UNIT_SEPARATOR) == list(SACCT_FIELDS)
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        values = line.split(UNIT_SEPARATOR)
        assert len(values) == len(SACCT_FIELDS), f"line {n}: {len(values)} columns"
        rows.append(dict(zip(SACCT_FIELDS, values, strict=True)))
    return rows


@pytest.fixture(scope="module")
def plain_lines(world_dir: Path) -> list[str]:
    return (world_dir / "sacct" / "sacct-P.txt").read_text(encoding="utf-8").splitlines()


def test_plain_dump_has_one_extra_column_per_pipe_in_the_name(plain_lines, epoch_rows):
    assert plain_lines[0] == "|".join(CLASSIC_FIELDS)
    assert CLASSIC_FIELDS[2] == "JobName"
    assert len(plain_lines) == len(epoch_rows) + 1
    extra_seen = 0
    for line, row in zip(plain_lines[1:], epoch_rows, strict=True):
        pipes_in_name = row["JobName"].count("|")
        assert line.count("|") == len(CLASSIC_FIELDS) - 1 + pipes_in_name, line
        extra_seen += pipes_in_name
        fields = line.split("|")
        assert fields[0] == row["JobID"]
        assert fields[-1] == row["AdminComment"].split("|")[-1]
    assert extra_seen >= 3  # train|resnet50 and sweep|lr=3e-4|bs=64


def test_plain_dump_uses_local_iso_times_and_raw_memory(plain_lines, epoch_rows):
    header = plain_lines[0].split("|")
    submit = header.index("Submit")
    first = plain_lines[1].split("|")
    assert ISO_LOCAL.match(first[submit])
    row = epoch_rows[0]
    # Europe/Berlin is UTC+1 in January
    utc = datetime.fromtimestamp(int(row["Submit"]), UTC) + timedelta(hours=1)
    assert first[submit] == utc.strftime("%Y-%m-%dT%H:%M:%S")
    # both dumps use --noconvert, like the real captures: memory in M
    assert all(not re.search(r"mem=\d+G", line) for line in plain_lines[1:])
    assert any(re.search(r"mem=\d+M", r["AllocTRES"]) for r in epoch_rows)


def test_epoch_times_are_integers_or_unknown_none(epoch_rows):
    for row in epoch_rows:
        for field in ("Submit", "Eligible", "Start", "End"):
            value = row[field]
            assert value.isdigit() or value in ("Unknown", "None"), (field, value)


def test_step_rows_follow_the_real_patterns(epoch_rows):
    jobs = {r["JobID"]: r for r in epoch_rows if not STEP_SUFFIX.search(r["JobID"])}
    steps = [r for r in epoch_rows if STEP_SUFFIX.search(r["JobID"])]
    assert steps
    for step in steps:
        parent = jobs[STEP_SUFFIX.sub("", step["JobID"])]
        for empty in ("User", "UID", "Partition", "QOS", "TimelimitRaw", "Reason", "Flags",
                      "DerivedExitCode", "ReqTRES", "AdminComment"):
            assert step[empty] == "", (step["JobID"], empty)
        assert step["Account"] == parent["Account"]
        assert step["Cluster"] == parent["Cluster"]
        assert step["Submit"] == step["Start"] == step["Eligible"]
        has_billing = "billing=" in step["AllocTRES"]
        assert has_billing == step["JobID"].endswith(".extern"), step["JobID"]
        assert step["JobIDRaw"].split(".")[-1] == step["JobID"].split(".")[-1]
    batch_order = [r["JobID"] for r in epoch_rows]
    i = batch_order.index(next(s["JobID"] for s in steps if s["JobID"].endswith(".batch")))
    assert batch_order[i + 1].endswith(".extern")  # .batch, .extern, .0 as sacct sorts them


def test_alloc_tres_layout(epoch_rows):
    gpu_rows = [r for r in epoch_rows if "gres/gpu=" in r["AllocTRES"]]
    assert gpu_rows
    for row in gpu_rows:
        parts = row["AllocTRES"].split(",")
        assert parts == sorted(parts)
        names = [p.split("=")[0] for p in parts]
        assert "gres/gpu" in names
        assert any(n.startswith("gres/gpu:") for n in names)  # typed and untyped both
    assert any("gres/gpumem=" in r["AllocTRES"] and "gres/gpuutil=" in r["AllocTRES"]
               for r in epoch_rows)
    untyped = [r for r in epoch_rows if r["ReqTRES"] and "gres/gpu=" in r["ReqTRES"]
               and "gres/gpu:" not in r["ReqTRES"]]
    assert untyped, "expected untyped --gpus requests (ReqTRES without a type)"


def test_job_kinds_are_all_present(epoch_rows):
    jobs = [r for r in epoch_rows if not STEP_SUFFIX.search(r["JobID"])]
    states = {r["State"].split(" by ")[0] for r in jobs}
    assert {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "CANCELLED", "REQUEUED",
            "RUNNING"} <= states
    exit_codes = {(r["State"], r["ExitCode"]) for r in jobs}
    assert ("FAILED", "1:0") in exit_codes
    assert ("FAILED", "0:9") in exit_codes
    assert any(r["DerivedExitCode"] == "3:0" and r["State"] == "COMPLETED" for r in jobs)
    assert any(re.fullmatch(r"CANCELLED by \d+", r["State"]) for r in jobs)
    names = {r["JobName"] for r in jobs}
    assert "モデル学習-ü-🚀" in names
    assert "eval, `v2` run" in names  # double quotes are stored as backticks
    assert {"normal", "high", "gpu-long"} <= {r["QOS"] for r in jobs}


def test_running_and_never_started_jobs(epoch_rows):
    running = [r for r in epoch_rows if r["State"] == "RUNNING"]
    assert running
    for row in running:
        assert row["End"] == "Unknown"
        assert int(row["ElapsedRaw"]) > 0
    cancelled_pending = [r for r in epoch_rows if r["NodeList"] == "None assigned"
                         and r["State"] != "PENDING"]
    assert cancelled_pending
    for row in cancelled_pending:
        assert row["State"].startswith("CANCELLED by ")
        assert row["Start"] == row["End"]  # the cancel time, as the real capture shows
        assert row["AllocNodes"] == "0"
        assert row["AllocTRES"] == ""
        assert row["ReqTRES"]
        assert row["ElapsedRaw"] == "0"
        assert row["NodeList"] == "None assigned"
        assert row["Reason"] in ("JobHeldUser", "Dependency", "BeginTime")


def test_arrays_het_jobs_and_requeues(epoch_rows):
    jobs = [r for r in epoch_rows if not STEP_SUFFIX.search(r["JobID"])]
    tasks: dict[str, list[dict[str, str]]] = {}
    for row in jobs:
        if "_" in row["JobID"]:
            tasks.setdefault(row["JobID"].split("_")[0], []).append(row)
    assert tasks
    for array_id, rows in tasks.items():
        rows.sort(key=lambda r: int(r["JobID"].split("_")[1]))
        assert rows[-1]["JobIDRaw"] == array_id  # the last task reuses the array id
        assert all(r["JobIDRaw"] != array_id for r in rows[:-1])
    assert any(r["Reason"] == "JobArrayTaskLimit" and int(r["Eligible"]) > int(r["Submit"])
               for rows in tasks.values() for r in rows if r["Eligible"].isdigit())
    het = [r for r in jobs if "+" in r["JobID"]]
    assert het
    by_id: dict[str, dict[str, str]] = {r["JobID"]: r for r in het}
    for job_id, row in by_id.items():
        base, offset = job_id.split("+")
        if offset == "1":
            assert int(row["JobIDRaw"]) == int(by_id[f"{base}+0"]["JobIDRaw"]) + 1
            assert row["Partition"] != by_id[f"{base}+0"]["Partition"]
    assert not any(r["JobID"].startswith(tuple(f"{j}.batch" for j in by_id if j.endswith("+1")))
                   for r in epoch_rows)
    seen: dict[str, list[dict[str, str]]] = {}
    for row in jobs:
        seen.setdefault(row["JobID"], []).append(row)
    requeued = [rows for rows in seen.values() if len(rows) > 1]
    assert requeued
    for first, second in requeued:
        assert first["State"] == "REQUEUED"
        assert second["Submit"] == first["End"]  # Submit is reset to the requeue time


def test_slurm_bridge_representatives(epoch_rows):
    reps = [r for r in epoch_rows if r["AdminComment"]]
    assert reps
    for row in reps:
        assert row["User"] == "slurm"
        pods = json.loads(row["AdminComment"])["pods"]
        assert len(pods) == 1
        assert pods[0].split("/")[1] == row["JobName"]
        assert row["Partition"] == "shared"
