"""dcgm-exporter's variants scraped by a real Prometheus, ingested through the normal path.

Upstream expositions (tests/fixtures/expositions; source in each file's header) served by the
scrape harness (``scrape.py``) as three GPU Operator exporters, plus kube-state-metrics:

* dcgm-exporter#363: no pod labels at all (no kubelet pod-resources mapping), node k8s-gpu1,
  where kube-state-metrics shows one pod holding the node's only GPU;
* dcgm-exporter#272: ``--use-old-namespace`` (``uuid``, ``pod_name``/``pod_namespace``/
  ``container_name``), MIG instances and a whole GPU held by a pod;
* dcgm-exporter#512: current names, MIG instances of an H100 with pod labels.

Two Prometheus servers scrape them: ``honor`` (every job ``honor_labels: true``) and
``nohonor`` (dcgm-exporter's chart default ``honorLabels: false``; kube-state-metrics honoured,
as kube-prometheus-stack sets it), so Prometheus itself makes the ``exported_*`` labels and adds
the exporter pod's namespace/pod/container. Each is read with ``ingest_kubernetes_window``
(``PrometheusHttpSource``) into ``gpu_utilization`` and ``gpu_busy_daily``; the rows must be the
workload's in both.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpuledger.ingest.kubernetes.run import ingest_kubernetes_window
from models.runner import connect
from tests.prometheus_real.scrape import (
    EXPOSITIONS,
    dcgm_exporter,
    exposition,
    kube_pod_status_phase,
    kube_state_metrics,
)

pytestmark = pytest.mark.prometheus

SETUPS = {"honor": True, "nohonor": {"kube-state-metrics": True}}  # others: honor_labels false
KSM_BODY = exposition([
    "# HELP kube_node_status_capacity [STABLE] The capacity for different resources of a node.",
    "# TYPE kube_node_status_capacity gauge",
    'kube_node_status_capacity{node="k8s-gpu1",resource="nvidia_com_gpu",unit="integer"} 1',
    "# HELP kube_pod_info [STABLE] Information about pod.",
    "# TYPE kube_pod_info gauge",
    'kube_pod_info{created_by_kind="Job",created_by_name="notebook",host_ip="10.0.0.9",'
    'namespace="team-a",node="k8s-gpu1",pod="notebook-0",pod_ip="10.244.3.20",uid="uid-nb",'
    'priority_class="",host_network="false"} 1',
    "# HELP kube_pod_container_resource_requests The number of requested request resource by "
    "a container. It is recommended to use the kube_pod_resource_requests metric exposed by "
    "kube-scheduler instead, as it is more precise.",
    "# TYPE kube_pod_container_resource_requests gauge",
    'kube_pod_container_resource_requests{namespace="team-a",pod="notebook-0",uid="uid-nb",'
    'container="main",node="k8s-gpu1",resource="nvidia_com_gpu",unit="integer"} 1',
]) + kube_pod_status_phase("team-a", "notebook-0", "uid-nb", "Running")

NO_LABELS = dcgm_exporter(
    (EXPOSITIONS / "dcgm-exporter-issue-363-no-pod-labels.prom").read_text(encoding="utf-8"),
    node="k8s-gpu1", pod="nvidia-dcgm-exporter-k8sg1", instance="10.244.3.5:9400")
OLD_NAMESPACE = dcgm_exporter(
    (EXPOSITIONS / "dcgm-exporter-issue-272-use-old-namespace-mig.prom").read_text(
        encoding="utf-8"), job="dcgm-exporter-old", path="/metrics/dcgm-old", node="a100-node",
    pod="nvidia-dcgm-exporter-a100n", instance="10.244.4.5:9400")
MIG = dcgm_exporter((EXPOSITIONS / "dcgm-exporter-issue-512-mig-h100.prom").read_text(
    encoding="utf-8"), job="dcgm-exporter-mig", path="/metrics/dcgm-mig", node="gsrh100-074",
    pod="nvidia-dcgm-exporter-h100m", instance="10.244.5.5:9400")
SCRAPES = 8


@pytest.fixture(scope="module")
def ingested(prometheus_scrape, tmp_path_factory: pytest.TempPathFactory):
    targets = [kube_state_metrics(KSM_BODY), NO_LABELS, OLD_NAMESPACE, MIG]
    out: dict[str, tuple[Path, object]] = {}
    with prometheus_scrape(targets, interval_s=1.0, setups=SETUPS) as harness:
        start, end = harness.wait_for_samples(SCRAPES)
        for setup in SETUPS:
            db = tmp_path_factory.mktemp(f"dcgm-{setup}") / "ledger.duckdb"
            with connect(db) as con:
                load = ingest_kubernetes_window(con, harness.source(setup), start, end,
                                                cluster="c")
            out[setup] = (db, load)
    return out


def rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.mark.parametrize("setup", list(SETUPS))
def test_unlabelled_exporter_goes_to_the_pod_holding_the_node(ingested, setup):
    db, load = ingested[setup]
    got = rows(db, "SELECT attribution, namespace, pod, pod_uid, container, sum(samples) "
                   "FROM gpu_utilization WHERE node = 'k8s-gpu1' GROUP BY ALL ORDER BY ALL")
    attributed = [r for r in got if r[0] == "sole_pod_on_node"]
    assert [r[:5] for r in attributed] == [
        ("sole_pod_on_node", "team-a", "notebook-0", "uid-nb", None)]
    # every scrape inside the pod's interval (kube-state-metrics' first Running scrape on)
    assert attributed[0][5] >= SCRAPES - 2
    assert all(r[0] is None for r in got if r not in attributed)  # before the pod was seen
    assert "nvidia-dcgm-exporter-k8sg1" not in {r[2] for r in got}
    assert any("dcgm-exporter job='nvidia-dcgm-exporter' instance='10.244.3.5:9400' "
               "node/Hostname='k8s-gpu1' carries no pod labels" in w
               and "DCGM_EXPORTER_KUBERNETES=true" in w for w in load.warnings)


@pytest.mark.parametrize("setup", list(SETUPS))
def test_old_namespace_pod_names_and_mig_instances(ingested, setup):
    db, _ = ingested[setup]
    got = rows(db, "SELECT gpu_uuid, gpu_instance, gpu_instance_profile, namespace, pod, "
                   "container, attribution, metric FROM gpu_utilization "
                   "WHERE node = 'a100-node' GROUP BY ALL ORDER BY ALL")
    assert got == [
        ("GPU-6043e4b2-feaa-8010-34c7-61d1a01576bb", "1", "3g.40gb", None, None, None, None,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ("GPU-931446e6-0413-2864-5b76-11227dcda4ae", None, None, "ai-1", "d85np-t6mdg",
         "-grpc-pod", "exporter_labels", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ("GPU-af2c63a8-8c8b-21cc-581a-bab6bba89d08", "1", "4g.40gb", None, None, None, None,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", "1", "3g.40gb", None, None, None, None,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", "2", "4g.40gb", None, None, None, None,
         "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    ]


@pytest.mark.parametrize("setup", list(SETUPS))
def test_mig_instances_with_pod_labels_and_their_parent(ingested, setup):
    db, _ = ingested[setup]
    holders = rows(db, "SELECT gpu_instance, namespace, pod, container FROM gpu_utilization "
                       "WHERE node = 'gsrh100-074' GROUP BY ALL ORDER BY ALL")
    assert holders == [
        ("7", "model-playground-stg", "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl",
         "kserve-container"),
        ("8", None, None, None),
        ("9", "model-playground-stg", "tts-predictor-00011-deployment-5554f75554-8j8pl",
         "kserve-container"),
    ]
    daily = rows(db, "SELECT gpu_instance, device_kind, mig_slices, busy_seconds FROM "
                     "gpu_busy_daily WHERE node = 'gsrh100-074' ORDER BY gpu_instance NULLS LAST")
    assert [r[:3] for r in daily] == [("7", "mig_instance", 1), ("8", "mig_instance", 1),
                                      ("9", "mig_instance", 1), (None, "mig_parent", 7)]
    assert {r[3] for r in daily} == {0.0}  # upstream's values are all 0.000000
