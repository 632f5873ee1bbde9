"""Slurm shards (``gres/shard=N``) and MPS units (``gres/mps=N``) of a shared GPU are read from
AllocTRES into ``slurm_runs.alloc_shards`` / ``alloc_mps`` and give ``slurm_node_allocations`` rows
with ``sharing`` ``shard`` / ``mps`` and ``gpus`` = shards / MPS units (docs/shared-gpus.md).
Before, such a job had no GPU and no row: its GPU time was invisible.

Real shapes: Slurm 22.05 on the suite's shard node (tests/fixtures/slurm/sharing/README.md).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from connectors.slurm.parse import allocations_per_node, parse_sacct
from gpuledger.ingest.slurm.run import import_sacct_file
from models.runner import ensure_schema
from tests.connectors.slurm.dumps import alloc, dump

SACCT = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sharing" / "sacct-unitsep.txt"


def _runs(*rows: dict[str, str]) -> pl.DataFrame:
    return parse_sacct(dump(list(rows)), source_file="d").runs


def test_shards_and_mps_units_are_columns_of_the_run():
    runs = _runs(alloc(AllocTRES="billing=2,cpu=2,gres/shard=3,mem=2000M,node=1"),
                 alloc(JobID="101", JobIDRaw="101", AllocTRES="cpu=2,gres/mps=50,node=1"),
                 alloc(JobID="102", JobIDRaw="102"))
    assert runs.select("alloc_gpus", "alloc_shards", "alloc_mps").rows() == [
        (0, 3, None), (0, None, 50), (1, None, None)]


def test_a_shard_job_holds_its_shards_on_its_node():
    per = allocations_per_node(_runs(alloc(NodeList="shard-01",
                                           AllocTRES="cpu=2,gres/shard=2,node=1")))
    assert per.select("node", "sharing", "slice_profile", "gpus", "gpus_source").rows() == [
        ("shard-01", "shard", None, 2, "single_node")]


def test_the_gpu_model_of_a_shard_row_is_the_nodes():
    per = allocations_per_node(_runs(alloc(NodeList="shard-01",
                                           AllocTRES="cpu=2,gres/mps=100,node=1")),
                               {"shard-01": "l40s"})
    assert per.select("sharing", "gpus", "gpu_model").rows() == [("mps", 100, "l40s")]


def test_shards_of_a_multi_node_job_are_split_evenly():
    per = allocations_per_node(_runs(alloc(NodeList="s[1-2]", AllocNodes="2",
                                           AllocTRES="cpu=4,gres/shard=5,node=2")))
    assert per.select("node", "gpus", "gpus_source").rows() == [
        ("s1", 3, "even_split"), ("s2", 2, "even_split")]


def test_a_cpu_only_job_still_has_no_row():
    runs = _runs(alloc(AllocTRES="cpu=2,mem=2000M,node=1"))
    assert allocations_per_node(runs).height == 0
    with_cpu = allocations_per_node(runs, include_cpu_only=True)
    assert with_cpu.select("gpus", "sharing").rows() == [(0, None)]


def test_real_slurm_shard_and_mps_jobs_are_stored(tmp_path: Path):
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    import_sacct_file(con, SACCT)
    runs = con.execute(
        "SELECT job_name, alloc_gpus, alloc_shards, alloc_mps FROM slurm_runs "
        "WHERE job_name IN ('shard-two', 'shard-three', 'mps-half') ORDER BY job_id_raw"
    ).fetchall()
    assert runs == [("shard-two", 0, 2, None), ("shard-three", 0, 3, None),
                    ("mps-half", 0, None, 50)]
    per = con.execute(
        "SELECT r.job_name, n.node, n.sharing, n.gpus FROM slurm_node_allocations n "
        "JOIN slurm_runs r USING (run_key) WHERE n.sharing IN ('shard', 'mps') "
        "ORDER BY r.job_id_raw").fetchall()
    assert per == [("shard-two", "shard-01", "shard", 2), ("shard-three", "shard-01", "shard", 3),
                   ("mps-half", "shard-01", "mps", 50)]


def test_the_streamed_load_reads_them_too(tmp_path: Path):
    from gpuledger.ingest.slurm.stream_load import stream_sacct_file

    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    stream_sacct_file(con, SACCT, delimiter=None, timezone="UTC", observed_until=None)
    assert con.execute(
        "SELECT sharing, slice_profile, sum(gpus) FROM slurm_node_allocations GROUP BY ALL "
        "ORDER BY ALL").fetchall() == [("mig", "1g.10gb", 4), ("mig", "3g.20gb", 2),
                                       ("mps", None, 50), ("shard", None, 5)]
    assert con.execute("SELECT sum(alloc_shards), sum(alloc_mps) FROM slurm_runs").fetchone() \
        == (5, 50)
