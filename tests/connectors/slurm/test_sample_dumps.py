"""The simulator's sample dumps (``sample_data/**/sacct``), when present: both variants agree."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from connectors.slurm.parse import parse_sacct
from connectors.slurm.sreport import parse_account_utilization_by_user, parse_cluster_utilization

ROOT = Path(__file__).resolve().parents[3]
SACCT_DIRS = sorted(p.parent for p in (ROOT / "sample_data").glob("**/sacct/sacct-P.txt*"))


def _world_timezone(sacct_dir: Path) -> str:
    world = sacct_dir.parent / "world.json"
    if world.is_file():
        return json.loads(world.read_text(encoding="utf-8")).get("sacct_timezone", "UTC")
    return "UTC"


def _one(sacct_dir: Path, stem: str) -> Path:
    found = sorted(sacct_dir.glob(f"{stem}*"))
    if not found:
        pytest.skip(f"{sacct_dir} has no {stem}")
    return found[0]


@pytest.mark.skipif(not SACCT_DIRS, reason="no simulator sample dumps in sample_data/")
@pytest.mark.parametrize("sacct_dir", SACCT_DIRS, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_variants_give_identical_runs(sacct_dir: Path):
    plain = _one(sacct_dir, "sacct-P.txt")
    unitsep = _one(sacct_dir, "sacct-unitsep-epoch.txt")
    a = parse_sacct(plain, timezone=_world_timezone(sacct_dir), source_file=plain.name)
    b = parse_sacct(unitsep, source_file=unitsep.name)
    for r in (a, b):
        r.check_counts()
        for rej in r.rejects:
            assert rej.reason.startswith(("expected", "ambiguous")), rej.describe()
    drop = ("source_file", "line_no")
    # a line the plain variant had to reject (ambiguous '|') is the only allowed difference
    lost = {x.line_no for x in a.rejects}
    assert len(lost) <= max(1, a.lines_read // 1000)
    keys_a = set(a.runs["run_key"])
    runs_b = b.runs.filter(pl.col("run_key").is_in(list(keys_a)))
    assert runs_b.height == a.runs.height
    assert a.runs.drop(drop).sort("run_key").equals(runs_b.drop(drop).sort("run_key"))
    if not a.rejects:
        assert a.runs.height == b.runs.height
        assert a.steps.drop(drop).equals(b.steps.drop(drop))


@pytest.mark.skipif(not SACCT_DIRS, reason="no simulator sample dumps in sample_data/")
@pytest.mark.parametrize("sacct_dir", SACCT_DIRS, ids=lambda p: str(p.relative_to(ROOT)))
def test_sreport_files_parse(sacct_dir: Path):
    sreport = sacct_dir.parent / "sreport"
    util = sreport / "cluster-utilization.txt"
    by_user = sreport / "account-utilization-by-user.txt"
    if not util.is_file() or not by_user.is_file():
        pytest.skip("no sreport files next to the dumps")
    u = parse_cluster_utilization(util, source_file=util.name)
    a = parse_account_utilization_by_user(by_user, source_file=by_user.name)
    assert u.height >= 1
    assert a.height >= 1
    assert (u["allocated_seconds"] <= u["reported_seconds"]).all()
