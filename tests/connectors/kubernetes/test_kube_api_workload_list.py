"""The Kubernetes API client lists every Workload: kubeconfig contexts (token, token file, client
certificate, CA data, insecure), the preferred Kueue version, pagination with an expired continue
token, retries; and a folder of time-named snapshots is its fixture twin."""

import base64
from datetime import datetime
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.kubernetes.kube_api import (
    ApiSettings,
    KubeApiClient,
    read_kubeconfig,
    snapshot_files,
)
from tests.connectors.kubernetes.kueue_api_server import (
    KueueApi,
    make_pki,
    server_tls,
    upstream_workload,
)

DOCS = "docs-v1beta2-created-admitted-pending.json"


def _workloads() -> list[dict]:
    return [upstream_workload(DOCS, "sample-job"), upstream_workload(DOCS, "my-workload"),
            upstream_workload("issue-2291-podsready-timeout-readmitted.json",
                              "job-sample-job-992ea")]


def _kubeconfig(tmp_path: Path, cluster: str, user: str, *, context: str = "prod",
                current: str = "prod") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: {current}
clusters:
- name: c1
  cluster:
{cluster}
users:
- name: u1
  user:
{user}
contexts:
- name: {context}
  context:
    cluster: c1
    user: u1
    namespace: team-a
""", encoding="utf-8")
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_a_token_context_lists_every_page_of_the_preferred_version(tmp_path: Path):
    with KueueApi([_workloads()], token="s3cret") as api:
        config = _kubeconfig(tmp_path, f"    server: {api.url}", "    token: s3cret")
        creds = read_kubeconfig(config)
        assert (creds.context, creds.server, creds.namespace) == ("prod", api.url, "team-a")
        listing = KubeApiClient(creds, ApiSettings(page_size=2)).list_workloads()
    assert listing.api_version == "kueue.x-k8s.io/v1beta2"
    assert listing.resource_version == "1000"
    assert listing.pages == 2
    assert [i["metadata"]["name"] for i in listing.items] == [
        w["metadata"]["name"] for w in _workloads()]
    # kubectl's shape: items get apiVersion/kind back, the List is a v1 List
    assert {i["apiVersion"] for i in listing.items} == {"kueue.x-k8s.io/v1beta2"}
    doc = listing.document()
    assert (doc["kind"], doc["metadata"]["resourceVersion"]) == ("List", "1000")
    assert api.requests[0] == "/apis/kueue.x-k8s.io"
    assert api.requests[1:] == ["/apis/kueue.x-k8s.io/v1beta2/workloads?limit=2",
                                "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=2&continue=0%3A2"]


def test_a_kueue_before_0_15_is_listed_as_v1beta1_and_a_namespace_alone(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("rotated-1\n")
    with KueueApi([_workloads()], version="v1beta1", token="rotated-1") as api:
        config = _kubeconfig(tmp_path, f"    server: {api.url}", "    tokenFile: token")
        client = KubeApiClient(read_kubeconfig(config))
        listing = client.list_workloads("my-namespace")
        assert [i["metadata"]["name"] for i in listing.items] == ["my-workload"]
        assert listing.api_version == "kueue.x-k8s.io/v1beta1"
        token.write_text("rotated-2\n")  # a projected token rotated: read again each request
        with pytest.raises(SourceError, match="expected 200, found 401"):
            client.list_workloads()


def test_an_expired_continue_token_restarts_the_list(tmp_path: Path):
    with KueueApi([_workloads()], expire_continue_once=True) as api:
        config = _kubeconfig(tmp_path, f"    server: {api.url}", "    token: t")
        listing = KubeApiClient(read_kubeconfig(config),
                                ApiSettings(page_size=1)).list_workloads()
    assert len(listing.items) == 3  # each Workload once, from the restarted list
    assert len({i["metadata"]["uid"] for i in listing.items}) == 3


def test_unavailable_answers_are_retried_then_reported(tmp_path: Path):
    waits: list[float] = []
    with KueueApi([_workloads()], fail_first=2) as api:
        config = _kubeconfig(tmp_path, f"    server: {api.url}", "    token: t")
        client = KubeApiClient(read_kubeconfig(config), ApiSettings(retries=2, backoff_s=0.1),
                               sleep=waits.append)
        assert len(client.list_workloads().items) == 3
        assert waits == [0.1, 0.2]
        api.fail_first = 5
        with pytest.raises(SourceError, match="expected 200, found 503"):
            client.list_workloads()


def test_nothing_listening_is_a_clear_error(tmp_path: Path):
    config = _kubeconfig(tmp_path, "    server: http://127.0.0.1:9", "    token: t")
    client = KubeApiClient(read_kubeconfig(config), ApiSettings(retries=1, backoff_s=0),
                           sleep=lambda _s: None)
    with pytest.raises(SourceError, match=r"expected an answer within 30 s, found .* after 2"):
        client.list_workloads()


def test_client_certificate_and_ca_data_reach_an_https_server(tmp_path: Path, pki):
    with KueueApi([_workloads()], tls=server_tls(pki)) as api:
        user = (f"    client-certificate-data: {_b64(pki['client.crt'])}\n"
                f"    client-key-data: {_b64(pki['client.key'])}")
        cluster = (f"    server: {api.url}\n"
                   f"    certificate-authority-data: {_b64(pki['ca.crt'])}")
        creds = read_kubeconfig(_kubeconfig(tmp_path, cluster, user))
        assert creds.ca_pem == pki["ca.crt"].read_bytes()
        assert len(KubeApiClient(creds).list_workloads().items) == 3
        # the same as files named relative to the kubeconfig's folder
        files = tmp_path / "files"
        files.mkdir()
        for name in ("ca.crt", "client.crt", "client.key"):
            (files / name).write_bytes(pki[name].read_bytes())
        user = "    client-certificate: files/client.crt\n    client-key: files/client.key"
        cluster = f"    server: {api.url}\n    certificate-authority: files/ca.crt"
        creds = read_kubeconfig(_kubeconfig(tmp_path, cluster, user))
        assert len(KubeApiClient(creds).list_workloads().items) == 3
        # without the CA the server is not trusted; without a client certificate it refuses
        creds = read_kubeconfig(_kubeconfig(tmp_path, f"    server: {api.url}", user))
        with pytest.raises(SourceError, match="CERTIFICATE_VERIFY_FAILED"):
            KubeApiClient(creds, ApiSettings(retries=0)).list_workloads()
        creds = read_kubeconfig(_kubeconfig(tmp_path, cluster, "    token: t"))
        with pytest.raises(SourceError):
            KubeApiClient(creds, ApiSettings(retries=0)).list_workloads()
        # insecure-skip-tls-verify trusts any server certificate
        cluster = f"    server: {api.url}\n    insecure-skip-tls-verify: true"
        creds = read_kubeconfig(_kubeconfig(tmp_path, cluster, user))
        assert creds.insecure
        assert len(KubeApiClient(creds).list_workloads().items) == 3


def test_a_missing_context_names_the_ones_there(tmp_path: Path):
    config = _kubeconfig(tmp_path, "    server: https://k:6443", "    token: t")
    with pytest.raises(SourceError, match=r"expected contexts to have an entry named 'dev', "
                       r"found \['prod'\]"):
        read_kubeconfig(config, "dev")
    config = _kubeconfig(tmp_path, "    server: https://k:6443", "    token: t", current="")
    with pytest.raises(SourceError, match=r"expected a context .*found none"):
        read_kubeconfig(config)
    with pytest.raises(SourceError, match="expected a kubeconfig at"):
        read_kubeconfig(tmp_path / "absent")


@pytest.mark.parametrize(("user", "message"), [
    ("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws",
     r"users\[name=u1\]\.user: expected a token, tokenFile or client certificate, found an "
     r"exec plugin \(not supported"),
    ("    auth-provider:\n      name: oidc", "found an auth-provider plugin"),
    ("    client-certificate-data: bm90IGJhc2U2NA==", "expected client-certificate and "
     "client-key together, found only client-certificate"),
    ("    client-key-data: '%%%'", r"client-key-data: expected base64"),
])
def test_unsupported_or_broken_users_are_clear_errors(tmp_path: Path, user: str, message: str):
    config = _kubeconfig(tmp_path, "    server: https://k:6443", user)
    with pytest.raises(SourceError, match=message):
        read_kubeconfig(config)


def test_a_server_that_is_not_a_url_is_refused(tmp_path: Path):
    config = _kubeconfig(tmp_path, "    server: k:6443", "    token: t")
    with pytest.raises(SourceError, match=r"clusters\[name=c1\]\.cluster\.server: expected an "
                       r"http:// or https:// URL, found 'k:6443'"):
        read_kubeconfig(config)


def test_a_folder_of_snapshots_is_read_in_the_order_taken(tmp_path: Path):
    for name in ("workloads-20260105T101500Z.json", "20260105T100000.250000Z.json.gz",
                 "workloads-20260105T100000Z.json", "README.md"):
        (tmp_path / name).write_text("{}")
    assert snapshot_files(tmp_path) == [
        (datetime(2026, 1, 5, 10), tmp_path / "workloads-20260105T100000Z.json"),
        (datetime(2026, 1, 5, 10, 0, 0, 250000), tmp_path / "20260105T100000.250000Z.json.gz"),
        (datetime(2026, 1, 5, 10, 15), tmp_path / "workloads-20260105T101500Z.json"),
    ]
    (tmp_path / "latest.json").write_text("{}")
    with pytest.raises(SourceError, match="expected a snapshot name with its UTC time"):
        snapshot_files(tmp_path)
