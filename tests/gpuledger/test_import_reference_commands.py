"""`gpuledger import-reference`, `import-nodes`, `import-accounts`, `import-rate-card`.

import-reference runs the site's Slurm commands through its prefix (here fakes on PATH that
print what the suite's real Slurm printed: tests/fixtures/real_slurm/sacctmgr-associations.txt,
reordered to the command's explicit format) and reads kube-state-metrics from the site's
Prometheus (an OpenMetrics file whose series follow kube-state-metrics' node_test.go and
namespace_test.go shapes)."""

import os
import stat
from pathlib import Path

import duckdb
import pytest

from gpuledger import cli
from tests.connectors.kubernetes.fakes import T0_S, om_file
from tests.helpers import FIXTURES, TINY_WORLD

SCONTROL = ("NodeName=gpu-hpc-01 Gres=gpu:a100:2(S:0) State=IDLE Partitions=gpu\n"
            "NodeName=gpu-shr-01 Gres=gpu:h100:1 State=IDLE Partitions=shared\n"
            "NodeName=cpu-01 Gres=(null) State=IDLE Partitions=cpu\n"
            "this is not a node line\n")


def _assoc() -> str:
    """The real capture (Cluster|Account|ParentName|User|DefaultQOS|QOS) in the command's
    format (Cluster|Account|User|Partition|ParentName)."""
    out = []
    text = (FIXTURES / "real_slurm" / "sacctmgr-associations.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        cluster, account, parent, user, _, _ = line.split("|")
        out.append("|".join((cluster, account, user, "", parent)))
    return "\n".join(out) + "\n"


def _fake(bin_dir: Path, name: str, text: str) -> None:
    data = bin_dir / f"{name}.out"
    data.write_text(text, encoding="utf-8")
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\ncat '{data}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "scontrol", SCONTROL)
    _fake(bin_dir, "sacctmgr", _assoc())
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    ts = [T0_S + 60 * i for i in range(3)]
    om_file(tmp_path / "ksm.om", [
        ("kube_node_status_capacity",
         {"node": "gpu-k8s-01", "resource": "nvidia_com_gpu", "unit": "integer"},
         [(t, 2.0) for t in ts]),
        ("kube_node_status_capacity",
         {"node": "gpu-shr-01", "resource": "nvidia_com_gpu", "unit": "integer"},
         [(t, 1.0) for t in ts]),
        ("kube_node_labels", {"node": "gpu-k8s-01",
                              "label_nvidia_com_gpu_product": "NVIDIA-H100-80GB-HBM3"},
         [(t, 1.0) for t in ts]),
        ("kube_namespace_labels", {"namespace": "team-vision", "label_team": "vision",
                                   "label_cost_centre": "CC-VIS-600"}, [(t, 1.0) for t in ts]),
    ])
    (tmp_path / "accounts.csv").write_text("account,parent\nphysics,ops\n", encoding="utf-8")
    path = tmp_path / "gpuledger.toml"
    path.write_text(
        '[gpuledger]\nfirst_day = "2025-01-06"\ndb = "ledger.duckdb"\n'
        '[gpuledger.reference]\naccounts = "accounts.csv"\n'
        '[gpuledger.clusters.gpuledger.slurm]\nmode = "sacct"\nprefix = "sh -c"\n'
        '[gpuledger.clusters.gpuledger.prometheus]\nopenmetrics = "ksm.om"\n', encoding="utf-8")
    return path


def _rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_import_reference_reads_sources_then_files_override(site, capsys):
    assert cli.main(["--config", str(site), "import-reference"]) == 0
    db = site.parent / "ledger.duckdb"
    assert _rows(db, "SELECT node, gpu_model, gpu_count, pool, source FROM node_inventory "
                 "ORDER BY node") == [
        ("gpu-hpc-01", "a100", 2, "slurm", "scontrol"),
        ("gpu-k8s-01", "h100", 2, "kubernetes", "ksm"),
        ("gpu-shr-01", "h100", 1, "shared", "scontrol+ksm")]
    # the accounts file overrides sacctmgr's parent of physics (research)
    assert _rows(db, "SELECT parent FROM slurm_accounts WHERE account = 'physics'") == [("ops",)]
    assert _rows(db, "SELECT parent FROM slurm_accounts WHERE account = 'ml-research'") == [
        ("research",)]
    assert ("namespace_labels", "k8s_namespace", "team-vision", "vision", "CC-VIS-600") in \
        _rows(db, "SELECT source, source_kind, key, team, cost_centre FROM identity_candidates")
    assert ("slurm_assoc", "slurm_user", "carol", "carol") in _rows(
        db, "SELECT source, source_kind, key, person FROM identity_candidates")
    # the unreadable scontrol line is kept and counted
    assert _rows(db, "SELECT source, line_no FROM rejects WHERE source = 'scontrol_nodes'") == [
        ("scontrol_nodes", 4)]
    assert "1 line(s)/sample(s) rejected" in capsys.readouterr().err
    before = _rows(db, "SELECT * FROM node_inventory ORDER BY ALL")
    assert cli.main(["--config", str(site), "import-reference"]) == 0
    assert _rows(db, "SELECT * FROM node_inventory ORDER BY ALL") == before
    # published for readers
    assert (site.parent / "ledger.serving.duckdb").is_file()


def test_import_reference_needs_a_site_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_CONFIG", raising=False)
    assert cli.main(["--db", str(tmp_path / "l.duckdb"), "import-reference"]) == 1
    assert "expected a site file" in capsys.readouterr().err


def test_file_commands_load_nodes_accounts_and_rate_card(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    assert cli.main(["--db", str(db), "import-nodes", str(TINY_WORLD / "nodes.csv"),
                     "--cluster", "c9"]) == 0
    assert cli.main(["--db", str(db), "import-accounts", str(TINY_WORLD / "accounts.csv")]) == 0
    assert cli.main(["--db", str(db), "import-rate-card", str(TINY_WORLD / "rate_card.csv")]) == 0
    assert _rows(db, "SELECT DISTINCT cluster FROM nodes") == [("c9",)]
    assert _rows(db, "SELECT count(*) FROM node_inventory WHERE cluster = 'c9' "
                 "AND valid_to IS NULL AND source = 'nodes_file'") == [(3,)]
    assert _rows(db, "SELECT count(*) > 0 FROM slurm_accounts") == [(True,)]
    assert _rows(db, "SELECT count(*) > 0 FROM rate_card") == [(True,)]
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu_model,domain,qos,valid_from,valid_to,rate_per_gpu_hour,currency\n"
                   "a100,slurm,,,,lots,EUR\n", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["--db", str(db), "import-rate-card", str(bad)]) == 0
    err = capsys.readouterr().err
    assert "0 rows loaded, 1 rejected" in err
    assert "expected a decimal number" in err
