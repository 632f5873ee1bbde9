"""The Dagster Kueue assets go through the CLI's one Workload import: both tables from one read,
GPU resource names from the settings, bad items reported by the check, not a failed run."""

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from tests.helpers import FIXTURES, copy_tiny_world, materialize_world

KUEUE = FIXTURES / "kueue"


def _world(tmp_path: Path, snapshot: str) -> Path:
    world = copy_tiny_world(tmp_path)
    shutil.copy(KUEUE / snapshot, world / "kueue" / "workloads.json")
    return world


def _materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {m.asset_key.to_user_string(): m.metadata
            for m in (e.event_specific_data.materialization
                      for e in result.get_asset_materialization_events())}


def test_one_import_fills_both_tables_with_the_configured_gpu_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # no gpuledger.toml here
    monkeypatch.setenv("GPULEDGER_GPU_RESOURCES", "nvidia.com/gpu,example.com/gpu")
    world = _world(tmp_path, "dra-resource-claim-template.json")
    db = tmp_path / "ledger.duckdb"
    result = materialize_world(
        db, world, dg.AssetSelection.assets("kueue_workload_snapshot", "kueue_workloads"))
    assert result.success
    meta = _materializations(result)
    assert set(meta) == {"kueue_workload_snapshot", "kueue_workloads"}
    assert meta["kueue_workloads"]["gpu_resources"].value == "nvidia.com/gpu, example.com/gpu"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT gpus_per_pod, gpus_admitted, gpu_resource FROM "
                           "kueue_workloads").fetchall() == [(1, 1, "example.com/gpu")]
        assert con.execute("SELECT count(*) FROM kueue_workloads_raw").fetchone() == (1,)
        # one read for both assets
        assert con.execute("SELECT count(*) FROM ingest_runs WHERE source = 'kueue_workloads'"
                           ).fetchone() == (1,)


def test_bad_items_fail_the_check_and_the_good_ones_load(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPULEDGER_GPU_RESOURCES", raising=False)
    world = _world(tmp_path, "bad-items-one-defect-each.json")
    db = tmp_path / "ledger.duckdb"
    result = materialize_world(db, world, dg.AssetSelection.assets("kueue_workloads"))
    assert result.success
    assert set(_materializations(result)) == {"kueue_workloads"}  # the asset selected
    (check,) = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed) == ("every_workload_read", False)
    assert check.metadata["offending_rows"].value == 11
    assert "items[1].status: expected an object or no field, found null" in \
        check.metadata["sample"].value
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM kueue_workloads").fetchone() == (2,)
        assert con.execute("SELECT count(*) FROM kueue_workloads_raw").fetchone() == (2,)


SCHEDULING = FIXTURES / "kubernetes" / "scheduling"


def test_the_pod_groups_asset_reads_the_sites_snapshot(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    world = copy_tiny_world(tmp_path)
    shutil.copy(SCHEDULING / "bad-items-one-defect-each.json", world / "kueue" / "groups.json")
    site = world / "gpuledger.toml"
    site.write_text(site.read_text() + 'pod_groups = "kueue/groups.json"\n')
    db = tmp_path / "ledger.duckdb"
    result = materialize_world(db, world, dg.AssetSelection.assets("k8s_pod_groups"))
    assert result.success
    assert _materializations(result)["k8s_pod_groups"]["rows"].value == 1
    (check,) = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed) == ("every_pod_group_read", False)
    assert check.metadata["offending_rows"].value == 5
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT cluster, name, min_count FROM k8s_pod_groups").fetchall() == [
            ("gpuledger", "training-job-workload", 4)]


def test_the_pod_groups_asset_lists_them_through_the_kubeconfig(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    from tests.connectors.kubernetes.kueue_api_server import KueueApi

    monkeypatch.chdir(tmp_path)
    items = json.loads((SCHEDULING / "workload-api-v1alpha2-job.json").read_text())["items"]
    with KueueApi([[]], token="reader-token") as api:
        api.groups = {"scheduling.k8s.io": {"v1": {"priorityclasses": []}, "v1alpha2": {
            "workloads": items[:1], "podgroups": items[1:]}}}
        world = tmp_path / "world"
        world.mkdir()
        (world / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters: [{{name: lab, cluster: {{server: "{api.url}"}}}}]
users: [{{name: reader, user: {{token: reader-token}}}}]
contexts: [{{name: lab, context: {{cluster: lab, user: reader}}}}]
""")
        (world / "gpuledger.toml").write_text("""[gpuledger]
first_day = "2026-01-05"
db = "data/ledger.duckdb"

[gpuledger.schedules]
enabled = false

[gpuledger.clusters.gpu-lab.kueue]
kubeconfig = "kubeconfig"
""")
        db = tmp_path / "ledger.duckdb"
        result = materialize_world(db, world, dg.AssetSelection.assets("k8s_pod_groups"))
    assert result.success
    meta = _materializations(result)["k8s_pod_groups"]
    assert meta["rows"].value == 2
    # the list is kept as a file (the fixture twin), named in the table
    [kept] = (world / "data" / "spool" / "pod_groups" / "gpu-lab").glob("pod-groups-*.json.gz")
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT cluster, kind, min_count, job_name, source_file FROM "
                           "k8s_pod_groups ORDER BY kind DESC").fetchall() == [
            ("gpu-lab", "Workload", 8, "train-8", str(kept)),
            ("gpu-lab", "PodGroup", 8, "train-8", str(kept))]


def test_an_api_that_cannot_be_read_fails_the_check_not_the_run(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    world = tmp_path / "world"
    world.mkdir()
    (world / "kubeconfig").write_text("""apiVersion: v1
kind: Config
current-context: lab
clusters: [{name: lab, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: reader, user: {token: t}}]
contexts: [{name: lab, context: {cluster: lab, user: reader}}]
""")
    (world / "gpuledger.toml").write_text("""[gpuledger]
first_day = "2026-01-05"
db = "data/ledger.duckdb"

[gpuledger.schedules]
enabled = false

[gpuledger.clusters.gpu-lab.kueue]
kubeconfig = "kubeconfig"
timeout_s = 2
""")
    result = materialize_world(tmp_path / "ledger.duckdb", world,
                               dg.AssetSelection.assets("k8s_pod_groups"))
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed
    assert "gpu-lab: GET http://127.0.0.1:1/apis/scheduling.k8s.io" in \
        check.metadata["sample"].value
