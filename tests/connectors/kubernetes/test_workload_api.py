import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.kubernetes.workload_api import fetch_workload_snapshot, kubectl_command
from connectors.slurm.commands import CommandRunner

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny_world" / "kueue" / "workloads.json"


def _fake_kubectl(tmp_path: Path, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "kubectl"
    tool.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_command_is_a_read_only_list_of_every_namespace():
    assert kubectl_command(Path("/k/config"), "prod") == [
        "kubectl", "--kubeconfig=/k/config", "--context=prod", "get",
        "workloads.kueue.x-k8s.io", "--all-namespaces", "--output=json",
    ]


def test_snapshot_is_fetched_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = _fake_kubectl(tmp_path, f'echo "$@" > {tmp_path}/args\ncat {TINY}\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\n", encoding="utf-8")
    path = fetch_workload_snapshot(kubeconfig, tmp_path / "snap",
                                   now=datetime(2026, 1, 12, 6, 0, tzinfo=UTC))
    assert path.name == "workloads-20260112T060000Z.json"
    assert path.read_text() == TINY.read_text()
    assert "--all-namespaces" in (tmp_path / "args").read_text()


def test_kubectl_failure_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = _fake_kubectl(tmp_path, 'echo "error: You must be logged in" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("x", encoding="utf-8")
    with pytest.raises(SourceError, match=r"kubectl .*You must be logged in"):
        fetch_workload_snapshot(kubeconfig, tmp_path / "snap",
                                runner=CommandRunner(retries=0))
    assert not (tmp_path / "snap").exists()


def test_missing_kubeconfig_is_a_clear_error(tmp_path: Path):
    with pytest.raises(SourceError, match="expected a kubeconfig at"):
        fetch_workload_snapshot(tmp_path / "nope", tmp_path)
