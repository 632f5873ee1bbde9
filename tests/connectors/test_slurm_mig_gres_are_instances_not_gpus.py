"""A Slurm GRES type naming a MIG profile (``gres/gpu:1g.10gb``, ``gres/gpu:a100_3g.20gb``) is
MIG instances, not whole GPUs (docs/shared-gpus.md): sacct's ``gres/gpu=N`` of such a job
counts instances, and ``slurm_node_allocations`` says so (``sharing`` ``mig``, the profile).
A job holding whole GPUs and MIG instances, or two profiles, gets a row of each.

Real shapes: Slurm 22.05 on the suite's MIG node (tests/fixtures/slurm/sharing/README.md).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.slurm.parse import allocations_per_node, parse_sacct
from gpuledger.ingest.slurm.run import import_sacct_file
from models.runner import ensure_schema
from tests.connectors.slurm.dumps import alloc, dump

SHARING = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sharing"
SACCT = SHARING / "sacct-unitsep.txt"


def _per_node(*rows: dict[str, str]) -> pl.DataFrame:
    runs = parse_sacct(dump(list(rows)), source_file="d").runs
    return allocations_per_node(runs)


def _pieces(per: pl.DataFrame) -> list[tuple]:
    return per.select("node", "sharing", "slice_profile", "gpus", "gpu_model").rows()


def test_a_mig_profile_type_is_instances_of_that_profile():
    per = _per_node(alloc(AllocTRES="cpu=2,gres/gpu:1g.10gb=2,gres/gpu=2,mem=2000M,node=1",
                          NodeList="mig-01"))
    assert _pieces(per) == [("mig-01", "mig", "1g.10gb", 2, "")]


def test_the_model_prefix_of_a_mig_type_is_the_physical_gpu_model():
    per = _per_node(alloc(AllocTRES="cpu=2,gres/gpu:a100_3g.20gb=1,gres/gpu=1,node=1",
                          NodeList="mig-01"))
    assert _pieces(per) == [("mig-01", "mig", "3g.20gb", 1, "a100")]


def test_autodetected_nvml_mig_type_names_are_mig_too():
    per = _per_node(alloc(AllocTRES="cpu=2,gres/gpu:nvidia_h100_80gb_hbm3_4g.40gb=1,gres/gpu=1",
                          NodeList="h100-01"))
    assert _pieces(per) == [("h100-01", "mig", "4g.40gb", 1, "nvidia_h100_80gb_hbm3")]


def test_whole_gpus_and_mig_instances_in_one_job_get_a_row_each():
    # 2 = one whole a100 + one 1g.10gb instance: never two whole GPUs
    per = _per_node(alloc(
        AllocTRES="cpu=2,gres/gpu:1g.10gb=1,gres/gpu:a100=1,gres/gpu=2,node=1", NodeList="n1"))
    assert _pieces(per) == [("n1", None, None, 1, "a100"), ("n1", "mig", "1g.10gb", 1, "")]
    assert per["gpus"].sum() == 2


def test_two_mig_profiles_in_one_job_get_a_row_each():
    per = _per_node(alloc(
        AllocTRES="cpu=2,gres/gpu:1g.10gb=1,gres/gpu:a100_3g.20gb=1,gres/gpu=2,node=1",
        NodeList="mig-01"))
    assert _pieces(per) == [("mig-01", "mig", "1g.10gb", 1, ""),
                            ("mig-01", "mig", "3g.20gb", 1, "a100")]


def test_mig_instances_of_a_multi_node_job_are_split_like_gpus():
    per = _per_node(alloc(AllocTRES="cpu=4,gres/gpu:1g.10gb=3,gres/gpu=3,node=2",
                          NodeList="mig-[01-02]", AllocNodes="2"))
    assert per.select("node", "gpus", "sharing", "gpus_source").rows() == [
        ("mig-01", 2, "mig", "even_split"), ("mig-02", 1, "mig", "even_split")]


def test_whole_gpu_jobs_keep_their_rows():
    per = _per_node(alloc(), alloc(JobID="101", JobIDRaw="101", NodeList="a100-[01-02]",
                                   AllocNodes="2",
                                   AllocTRES="cpu=4,gres/gpu:a100=5,gres/gpu=5,node=2"))
    assert per.select("node", "gpus", "gpu_model", "sharing", "slice_profile").rows() == [
        ("a100-01", 1, "a100", None, None), ("a100-01", 3, "a100", None, None),
        ("a100-02", 2, "a100", None, None)]


def test_alloc_gpu_types_keeps_every_typed_key():
    runs = parse_sacct(SACCT.read_text(), source_file=str(SACCT)).runs
    mixed = runs.filter(pl.col("job_name") == "mig-two-profiles")
    assert mixed["alloc_gpu_types"].to_list() == [[{"model": "1g.10gb", "gpus": 1},
                                                   {"model": "a100_3g.20gb", "gpus": 1}]]
    assert mixed["alloc_gpus"].to_list() == [2]  # gres/gpu= as sacct prints it


@pytest.mark.parametrize(("job_name", "pieces"), [
    ("mig-small", [("mig-01", "mig", "1g.10gb", 2, "")]),
    ("mig-medium", [("mig-01", "mig", "3g.20gb", 1, "a100")]),
    ("mig-two-profiles", [("mig-01", "mig", "1g.10gb", 1, ""),
                          ("mig-01", "mig", "3g.20gb", 1, "a100")]),
    # --gres=gpu:1 untyped on the MIG node: Slurm records the type it gave (gres/gpu:1g.10gb=1)
    ("mig-any", [("mig-01", "mig", "1g.10gb", 1, "")]),
])
def test_real_slurm_mig_jobs(job_name: str, pieces: list[tuple]):
    runs = parse_sacct(SACCT.read_text(), source_file=str(SACCT)).runs
    per = allocations_per_node(runs.filter(pl.col("job_name") == job_name))
    assert _pieces(per) == pieces


def test_the_ledger_stores_one_row_per_run_node_and_profile(tmp_path: Path):
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    load = import_sacct_file(con, SACCT)
    assert load.rejects == ()
    rows = con.execute(
        "SELECT r.job_name, n.sharing, n.slice_profile, n.gpus FROM slurm_node_allocations n "
        "JOIN slurm_runs r USING (run_key) WHERE n.sharing = 'mig' "
        "ORDER BY r.job_id_raw, n.slice_profile").fetchall()
    assert rows == [("mig-small", "mig", "1g.10gb", 2), ("mig-medium", "mig", "3g.20gb", 1),
                    ("mig-two-profiles", "mig", "1g.10gb", 1),
                    ("mig-two-profiles", "mig", "3g.20gb", 1), ("mig-any", "mig", "1g.10gb", 1)]
    dupes = con.execute(
        "SELECT count(*) FROM (SELECT run_key, node, sharing, slice_profile, count(*) AS n "
        "FROM slurm_node_allocations GROUP BY ALL HAVING n > 1)").fetchone()
    assert dupes == (0,)
