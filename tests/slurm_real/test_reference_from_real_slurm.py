"""Node inventory, accounts and identity candidates read from the REAL Slurm of the suite
(`scontrol -o show node`, `sacctmgr -n -P show assoc format=…`) by `gpuledger import-reference`'s
library call, through a site file in live mode (tests/services/slurm: a100-01/a100-02 with
gpu:a100:8, h100-01 with gpu:h100:4, cpu-01 without GPUs, and in partition `shared` mig-01 with
MIG types gpu:1g.10gb:7,gpu:a100_3g.20gb:2 and shard-01 with gpu:2,shard:8,mps:200; accounts
research -> physics, ml-research; ops)."""

from pathlib import Path

import pytest

from connectors.slurm.commands import CommandRunner
from connectors.slurm.sacctmgr import SACCTMGR_ASSOC_COMMAND, parse_sacctmgr_assoc
from connectors.slurm.scontrol_nodes import SCONTROL_NODES_COMMAND, parse_scontrol_nodes
from gpuledger.ingest.reference import import_reference
from gpuledger.site import load_site
from models.runner import connect

pytestmark = pytest.mark.slurm


def test_scontrol_nodes_of_the_real_cluster(real_slurm):
    text = CommandRunner().run(SCONTROL_NODES_COMMAND, {})
    frame, rejects = parse_scontrol_nodes(text)
    assert rejects == [], text
    got = sorted(frame.select("node", "gpu_model", "gpu_count", "partitions").rows())
    assert got == [("a100-01", "a100", 8, "gpu"), ("a100-02", "a100", 8, "gpu"),
                   ("h100-01", "h100", 4, "gpu"), ("mig-01", "1g.10gb", 7, "shared"),
                   ("mig-01", "a100_3g.20gb", 2, "shared"), ("shard-01", "", 2, "shared")], text


def test_sacctmgr_associations_of_the_real_cluster(real_slurm):
    text = CommandRunner().run(SACCTMGR_ASSOC_COMMAND, {})
    accounts, users, rejects = parse_sacctmgr_assoc(text)
    assert rejects == [], text
    tree = dict(accounts.select("account", "parent").rows())
    assert tree["physics"] == "research"
    assert tree["ml-research"] == "research"
    assert tree["ops"] == "root"
    assert tree["root"] == ""
    pairs = set(users.select("account", "user").rows())
    assert {("physics", "alice"), ("ml-research", "alice"), ("ml-research", "bob"),
            ("ops", "carol")} <= pairs
    assert set(accounts["cluster"]) == {real_slurm.cluster}


def test_import_reference_from_live_slurm_then_rerun_changes_nothing(real_slurm, tmp_path: Path):
    site_file = tmp_path / "gpuledger.toml"
    site_file.write_text(
        '[gpuledger]\nfirst_day = "2026-01-05"\ndb = "ledger.duckdb"\n'
        f'[gpuledger.clusters.{real_slurm.cluster}.slurm]\nmode = "sacct"\n', encoding="utf-8")
    site = load_site(site_file)
    result = import_reference(site, lambda: connect(site.db))
    assert result.rejects == 0, result.summary()
    with connect(site.db) as con:
        inventory = con.execute(
            "SELECT node, gpu_model, gpu_count, pool, source, valid_to FROM node_inventory "
            "ORDER BY node").fetchall()
        nodes = con.execute("SELECT count(*), count(DISTINCT node) FROM nodes").fetchone()
        candidates = set(con.execute(
            "SELECT source_kind, key, person, team FROM identity_candidates").fetchall())
        parent = con.execute(
            "SELECT parent FROM slurm_accounts WHERE account = 'physics'").fetchone()
        slices = con.execute(
            "SELECT node, sharing, slice_profile, units, physical_gpus, source, valid_to "
            "FROM node_gpu_slices ORDER BY node, sharing DESC, slice_profile").fetchall()
    # the MIG node is inventoried by its GRES types, as Slurm lists them (docs/slurm.md)
    assert inventory == [("a100-01", "a100", 8, "slurm", "scontrol", None),
                         ("a100-02", "a100", 8, "slurm", "scontrol", None),
                         ("h100-01", "h100", 4, "slurm", "scontrol", None),
                         ("mig-01", "1g.10gb", 7, "slurm", "scontrol", None),
                         ("mig-01", "a100_3g.20gb", 2, "slurm", "scontrol", None),
                         ("shard-01", "unknown", 2, "slurm", "scontrol", None)]
    assert nodes == (31, 5)
    assert slices == [("mig-01", "mig", "1g.10gb", 7, 2, "scontrol", None),
                      ("mig-01", "mig", "3g.20gb", 2, 2, "scontrol", None),
                      ("shard-01", "shard", None, 8, 2, "scontrol", None),
                      ("shard-01", "mps", None, 200, 2, "scontrol", None)]
    assert ("slurm_user", "alice", "alice", "") in candidates
    assert ("slurm_account", "physics", "", "physics") in candidates
    assert parent == ("research",)
    again = import_reference(site, lambda: connect(site.db))
    assert "0 row(s) opened, 0 closed" in again.summary()
    assert "node_gpu_slices: 0 opened, 0 closed" in again.summary()
    with connect(site.db) as con:
        assert con.execute("SELECT count(*) FROM node_inventory").fetchone() == (6,)
        assert con.execute("SELECT count(*) FROM node_gpu_slices").fetchone() == (4,)
