"""``scontrol`` on shared GPUs (docs/shared-gpus.md), real Slurm 22.05 output
(tests/fixtures/slurm/sharing/README.md):

- ``scontrol show job -d``: a MIG-typed ``GRES=gpu:1g.10gb:2(IDX:0-1)`` gives
  ``slurm_gpu_indices`` rows with ``sharing`` ``mig`` and the profile; ``mps:50(IDX:0)`` a row of
  50 MPS units on GPU 0; ``shard(CNT:2)`` (22.05 names no GPU) no row; an untyped job on a MIG
  node prints the other type as ``gpu:a100_3g.20gb:0(IDX:)``, which is none, not a bad block.
- ``scontrol -o show node`` ``Gres=``: ``node_gpu_slices`` rows (source ``scontrol``),
  effective-dated: a changed layout closes the node's rows and opens new ones.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from connectors.slurm.scontrol import parse_scontrol_jobs
from connectors.slurm.scontrol_nodes import node_slices, parse_scontrol_nodes
from gpuledger.ingest.reference import write_cluster_reference
from gpuledger.ingest.reference_read import ClusterReference
from models.runner import ensure_schema

SHARING = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sharing"
JOBS = SHARING / "scontrol-show-job-d.txt"
NODES = SHARING / "scontrol-o-show-node.txt"


def _jobs() -> pl.DataFrame:
    parsed = parse_scontrol_jobs(JOBS.read_text(), source_file=str(JOBS))
    assert parsed.rejects == []
    return parsed.gpus


def test_mig_instances_are_placed_by_their_gres_index():
    rows = _jobs().filter(pl.col("sharing") == "mig").select(
        "job_id", "node", "gpu_index", "gpu_model", "slice_profile", "units").rows()
    assert rows == [
        ("1", "mig-01", 0, "1g.10gb", "1g.10gb", 1), ("1", "mig-01", 1, "1g.10gb", "1g.10gb", 1),
        ("2", "mig-01", 7, "a100_3g.20gb", "3g.20gb", 1),
        ("3", "mig-01", 2, "1g.10gb", "1g.10gb", 1),
        ("3", "mig-01", 8, "a100_3g.20gb", "3g.20gb", 1),
        ("4", "mig-01", 3, "1g.10gb", "1g.10gb", 1),  # gpu:a100_3g.20gb:0(IDX:) is none
    ]


def test_mps_units_are_placed_on_their_gpu():
    rows = _jobs().filter(pl.col("sharing") == "mps").select(
        "job_id", "node", "gpu_index", "units").rows()
    assert rows == [("7", "shard-01", 0, 50)]


def test_shards_without_a_gpu_give_no_row():
    assert _jobs().filter(pl.col("node") == "shard-01")["job_id"].to_list() == ["7"]


def test_whole_gpus_are_still_whole():
    text = (SHARING.parents[1] / "real_slurm" / "scontrol-show-job-d-running-gpu.txt").read_text()
    gpus = parse_scontrol_jobs(text, source_file="x").gpus
    assert gpus.height > 0
    assert gpus["sharing"].is_null().all()
    assert gpus["units"].to_list() == [1] * gpus.height


def test_node_gres_gives_the_shared_capacity():
    nodes, rejects = parse_scontrol_nodes(NODES.read_text())
    assert rejects == []
    assert node_slices(nodes).rows() == [
        # 7 x 1g + 2 x 3g = 13 of 7 compute slices: two A100s
        ("mig-01", "mig", "1g.10gb", 7, 2, 1, 7, None),
        ("mig-01", "mig", "3g.20gb", 2, 2, 3, 7, None),
        ("shard-01", "shard", None, 8, 2, 4, None, None),
        ("shard-01", "mps", None, 200, 2, 100, None, None),
    ]


def _reference(text: str, at: datetime) -> ClusterReference:
    nodes, _ = parse_scontrol_nodes(text)
    return ClusterReference("c", at, slurm_nodes=nodes, slurm_slices=node_slices(nodes))


def test_node_gpu_slices_follow_the_layout_over_time(tmp_path: Path):
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    text = NODES.read_text()
    t1, t2 = datetime(2026, 12, 1), datetime(2026, 12, 2)
    lines = write_cluster_reference(con, _reference(text, t1), None, frozenset({"nodes"}))
    assert "c: shared GPUs (scontrol): 4 node slice row(s); node_gpu_slices: 4 opened, " \
           "0 closed" in lines
    # the same reading again changes nothing
    write_cluster_reference(con, _reference(text, t1), None, frozenset({"nodes"}))
    assert con.execute("SELECT count(*) FROM node_gpu_slices").fetchone() == (4,)
    # GPU 1 of mig-01 re-cut into 7 x 1g.10gb: the 3g row closes, the 1g row changes
    recut = text.replace("Gres=gpu:1g.10gb:7,gpu:a100_3g.20gb:2", "Gres=gpu:1g.10gb:14")
    write_cluster_reference(con, _reference(recut, t2), None, frozenset({"nodes"}))
    rows = con.execute(
        "SELECT node, sharing, slice_profile, units, source, valid_from, valid_to "
        "FROM node_gpu_slices WHERE node = 'mig-01' ORDER BY valid_from, slice_profile"
    ).fetchall()
    assert rows == [
        ("mig-01", "mig", "1g.10gb", 7, "scontrol", t1, t2),
        ("mig-01", "mig", "3g.20gb", 2, "scontrol", t1, t2),
        ("mig-01", "mig", "1g.10gb", 14, "scontrol", t2, None),
    ]
