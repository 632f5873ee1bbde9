"""The parsers against real Slurm 22.05 output (``tests/fixtures/real_slurm``, see its README)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from connectors.slurm.parse import SacctParse, allocations_per_node, parse_sacct
from connectors.slurm.sreport import parse_account_utilization_by_user, parse_cluster_utilization

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_slurm"

SACCT_FILES = {  # file -> the TZ sacct ran with
    "sacct-unitsep-epoch.txt": "UTC",
    "sacct-P-europe-berlin.txt": "Europe/Berlin",
    "sacct-cancelled-pending-unitsep-epoch.txt": "UTC",
    "sacct-running-unitsep-epoch.txt": "UTC",
    "sacct-running-P-europe-berlin.txt": "Europe/Berlin",
}

pytestmark = pytest.mark.skipif(
    not (REAL / "manifest.tsv").is_file(), reason="no real Slurm captures in tests/fixtures"
)


def _parse(name: str) -> SacctParse:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"{name} not captured")
    return parse_sacct(path, timezone=SACCT_FILES[name], source_file=name)


def _manifest(name: str = "manifest.tsv") -> dict[str, dict[str, str]]:
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = [dict(zip(header, ln.split("\t"), strict=False)) for ln in lines[1:] if ln]
    return {r["kind"]: r for r in rows}


@pytest.mark.parametrize("name", list(SACCT_FILES))
def test_every_line_loads_or_is_rejected_with_a_reason(name: str):
    r = _parse(name)
    r.check_counts()
    text = (REAL / name).read_text(encoding="utf-8")
    assert r.lines_read == len(text.splitlines()) - 1
    for rej in r.rejects:  # none expected; if any, each must say why
        assert rej.reason.startswith(("expected", "ambiguous")), rej.describe()
    assert r.rejects == []


def test_both_variants_give_identical_runs_and_steps():
    a = _parse("sacct-unitsep-epoch.txt")
    b = _parse("sacct-P-europe-berlin.txt")
    drop = ("source_file", "line_no")
    assert a.runs.drop(drop).equals(b.runs.drop(drop))
    assert a.steps.drop(drop).equals(b.steps.drop(drop))


def test_pipe_name_is_recovered_in_the_plain_variant():
    job = _manifest()["name-pipe"]["jobid"]
    for name in ("sacct-P-europe-berlin.txt", "sacct-unitsep-epoch.txt"):
        runs = _parse(name).runs.filter(pl.col("job_id") == job)
        assert runs["job_name"].to_list() == ["train|resnet50"]


def test_unicode_name_survives():
    job = _manifest()["name-unicode"]["jobid"]
    runs = _parse("sacct-P-europe-berlin.txt").runs.filter(pl.col("job_id") == job)
    assert runs["job_name"].to_list() == ["モデル学習-ü-🚀"]


def test_requeued_job_has_two_runs_each_with_its_steps():
    job = _manifest()["requeue"]["jobid"]
    r = _parse("sacct-unitsep-epoch.txt")
    runs = r.runs.filter(pl.col("job_id") == job).sort("submit")
    assert runs["state"].to_list() == ["REQUEUED", "COMPLETED"]
    keys = runs["run_key"].to_list()
    assert len(set(keys)) == 2
    assert all(re.fullmatch(rf"gpuledger:{job}:\d+", k) for k in keys)
    assert runs["submit"][1] > runs["submit"][0]  # Submit is reset at the requeue
    steps = r.steps.filter(pl.col("job_id") == job)
    for key in keys:
        assert sorted(steps.filter(pl.col("run_key") == key)["step_id"]) == ["batch", "extern"]
    first = steps.filter(pl.col("run_key") == keys[0])
    assert first.filter(pl.col("step_id") == "batch")["exit_signal"].to_list() == [15]


#: GPUs per allocation as submitted by tests/services/slurm/submit-jobs.sh (by job kind).
SUBMITTED_GPUS = {
    "timeout": 0, "requeue": 1, "cancel-running": 1, "gpu-1-typed": 1, "gpu-2-untyped": 2,
    "gpu-3-untyped-gres": 3, "gpu-4-h100": 4, "gpu-8-a100": 8, "two-node": 4, "array": 1,
    "multistep": 2, "fail-exit1": 1, "name-pipe": 1, "name-unicode": 1,
}


def _note_gpus(note: str) -> int | None:
    """GPUs the manifest note states (``--gres=gpu:a100:2``, ``--gpus=2``, ``-N2``), if any."""
    m = re.search(r"--gpus=(\d+)|(?:gpu|a100|h100)(?::[a-z0-9]+)?:(\d+)", note)
    if m is None:
        return None
    nodes = re.search(r"-N(\d+)", note)
    return int(next(g for g in m.groups() if g)) * (int(nodes.group(1)) if nodes else 1)


def test_gpu_counts_match_the_manifest():
    r = _parse("sacct-unitsep-epoch.txt")
    manifest = _manifest()
    assert set(SUBMITTED_GPUS) <= set(manifest)
    for kind, gpus in SUBMITTED_GPUS.items():
        row = manifest[kind]
        note = _note_gpus(row["note"])
        assert note is None or note == gpus, kind
        runs = r.runs.filter(
            (pl.col("job_id") == row["jobid"]) | (pl.col("array_job_id") == int(row["jobid"]))
        )
        assert runs.height >= 1, kind
        assert set(runs["alloc_gpus"].to_list()) == {gpus}, kind


def test_array_and_multi_node_details():
    m = _manifest()
    r = _parse("sacct-unitsep-epoch.txt")
    arr = r.runs.filter(pl.col("array_job_id") == int(m["array"]["jobid"])).sort("array_task_id")
    assert arr["array_task_id"].to_list() == [0, 1, 2, 3]
    assert arr["job_id_raw"][-1] == int(m["array"]["jobid"])  # the last task reuses the id
    assert arr.filter(pl.col("array_task_id") == 2)["exit_code"].to_list() == [2]
    two = r.runs.filter(pl.col("job_id") == m["two-node"]["jobid"]).row(0, named=True)
    assert (two["nodes"], two["alloc_gpus"], two["alloc_nodes"]) == (["a100-01", "a100-02"], 4, 2)
    per_node = allocations_per_node(r.runs).filter(pl.col("run_key") == two["run_key"])
    assert per_node.select("node", "gpus", "gpu_model").rows() == [
        ("a100-01", 2, "a100"), ("a100-02", 2, "a100")]
    multi = r.runs.filter(pl.col("job_id") == m["multistep"]["jobid"]).row(0, named=True)
    assert (multi["exit_code"], multi["derived_exit_code"]) == (0, 3)
    steps = r.steps.filter(pl.col("job_id") == m["multistep"]["jobid"]).sort("line_no")
    assert steps["step_name"].to_list()[2:] == ["preprocess", "train", "evaluate", "report"]


def test_cancelled_states_and_never_started_job():
    m = _manifest()
    r = _parse("sacct-unitsep-epoch.txt")
    cancelled = r.runs.filter(pl.col("job_id") == m["cancel-running"]["jobid"]).row(0, named=True)
    assert (cancelled["state"], cancelled["cancelled_by_uid"]) == ("CANCELLED", 20001)
    pending = _parse("sacct-cancelled-pending-unitsep-epoch.txt").runs.row(0, named=True)
    assert pending["nodes"] == []
    assert pending["alloc_gpus"] == 0
    assert pending["req_gpus"] == 4
    assert pending["eligible"] is None
    assert pending["elapsed_s"] == 0


@pytest.mark.parametrize("name", ["sacct-running-unitsep-epoch.txt",
                                  "sacct-running-P-europe-berlin.txt"])
def test_running_job(name: str):
    r = _parse(name)
    row = r.runs.row(0, named=True)
    assert row["state"] == "RUNNING"
    assert row["end"] is None
    assert row["alloc_gpus"] == 2
    assert r.steps["state"].to_list() == ["RUNNING", "RUNNING"]


def test_sacct_reconciles_with_sreport_to_the_gpu_second():
    runs = _parse("sacct-unitsep-epoch.txt").runs
    util = parse_cluster_utilization(REAL / "sreport-cluster-utilization-gpu.txt",
                                     source_file="u.txt")
    gpu_seconds = runs.select((pl.col("alloc_gpus") * pl.col("elapsed_s")).sum()).item()
    assert util.filter(pl.col("tres_name") == "gres/gpu")["allocated_seconds"].item() == gpu_seconds

    by_user = parse_account_utilization_by_user(
        REAL / "sreport-account-utilization-by-user-gpu.txt", source_file="a.txt"
    )
    users = by_user.filter(~pl.col("is_account_total"))
    ours = runs.group_by("account", "user").agg(
        (pl.col("alloc_gpus") * pl.col("elapsed_s")).sum().alias("ours")
    )
    joined = users.join(ours, left_on=["account", "login"], right_on=["account", "user"])
    assert joined.height == users.height
    assert (joined["used_seconds"] == joined["ours"]).all()
    root = by_user.filter(pl.col("account") == "root")["used_seconds"].item()
    assert root == users["used_seconds"].sum() == gpu_seconds


def test_typed_sreport_rows():
    util = parse_cluster_utilization(REAL / "sreport-cluster-utilization-gpu-typed.txt",
                                     source_file="u.txt")
    assert util["tres_name"].to_list() == ["gres/gpu", "gres/gpu:a100", "gres/gpu:h100"]
    total, a100, h100 = util["allocated_seconds"].to_list()
    assert total == a100 + h100
    runs = _parse("sacct-unitsep-epoch.txt").runs
    per_model = (
        runs.explode("alloc_gpu_types").unnest("alloc_gpu_types")
        .group_by("model").agg((pl.col("gpus") * pl.col("elapsed_s")).sum())
    )
    assert dict(per_model.rows()) == {"a100": a100, "h100": h100}
    by_user = parse_account_utilization_by_user(
        REAL / "sreport-account-utilization-by-user-gpu-typed.txt", source_file="a.txt"
    )
    assert by_user.height == 27
    assert by_user["used_seconds"].min() == 0
