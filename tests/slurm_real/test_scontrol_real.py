"""`scontrol show job -d` against the real Slurm: GPU jobs submitted here while the test runs,
their indices read live through gpuledger's command and checked against what the jobs
themselves were given (SLURM_JOB_GPUS) and against sacct."""

import re
import subprocess
import time
from pathlib import Path

import pytest

from connectors.slurm.commands import CommandRunner
from connectors.slurm.scontrol import scontrol_command
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from models.runner import connect

pytestmark = [pytest.mark.slurm, pytest.mark.submits_slurm_jobs]

WAIT_S = 60
SCRIPT = """#!/bin/bash
echo "node=$SLURMD_NODENAME gpus=${SLURM_JOB_GPUS:-none}"
sleep 120
"""


def _sbatch(jobs: Path, *args: str) -> str:
    out = subprocess.run(
        ["runuser", "-u", "alice", "--", "sbatch", "--parsable", f"--chdir={jobs}",
         f"--output={jobs}/scontrol-test-%j.out", "-A", "physics", "-p", "gpu", "-c", "1",
         "-t", "5", *args, str(jobs / "gpu-indices.sh")],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL, timeout=60,
    ).stdout
    return out.strip().split(";")[0]


def _state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True,
                         check=False, timeout=30).stdout
    m = re.search(r"JobState=(\S+)", out)
    return m.group(1) if m else ""


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"expected {what} within {WAIT_S} s, found it not")
        time.sleep(0.5)


def _own_gpus(jobs: Path, job: str) -> set[int]:
    """The indices the job's batch step was given, as it printed them (SLURM_JOB_GPUS)."""
    text = (jobs / f"scontrol-test-{job}.out").read_text()
    gpus = re.search(r"gpus=(\S+)", text).group(1)
    return {int(g) for g in gpus.split(",")}


def test_live_scontrol_gives_each_running_job_its_own_gpu_indices(real_slurm, tmp_path):
    jobs = real_slurm.state_dir / "jobs"
    script = jobs / "gpu-indices.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    # two jobs side by side on one node, and one spanning both a100 nodes
    ids = [_sbatch(jobs, "--gres=gpu:a100:2", "-w", "a100-01"),
           _sbatch(jobs, "--gres=gpu:a100:3", "-w", "a100-01"),
           _sbatch(jobs, "--gres=gpu:a100:1", "-N", "2", "-w", "a100-[01-02]")]
    try:
        _wait(lambda: all(_state(j) == "RUNNING" for j in ids), f"jobs {ids} RUNNING")
        _wait(lambda: all((jobs / f"scontrol-test-{j}.out").is_file()
                          and "gpus=" in (jobs / f"scontrol-test-{j}.out").read_text()
                          for j in ids), "the jobs' first output line")
        assert scontrol_command()[0] == "scontrol"
        with connect(tmp_path / "ledger.duckdb") as con:
            load = scontrol_ingest.ingest_scontrol(con, CommandRunner(timeout_s=60))
            rows = con.execute(
                "SELECT job_id, job_id_raw, node, gpu_index, gpu_model, state, start, \"end\", "
                "observed_at FROM slurm_gpu_indices WHERE job_id = ANY(?)", [ids]).fetchall()
        assert load.rejects == ()
        by_job: dict[str, set[tuple[str, int]]] = {}
        for job_id, raw, node, index, model, state, start, end, seen in rows:
            assert (str(raw), model, state, end) == (job_id, "a100", "RUNNING", None)
            assert start <= seen
            by_job.setdefault(job_id, set()).add((node, index))
        single, triple, spread = ids
        assert len(by_job[single]) == 2
        assert len(by_job[triple]) == 3
        assert {n for n, _ in by_job[spread]} == {"a100-01", "a100-02"}
        assert len(by_job[spread]) == 2
        # no GPU is given twice on one node
        held = [g for gpus in by_job.values() for g in gpus]
        assert len(held) == len(set(held)) == 7
        # the batch step (first node) was given exactly the GPUs scontrol shows there
        for job in (single, triple):
            assert {i for _, i in by_job[job]} == _own_gpus(jobs, job)
        first_node = min(by_job[spread])[0]
        assert {i for n, i in by_job[spread] if n == first_node} == _own_gpus(jobs, spread)
        # sacct agrees on the node list and the GPU count (it never knew the indices)
        # (slurmdbd records a job's start a moment after slurmctld: wait for its AllocTRES)
        def accounted(job: str) -> str:
            return real_slurm.sacct(["-X", "-n", "-P", "-j", job, "-o", "NodeList,AllocTRES"])

        for job in ids:
            _wait(lambda job=job: "gres/gpu=" in accounted(job), f"sacct's AllocTRES of {job}")
            nodelist, tres = accounted(job).strip().split("|")
            count = int(re.search(r"gres/gpu=(\d+)", tres).group(1))
            assert count == len(by_job[job])
            assert ("[" in nodelist) == (job == spread)
    finally:
        subprocess.run(["scancel", *ids], check=False, timeout=60)
