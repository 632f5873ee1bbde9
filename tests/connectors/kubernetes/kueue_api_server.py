"""A Kubernetes API server for tests: ``GET /apis/kueue.x-k8s.io`` (the APIGroup) and the
Workload list (all namespaces or one), paginated with ``limit``/``continue`` as the real server
does, from a SEQUENCE of snapshots (``advance()`` moves to the next one, so Workloads that
finished can disappear). Optional: a bearer token, HTTPS with a client certificate, failures
before the first answer (retries), and a continue token that expires between pages (410).
Other API groups (``groups``: the scheduler's Workload/PodGroup objects, tests/fixtures/kubernetes/
scheduling/) are served the same way, with their discovery documents.

The Workload objects are Kueue's own (tests/fixtures/kueue/README.md names each source); the
Finished condition is Kueue's: ``Finished`` True, reason ``Succeeded``, "Job finished
successfully" (kueue @ff69552 pkg/controller/jobs/job/job_controller_test.go, line 4094).
"""

import copy
import json
import ssl
import subprocess
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers import FIXTURES

GROUP = "kueue.x-k8s.io"
FINISHED = {"type": "Finished", "status": "True", "reason": "Succeeded",
            "message": "Job finished successfully"}


def upstream_workload(file: str, name: str) -> dict:
    """One Workload object of tests/fixtures/kueue/<file>, by name (a fresh copy)."""
    doc = json.loads((FIXTURES / "kueue" / file).read_text(encoding="utf-8"))
    [item] = [i for i in doc["items"] if isinstance(i, dict)
              and i.get("metadata", {}).get("name") == name]
    return copy.deepcopy(item)


def changed(item: dict, rv: int, **status) -> dict:
    """``item`` as the API server returns it after a write: a new resourceVersion."""
    new = copy.deepcopy(item)
    new["metadata"]["resourceVersion"] = str(rv)
    new.setdefault("status", {}).update(copy.deepcopy(status))
    return new


def finished(item: dict, rv: int, at: str) -> dict:
    conditions = [*copy.deepcopy(item.get("status", {}).get("conditions", [])),
                  {**FINISHED, "lastTransitionTime": at}]
    return changed(item, rv, conditions=conditions)


class KueueApi:
    """The server; ``url``, ``requests`` (paths asked), ``advance()``."""

    def __init__(self, snapshots: list[list[dict]], *, version: str = "v1beta2",
                 token: str = "", tls: ssl.SSLContext | None = None,
                 fail_first: int = 0, expire_continue_once: bool = False) -> None:
        self.snapshots = snapshots
        self.index = 0
        self.version = version
        self.token = token
        self.fail_first = fail_first
        self.expire_continue_once = expire_continue_once
        self.requests: list[str] = []
        # other API groups served beside Kueue's: group -> version (preferred first) ->
        # plural -> items (with apiVersion and kind, as kubectl writes them); discovery too
        self.groups: dict[str, dict[str, dict[str, list[dict]]]] = {}
        self.forbidden: set[str] = set()  # plurals RBAC refuses (403), e.g. resourceslices
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "KueueApi":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def advance(self) -> None:
        self.index = min(self.index + 1, len(self.snapshots) - 1)

    def _page(self, namespace: str, query: dict[str, list[str]]) -> tuple[int, dict]:
        items = [i for i in self.snapshots[self.index]
                 if not namespace or i["metadata"]["namespace"] == namespace]
        limit = int(query.get("limit", ["500"])[0])
        token = query.get("continue", [""])[0]
        start = 0
        if token:
            snap, offset = (int(x) for x in token.split(":"))
            if snap != self.index or self.expire_continue_once:
                self.expire_continue_once = False
                return 410, {"kind": "Status", "status": "Failure", "reason": "Expired",
                             "code": 410, "message": "The provided continue parameter is too "
                             "old to display a consistent list result."}
            start = offset
        page = items[start:start + limit]
        meta = {"resourceVersion": str(1000 + self.index)}
        if start + limit < len(items):
            meta["continue"] = f"{self.index}:{start + limit}"
        body = []
        for item in page:  # a List's items carry no apiVersion/kind
            item = copy.deepcopy(item)
            item.pop("apiVersion", None)
            item.pop("kind", None)
            body.append(item)
        return 200, {"apiVersion": f"{GROUP}/{self.version}", "kind": "WorkloadList",
                     "metadata": meta, "items": body}

    def _other(self, parts: list[str], query: dict[str, list[str]]) -> tuple[int, dict]:
        """``/apis/<group>[/<version>[/namespaces/<ns>]/<plural>]`` of ``self.groups``."""
        versions = self.groups[parts[1]]
        if len(parts) == 2:
            gvs = [{"groupVersion": f"{parts[1]}/{v}", "version": v} for v in versions]
            return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": parts[1],
                         "versions": gvs, "preferredVersion": gvs[0]}
        lists = versions.get(parts[2])
        if lists is None:
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        if len(parts) == 3:
            return 200, {"kind": "APIResourceList", "apiVersion": "v1",
                         "groupVersion": f"{parts[1]}/{parts[2]}",
                         "resources": [{"name": r, "namespaced": True} for r in lists]}
        if parts[-1] in self.forbidden:
            return 403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                         "message": f'{parts[-1]}.{parts[1]} is forbidden: User "u1" cannot '
                                    f'list resource "{parts[-1]}" in API group "{parts[1]}" '
                                    "at the cluster scope"}
        namespace = parts[4] if len(parts) == 6 and parts[3] == "namespaces" else ""
        if parts[-1] not in lists or len(parts) not in (4, 6):
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        items = [i for i in lists[parts[-1]]
                 if not namespace or i["metadata"]["namespace"] == namespace]
        limit = int(query.get("limit", ["500"])[0])
        start = int(query.get("continue", ["0"])[0] or 0)
        meta = {"resourceVersion": str(2000 + self.index)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = [{k: v for k, v in copy.deepcopy(i).items() if k not in ("apiVersion", "kind")}
                for i in items[start:start + limit]]
        return 200, {"apiVersion": f"{parts[1]}/{parts[2]}", "kind": "List", "metadata": meta,
                     "items": body}

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                api.requests.append(self.path)
                if api.fail_first > 0:
                    api.fail_first -= 1
                    self._send(503, {"kind": "Status", "code": 503})
                    return
                if api.token and self.headers.get("Authorization") != f"Bearer {api.token}":
                    self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
                    return
                parts = url.path.strip("/").split("/")
                if len(parts) >= 2 and parts[0] == "apis" and parts[1] in api.groups:
                    self._send(*api._other(parts, urllib.parse.parse_qs(url.query)))
                    return
                if url.path == f"/apis/{GROUP}":
                    gv = {"groupVersion": f"{GROUP}/{api.version}", "version": api.version}
                    versions = [gv] + ([{"groupVersion": f"{GROUP}/v1beta1",
                                         "version": "v1beta1"}]
                                       if api.version != "v1beta1" else [])
                    self._send(200, {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                                     "versions": versions, "preferredVersion": gv})
                    return
                query = urllib.parse.parse_qs(url.query)
                prefix = ["apis", GROUP, api.version]
                if parts == [*prefix, "workloads"]:
                    self._send(*api._page("", query))
                elif (len(parts) == 6 and parts[:3] == prefix and parts[3] == "namespaces"
                      and parts[5] == "workloads"):
                    self._send(*api._page(parts[4], query))
                else:
                    self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

        return Handler


def make_pki(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made by openssl."""
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=test-kube-ca")
    for who, subject, ext in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                              ("client", "/O=gpuledger/CN=gpuledger-reader",
                               "extendedKeyUsage=clientAuth")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out",
            f"{who}.csr", "-subj", subject)
        (folder / f"{who}.ext").write_text(ext + "\n", encoding="utf-8")
        run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{who}.crt", "-days", "2", "-extfile", f"{who}.ext")
    return {name: folder / name for name in
            ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


def server_tls(pki: dict[str, Path]) -> ssl.SSLContext:
    """The server side: its certificate, and a client certificate from the CA required."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["server.crt"], pki["server.key"])
    ctx.load_verify_locations(pki["ca.crt"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
