"""The reference assets of a site with live sources read scontrol and sacctmgr (fakes on PATH
printing the real Slurm's shapes, see tests/gpuledger/test_import_reference_commands.py), and
their checks return the offending rows."""

import os
from pathlib import Path

import dagster as dg
import duckdb

from tests.gpuledger.test_import_reference_commands import SCONTROL, _assoc, _fake
from tests.helpers import load_definitions, site_environment


def test_live_site_builds_inventory_accounts_and_candidates(tmp_path: Path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "scontrol", SCONTROL)
    _fake(bin_dir, "sacctmgr", _assoc())
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    site_file = tmp_path / "gpuledger.toml"
    site_file.write_text(
        '[gpuledger]\nfirst_day = "2026-01-05"\ndb = "ledger.duckdb"\n'
        '[gpuledger.clusters.gpuledger.slurm]\nmode = "sacct"\nprefix = "sh -c"\n',
        encoding="utf-8")
    defs = load_definitions(site_file)
    from pipelines.defs.resources import LedgerResource

    db = tmp_path / "ledger.duckdb"
    with site_environment(site_file):
        result = dg.materialize(
            [*defs.assets, *(defs.asset_checks or [])],
            resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
            selection=dg.AssetSelection.assets("gpu_inventory", "slurm_accounts",
                                               "identity_candidates"))
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    bad = checks["gpu_inventory_has_no_rejects"]
    assert bad.passed is False
    assert "scontrol_nodes" in bad.metadata["offending_rows"].value
    assert bad.metadata["rejected"].value == 1
    assert checks["gpu_inventory_is_consistent"].passed is True
    assert checks["slurm_accounts_have_no_rejects"].passed is True
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT node, pool FROM node_inventory ORDER BY node").fetchall() == [
            ("gpu-hpc-01", "slurm"), ("gpu-shr-01", "slurm")]
        assert con.execute("SELECT parent FROM slurm_accounts WHERE account = 'physics'"
                           ).fetchall() == [("research",)]
        assert con.execute("SELECT count(*) FROM identity_candidates WHERE source = "
                           "'slurm_assoc' AND source_kind = 'slurm_user'").fetchone()[0] >= 3
