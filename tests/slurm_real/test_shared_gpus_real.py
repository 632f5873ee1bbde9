"""Shared GPUs on the REAL Slurm (docs/shared-gpus.md, docs/slurm.md "Shared GPUs"): jobs on
MIG instances, shards and MPS units (tests/services/slurm/submit-shared-jobs.sh, partition
`shared` of start-slurm.sh) are read from sacct and scontrol into the new columns.

Debian 12's Slurm is 22.05.8: shards exist since 22.05; its `scontrol show job -d` prints a
shard job's GRES without a GPU (`shard(CNT:2)`).
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.parse import allocations_per_node, parse_sacct
from connectors.slurm.scontrol import parse_scontrol_jobs
from connectors.slurm.scontrol_nodes import node_slices, parse_scontrol_nodes
from gpuledger.ingest.slurm.run import import_sacct_file
from models.runner import ensure_schema

# adds jobs to the accounting: after the tests that compare the fixed job set with sreport
pytestmark = [pytest.mark.slurm, pytest.mark.submits_slurm_jobs]
SERVICE_DIR = Path(__file__).resolve().parents[1] / "services" / "slurm"


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


class Shared:
    def __init__(self, out: Path, sacct_text: str) -> None:
        self.out = out
        lines = (out / "manifest.tsv").read_text().splitlines()[1:]
        self.ids = {c[0]: c[1] for c in (ln.split("\t") for ln in lines if ln)}
        self.sacct_text = sacct_text


@pytest.fixture(scope="module")
def shared(real_slurm: Any) -> Shared:  # conftest.RealSlurm
    out = real_slurm.state_dir / "out-shared"
    env = {**os.environ, "GPULEDGER_SLURM_DIR": str(real_slurm.state_dir)}
    proc = subprocess.run(["bash", str(SERVICE_DIR / "submit-shared-jobs.sh"), str(out)],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=300,
                          check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()[-4000:]
    window = dict(ln.split("=", 1) for ln in (out / "window.env").read_text().splitlines())
    start, end = (datetime.fromtimestamp(int(window[k]), tz=UTC)
                  for k in ("WINDOW_START", "WINDOW_END"))
    argv = sacct_command(_iso(start), _iso(end))
    return Shared(out, real_slurm.sacct(argv[1:], env=SACCT_ENVIRONMENT))


def test_debian_slurm_supports_shards(real_slurm: Any):
    out = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"slurm(?:-wlm)? (\d+)\.(\d+)", out)  # Debian: "slurm-wlm 22.05.8"
    assert m, out
    assert (int(m.group(1)), int(m.group(2))) >= (22, 5)


def _runs(shared: Shared) -> pl.DataFrame:
    parsed = parse_sacct(shared.sacct_text, source_file="sacct")
    assert parsed.rejects == []
    return parsed.runs


def _pieces(shared: Shared, kind: str) -> list[tuple]:
    runs = _runs(shared).filter(pl.col("job_id") == shared.ids[kind])
    return allocations_per_node(runs).select("node", "sharing", "slice_profile", "gpus").rows()


@pytest.mark.parametrize(("kind", "pieces"), [
    ("mig-1g-2", [("mig-01", "mig", "1g.10gb", 2)]),
    ("mig-3g-1", [("mig-01", "mig", "3g.20gb", 1)]),
    ("mig-mixed", [("mig-01", "mig", "1g.10gb", 1), ("mig-01", "mig", "3g.20gb", 1)]),
    ("mig-untyped", [("mig-01", "mig", "1g.10gb", 1)]),
    ("shard-2", [("shard-01", "shard", None, 2)]),
    ("shard-3", [("shard-01", "shard", None, 3)]),
    ("mps-50", [("shard-01", "mps", None, 50)]),
])
def test_sacct_of_shared_gpu_jobs_is_read_into_their_pieces(shared: Shared, kind: str,
                                                            pieces: list[tuple]):
    assert _pieces(shared, kind) == pieces


def test_the_ledger_stores_shards_mps_and_mig_instances(shared: Shared, tmp_path: Path):
    dump = tmp_path / "sacct.txt"
    dump.write_text(shared.sacct_text)
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    ensure_schema(con)
    import_sacct_file(con, dump)
    got = dict(con.execute(
        "SELECT job_id, [alloc_gpus, alloc_shards, alloc_mps] FROM slurm_runs").fetchall())
    assert got[shared.ids["shard-3"]] == [0, 3, None]
    assert got[shared.ids["mps-50"]] == [0, None, 50]
    assert got[shared.ids["mig-mixed"]] == [2, None, None]
    # the window may hold jobs other tests submitted meanwhile: only the shared set's
    sharing = con.execute(
        "SELECT sharing, sum(gpus) FROM slurm_node_allocations WHERE job_id IN (SELECT unnest(?)) "
        "GROUP BY ALL ORDER BY ALL", [list(shared.ids.values())]).fetchall()
    assert sharing == [("mig", 6), ("mps", 50), ("shard", 5)]


def test_scontrol_places_mig_instances_and_mps_units(shared: Shared):
    text = (shared.out / "scontrol-jobs.txt").read_text()
    parsed = parse_scontrol_jobs(text, source_file="scontrol-jobs.txt")
    assert parsed.rejects == []
    gpus = parsed.gpus
    mig = gpus.filter(pl.col("sharing") == "mig")
    # one row per MIG instance, as many as sacct's gres/gpu of each job
    per_job = dict(mig.group_by("job_id").len().rows())
    assert per_job == {shared.ids["mig-1g-2"]: 2, shared.ids["mig-3g-1"]: 1,
                       shared.ids["mig-mixed"]: 2, shared.ids["mig-untyped"]: 1}
    # the 1g.10gb instances are GRES indices 0-6, the 3g.20gb ones 7-8 (gres.conf order)
    for profile, allowed in (("1g.10gb", range(7)), ("3g.20gb", range(7, 9))):
        assert set(mig.filter(pl.col("slice_profile") == profile)["gpu_index"]) <= set(allowed)
    assert mig["gpu_index"].n_unique() == mig.height  # no instance given twice
    mps = gpus.filter(pl.col("sharing") == "mps").select("job_id", "node", "units").rows()
    assert mps == [(shared.ids["mps-50"], "shard-01", 50)]
    # 22.05 names no GPU for shards (shard(CNT:N)): no placement row
    assert "GRES=shard(CNT:2)" in text
    assert gpus.filter(pl.col("job_id") == shared.ids["shard-2"]).height == 0


def test_scontrol_node_gres_is_the_shared_capacity(shared: Shared):
    nodes, rejects = parse_scontrol_nodes((shared.out / "scontrol-nodes.txt").read_text())
    assert rejects == []
    rows = node_slices(nodes).select("node", "sharing", "slice_profile", "units",
                                     "physical_gpus", "units_per_gpu").rows()
    assert rows == [("mig-01", "mig", "1g.10gb", 7, 2, 1), ("mig-01", "mig", "3g.20gb", 2, 2, 3),
                    ("shard-01", "shard", None, 8, 2, 4), ("shard-01", "mps", None, 200, 2, 100)]
