"""Slurm GPU type names as AutoDetect=nvml writes them (issue #27 item 6; docs/shared-gpus.md):
``nvidia_h100_80gb_hbm3`` is a whole GPU of that model, ``nvidia_h100_80gb_hbm3_3g.40gb`` a MIG
instance of profile ``3g.40gb`` (3/7 of an H100), ``nvidia_a100_1c.3g.20gb`` a compute instance
holding 1 of the A100's 7 compute slices (profile ``1c.3g.20gb``), never a whole GPU. Read alike
from sacct ``AllocTRES``, ``scontrol show job -d`` ``GRES=`` and ``scontrol -o show node``
``Gres=``; Slurm 23.11.2+'s per-GPU detail of shared GRES (``mps:50(0/100,50/100)``) is read.

The names come from Slurm's ``gpu_nvml.c``; the fixtures and their sources:
tests/fixtures/slurm/autodetect/README.md.
"""

from __future__ import annotations

import csv
from fractions import Fraction
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.gpu_sharing import (
    MIG,
    Sharing,
    gpu_slices,
    mig_compute_slices,
    slurm_gpu_type,
    slurm_gres,
)
from connectors.slurm.parse import allocations_per_node, parse_sacct
from connectors.slurm.scontrol import parse_scontrol_jobs
from connectors.slurm.scontrol_nodes import node_slices, parse_scontrol_nodes
from gpuledger.ingest.slurm.run import import_sacct_file
from models.runner import ensure_schema
from tests.connectors.slurm.dumps import alloc, dump

AUTODETECT = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "autodetect"
ALLOC_TRES = AUTODETECT / "sacct-alloctres.tsv"
JOBS = AUTODETECT / "scontrol-show-job-d.txt"
NODES = AUTODETECT / "scontrol-o-show-node.txt"

H100 = "nvidia_h100_80gb_hbm3"


@pytest.mark.parametrize(("gres_type", "expected"), [
    # a GPU not in MIG mode: its NVML name, lower case, spaces as _ (a model, never a profile)
    (H100, Sharing(None, None, H100)),
    ("nvidia_a100-sxm4-40gb", Sharing(None, None, "nvidia_a100-sxm4-40gb")),
    # MIG: the name up to its first '-', then _<profile>
    (f"{H100}_3g.40gb", Sharing(MIG, "3g.40gb", H100)),
    ("nvidia_a100_3g.20gb", Sharing(MIG, "3g.20gb", "nvidia_a100")),
    # a compute instance narrower than its GPU instance: <c>c.<g>g.<mem>gb
    ("nvidia_a100_1c.3g.20gb", Sharing(MIG, "1c.3g.20gb", "nvidia_a100")),
    (f"{H100}_2c.4g.40gb", Sharing(MIG, "2c.4g.40gb", H100)),
    # Slurm compares GRES types without case
    ("NVIDIA_A100_1C.3G.20GB", Sharing(MIG, "1c.3g.20gb", "nvidia_a100")),
])
def test_autodetect_type_names(gres_type: str, expected: Sharing):
    assert slurm_gpu_type(gres_type) == expected
    assert slurm_gres(f"gres/gpu:{gres_type}") == expected


@pytest.mark.parametrize(("gres_type", "share"), [
    ("nvidia_a100_1c.3g.20gb", Fraction(1, 7)),  # 1 compute slice of the A100's 7
    (f"{H100}_3g.40gb", Fraction(3, 7)),
    (f"{H100}_2c.4g.40gb", Fraction(2, 7)),
    ("nvidia_a30_1c.2g.12gb", Fraction(1, 4)),  # an A30 has 4 compute slices
])
def test_a_mig_type_is_charged_its_compute_slices_of_the_gpu(gres_type: str, share: Fraction):
    s = slurm_gpu_type(gres_type)
    assert Fraction(s.compute_slices, gpu_slices(s.model)) == share


def test_a_bad_profile_says_what_was_expected():
    with pytest.raises(ValueError, match=r"expected a MIG profile such as 3g\.40gb or "
                       r"1c\.3g\.20gb, found '3g'"):
        mig_compute_slices("3g")


def _sacct_rows() -> list[dict[str, str]]:
    with ALLOC_TRES.open(newline="") as f:
        return [alloc(JobID=str(300 + i), JobIDRaw=str(300 + i), **row)
                for i, row in enumerate(csv.DictReader(f, delimiter="\t"))]


def _pieces() -> dict[str, list[tuple]]:
    parsed = parse_sacct(dump(_sacct_rows()), source_file=str(ALLOC_TRES))
    assert parsed.rejects == []
    per = allocations_per_node(parsed.runs).join(
        parsed.runs.select("run_key", "job_name"), on="run_key")
    out: dict[str, list[tuple]] = {}
    for name, *piece in per.select("job_name", "node", "sharing", "slice_profile", "gpus",
                                   "gpu_model").rows():
        out.setdefault(name, []).append(tuple(piece))
    return out


def test_sacct_alloctres_with_autodetect_types():
    assert _pieces() == {
        "whole-h100": [("h100-01", None, None, 2, H100)],
        "mig-h100-3g": [("h100-mig-01", MIG, "3g.40gb", 1, H100)],
        "ci-a100-1c": [("a100-ci-01", MIG, "1c.3g.20gb", 1, "nvidia_a100")],
        # 3 = one whole A100 + two compute instances, never three whole GPUs
        "whole-and-ci": [("a100-ci-01", None, None, 1, "nvidia_a100-sxm4-40gb"),
                         ("a100-ci-01", MIG, "1c.3g.20gb", 2, "nvidia_a100")],
    }


def test_physical_gpus_charged_per_sacct_job():
    def physical(pieces: list[tuple]) -> Fraction:
        shares = [Fraction(gpus) if sharing is None else Fraction(
            gpus * Sharing(sharing, profile).compute_slices, gpu_slices(model))
            for _, sharing, profile, gpus, model in pieces]
        return sum(shares, Fraction(0))

    assert {name: physical(p) for name, p in _pieces().items()} == {
        "whole-h100": 2, "mig-h100-3g": Fraction(3, 7), "ci-a100-1c": Fraction(1, 7),
        "whole-and-ci": 1 + Fraction(2, 7)}


def test_the_ledger_keeps_the_compute_instance_profile(tmp_path: Path):
    path = tmp_path / "sacct.txt"
    path.write_text(dump(_sacct_rows()))
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    assert import_sacct_file(con, path).rejects == ()
    rows = con.execute(
        "SELECT r.job_name, n.sharing, n.slice_profile, n.gpus, n.gpu_model "
        "FROM slurm_node_allocations n JOIN slurm_runs r USING (run_key) "
        "ORDER BY r.job_id_raw, n.sharing NULLS FIRST").fetchall()
    assert rows == [("whole-h100", None, None, 2, H100),
                    ("mig-h100-3g", "mig", "3g.40gb", 1, H100),
                    ("ci-a100-1c", "mig", "1c.3g.20gb", 1, "nvidia_a100"),
                    ("whole-and-ci", None, None, 1, "nvidia_a100-sxm4-40gb"),
                    ("whole-and-ci", "mig", "1c.3g.20gb", 2, "nvidia_a100")]


def test_node_gres_with_autodetect_types():
    nodes, rejects = parse_scontrol_nodes(NODES.read_text(), source_file=str(NODES))
    assert rejects == []
    assert nodes.select("node", "gpu_model", "gpu_count", "mig").rows() == [
        ("h100-01", H100, 4, False),
        ("h100-mig-01", f"{H100}_3g.40gb", 2, True),
        ("h100-mig-01", f"{H100}_1g.10gb", 1, True),
        ("h100-mig-01", H100, 1, False),
        ("a100-ci-01", "nvidia_a100_1c.3g.20gb", 3, True),
        ("a100-ci-01", "nvidia_a100_3g.20gb", 1, True),
        ("a100-ci-01", "nvidia_a100-sxm4-40gb", 1, False),
    ]
    # (node, sharing, profile, units, physical_gpus, units_per_gpu, gpu_slices, mig_config)
    assert node_slices(nodes).rows() == [
        # 2 x 3g + 1g = 7 slices: one H100, plus the whole one
        ("h100-mig-01", "mig", "3g.40gb", 2, 2, 3, 7, None),
        ("h100-mig-01", "mig", "1g.10gb", 1, 2, 1, 7, None),
        # 3 x 1c (one 3g instance split in three) + 3g = 6 slices: one A100, plus the whole one
        ("a100-ci-01", "mig", "1c.3g.20gb", 3, 2, 1, 7, None),
        ("a100-ci-01", "mig", "3g.20gb", 1, 2, 3, 7, None),
    ]


def test_job_gres_with_autodetect_types_and_per_gpu_shared_detail():
    parsed = parse_scontrol_jobs(JOBS.read_text(), source_file=str(JOBS))
    assert parsed.rejects == []
    assert parsed.jobs == 5
    rows = parsed.gpus.select("job_id", "node", "gpu_index", "gpu_model", "sharing",
                              "slice_profile", "units").rows()
    assert rows == [
        ("201", "h100-01", 0, H100, None, None, 1),
        ("201", "h100-01", 1, H100, None, None, 1),
        ("202", "h100-mig-01", 1, f"{H100}_3g.40gb", "mig", "3g.40gb", 1),
        ("203", "a100-ci-01", 0, "nvidia_a100_1c.3g.20gb", "mig", "1c.3g.20gb", 1),
        # mps:50(0/100,50/100): 50 of GPU 1's 100 units; shard:2(2/4,0/4) gives no row
        ("204", "shard-01", 1, None, "mps", None, 50),
    ]


_BLOCK = """JobId=7 JobName=x
   JobState=RUNNING Reason=None Dependency=(null)
   RunTime=00:00:06 TimeLimit=00:10:00 TimeMin=N/A
   StartTime=1796172000 EndTime=1796172600 Deadline=N/A
     Nodes=a100-ci-01 CPU_IDs=0-1 Mem=2000 GRES={gres}
"""


@pytest.mark.parametrize(("gres", "reason"), [
    ("gpu:nvidia_a100_1c.3g.20gb:2(IDX:0)",
     "expected 2 GPU indices in 'gpu:nvidia_a100_1c.3g.20gb:2(IDX:0)', found 1"),
    ("mps:50(0/100,40/100)",
     "expected MPS units adding up to 50 in 'mps:50(0/100,40/100)', found 40"),
    ("gpu:nvidia_a100_1c.3g.20gb:1(2/4)",
     "expected GPU indices (IDX:…) for a gpu entry, found units per GPU in "
     "'gpu:nvidia_a100_1c.3g.20gb:1(2/4)'"),
    ("gpu:nvidia_a100_1c.3g.20gb:1(IDX:0-)",
     "expected GPU indices like 0-1,4 in 'gpu:nvidia_a100_1c.3g.20gb:1(IDX:0-)', found '0-'"),
    # Slurm prints bit_fmt indices here (gres_stepmgr.c), never UUIDs (fixture README)
    ("gpu:nvidia_h100_80gb_hbm3:1(IDX:GPU-2fa5cf01-9520-1bc1-995b-cc0c6d9bca7c)",
     "expected GPU indices like 0-1,4 in 'gpu:nvidia_h100_80gb_hbm3:1(IDX:GPU-2fa5cf01-9520-"
     "1bc1-995b-cc0c6d9bca7c)', found 'GPU-2fa5cf01-9520-1bc1-995b-cc0c6d9bca7c'"),
])
def test_bad_job_gres_is_rejected_with_file_line_and_field(gres: str, reason: str):
    parsed = parse_scontrol_jobs(_BLOCK.format(gres=gres), source_file="snap.txt")
    assert parsed.gpus.height == 0
    assert [r.describe() for r in parsed.rejects] == [f"snap.txt:5: field GRES: {reason}"]


def test_bad_node_gres_is_rejected_with_file_line_and_field():
    line = NODES.read_text().splitlines()[2].replace(
        "gpu:nvidia_a100_1c.3g.20gb:3(S:0)", "gpu:nvidia_a100_1c.3g.20gb:three(S:0)")
    nodes, rejects = parse_scontrol_nodes(f"{line}\n", source_file="nodes.txt")
    assert nodes.height == 0
    assert [r.describe() for r in rejects] == [
        "nodes.txt:1: field Gres: expected a GRES count such as 4 or 1K, found 'three'"]


def test_bad_alloctres_is_rejected_with_file_line_and_field():
    bad = "cpu=2,gres/gpu:nvidia_a100_1c.3g.20gb=one,gres/gpu=1"
    parsed = parse_sacct(dump([alloc(AllocTRES=bad, NodeList="a100-ci-01")]), source_file="d")
    assert parsed.runs.filter(pl.col("alloc_tres") == bad).height == 0
    assert [r.describe() for r in parsed.rejects] == [
        "d:2: field AllocTRES: expected name=count items separated by commas "
        f"(billing=1,cpu=2,gres/gpu=1,…), found {bad!r}"]
