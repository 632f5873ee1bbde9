"""The Workload history sensor lists Workloads through the Kubernetes API every
``every_minutes`` without opening the ledger, spools each list, and its ingest job keeps every
Workload in the history although finished ones disappear from later lists; a site with a
snapshot folder instead reads the folder in order through the existing Kueue asset."""

import json
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.site import load_site
from pipelines.defs.kueue.assets import kueue_workload_tables
from pipelines.defs.kueue.sensors import sensor_name, workload_history_sensor
from pipelines.defs.resources import LedgerResource, SiteResource
from tests.connectors.kubernetes.kueue_api_server import (
    KueueApi,
    changed,
    finished,
    upstream_workload,
)

DOCS = "docs-v1beta2-created-admitted-pending.json"


def _sequence() -> list[list[dict]]:
    created = upstream_workload(DOCS, "sample-job")
    admitted = upstream_workload(DOCS, "my-workload")
    readmitted = upstream_workload("issue-2291-podsready-timeout-readmitted.json",
                                   "job-sample-job-992ea")
    running = changed(created, 2, **admitted["status"])
    return [[created, admitted, readmitted],
            [running, finished(admitted, 2, "2026-01-05T12:00:00Z"), readmitted],
            [running]]


def _site(tmp_path: Path, kueue: str, *, enabled: bool = True) -> Path:
    site = tmp_path / "gpuledger.toml"
    site.write_text(f"""[gpuledger]
first_day = "2026-01-05"
db = "data/ledger.duckdb"

[gpuledger.schedules]
enabled = {str(enabled).lower()}

[gpuledger.clusters.gpu-lab.kueue]
{kueue}
""", encoding="utf-8")
    return site


def _kubeconfig(tmp_path: Path, url: str) -> None:
    (tmp_path / "token").write_text("reader-token\n")
    (tmp_path / "kubeconfig").write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster:
    server: {url}
users:
- name: reader
  user:
    tokenFile: token
contexts:
- name: lab
  context: {{cluster: lab, user: reader}}
""")


@pytest.fixture
def site_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)

    def use(site: Path) -> None:
        monkeypatch.setenv("GPULEDGER_CONFIG", str(site))
    return use


def test_the_sensor_and_its_job_keep_every_workload(tmp_path: Path, site_env):
    with KueueApi(_sequence(), token="reader-token") as api:
        _kubeconfig(tmp_path, api.url)
        site_file = _site(tmp_path, 'kubeconfig = "kubeconfig"\nevery_minutes = 2')
        site_env(site_file)
        site = load_site(site_file)
        sensor = workload_history_sensor(site, site.cluster("gpu-lab"))
        assert sensor.name == sensor_name("gpu-lab") == "kueue_workload_history_gpu_lab"
        assert sensor.minimum_interval_seconds == 120
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
        from pipelines.definitions import defs as load_defs
        defs = load_defs()
        job = defs.resolve_job_def("kueue_workload_history_ingest")
        assert sensor.name in {s.name for s in defs.sensors}

        spool = tmp_path / "data" / "spool" / "kueue" / "gpu-lab"
        db = tmp_path / "data" / "ledger.duckdb"
        [first] = sensor.evaluate_tick(dg.build_sensor_context()).run_requests
        assert sensor.job_name == "kueue_workload_history_ingest"
        assert not db.exists()  # the sensor lists and spools with no ledger connection
        assert [p.name.endswith(".json.gz") for p in spool.iterdir()] == [True]
        assert job.execute_in_process().success
        later = []
        for _ in range(2):  # two ticks before the next run: both files wait in the spool
            api.advance()
            later += sensor.evaluate_tick(dg.build_sensor_context()).run_requests
        assert len({r.run_key for r in [first, *later]}) == 3
        result = job.execute_in_process()
        assert result.success
    [event] = result.get_asset_materialization_events()
    meta = event.event_specific_data.materialization.metadata
    assert (meta["files"].value, meta["new_states"].value, meta["deleted"].value) == (2, 2, 2)
    assert sorted(p.name for p in spool.iterdir()) == ["done"]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(
            "SELECT cluster, name, count(*), max(deleted_seen_at) IS NOT NULL "
            "FROM kueue_workload_history GROUP BY ALL ORDER BY name").fetchall() == [
            ("gpu-lab", "job-sample-job-992ea", 1, True),
            ("gpu-lab", "my-workload", 2, True),
            ("gpu-lab", "sample-job", 2, False)]
        assert con.execute("SELECT name, finished FROM kueue_workloads ORDER BY name"
                           ).fetchall() == [("job-sample-job-992ea", False),
                                            ("my-workload", True), ("sample-job", False)]


def test_schedules_off_leave_the_sensor_stopped(tmp_path: Path):
    site = load_site(_site(tmp_path, 'kubeconfig = "kubeconfig"', enabled=False))
    sensor = workload_history_sensor(site, site.cluster("gpu-lab"))
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert sensor.minimum_interval_seconds == 300  # every_minutes defaults to 5


def test_a_failing_api_fails_the_tick_and_spools_nothing(tmp_path: Path, site_env):
    with KueueApi(_sequence(), token="another-token") as api:
        _kubeconfig(tmp_path, api.url)
        site_file = _site(tmp_path, 'kubeconfig = "kubeconfig"')
        site_env(site_file)
        site = load_site(site_file)
        sensor = workload_history_sensor(site, site.cluster("gpu-lab"))
        with pytest.raises(Exception, match="expected 200, found 401"):
            sensor.evaluate_tick(dg.build_sensor_context())
    spool = tmp_path / "data" / "spool" / "kueue" / "gpu-lab"
    assert not spool.exists() or not list(spool.iterdir())


def test_a_snapshot_folder_is_read_in_order_by_the_kueue_asset(tmp_path: Path, site_env):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for hour, items in zip((10, 12, 13), _sequence(), strict=True):
        (folder / f"workloads-20260105T{hour:02d}0000Z.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    site_file = _site(tmp_path, 'snapshot = "snapshots"')
    site_env(site_file)
    db = tmp_path / "data" / "ledger.duckdb"
    result = dg.materialize([kueue_workload_tables],
                            resources={"ledger": LedgerResource(database=str(db)),
                                       "site": SiteResource(path=str(site_file))})
    assert result.success
    assert sorted(p.name for p in folder.iterdir())[0].startswith("workloads-")  # kept there
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT name, deleted_seen_at FROM kueue_workload_history "
                           "WHERE deleted_seen_at IS NOT NULL GROUP BY ALL ORDER BY 1"
                           ).fetchall() == [("job-sample-job-992ea", datetime(2026, 1, 5, 13)),
                                            ("my-workload", datetime(2026, 1, 5, 13))]
        assert con.execute("SELECT count(*) FROM kueue_workloads").fetchone() == (3,)
