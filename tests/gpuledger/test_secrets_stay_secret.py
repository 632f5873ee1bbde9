"""Secrets stay out of what gpuledger prints, stores and sends (issue #28, the probe's findings,
each failing before connectors/secrets.py):

* ``doctor`` and ``load`` show a Prometheus URL without its ``user:password@`` when the server
  is down; the Dagster resource's description of the source (run metadata) too;
* an error body that echoes the request (a proxy showing the Authorization header, the token,
  the tenant header) is redacted before it is quoted;
* configured headers never follow a redirect to another host (Prometheus and the Kubernetes API:
  a redirect is an error that says where it points);
* a world-readable bearer-token file is refused like the alert secrets.
"""

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.kubernetes.kube_api import (
    ApiError,
    ApiSettings,
    KubeApiClient,
    KubeCredentials,
)
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.secrets import SecretFileError, check_secret_file, redact, without_credentials
from tests.gpuledger.doctor_sites import doctor, line, write_site
from tests.gpuledger.test_doctor_reports_what_to_fix import _free_port

TOKEN = "s3cr3t-t0ken-value"
PASSWORD = "hunter2-password"


class _Server:
    def __init__(self, handler) -> None:
        self.requests: list[dict[str, str]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                outer.requests.append(dict(self.headers))
                handler(self)

            do_POST = do_GET

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serving(handler) -> Iterator[_Server]:
    server = _Server(handler)
    try:
        yield server
    finally:
        server.close()


def _answer(code: int, body: bytes, headers: dict[str, str] | None = None):
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return handle


def _echo(h: http.server.BaseHTTPRequestHandler) -> None:
    """A proxy that answers 400 with the request it got, headers and all."""
    body = ("bad request:\n" + "".join(f"{k}: {v}\n" for k, v in h.headers.items())).encode()
    _answer(400, body)(h)


def test_redact_takes_out_values_headers_and_url_credentials():
    text = (f"GET https://ops:{PASSWORD}@prom.example/api Authorization: Bearer {TOKEN}\n"
            "X-Api-Key: abcd1234efgh X-Scope-OrgID: tenant-a password=letmein1")
    out = redact(text, [PASSWORD])
    for secret in (PASSWORD, TOKEN, "abcd1234efgh", "letmein1"):
        assert secret not in out
    assert "X-Scope-OrgID: tenant-a" in out  # a tenant id is no secret unless configured
    assert without_credentials(f"https://ops:{PASSWORD}@prom:9090/x") == "https://prom:9090/x"


def test_doctor_and_load_show_the_url_without_its_password(tmp_path: Path, capsys):
    url = f"http://ops:{PASSWORD}@127.0.0.1:{_free_port()}"
    site = write_site(tmp_path, {"a": {"prometheus": {"url": url, "connect_timeout_s": 2,
                                                      "retries": 0}}})
    code, lines = doctor(site, capsys)
    assert code == 1
    reach = line(lines, "prometheus a: reachable")
    assert "http://127.0.0.1:" in reach
    assert PASSWORD not in "\n".join(lines)
    from gpuledger.ingest.site_load import _live
    from gpuledger.site import load_site
    from pipelines.defs.kubernetes.resources import KubernetesSourceResource

    loaded = load_site(site)
    assert all(PASSWORD not in text for text in _live(loaded.clusters[0]))
    described = KubernetesSourceResource(site_file=str(site)).describe(loaded.clusters[0])
    assert PASSWORD not in described
    assert described.startswith("http://127.0.0.1:")


def test_an_echoed_request_is_redacted_before_it_is_quoted(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    with serving(_echo) as proxy:
        source = PrometheusHttpSource(PrometheusConfig(
            proxy.url, bearer_token_file=token, headers={"X-Api-Key": "k3y-value-123"},
            retries=0))
        with pytest.raises(SourceError) as caught:
            source.series("up", *_window())
    message = str(caught.value)
    assert "HTTP 400" in message
    assert TOKEN not in message
    assert "k3y-value-123" not in message
    assert proxy.requests[0]["Authorization"] == f"Bearer {TOKEN}"  # it was sent, not shown


def _client(url: str) -> KubeApiClient:
    return KubeApiClient(KubeCredentials(Path("kubeconfig"), "ctx", url, token=TOKEN),
                         ApiSettings(retries=0))


def test_the_kubernetes_api_error_body_is_redacted_and_redirects_are_not_followed():
    with serving(_echo) as proxy, pytest.raises(ApiError) as caught:
        _client(proxy.url).get_json("/apis/resource.k8s.io")
    assert TOKEN not in str(caught.value)
    with serving(_answer(200, b"{}")) as other:
        with (serving(_answer(302, b"", {"Location": f"{other.url}/apis"})) as moved,
              pytest.raises(ApiError) as caught):
            _client(moved.url).get_json("/apis")
        assert other.requests == []  # the token never went to the other host
    assert "302" in str(caught.value)


def test_prometheus_headers_never_follow_a_redirect_to_another_host():
    with serving(_answer(200, b'{"status":"success","data":[]}')) as other:
        moved_to = f"{other.url}/api/v1/series"
        with serving(_answer(302, b"", {"Location": moved_to})) as moved:
            source = PrometheusHttpSource(PrometheusConfig(
                moved.url, headers={"X-Api-Key": "k3y-value-123"}, retries=0))
            with pytest.raises(SourceError, match="found a redirect \\(HTTP 302\\) to "):
                source.series("up", *_window())
        assert other.requests == []


def test_a_world_readable_token_file_is_refused(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o644)
    with pytest.raises(SecretFileError, match=r"chmod o-r"):
        check_secret_file(token)
    with pytest.raises(SourceError, match=r"not readable by every user \(chmod o-r\)"):
        PrometheusHttpSource(PrometheusConfig("http://127.0.0.1:1", bearer_token_file=token))
    token.chmod(0o640)  # group-readable: a group of service accounts
    PrometheusHttpSource(PrometheusConfig("http://127.0.0.1:1", bearer_token_file=token))
    link = tmp_path / "dir"
    link.mkdir()
    with pytest.raises(SecretFileError, match="expected a regular file"):
        check_secret_file(link)


def _window():
    from datetime import datetime

    return datetime(2026, 1, 5), datetime(2026, 1, 5, 1)


def test_the_kubelets_projected_token_is_accepted_as_it_is(monkeypatch, tmp_path: Path):
    # /var/run/secrets/kubernetes.io/serviceaccount/token is 0644 by the kubelet's default:
    # only the pod's containers see it
    from connectors import secrets

    projected = tmp_path / "secrets" / "kubernetes.io" / "serviceaccount"
    projected.mkdir(parents=True)
    (projected / "token").write_text(TOKEN)
    (projected / "token").chmod(0o644)
    monkeypatch.setattr(secrets, "KUBELET_SECRET_DIRS", (tmp_path / "secrets",))
    check_secret_file(projected / "token")
