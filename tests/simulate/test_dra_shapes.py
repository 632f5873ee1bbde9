"""``--dra-pods`` (issue #27 item 8; simulator/dra.py): what a world with DRA pods writes, read
with the project's own readers, against the upstream shapes the repository keeps:

* kube-state-metrics v2.20 (tests/fixtures/expositions/kube-state-metrics-v2.20.0-pod_resource
  claim_info.prom): DRA pods have no ``nvidia_com_gpu`` request, a ``kube_pod_resourceclaim_info``
  series with the fixture's labels instead (none for slurm-bridge's extended resource);
* the ``dra/`` ResourceClaim snapshots (tests/fixtures/kubernetes/dra/): read by
  connectors.kubernetes.dra_claims without a reject, named by the site file's ``[dra]
  snapshot`` (gpuledger.site.dra); driver ``gpu.nvidia.com``, pool the node, ``gpu-N`` devices,
  a claim shared by several pods, extended-resource claims named in the pods' status;
* dcgm-exporter (tests/fixtures/expositions/dcgm-exporter-dra-labels.prom): the ``dra_*``
  labels with ``--kubernetes-enable-dra`` (connectors.kubernetes.dcgm_dra reads them), no pod
  labels on DRA GPUs without it;
* the truth is the device-plugin world's, byte for byte.
"""

import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm_dra import dra_series
from connectors.kubernetes.dra_claims import read_claim_file
from connectors.kubernetes.kube_api import snapshot_files
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes.dra import read_fresh
from gpuledger.site import load_site
from simulator import NodeCounts, SimConfig, simulate
from tests.helpers import FIXTURES

SMALL = NodeCounts(hpc=3, k8s=1, shared=1)
BASE = SimConfig(seed=3, days=1, step_seconds=600, nodes=SMALL)
WORLDS = {"plugin": BASE, "labels": replace(BASE, dra_pods=0.5),
          "no_labels": replace(BASE, dra_pods=0.5, dcgm_dra_labels=False)}
W0, W1 = datetime(2026, 1, 5), datetime(2026, 1, 6)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="')


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, cfg in WORLDS.items():
        out[name] = tmp_path_factory.mktemp(name) / "world"
        simulate(cfg, out[name])
    return out


def _source(world: Path) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(world / "prometheus" / "metrics.om")


def _claims(world: Path):
    return read_fresh(snapshot=world / "dra")


def _dra_pods(world: Path) -> set[tuple[str, str]]:
    pods = _claims(world).pods
    return set(zip(pods["namespace"], pods["pod"], strict=True))


def test_the_site_file_names_the_snapshots_and_they_read_without_rejects(worlds):
    world = worlds["labels"]
    site = load_site(world / "gpuledger.toml")
    dra = site.clusters[0].dra
    assert dra is not None
    assert dra.snapshot == world / "dra"
    files = snapshot_files(dra.snapshot)
    assert len(files) == 24 * 6  # every 10 minutes of the day
    for at, path in files[::12]:
        read = read_claim_file(path, at)
        assert read.rejects == []
    claims = _claims(world)
    assert claims.rejects == []
    d = claims.devices
    assert set(d["driver"]) == {"gpu.nvidia.com"} == set(d["device_class"])
    nodes = set(pl.read_csv(world / "nodes.csv")["node"])
    assert set(d["pool"]) <= nodes
    assert d["device"].str.contains(r"^gpu-\d$").all()
    assert d.filter(pl.col("extended"))["request"].unique().to_list() == ["container-0-request-0"]
    vias = set(claims.pods["via"])
    assert {"reservedFor", "ownerReference", "resourceClaimStatuses",
            "extendedResourceClaimStatus", "resourceClaims"} <= vias
    # a claim several pods hold at once (a Deployment's replicas on one node)
    at_once = claims.pods.filter(pl.col("via") == "reservedFor").group_by(
        "claim", "observed_at").agg(pl.col("pod").n_unique().alias("n"))
    assert at_once["n"].max() >= 2
    # no device is allocated to two claims at one time
    twice = d.group_by("observed_at", "pool", "device").agg(pl.col("claim").n_unique().alias("n"))
    assert twice["n"].max() == 1


def test_the_fixture_shapes_are_kept(worlds):
    upstream = (FIXTURES / "expositions" /
                "kube-state-metrics-v2.20.0-pod_resourceclaim_info.prom").read_text()
    want = {n for line in upstream.splitlines() if line.startswith("kube_pod_resourceclaim_info")
            for n in _LABEL.findall(line)}
    text = (worlds["labels"] / "prometheus" / "metrics.om").read_text()
    info = [line for line in text.splitlines() if line.startswith("kube_pod_resourceclaim_info{")]
    assert info
    assert {n for line in info for n in _LABEL.findall(line)} == want | {"job", "instance"}
    dcgm = (FIXTURES / "expositions" / "dcgm-exporter-dra-labels.prom").read_text()
    fixture = next(line for line in dcgm.splitlines() if line.startswith("DCGM_"))
    ours = next(line for line in text.splitlines()
                if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and "dra_claim_name" in line)
    dra = [n for n in _LABEL.findall(fixture) if n.startswith("dra_")]
    assert [n for n in _LABEL.findall(ours) if n.startswith("dra_")] == dra
    # the pod's labels, then the dra_* ones, as in the fixture
    names = _LABEL.findall(ours)
    assert names.index("pod") < names.index("dra_claim_name")


def test_dra_pods_request_no_gpu_and_name_their_claims(worlds):
    world = worlds["labels"]
    src = _source(world)
    pods = _dra_pods(world)
    assert len(pods) > 10
    requests = src.raw_samples("kube_pod_container_resource_requests", W0, W1)
    requested = set(zip(requests["namespace"], requests["pod"], strict=True))
    assert requested
    assert not requested & pods
    info = src.raw_samples("kube_pod_resourceclaim_info", W0, W1)
    named = set(zip(info["namespace"], info["pod"], strict=True))
    claims = _claims(world)
    extended = claims.pods.filter(pl.col("via") == "extendedResourceClaimStatus")
    bridge = set(zip(extended["namespace"], extended["pod"], strict=True))
    assert bridge
    assert not bridge & named
    running = src.raw_samples("kube_pod_info", W0, W1)
    seen = set(zip(running["namespace"], running["pod"], strict=True))
    assert named == (pods - bridge) & seen
    # every claim kube-state-metrics names is one of the snapshots' claims
    assert set(info["resourceclaim_name"]) <= set(claims.devices["claim"]) | set(
        claims.pods["claim"])


def test_dcgm_exporter_with_and_without_dra_labels(worlds):
    on = dra_series(_source(worlds["labels"]), W0, W1)
    assert on.height > 0
    devices = _claims(worlds["labels"]).devices.select("namespace", "claim", "pool", "device")
    got = on.select(pl.col("claim_namespace").alias("namespace"), "claim", "pool", "device")
    assert got.join(devices, on=["namespace", "claim", "pool", "device"], how="anti").is_empty()
    assert set(on["driver"]) == {"gpu.nvidia.com"}
    # a shared claim's GPU: one series per pod
    assert on.group_by("gpu_uuid", "claim").agg(pl.col("pod").n_unique())["pod"].max() >= 2
    world = worlds["no_labels"]
    assert dra_series(_source(world), W0, W1).is_empty()
    text = (world / "prometheus" / "metrics.om").read_text()
    dcgm = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    for namespace, pod in _dra_pods(world):
        assert not any(f'pod="{pod}"' in line for line in dcgm), (namespace, pod)
    assert any('pod="' in line for line in dcgm)  # device-plugin pods keep theirs


def test_the_truth_is_the_device_plugin_worlds(worlds):
    for name in ("labels", "no_labels"):
        for csv in ("allocations.csv", "gpu_seconds_daily.csv", "gpu_seconds_priced.csv",
                    "incidents.csv", "gpu_busy_seconds.csv"):
            assert (worlds[name] / "truth" / csv).read_bytes() == \
                (worlds["plugin"] / "truth" / csv).read_bytes(), (name, csv)


def test_the_bridge_job_on_the_dra_path_shows_the_device_class(worlds):
    text = (worlds["labels"] / "sacct" / "sacct-unitsep-epoch.txt").read_text()
    assert "gres/gpu:gpu.nvidia.com=" in text
    plugin = (worlds["plugin"] / "sacct" / "sacct-unitsep-epoch.txt").read_text()
    assert "gres/gpu:gpu.nvidia.com=" not in plugin
