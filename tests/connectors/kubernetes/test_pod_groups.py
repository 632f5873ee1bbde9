"""The scheduler's gang objects (Kubernetes' Workload API, coscheduling PodGroups): every shape
of tests/fixtures/kubernetes/scheduling/ read into gang rows, bad items rejected alone, and the
same objects served by the local HTTPS API server (discovery, pages) read by the client."""

import base64
import json
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.kube_api import ApiSettings, KubeApiClient, read_kubeconfig
from connectors.kubernetes.pod_groups import read_pod_group_items, read_pod_group_snapshot
from connectors.kubernetes.pod_groups_api import list_pod_groups
from tests.connectors.kubernetes.kueue_api_server import KueueApi, make_pki, server_tls
from tests.helpers import FIXTURES

SCHEDULING = FIXTURES / "kubernetes" / "scheduling"
COLUMNS = ["api_version", "kind", "namespace", "name", "pod_group", "policy", "min_count",
           "job_name", "pod_label", "workload_name"]


def _items(name: str) -> list[dict]:
    return json.loads((SCHEDULING / name).read_text(encoding="utf-8"))["items"]


def _rows(path: Path) -> list[tuple]:
    return [tuple(r.values()) for r in read_pod_group_snapshot(path).groups.select(COLUMNS)
            .to_dicts()]


def test_every_version_of_the_workload_api_gives_its_gang_min_count_and_job():
    v1a1 = "scheduling.k8s.io/v1alpha1"
    assert _rows(SCHEDULING / "workload-api-v1alpha1-docs.json") == [
        (v1a1, "Workload", "some-ns", "training-job-workload", "workers", "gang", 4,
         "training-job", None, None),
        (v1a1, "Workload", "some-ns", "batch-workload", "workers", "basic", None, "batch-job",
         None, None),
        # two pod groups: which pod is in which is in the pod spec only, so no Job
        (v1a1, "Workload", "some-ns", "driver-worker-workload", "driver", "gang", 1, None, None,
         None),
        (v1a1, "Workload", "some-ns", "driver-worker-workload", "workers", "gang", 8, None, None,
         None),
    ]
    v1a2 = "scheduling.k8s.io/v1alpha2"
    assert _rows(SCHEDULING / "workload-api-v1alpha2-job.json") == [
        (v1a2, "Workload", "training", "training-policy", "worker", "gang", 8, "train-8", None,
         None),
        (v1a2, "PodGroup", "training", "training-policy-worker-5f7c9", "worker", "gang", 8,
         "train-8", None, "training-policy"),
    ]
    v1b1 = "scheduling.k8s.io/v1beta1"
    assert _rows(SCHEDULING / "workload-api-v1beta1-kep5547.json") == [
        (v1b1, "Workload", "training", "trainer-4-x7k2p", "trainer", "gang", 4, "trainer-4",
         None, None),
        (v1b1, "PodGroup", "training", "trainer-4-x7k2p-trainer-q9z4w", "trainer", "gang", 4,
         "trainer-4", None, "trainer-4-x7k2p"),
    ]
    assert _rows(SCHEDULING / "coscheduling-podgroup.json") == [
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup", "default", "pg1", "", "gang", 3, None,
         "pg1", None)]


def test_bad_items_are_rejected_one_by_one_and_the_rest_load():
    snap = read_pod_group_snapshot(SCHEDULING / "bad-items-one-defect-each.json")
    assert snap.listed == 6
    assert snap.groups.height == 1  # the good item, last
    assert [(r.line_no, r.field, r.reason) for r in snap.rejects] == [
        (0, "items[0].spec.podGroups[0].policy.gang.minCount",
         "expected an integer >= 1, found a string '4x'"),
        (1, "items[1].spec.podGroups[0].policy", "expected a gang or basic policy, found an "
         "object"),
        (2, "items[2].spec.podGroups", "expected an array, found none"),
        (3, "items[3].kind", "expected a Workload or PodGroup of scheduling.k8s.io or a "
         "PodGroup of scheduling.x-k8s.io, found a string 'apps/v1 Deployment'"),
        (4, "items[4]", "expected a Workload or PodGroup object, found null"),
    ]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _served() -> dict:
    """The fixtures as a 1.37 server has them: scheduling.k8s.io/v1 (PriorityClasses only) is
    the group's preferred version, the Workload API is v1beta1."""
    beta = _items("workload-api-v1beta1-kep5547.json")
    return {
        "scheduling.k8s.io": {
            "v1": {"priorityclasses": []},
            "v1beta1": {"workloads": [i for i in beta if i["kind"] == "Workload"],
                        "podgroups": [i for i in beta if i["kind"] == "PodGroup"]},
        },
        "scheduling.x-k8s.io": {"v1alpha1": {"podgroups": _items("coscheduling-podgroup.json")}},
    }


def test_the_https_api_server_serves_them_and_the_client_reads_them(tmp_path: Path):
    pki = make_pki(tmp_path / "pki")
    with KueueApi([[]], tls=server_tls(pki)) as api:
        api.groups = _served()
        config = tmp_path / "kubeconfig"
        config.write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster:
    server: {api.url}
    certificate-authority-data: {_b64(pki['ca.crt'])}
users:
- name: reader
  user:
    client-certificate-data: {_b64(pki['client.crt'])}
    client-key-data: {_b64(pki['client.key'])}
contexts:
- name: lab
  context: {{cluster: lab, user: reader}}
""", encoding="utf-8")
        client = KubeApiClient(read_kubeconfig(config), ApiSettings(page_size=1))
        listing = list_pod_groups(client)
        requests = list(api.requests)
    assert listing.versions == {"scheduling.k8s.io/workloads": "v1beta1",
                                "scheduling.k8s.io/podgroups": "v1beta1",
                                "scheduling.x-k8s.io/podgroups": "v1alpha1"}
    assert listing.missing == ()
    # discovery looked past the preferred v1, and every list came page by page
    assert "/apis/scheduling.k8s.io/v1" in requests
    assert "/apis/scheduling.k8s.io/v1beta1/podgroups?limit=1" in requests
    # the client's list is the kubectl List of the fixture files: the same rows
    rows, rejects, listed = read_pod_group_items(listing.items, "api")
    assert (rejects, listed) == ([], 3)
    files = pl.concat([read_pod_group_snapshot(SCHEDULING / name).groups for name in (
        "workload-api-v1beta1-kep5547.json", "coscheduling-podgroup.json")])
    assert (pl.DataFrame(rows).drop("source_file").to_dicts()
            == files.drop("source_file").to_dicts())
    assert listing.document()["kind"] == "List"


def test_a_server_without_the_apis_lists_nothing_and_says_so(tmp_path: Path):
    with KueueApi([[]]) as api:
        config = tmp_path / "kubeconfig"
        config.write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters: [{{name: lab, cluster: {{server: "{api.url}"}}}}]
users: [{{name: reader, user: {{token: t}}}}]
contexts: [{{name: lab, context: {{cluster: lab, user: reader}}}}]
""", encoding="utf-8")
        listing = list_pod_groups(KubeApiClient(read_kubeconfig(config)))
    assert listing.items == ()
    assert listing.missing == ("scheduling.k8s.io/workloads", "scheduling.k8s.io/podgroups",
                               "scheduling.x-k8s.io/podgroups")


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_older_alpha_versions_are_listed_where_they_are_the_only_ones(tmp_path: Path,
                                                                      version: str):
    name = {"v1alpha1": "workload-api-v1alpha1-docs.json",
            "v1alpha2": "workload-api-v1alpha2-job.json"}[version]
    items = _items(name)
    with KueueApi([[]]) as api:
        served = {"workloads": [i for i in items if i["kind"] == "Workload"]}
        if version == "v1alpha2":
            served["podgroups"] = [i for i in items if i["kind"] == "PodGroup"]
        api.groups = {"scheduling.k8s.io": {"v1": {"priorityclasses": []}, version: served}}
        config = tmp_path / "kubeconfig"
        config.write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters: [{{name: lab, cluster: {{server: "{api.url}"}}}}]
users: [{{name: reader, user: {{token: t}}}}]
contexts: [{{name: lab, context: {{cluster: lab, user: reader}}}}]
""", encoding="utf-8")
        listing = list_pod_groups(KubeApiClient(read_kubeconfig(config)), "training")
    assert listing.versions["scheduling.k8s.io/workloads"] == version
    assert [i["metadata"]["namespace"] for i in listing.items] == (
        ["training", "training"] if version == "v1alpha2" else [])
