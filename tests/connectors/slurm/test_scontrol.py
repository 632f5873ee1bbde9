"""``scontrol show job -d`` snapshots → GPU index rows (connectors/slurm/scontrol.py): the real
Slurm 22.05 capture, hand-written variants of the format, rejects, and the live command."""

import os
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.slurm.commands import CommandRunner
from connectors.slurm.jobid import ALLOC_ID_RE
from connectors.slurm.records import SCONTROL_GPU_INDICES_SCHEMA
from connectors.slurm.scontrol import fetch_scontrol_jobs, parse_scontrol_jobs

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_slurm"
CAPTURE = REAL / "scontrol-show-job-d-running-gpu.txt"
US = "\x1f"


def _sacct_running_row() -> dict[str, str]:
    """The same running job as sacct saw it (epoch times), captured right after scontrol."""
    header, row = (REAL / "sacct-running-unitsep-epoch.txt").read_text().splitlines()[:2]
    return dict(zip(header.split(US), row.split(US), strict=True))


def _block(first: str, *, state: str = "RUNNING", start: str = "1767600000",
           end: str = "1767603600", run: str = "00:10:00", nodes: tuple[str, ...] = ()) -> str:
    """One job as `scontrol show job -d` prints it (the lines the parser reads, plus others)."""
    lines = [first, "   UserId=alice(20001) GroupId=alice(20001) MCS_label=N/A",
             f"   JobState={state} Reason=None Dependency=(null)",
             f"   RunTime={run} TimeLimit=01:00:00 TimeMin=N/A",
             f"   StartTime={start} EndTime={end} Deadline=N/A",
             "   NodeList=gpu-01 NumNodes=1 NumCPUs=4 NumTasks=1 CPUs/Task=4 ReqB:S:C:T=0:0:*:*",
             "   TRES=cpu=4,mem=4000M,node=1,billing=24,gres/gpu=2"]
    if nodes:
        lines.append("   JOB_GRES=gpu:2")
    lines += [f"     {n}" for n in nodes]
    lines += ["   MinCPUsNode=4 MinMemoryCPU=1000M MinTmpDiskNode=0",
              "   Command=/home/alice/train.sh --name JobState=FAKE Nodes=evil", "   Power="]
    return "\n".join(lines) + "\n"


def _rows(parsed) -> list[tuple]:
    return sorted(parsed.gpus.select("job_id", "node", "gpu_index").iter_rows())


def _epoch(value: str) -> datetime:
    return datetime.fromtimestamp(int(value), tz=UTC).replace(tzinfo=None)


# --------------------------------------------------------------------------------------------
# the real capture


def test_the_real_capture_gives_the_job_its_two_gpus_at_sacct_s_start():
    text = CAPTURE.read_text(encoding="utf-8")
    parsed = parse_scontrol_jobs(text, source_file=CAPTURE.name)
    sacct = _sacct_running_row()
    assert parsed.rejects == []
    assert parsed.jobs == 1
    assert parsed.gpus.schema == SCONTROL_GPU_INDICES_SCHEMA
    rows = parsed.gpus.to_dicts()
    # sacct's AllocTRES says how many GPUs; scontrol's IDX says which
    gpus = int(re.search(r"gres/gpu=(\d+)", sacct["AllocTRES"]).group(1))
    assert len(rows) == gpus == 2
    assert {r["gpu_index"] for r in rows} == {0, 1}
    assert {(r["job_id"], r["job_id_raw"], r["node"]) for r in rows} == {
        (sacct["JobID"], int(sacct["JobIDRaw"]), sacct["NodeList"])}
    assert {r["gpu_model"] for r in rows} == {"a100"}
    assert {r["state"] for r in rows} == {sacct["State"]}  # RUNNING
    assert {r["start"] for r in rows} == {_epoch(sacct["Start"])}
    assert {r["end"] for r in rows} == {None}  # EndTime is the time-limit projection
    # printed a few seconds into the run: sacct, run right after, counted ElapsedRaw seconds
    seen = parsed.observed_at - _epoch(sacct["Start"])
    assert abs(seen.total_seconds() - int(sacct["ElapsedRaw"])) <= 2
    line = text.splitlines()[rows[0]["line_no"] - 1]
    assert line.strip().startswith("Nodes=a100-01 ")
    assert "IDX:0-1" in line


# --------------------------------------------------------------------------------------------
# the format's variants


def test_hostlists_several_node_lines_and_index_lists():
    text = _block("JobId=40 JobName=big", nodes=(
        "Nodes=gpu-[01-02] CPU_IDs=0-7 Mem=8000 GRES=gpu:a100:5(IDX:0-1,4,6-7)",
        "Nodes=gpu-10 CPU_IDs=0-3 Mem=4000 GRES=gpu:h100:1(IDX:3)",
    ))
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert parsed.rejects == []
    expected = [("40", n, i) for n in ("gpu-01", "gpu-02") for i in (0, 1, 4, 6, 7)]
    assert _rows(parsed) == sorted([*expected, ("40", "gpu-10", 3)])
    models = dict(parsed.gpus.select("node", "gpu_model").unique().iter_rows())
    assert models == {"gpu-01": "a100", "gpu-02": "a100", "gpu-10": "h100"}
    lines = text.splitlines()
    for node, line_no in parsed.gpus.select("node", "line_no").unique().iter_rows():
        assert node.removeprefix("gpu-") in lines[line_no - 1]


@pytest.mark.parametrize(("first", "job_id"), [
    ("JobId=16 ArrayJobId=11 ArrayTaskId=0 JobName=arr", "11_0"),
    ("JobId=11 ArrayJobId=11 ArrayTaskId=3 ArrayTaskThrottle=2 JobName=arr", "11_3"),
    ("JobId=16 HetJobId=15 HetJobOffset=1 JobName=het", "15+1"),
    ("JobId=7 JobName=name with JobId=99 ArrayJobId=1 inside", "7"),
])
def test_array_and_het_ids_are_sacct_s_job_ids(first, job_id):
    text = _block(first, nodes=("Nodes=gpu-01 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:2)",))
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert parsed.rejects == []
    [row] = parsed.gpus.to_dicts()
    assert row["job_id"] == job_id
    assert re.match(ALLOC_ID_RE, row["job_id"])
    assert row["job_id_raw"] == int(first.split()[0].removeprefix("JobId="))


def test_jobs_without_gpu_indices_give_no_rows_and_no_rejects():
    text = "\n".join([
        _block("JobId=1 JobName=cpu", nodes=("Nodes=cpu-01 CPU_IDs=0-3 Mem=4000 GRES=",)),
        _block("JobId=2 JobName=pending", state="PENDING", start="Unknown", end="Unknown",
               run="00:00:00"),
        _block("JobId=3 JobName=counted", nodes=("Nodes=gpu-01 CPU_IDs=0 Mem=1 "
                                                 "GRES=gpu:a100(CNT:2)",)),
        _block("JobId=4 JobName=shard", nodes=("Nodes=gpu-01 CPU_IDs=0 Mem=1 "
                                               "GRES=shard:a100:2(IDX:0)",)),
    ])
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert (parsed.jobs, parsed.gpus.height, parsed.rejects) == (4, 0, [])


def test_untyped_gpus_other_gres_and_older_gres_idx():
    text = "\n".join([
        _block("JobId=5 JobName=u", nodes=(
            "Nodes=gpu-01 CPU_IDs=0 Mem=1 GRES=gpu:2(IDX:2-3),gpumem:40G,shard:0(IDX:N/A)",)),
        _block("JobId=6 JobName=old", nodes=("Nodes=gpu-02 CPU_IDs=0 Mem=1 "
                                             "GRES_IDX=gpu:v100(IDX:1)",)),
    ])
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert parsed.rejects == []
    got = sorted(parsed.gpus.select("job_id", "node", "gpu_index", "gpu_model").iter_rows())
    assert got == [("5", "gpu-01", 2, None), ("5", "gpu-01", 3, None),
                   ("6", "gpu-02", 1, "v100")]


def test_local_times_are_read_in_the_given_zone_and_end_only_for_finished_jobs():
    local = datetime(2026, 1, 5, 10, 0, 0)
    utc = local.replace(tzinfo=ZoneInfo("Europe/Berlin")).astimezone(UTC).replace(tzinfo=None)
    text = "\n".join([
        _block("JobId=8 JobName=done", state="COMPLETED", start="2026-01-05T10:00:00",
               end="2026-01-05T11:30:00",
               nodes=("Nodes=gpu-01 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)",)),
        _block("JobId=9 JobName=going", start="2026-01-05T10:00:00", end="2026-01-05T12:00:00",
               run="00:45:30", nodes=("Nodes=gpu-01 CPU_IDs=1 Mem=1 GRES=gpu:a100:1(IDX:1)",)),
    ])
    parsed = parse_scontrol_jobs(text, source_file="s", timezone="Europe/Berlin")
    rows = {r["job_id"]: r for r in parsed.gpus.to_dicts()}
    assert rows["8"]["start"] == rows["9"]["start"] == utc
    assert rows["8"]["end"] == utc + timedelta(minutes=90)
    assert rows["9"]["end"] is None
    # the running job's RunTime dates the snapshot
    assert parsed.observed_at == utc + timedelta(minutes=45, seconds=30)
    assert {r["observed_at"] for r in rows.values()} == {parsed.observed_at}


def test_a_stated_snapshot_time_wins_and_is_stored_in_utc():
    text = _block("JobId=10 JobName=x", nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:1(IDX:0)",))
    when = datetime(2026, 1, 5, 12, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    parsed = parse_scontrol_jobs(text, source_file="s", observed_at=when)
    assert parsed.gpus["observed_at"].to_list() == [datetime(2026, 1, 5, 3, 0)]


def test_empty_snapshots_and_windows_line_ends():
    assert parse_scontrol_jobs("No jobs in the system\n", source_file="s").rejects == []
    assert parse_scontrol_jobs("", source_file="s").gpus.height == 0
    text = _block("JobId=12 JobName=x", nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:1(IDX:5)",))
    parsed = parse_scontrol_jobs(text.replace("\n", "\r\n"), source_file="s")
    assert (_rows(parsed), parsed.rejects) == ([("12", "g1", 5)], [])


# --------------------------------------------------------------------------------------------
# broken blocks


BROKEN = [  # (block, field, the text the rejected line contains)
    (_block("JobId=20 JobName=a", nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:2(IDX:0-x)",)),
     "GRES", "IDX:0-x"),
    (_block("JobId=21 JobName=b", nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:3(IDX:0-1)",)),
     "GRES", "IDX:0-1"),
    (_block("JobId=22 JobName=c", nodes=("Nodes=g[01- CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)",)),
     "Nodes", "g[01-"),
    (_block("JobId=23 JobName=d", start="yesterday",
            nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)",)), "StartTime", "yesterday"),
    (_block("JobId=x24 JobName=e", nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)",)),
     "JobId", "JobId=x24"),
    (_block("JobId=25 JobName=f", start="Unknown",
            nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)",)), "StartTime", "Unknown"),
    ("JobId=26 JobName=cut\n   UserId=alice(20001) GroupId=alice(20001)\n", "JobState",
     "JobId=26"),
    ("   Nodes=g9 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:0)\n", "JobId", "Nodes=g9"),
]


@pytest.mark.parametrize(("bad", "field_name", "where"), BROKEN)
def test_a_broken_block_is_rejected_with_line_and_field_and_the_rest_loads(bad, field_name,
                                                                          where):
    good_before = _block("JobId=30 JobName=ok",
                         nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:a100:1(IDX:7)",))
    good_after = _block("JobId=31 JobName=ok",
                        nodes=("Nodes=g2 CPU_IDs=0 Mem=1 GRES=gpu:a100:2(IDX:0-1)",))
    text = "\n".join([good_before, bad, good_after])
    parsed = parse_scontrol_jobs(text, source_file="snap.txt")
    assert _rows(parsed) == [("30", "g1", 7), ("31", "g2", 0), ("31", "g2", 1)]
    [reject] = parsed.rejects
    assert (reject.source, reject.source_file, reject.field) == ("scontrol", "snap.txt",
                                                                 field_name)
    line = text.splitlines()[reject.line_no - 1]
    assert where in line
    assert reject.raw == line
    assert reject.reason.startswith("expected ")


def test_an_ambiguous_local_time_is_rejected_not_guessed():
    # 02:30 happens twice in Berlin on 2026-10-25 (clocks go back at 03:00 CEST)
    text = _block("JobId=40 JobName=dst", start="2026-10-25T02:30:00", end="2026-10-25T04:00:00",
                  nodes=("Nodes=g1 CPU_IDs=0 Mem=1 GRES=gpu:1(IDX:0)",))
    parsed = parse_scontrol_jobs(text, source_file="s", timezone="Europe/Berlin")
    assert parsed.gpus.height == 0
    [reject] = parsed.rejects
    assert reject.field == "StartTime"
    assert "SLURM_TIME_FORMAT=%s" in reject.reason


def test_an_unknown_time_zone_is_refused():
    with pytest.raises(ValueError, match="expected an IANA time zone"):
        parse_scontrol_jobs("", source_file="s", timezone="Mars/Olympus")


# --------------------------------------------------------------------------------------------
# the live command


def _fake_scontrol(tmp_path: Path, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_the_live_fetch_runs_scontrol_with_epoch_times(tmp_path, monkeypatch):
    calls = tmp_path / "calls.txt"
    bin_dir = _fake_scontrol(tmp_path, (
        f'echo "$@" "TZ=$TZ" "FORMAT=$SLURM_TIME_FORMAT" >> {calls}\n'
        f"cat {CAPTURE}\n"
    ))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    now = datetime(2026, 11, 30, 5, 55, 0, 700_000)
    parsed = fetch_scontrol_jobs(CommandRunner(timeout_s=10), now=now)
    assert calls.read_text().split() == ["--all", "--details", "show", "job", "TZ=UTC",
                                         "FORMAT=%s"]
    assert parsed.gpus.height == 2
    assert parsed.observed_at == datetime(2026, 11, 30, 5, 55, 0)
    assert set(parsed.gpus["source_file"]) == {"scontrol 2026-11-30T05:55:00"}


def test_a_failing_live_fetch_raises_with_the_command(tmp_path, monkeypatch):
    bin_dir = _fake_scontrol(tmp_path, 'echo "slurm_load_jobs error: Unable to contact" >&2\n'
                                       "exit 1\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SourceError, match=r"scontrol --all --details show job.*Unable to contact"):
        fetch_scontrol_jobs(CommandRunner(timeout_s=10, retries=0))


def test_a_gpu_count_without_bound_indices_is_no_row_and_no_reject():
    # Slurm prints IDX:N/A for a GPU GRES not bound to device indices (e.g. a job whose GPUs are
    # not yet placed): the job is still readable, and only its placed GPUs give rows.
    text = "\n".join([
        _block("JobId=7 JobName=unbound", nodes=("Nodes=gpu-01 CPU_IDs=0 Mem=1 "
                                                 "GRES=gpu:a100:1(IDX:N/A)",)),
        _block("JobId=8 JobName=placed", nodes=("Nodes=gpu-02 CPU_IDs=0 Mem=1 "
                                                "GRES=gpu:a100:2(IDX:0,2)",)),
    ])
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert parsed.rejects == []
    assert parsed.jobs == 2
    assert _rows(parsed) == [("8", "gpu-02", 0), ("8", "gpu-02", 2)]


def test_gres_is_found_when_a_later_release_prints_fields_after_it():
    text = _block("JobId=9 JobName=later", nodes=(
        "Nodes=gpu-03 CPU_IDs=0-1 Mem=2 GRES=gpu:h100:2(IDX:1,3) Features=fast",))
    parsed = parse_scontrol_jobs(text, source_file="s")
    assert parsed.rejects == []
    assert _rows(parsed) == [("9", "gpu-03", 1), ("9", "gpu-03", 3)]


def test_a_real_full_snapshot_with_a_pending_throttled_array_loads():
    """`scontrol --all --details show job` of the suite's Slurm 22.05 while the --gpus=5 -N 2 job
    ran (tests/fixtures/real_slurm/format-all): the pending rest of an array is printed
    `ArrayTaskId=0-3%2 ArrayTaskThrottle=2`."""
    path = (Path(__file__).resolve().parents[2] / "fixtures" / "real_slurm" / "format-all"
            / "scontrol-snapshot.txt")
    text = path.read_text(encoding="utf-8")
    assert "ArrayTaskId=0-3%2 ArrayTaskThrottle=2" in text
    parsed = parse_scontrol_jobs(text, source_file=path.name)
    assert parsed.rejects == []
    assert parsed.jobs == 16
    split = parsed.gpus.filter(pl.col("job_id") == "2").group_by("node").agg(
        pl.col("gpu_index").sort()).sort("node").rows()
    assert split == [("a100-01", [0, 1, 2, 3]), ("a100-02", [0])]
