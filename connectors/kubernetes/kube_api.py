"""Kueue Workloads straight from the Kubernetes API: a kubeconfig reader and a list client.

``read_kubeconfig`` resolves one context of a kubeconfig (server, CA, client certificate, bearer
token or token file, basic auth, ``insecure-skip-tls-verify``) the way kubectl does: paths are
relative to the kubeconfig's folder, ``*-data`` fields are base64. Exec and auth-provider
plugins are refused with a clear error (they run programs; use a token file or a client
certificate for a service account instead).

``KubeApiClient.list_workloads`` asks ``/apis/kueue.x-k8s.io`` for the preferred version
(Kueue 0.15+ serves ``v1beta2``, older releases ``v1beta1``), then lists every Workload page by
page (``limit``/``continue``), with a timeout per request and retries with backoff on
connection errors, 429 and 5xx. A ``continue`` token that expired (410 Gone) restarts the list.

The fixture twin of the API is a folder of kubectl JSON snapshots whose names carry their UTC
time (``snapshot_files``). Nothing here knows about the ledger.
"""

import base64
import binascii
import http.client
import json
import os
import re
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from connectors.errors import SourceError
from connectors.secrets import excerpt
from connectors.textfiles import regular_files

GROUP = "kueue.x-k8s.io"
KNOWN_VERSIONS = ("v1beta2", "v1beta1")  # newest first: the order to try without discovery
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# a snapshot file's UTC time in its name: 20260112T000000Z or 20260112T000000.123456Z
STAMP = re.compile(r"(\d{8}T\d{6})(?:\.(\d{1,6}))?Z")


@dataclass(frozen=True)
class KubeCredentials:
    """One resolved kubeconfig context: where the API server is and how to authenticate."""

    kubeconfig: Path
    context: str
    server: str
    namespace: str = ""  # the context's default namespace (listing uses the site's)
    ca_pem: bytes | None = None
    insecure: bool = False
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    token: str = ""
    token_file: Path | None = None  # re-read on every request: projected tokens rotate
    username: str = ""
    password: str = ""

    def bearer(self) -> str:
        if self.token_file is not None:
            try:
                return self.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                msg = (f"{self.kubeconfig}: expected a readable tokenFile {self.token_file}, "
                       f"found {exc.strerror}")
                raise SourceError(msg) from exc
        return self.token


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are answers, not followed: urllib would send the Authorization header on to
    whatever host the Location names."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


@dataclass(frozen=True)
class ApiSettings:
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5  # doubled after each failed attempt
    page_size: int = 500


@dataclass(frozen=True)
class WorkloadList:
    """Every Workload the API server listed at one instant (one consistent resourceVersion)."""

    api_version: str  # kueue.x-k8s.io/v1beta2
    resource_version: str
    observed_at: datetime  # naive UTC: when the first page was asked for
    items: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    pages: int = 1

    def document(self) -> dict[str, Any]:
        """The list as ``kubectl get workloads -A -o json`` writes it (a ``v1`` List)."""
        return {"apiVersion": "v1", "kind": "List",
                "metadata": {"resourceVersion": self.resource_version},
                "items": list(self.items)}


# ------------------------------------------------------------------------------- kubeconfig


def _named(doc: dict[str, Any], key: str, name: str, path: Path) -> dict[str, Any]:
    entries = doc.get(key) or []
    if not isinstance(entries, list):
        msg = f"{path}: {key}: expected a list, found {type(entries).__name__}"
        raise SourceError(msg)
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key[:-1])  # clusters[].cluster, users[].user, contexts[].context
            if not isinstance(body, dict):
                msg = f"{path}: {key}[name={name}].{key[:-1]}: expected a mapping, found {body!r}"
                raise SourceError(msg)
            return body
    names = [e.get("name") for e in entries if isinstance(e, dict)]
    msg = f"{path}: expected {key} to have an entry named {name!r}, found {names}"
    raise SourceError(msg)


def _file_or_data(body: dict[str, Any], key: str, where: str, base: Path) -> bytes | None:
    """``key-data`` (base64) or ``key`` (a file, relative to the kubeconfig's folder)."""
    data = body.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError) as exc:
            msg = f"{where}.{key}-data: expected base64, found {str(data)[:40]!r}"
            raise SourceError(msg) from exc
    name = body.get(key)
    if not name:
        return None
    file = Path(str(name)).expanduser()
    file = file if file.is_absolute() else base / file
    try:
        return file.read_bytes()
    except OSError as exc:
        msg = f"{where}.{key}: expected a readable file {file}, found {exc.strerror}"
        raise SourceError(msg) from exc


def read_kubeconfig(path: Path, context: str = "") -> KubeCredentials:
    """Resolve ``context`` (default: ``current-context``) of the kubeconfig at ``path``."""
    path = Path(path).expanduser()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        msg = f"expected a kubeconfig at {path}, found none"
        raise SourceError(msg) from exc
    except yaml.YAMLError as exc:
        msg = f"{path}: expected a kubeconfig (YAML), found a syntax error: {exc}"
        raise SourceError(msg) from exc
    if not isinstance(doc, dict):
        msg = f"{path}: expected a kubeconfig mapping, found {type(doc).__name__}"
        raise SourceError(msg)
    name = context or str(doc.get("current-context") or "")
    if not name:
        msg = f"{path}: expected a context (current-context or the site's context), found none"
        raise SourceError(msg)
    ctx = _named(doc, "contexts", name, path)
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    cluster = _named(doc, "clusters", cluster_name, path)
    user = _named(doc, "users", user_name, path) if user_name else {}
    where_c, where_u = f"{path}: clusters[name={cluster_name}].cluster", \
        f"{path}: users[name={user_name}].user"
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            msg = (f"{where_u}: expected a token, tokenFile or client certificate, found an "
                   f"{plugin} plugin (not supported; give gpuledger a service account token)")
            raise SourceError(msg)
    server = str(cluster.get("server") or "").rstrip("/")
    if not server.startswith(("http://", "https://")):
        msg = f"{where_c}.server: expected an http:// or https:// URL, found {server!r}"
        raise SourceError(msg)
    base = path.parent
    token_file = None
    if user.get("tokenFile"):
        token_file = Path(str(user["tokenFile"])).expanduser()
        token_file = token_file if token_file.is_absolute() else base / token_file
    cert = _file_or_data(user, "client-certificate", where_u, base)
    key = _file_or_data(user, "client-key", where_u, base)
    if (cert is None) != (key is None):
        msg = (f"{where_u}: expected client-certificate and client-key together, found only "
               f"{'client-certificate' if cert else 'client-key'}")
        raise SourceError(msg)
    return KubeCredentials(
        kubeconfig=path, context=name, server=server,
        namespace=str(ctx.get("namespace") or ""),
        ca_pem=_file_or_data(cluster, "certificate-authority", where_c, base),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        client_cert_pem=cert, client_key_pem=key,
        token=str(user.get("token") or ""), token_file=token_file,
        username=str(user.get("username") or ""), password=str(user.get("password") or ""),
    )


# ------------------------------------------------------------------------------- HTTP client


def _ssl_context(creds: KubeCredentials) -> ssl.SSLContext | None:
    if not creds.server.startswith("https://"):
        return None
    if creds.insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif creds.ca_pem:
        ctx = ssl.create_default_context(cadata=creds.ca_pem.decode("ascii", "replace"))
    else:
        ctx = ssl.create_default_context()
    if creds.client_cert_pem and creds.client_key_pem:
        # ssl reads certificates only from files: a private folder, gone once loaded
        with tempfile.TemporaryDirectory(prefix="gpuledger-kube-") as tmp:
            cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            for file, data in ((cert, creds.client_cert_pem), (key, creds.client_key_pem)):
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            try:
                ctx.load_cert_chain(cert, key)
            except ssl.SSLError as exc:
                msg = (f"{creds.kubeconfig}: expected a client certificate and its key (PEM), "
                       f"found {exc.reason or exc}")
                raise SourceError(msg) from exc
    return ctx


class KubeApiClient:
    """Read-only GETs against one API server (the credentials of one kubeconfig context)."""

    def __init__(self, creds: KubeCredentials, settings: ApiSettings | None = None,
                 *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.creds = creds
        self.settings = settings or ApiSettings()
        self._ssl = _ssl_context(creds)
        self._sleep = sleep

    def _secrets(self) -> list[str]:
        """Values never shown in a message: the token and the basic-auth pair."""
        try:
            token = self.creds.bearer()
        except SourceError:
            token = ""
        pair = f"{self.creds.username}:{self.creds.password}".encode()
        return [token, self.creds.password, base64.b64encode(pair).decode()]

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "gpuledger"}
        token = self.creds.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif self.creds.username:
            pair = f"{self.creds.username}:{self.creds.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return headers

    def get_json(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` as JSON, retrying what may pass (connection errors, 429, 5xx)."""
        url = self.creds.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        attempts = max(1, self.settings.retries + 1)
        delay = self.settings.backoff_s
        for attempt in range(1, attempts + 1):
            request = urllib.request.Request(url, headers=self._headers())  # noqa: S310
            try:
                opener = urllib.request.build_opener(
                    urllib.request.HTTPSHandler(context=self._ssl), _NoRedirect())
                with opener.open(request, timeout=self.settings.timeout_s) as response:
                    body = response.read()
                break
            except urllib.error.HTTPError as exc:
                # redacted: a proxy may echo the request, Authorization header and all
                text = excerpt(exc.read()[:4096], self._secrets())
                if exc.code not in RETRY_STATUSES or attempt == attempts:
                    raise ApiError(exc.code, f"GET {url}: expected 200, found {exc.code} "
                                   f"{exc.reason}: {text}") from exc
                retry_after = exc.headers.get("Retry-After", "")
                wait = float(retry_after) if retry_after.isdigit() else delay
            # OSError: URLError, timeouts, resets, and TLS alerts that TLS 1.3 delivers on the
            # first read (a refused client certificate) rather than in the handshake
            except (OSError, http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", exc)
                if attempt == attempts:
                    msg = (f"GET {url}: expected an answer within {self.settings.timeout_s:g} s, "
                           f"found {reason} after {attempts} attempts")
                    raise SourceError(msg) from exc
                wait = delay
            self._sleep(min(wait, 30.0))
            delay *= 2
        try:
            doc = json.loads(body)
        except json.JSONDecodeError as exc:
            msg = f"GET {url}: expected JSON, found {body[:120]!r}"
            raise SourceError(msg) from exc
        if not isinstance(doc, dict):
            msg = f"GET {url}: expected a JSON object, found {type(doc).__name__}"
            raise SourceError(msg)
        return doc

    def kueue_version(self) -> str:
        """The version of kueue.x-k8s.io the server prefers (``v1beta2`` on Kueue 0.15+)."""
        try:
            group = self.get_json(f"/apis/{GROUP}")
        except ApiError as exc:
            if exc.status == 404:
                msg = (f"{self.creds.server}: expected the API group {GROUP} (is Kueue "
                       f"installed?), found 404 at /apis/{GROUP}")
                raise SourceError(msg) from exc
            if exc.status != 403:  # discovery forbidden: try the known versions instead
                raise
            return ""
        version = (group.get("preferredVersion") or {}).get("version")
        if not isinstance(version, str) or not version:
            msg = f"/apis/{GROUP}: expected preferredVersion.version, found {group!r:.200}"
            raise SourceError(msg)
        return version

    def list_workloads(self, namespace: str = "") -> WorkloadList:
        """Every Workload (of ``namespace``, or of all), page by page, at one resourceVersion."""
        preferred = self.kueue_version()
        versions = (preferred,) if preferred else KNOWN_VERSIONS
        for version in versions[:-1]:
            try:
                return self._list(version, namespace)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        return self._list(versions[-1], namespace)

    def _list(self, version: str, namespace: str) -> WorkloadList:
        listed = list_all(self, GROUP, version, "workloads", "Workload", namespace)
        return WorkloadList(f"{GROUP}/{version}", listed.resource_version, listed.observed_at,
                            listed.items, listed.pages)


@dataclass(frozen=True)
class ListedItems:
    """Every item of one paged List, as one consistent read."""

    items: tuple[dict[str, Any], ...]
    resource_version: str
    observed_at: datetime  # naive UTC: when the read that completed began
    pages: int


def list_all(client: "KubeApiClient", group: str, version: str, plural: str, kind: str,
             namespace: str = "") -> ListedItems:
    """``GET /apis/<group>/<version>[/namespaces/<ns>]/<plural>`` page by page (``limit``,
    ``continue``); a continue token that expired (410) restarts the list from its first page,
    at most three times. A List's items carry no apiVersion/kind: they get them, as kubectl
    adds them."""
    scope = f"/namespaces/{urllib.parse.quote(namespace)}" if namespace else ""
    path = f"/apis/{group}/{version}{scope}/{plural}"
    for _restart in range(3):
        observed = datetime.now(UTC).replace(tzinfo=None)
        items: list[dict[str, Any]] = []
        token, pages, rv = "", 0, ""
        try:
            while True:
                query = {"limit": str(client.settings.page_size)}
                if token:
                    query["continue"] = token
                page = client.get_json(path, query)
                pages += 1
                meta = page.get("metadata") or {}
                rv = str(meta.get("resourceVersion") or rv)
                batch = page.get("items")
                if not isinstance(batch, list):
                    msg = f"GET {path}: expected an 'items' array, found {batch!r:.100}"
                    raise SourceError(msg)
                for item in batch:
                    if isinstance(item, dict):
                        item.setdefault("apiVersion", f"{group}/{version}")
                        item.setdefault("kind", kind)
                    items.append(item)
                token = str(meta.get("continue") or "")
                if not token:
                    return ListedItems(tuple(items), rv, observed, pages)
        except ApiError as exc:
            if exc.status != 410 or not token:  # 410: the continue token expired
                raise
    msg = f"GET {path}: expected a complete list, found the continue token expired 3 times"
    raise SourceError(msg)


class ApiError(SourceError):
    """An HTTP answer other than 200 (``status`` says which)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ------------------------------------------------------------------------ the fixture twin


def snapshot_time(path: Path) -> datetime | None:
    """The naive-UTC time a snapshot file's name carries (``…20260112T000000Z…``), if any."""
    match = STAMP.search(path.name)
    if not match:
        return None
    stamp = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S")  # UTC by name
    micros = match.group(2)
    return stamp.replace(microsecond=int(micros.ljust(6, "0"))) if micros else stamp


def stamp_name(at: datetime) -> str:
    """The file name stem a snapshot taken at ``at`` (naive UTC) gets: sortable by time."""
    return at.strftime("%Y%m%dT%H%M%S.%fZ")


def snapshot_files(folder: Path) -> list[tuple[datetime, Path]]:
    """A folder of kubectl JSON snapshots (``.json`` or ``.json.gz``) in the order taken.

    Each name must carry its UTC time; one that does not is an error, not a guess."""
    found = []
    names = regular_files(folder, lambda n: n.endswith((".json", ".json.gz"))) \
        if folder.is_dir() else []
    for path in names:
        at = snapshot_time(path)
        if at is None:
            msg = (f"{path}: expected a snapshot name with its UTC time such as "
                   f"workloads-20260112T000000Z.json, found {path.name!r}")
            raise SourceError(msg)
        found.append((at, path))
    return sorted(found)


def list_workloads(creds: KubeCredentials, namespace: str = "",
                   settings: ApiSettings | None = None) -> WorkloadList:
    """One call: the Workloads the API server of ``creds`` lists now."""
    return KubeApiClient(creds, settings).list_workloads(namespace)
