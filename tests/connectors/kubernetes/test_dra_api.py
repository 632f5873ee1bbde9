"""DRA ResourceClaims from the Kubernetes API (connectors/kubernetes/dra_api.py) over HTTPS with a
client certificate, page by page; the site file's [gpuledger.dra] and per-cluster [dra] tables
(gpuledger/site/dra.py); and `gpuledger ingest kubernetes` charging DRA pods with the claims
read through a cluster's kubeconfig.

The API server is the suite's test server (kueue_api_server.py) serving resource.k8s.io/v1
resourceclaims; the claims are tests/fixtures/kubernetes/dra (sources in its README).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.kubernetes.dra_api import list_resource_claims
from connectors.kubernetes.dra_claims import DraNames, read_claim_file
from connectors.kubernetes.kube_api import ApiSettings, KubeApiClient, read_kubeconfig
from gpuledger import cli
from gpuledger.ingest.kubernetes.dra import read_fresh
from gpuledger.site import SiteError, load_site
from tests.connectors.kubernetes.dra_world import CLAIMS, PODS, World
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.kueue_api_server import KueueApi, make_pki, server_tls

ITEMS = [i for i in json.loads(CLAIMS.read_text(encoding="utf-8"))["items"]
         if i["kind"] == "ResourceClaim"]
SLICES = json.loads((CLAIMS.parent / "resourceslices-20250106T120000Z.json").read_text(
    encoding="utf-8"))["items"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _kubeconfig(tmp_path: Path, url: str, pki: dict[str, Path]) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: c1
  cluster:
    server: {url}
    certificate-authority-data: {_b64(pki['ca.crt'])}
users:
- name: u1
  user:
    client-certificate-data: {_b64(pki['client.crt'])}
    client-key-data: {_b64(pki['client.key'])}
contexts:
- name: prod
  context: {{cluster: c1, user: u1}}
""", encoding="utf-8")
    return path


def _api(pki: dict[str, Path]) -> KueueApi:
    api = KueueApi([[]], tls=server_tls(pki))
    api.groups["resource.k8s.io"] = {"v1": {"resourceclaims": ITEMS, "resourceslices": SLICES},
                                     "v1beta2": {"resourceclaims": ITEMS}}
    return api


def _devices(frame: pl.DataFrame) -> list[tuple]:
    return frame.drop("observed_at", "source").sort("claim_uid", "device").rows()


def test_the_api_lists_every_claim_page_by_page_over_https(tmp_path: Path, pki):
    with _api(pki) as api:
        client = KubeApiClient(read_kubeconfig(_kubeconfig(tmp_path, api.url, pki)),
                               ApiSettings(page_size=3))
        listing = list_resource_claims(client)
        fresh = read_fresh(kubeconfig=_kubeconfig(tmp_path, api.url, pki))
    assert listing.api_version == "resource.k8s.io/v1"
    assert listing.pages == 3
    assert api.requests[:3] == ["/apis/resource.k8s.io",
                                "/apis/resource.k8s.io/v1/resourceclaims?limit=3",
                                "/apis/resource.k8s.io/v1/resourceclaims?limit=3&continue=3"]
    # the API's answer reads as its fixture twin, the kubectl snapshot, does (Pods aside)
    assert _devices(fresh.devices) == _devices(read_claim_file(CLAIMS, T0).devices)
    assert fresh.devices["source"].unique().to_list() == [f"{api.url} resource.k8s.io/v1"]


SITE = """\
[gpuledger]
first_day = "2025-01-06"
db = "ledger.duckdb"

[gpuledger.dra]
device_classes = ["gpu.nvidia.com", "mig.nvidia.com", "mig-1g-12gb.gpu.nvidia.com"]
kueue_config = "kueue-manager-config.yaml"

[gpuledger.clusters.c.prometheus]
openmetrics = "dra.om"
scrape_interval_s = 30

[gpuledger.clusters.c.dra]
kubeconfig = "kubeconfig"
"""

# Kueue's ConfigMap (config/components/manager/controller_manager_config.yaml) with the
# Configuration's resources.deviceClassMappings (Kueue docs' example.com/gpu)
KUEUE_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kueue-manager-config, namespace: kueue-system}
data:
  controller_manager_config.yaml: |
    apiVersion: config.kueue.x-k8s.io/v1beta1
    kind: Configuration
    resources:
      deviceClassMappings:
      - name: example.com/gpu
        deviceClassNames: [gpu.nvidia.com]
      - name: example.com/nic
        deviceClassNames: [nic.example.com]
"""


def test_the_site_names_its_dra_gpus_and_kueues_mapped_resource(tmp_path: Path):
    (tmp_path / "kubeconfig").write_text("", encoding="utf-8")
    (tmp_path / "kueue-manager-config.yaml").write_text(KUEUE_CONFIG, encoding="utf-8")
    site = load_site(_write(tmp_path, SITE))
    assert site.dra.names == DraNames(("gpu.nvidia.com",), (
        "gpu.nvidia.com", "mig.nvidia.com", "mig-1g-12gb.gpu.nvidia.com"))
    assert site.gpu_resources == ("nvidia.com/gpu", "example.com/gpu")  # the NIC is no GPU
    assert site.clusters[0].dra is not None
    assert site.clusters[0].dra.kubeconfig == tmp_path / "kubeconfig"
    with pytest.raises(SiteError, match=r"\[gpuledger.clusters.c.dra.kubeconfig\]: expected "
                                        "kubeconfig"):
        load_site(_write(tmp_path, SITE.replace('kubeconfig = "kubeconfig"', "")))
    with pytest.raises(SiteError, match=r"\[gpuledger.dra.drivers\]: expected a non-empty"):
        load_site(_write(tmp_path, SITE.replace("[gpuledger.dra]\n",
                                                "[gpuledger.dra]\ndrivers = []\n")))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("slices", ["listed", "refused"])
def test_ingest_charges_dra_pods_with_claims_read_through_the_clusters_kubeconfig(
        tmp_path: Path, pki, capsys, slices: str):
    om_file(tmp_path / "dra.om", World(dcgm_dra=False).series())  # no dcgm DRA labels
    (tmp_path / "kueue-manager-config.yaml").write_text(KUEUE_CONFIG, encoding="utf-8")
    with _api(pki) as api:
        if slices == "refused":
            api.forbidden.add("resourceslices")
        _kubeconfig(tmp_path, api.url, pki)
        site = _write(tmp_path, SITE)
        code = cli.main(["--config", str(site), "ingest", "kubernetes", "--start",
                         "2025-01-06", "--end", "2025-01-07"])
    assert code == 0
    err = capsys.readouterr().err
    published = 8 if slices == "listed" else 0
    assert (f"ResourceClaims: 6 claims with 6 devices read, {published} devices the drivers' "
            "ResourceSlices publish") in err
    with duckdb.connect(str(tmp_path / "ledger.duckdb"), read_only=True) as con:
        pods = con.execute("SELECT namespace || '/' || pod, gpu_resource, gpus FROM "
                           "k8s_pod_allocations ORDER BY 1").fetchall()
        claims = con.execute("SELECT count(*) FROM k8s_resource_claim_devices").fetchone()
    assert claims == (6,)
    if slices == "refused":
        # the MIG pod's old-style device name carries no profile and no dcgm label names it;
        # the refusal is said
        assert "warning:" in err
        assert "found HTTP 403" in err
        assert [p for p, _, _ in pods] == sorted(f"{p.namespace}/{p.pod}" for p in PODS
                                                if p.namespace != "extended-resource-mig-1g12gb")
    else:  # its slice names the profile: charged as a 1g.12gb instance
        assert [p for p, _, _ in pods] == sorted(f"{p.namespace}/{p.pod}" for p in PODS)
        assert ("extended-resource-mig-1g12gb/mig-1g12gb-pod",
                "dra/mig-1g-12gb.gpu.nvidia.com/1g.12gb", 1) in pods


def test_the_api_lists_the_drivers_resource_slices_and_says_when_refused(tmp_path: Path, pki):
    with _api(pki) as api:
        fresh = read_fresh(kubeconfig=_kubeconfig(tmp_path, api.url, pki))
        assert "/apis/resource.k8s.io/v1/resourceslices?limit=500" in api.requests
        assert fresh.rejects == []
        assert fresh.slices.filter(pl.col("device") == "gpu-2", pl.col("pool") == "node-a"
                                   )["gpu_uuid"].to_list() == [
            "GPU-node-a-0002-0000-0000-000000000000"]
        api.forbidden.add("resourceslices")  # RBAC lets the reader list claims only
        refused = read_fresh(kubeconfig=_kubeconfig(tmp_path, api.url, pki))
    assert refused.slices.height == 0
    assert _devices(refused.devices) == _devices(fresh.devices)  # the claims are read anyway
    [reject] = refused.rejects
    assert reject.field == "resourceslices"
    assert "found HTTP 403" in reject.reason
    assert "grant list on resourceslices" in reject.reason
