"""The optional pyslurm backend: rendering is tested with stand-in job objects everywhere; the
live call only where pyslurm is installed (PyPI builds it for Slurm 25.11 only)."""

import importlib.util
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from connectors.errors import SourceError
from connectors.slurm.parse import parse_sacct
from connectors.slurm.pyslurm_source import PySlurmSource, job_lines


@dataclass
class Step:
    id: str
    state: str
    start_time: int
    end_time: int
    elapsed_time: int
    nodelist: str = "a100-01"
    name: str = "batch"
    exit_code: int = 0
    exit_code_signal: int = 0


@dataclass
class Job:
    id: int
    name: str
    start_time: int
    end_time: int | None
    tres_alloc_str: str
    state: str = "COMPLETED"
    user_name: str = "alice"
    user_id: int = 20001
    account: str = "physics"
    partition: str = "gpu"
    qos: str = "normal"
    exit_code: int = 0
    exit_code_signal: int = 0
    derived_exit_code: int = 0
    derived_exit_code_signal: int = 0
    submit_time: int = 1_767_600_000
    eligible_time: int = 1_767_600_000
    elapsed_time: int = 600
    cpus: int = 4
    num_nodes: int = 1
    nodelist: str = "a100-01"
    cluster: str = "gpulab"
    reservation: str = ""
    wckey: str = ""
    admin_comment: str = ""
    array_id: int | None = None
    array_task_id: int | None = None
    steps: dict = field(default_factory=dict)


def test_rendered_jobs_parse_like_sacct_output():
    jobs = [
        Job(7, "train|resnet", 1_767_600_100, 1_767_600_700,
            "billing=8,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=8000M,node=1",
            steps={"batch": Step("batch", "COMPLETED", 1_767_600_100, 1_767_600_700, 600)}),
        Job(8, "モデル学習", 1_767_600_200, None, "cpu=8,gres/gpu=4,node=1", state="RUNNING",
            array_id=5, array_task_id=3),
    ]
    parsed = parse_sacct("\n".join(job_lines(jobs)) + "\n", source_file="pyslurm")
    assert parsed.rejects == []
    runs = parsed.runs.sort("job_id_raw")
    assert runs["job_id"].to_list() == ["7", "5_3"]
    assert runs["job_name"].to_list() == ["train|resnet", "モデル学習"]
    assert runs["alloc_gpus"].to_list() == [2, 4]
    assert runs["end"].to_list()[1] is None
    assert parsed.steps["step_id"].to_list() == ["batch"]
    assert parsed.steps["run_key"].to_list() == [runs["run_key"][0]]


def test_a_pyslurm_without_allocated_tres_is_refused_with_a_reason():
    class Bare:
        id = 1

    with pytest.raises(SourceError, match="expected this pyslurm to expose a job's allocated"):
        job_lines([Bare()])


@pytest.mark.skipif(importlib.util.find_spec("pyslurm") is not None,
                    reason="pyslurm is installed here")
def test_missing_pyslurm_is_a_clear_error():
    with pytest.raises(SourceError, match="optional pyslurm package"):
        PySlurmSource()


@pytest.mark.skipif(importlib.util.find_spec("pyslurm") is None,
                    reason="pyslurm (optional extra, Slurm 25.11 only) is not installed")
def test_live_pyslurm_window_parses():
    parsed = PySlurmSource().window(datetime(2026, 1, 1), datetime(2026, 1, 2))
    parsed.check_counts()
