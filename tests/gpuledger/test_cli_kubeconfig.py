import stat
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OM = FIXTURES / "openmetrics" / "small-cluster.om.gz"
WORKLOADS = FIXTURES / "tiny_world" / "kueue" / "workloads.json"


def test_ingest_kubernetes_fetches_workloads_through_a_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!/bin/sh\ncat {WORKLOADS}\n", encoding="utf-8")
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n", encoding="utf-8")
    db = tmp_path / "data" / "ledger.duckdb"
    assert main(["--db", str(db), "ingest", "kubernetes", "--openmetrics", str(OM),
                 "--start", "2025-01-06", "--end", "2025-01-07",
                 "--kubeconfig", str(kubeconfig)]) == 0
    assert "fetched Kueue Workloads from the API" in capsys.readouterr().err
    assert len(list((tmp_path / "data" / "snapshots").glob("workloads-*.json"))) == 1
    with read_snapshot(db) as con:
        assert con.execute("SELECT count(*) FROM kueue_workloads").fetchone() == (2,)
        assert con.execute("SELECT count(*) FROM k8s_pod_allocations").fetchone()[0] > 0
