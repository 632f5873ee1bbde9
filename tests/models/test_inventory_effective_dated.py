"""The GPU inventory keeps its history (node_inventory): a node that moves between pools or
changes its GPU count gets its old row closed and a new one opened; a re-read with nothing
changed changes nothing; the nodes file overrides the sources per node
(gpuledger/ingest/reference.py)."""

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm_nodes import KSM_NODE_SCHEMA
from connectors.reference_files import read_nodes
from connectors.slurm.scontrol_nodes import parse_scontrol_nodes
from gpuledger.ingest.reference import import_nodes_file, write_inventory
from gpuledger.ingest.reference_read import merge_sources, with_file_override
from models.runner import connect, ensure_schema

T1, T2, T3 = datetime(2026, 1, 5), datetime(2026, 1, 6), datetime(2026, 1, 7)
SLURM = ("NodeName=gpu-a Gres=gpu:a100:8(S:0-1) State=IDLE Partitions=gpu\n"
         "NodeName=gpu-c Gres=gpu:h100:4(S:0) State=IDLE Partitions=shared")


def ksm(*rows: tuple[str, int]) -> pl.DataFrame:
    return pl.DataFrame([{"node": n, "gpu_model": "h100", "gpu_product": "NVIDIA-H100-80GB-HBM3",
                          "gpu_count": c, "capacity_gpus": c, "replicas": 1, "mig": False,
                          "observed_at": T1} for n, c in rows], schema=KSM_NODE_SCHEMA)


@pytest.fixture
def con(tmp_path: Path):
    with connect(tmp_path / "l.duckdb") as c:
        ensure_schema(c)
        yield c


def history(con) -> list[tuple]:
    return con.execute("SELECT node, gpu_model, gpu_count, pool, source, valid_from, valid_to "
                       "FROM node_inventory ORDER BY node, valid_from").fetchall()


def write(con, slurm_text: str, k8s: pl.DataFrame, at: datetime, file_rows=None):
    slurm, _ = parse_scontrol_nodes(slurm_text)
    gpus = with_file_override(merge_sources("c1", slurm, k8s), file_rows)
    return write_inventory(con, "c1", gpus, at)


def test_pools_come_from_which_scheduler_lists_the_node(con):
    write(con, SLURM, ksm(("gpu-b", 4), ("gpu-c", 4)), T1)
    assert history(con) == [
        ("gpu-a", "a100", 8, "slurm", "scontrol", T1, None),
        ("gpu-b", "h100", 4, "kubernetes", "ksm", T1, None),
        ("gpu-c", "h100", 4, "shared", "scontrol+ksm", T1, None),
    ]
    gpus = con.execute("SELECT node, count(*), count(gpu_uuid), max(gpu_index) FROM nodes "
                       "GROUP BY node ORDER BY node").fetchall()
    assert gpus == [("gpu-a", 8, 0, 7), ("gpu-b", 4, 0, 3), ("gpu-c", 4, 0, 3)]


def test_a_reread_with_nothing_changed_changes_nothing(con):
    write(con, SLURM, ksm(("gpu-b", 4)), T1)
    before = history(con)
    change = write(con, SLURM, ksm(("gpu-b", 4)), T2)
    assert (change.opened, change.closed) == (0, 0)
    assert history(con) == before


def test_pool_move_and_count_change_close_the_old_row_and_open_a_new_one(con):
    write(con, SLURM, ksm(("gpu-b", 4)), T1)
    # gpu-a joins Kubernetes (now shared); gpu-b gets 8 GPUs; gpu-c leaves Slurm entirely
    change = write(con, "NodeName=gpu-a Gres=gpu:a100:8 State=IDLE Partitions=gpu",
                   ksm(("gpu-a", 8), ("gpu-b", 8)), T2)
    assert (change.opened, change.closed) == (2, 3)
    assert history(con) == [
        ("gpu-a", "a100", 8, "slurm", "scontrol", T1, T2),
        ("gpu-a", "a100", 8, "shared", "scontrol+ksm", T2, None),
        ("gpu-b", "h100", 4, "kubernetes", "ksm", T1, T2),
        ("gpu-b", "h100", 8, "kubernetes", "ksm", T2, None),
        ("gpu-c", "h100", 4, "slurm", "scontrol", T1, T2),
    ]
    assert con.execute("SELECT DISTINCT node FROM nodes ORDER BY 1").fetchall() == [
        ("gpu-a",), ("gpu-b",)]


def test_an_older_reading_does_not_rewrite_newer_history(con):
    write(con, SLURM, ksm(), T2)
    write(con, "NodeName=gpu-a Gres=gpu:a100:4 State=IDLE Partitions=gpu", ksm(), T1)
    assert [r[2] for r in history(con) if r[0] == "gpu-a"] == [8]


def test_the_nodes_file_overrides_the_sources_per_node(con, tmp_path: Path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "node,pool,gpu_model,gpu_count,gpu_index,gpu_uuid,slurm_partition\n"
        "gpu-a,slurm,a100,2,0,GPU-1,gpu\ngpu-a,slurm,a100,2,1,GPU-2,gpu\n", encoding="utf-8")
    file_rows, rejects = read_nodes(nodes)
    assert rejects == []
    write(con, SLURM, ksm(("gpu-a", 8)), T1, file_rows.with_columns(cluster=pl.lit("c1")))
    rows = {r[0]: r for r in history(con)}
    assert rows["gpu-a"][1:5] == ("a100", 2, "slurm", "nodes_file")
    assert rows["gpu-c"][4] == "scontrol"  # not in the file: the sources' word stands
    assert con.execute("SELECT gpu_uuid FROM nodes WHERE node = 'gpu-a' ORDER BY gpu_index"
                       ).fetchall() == [("GPU-1",), ("GPU-2",)]


def test_import_nodes_file_keeps_history_too(con, tmp_path: Path):
    write(con, SLURM, ksm(), T1)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("node,pool,gpu_model,gpu_count,gpu_index,gpu_uuid,slurm_partition\n"
                     "gpu-a,shared,a100,1,0,GPU-1,gpu\n", encoding="utf-8")
    result = import_nodes_file(con, nodes, "c1", at=T2)
    assert result.rows == 1
    assert [(r[0], r[3], r[6]) for r in history(con)] == [
        ("gpu-a", "slurm", T2), ("gpu-a", "shared", None), ("gpu-c", "slurm", T2)]
