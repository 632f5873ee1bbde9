"""Scrape harness: a real Prometheus scrapes exposition text we serve, as a cluster's would.

Usage (the ``prometheus_scrape`` fixture is in conftest.py; mark such tests ``prometheus``)::

    from tests.prometheus_real.scrape import EXPOSITIONS, kube_pod_status_phase, kube_state_metrics

    def test_pods_as_each_setup_stores_them(prometheus_scrape):
        pods = kube_state_metrics((EXPOSITIONS / "kube-state-metrics-pod_test.prom").read_text())
        shard = kube_state_metrics(  # a second target, its body a function of harness seconds
            lambda t: kube_pod_status_phase("ns", "p", "uid-p", "Pending" if t < 8 else "Running"),
            job="kube-state-metrics-shard-1", path="/metrics/shard-1", pod="kube-state-metrics-1")
        with prometheus_scrape([pods, shard], interval_s=1.0) as h:  # "honor" + "nohonor" servers
            start, end = h.wait_for_samples(5)  # >= 5 scrapes of every job on both servers
            info = h.source("nohonor").raw_samples("kube_pod_info", start, end)
            assert set(info["exported_pod"]) == {"pod1", "pod2"}
            h.freeze()  # scraping stops; now the normal path: ingest from h.url("nohonor")

A module-scoped fixture can hold one harness for several tests (``with prometheus_scrape(...) as
h: yield h``). Timing: Prometheus' discovery manager hands targets to the scrapers about 5 s after
start, so the first scrape comes ~5-6 s after the harness started; then one per ``interval_s``.
A harness of two servers and 10 scrapes at 1 s takes ~15 s.

API

* ``Target(job, path, body, namespace, pod, container, service, endpoint="http", instance=...,
  node=None, extra_labels={})``: one exporter. ``body`` is the exposition text, or a callable
  ``(seconds since the harness started) -> text`` called on every scrape (each server scrapes on
  its own, so one instant may be served twice with slightly different seconds). The other fields
  are the target labels a Prometheus Operator ServiceMonitor gives the exporter's pod (``job`` is
  the Service's name; ``instance`` the pod IP:port). Builders with realistic defaults:
  ``kube_state_metrics(body, **changes)``, ``dcgm_exporter(body, **changes)`` (GPU Operator
  names), ``kueue_controller(body, **changes)``; ``node`` is off unless given (no ServiceMonitor
  adds it by default).
* ``ScrapeHarness`` (built and started by the fixture; a context manager, ``stop()`` is
  idempotent): ``url(setup)``, ``source(setup, **PrometheusConfig fields)`` (a
  ``PrometheusHttpSource``, closed at stop), ``exporter_url`` (our HTTP server),
  ``elapsed()`` (the clock the callables get), ``set_body(path, body)``, ``served`` (one
  ``Served(setup, path, at_s)`` per answered scrape), ``scrapes(setup)`` (successful scrape times
  per job, from ``up``), ``wait_for_samples(n, timeout_s=None, common=False)`` -> ``Window(start,
  end)``, ``freeze()`` -> ``Window`` (stop scraping, keep serving queries: use it before reads
  that go past the window, e.g. the ingest's whole-UTC-day reads).
* Setups: by default two Prometheus servers, ``"honor"`` (every job ``honor_labels: true``) and
  ``"nohonor"`` (every job ``honor_labels: false``, the ServiceMonitor default). Pass
  ``setups={"kps": {"kube-state-metrics": True, "nvidia-dcgm-exporter": False}}`` for a mixed
  server (that one is kube-prometheus-stack's: KSM honoured, dcgm-exporter not); a job missing
  from such a mapping gets ``honor_labels: false``.

Why one server per setup and not one server with ``-honor`` / ``-nohonor`` jobs: production
code reads a whole Prometheus and never filters on ``job``, so a job-suffix selector would test
a read path no site has (and would need a ``MetricsSource`` wrapper rewriting every selector).
With a server per setup, ``source("nohonor")`` or ``gpuledger ingest kubernetes
--prometheus-url <url("nohonor")>`` stores and reads exactly what a site with that setting
has. Cost: one more Prometheus process (~50 MB RSS, idle between 1 s scrapes).

What Prometheus 2.42 stores (checked with a real scrape by ``test_scrape_shapes.py``): with
``honor_labels: false`` every target label the series also carries with a non-empty value
(``namespace``, ``pod``, ``container``, ``job``, ``instance``, ``node``, ...) is kept as
``exported_<label>`` and the plain label takes the target's value; target labels the series lacks
are added. With ``true`` the series' own values win and target labels are added only where the
series lacks the label -- a series exposing ``node=""`` counts as having it, so it is stored with
no ``node`` at all. Labels with an empty value are dropped either way. ``job`` is the scrape
job's name (do not set it in ``extra_labels``); ``up`` carries the target labels only.

Helpers: ``EXPOSITIONS`` (tests/fixtures/expositions, upstream-derived bodies),
``exposition(lines)`` (join lines into a body), ``kube_pod_status_phase(namespace, pod, uid,
phase)`` (KSM's five phase lines for a pod).

``wait_for_samples(n)`` polls ``up[...]`` on every server until every job has at least ``n``
successful scrapes in ``[start, end)`` and returns that window. ``end`` lies in the widest gap
between scrapes in the interval before the earliest "latest scrape" over all (setup, job): each
target scrapes sequentially and a scrape's samples and ``up`` are committed together, so no
sample can later appear in the window (reads of it are repeatable). ``start`` is the moment the
harness started (before any scrape); with ``common=True`` it lies in the gap just before the
latest first scrape over all (setup, job), so every server holds every job's scrapes throughout
the window. Both are naive UTC ``datetime`` (whole ms) like the frames' ``ts``. On timeout it
fails (``ScrapeTimeout``, an ``AssertionError``) with the counts so far, the targets' last scrape
errors and any exception a body callable raised -- at once if a body callable raised.

Servers scrape in step: Prometheus seeds a target's offset within the interval with its labels,
its URL and the host, which are the same on every server (the setup travels in an
``Authorization`` header, not in the URL), so all servers scrape a target within a few ms of
each other and a time-dependent body gives them the same text. Window boundaries sit in gaps
between scrapes, never between two servers' scrapes of one tick. A server may still begin one
interval later than another: compare setups on a ``common=True`` window.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import socket
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import requests

from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.prometheus import PrometheusHttpSource

ROOT = Path(__file__).resolve().parents[2]
EXPOSITIONS = ROOT / "tests" / "fixtures" / "expositions"
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_SETUPS: Mapping[str, bool | Mapping[str, bool]] = {"honor": True, "nohonor": False}
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0

Body = str | Callable[[float], str]


class ScrapeHarnessError(RuntimeError):
    """The harness could not start (bad targets, Prometheus would not come up)."""


class ScrapeTimeout(AssertionError):
    """`wait_for_samples` did not see enough scrapes in time (a test failure, with details)."""


class Window(NamedTuple):
    """``[start, end)`` in naive UTC, as ``raw_samples`` and the ingest take it."""

    start: datetime
    end: datetime


@dataclass(frozen=True)
class Served:
    setup: str  # which Prometheus scraped (from its scrape's "Authorization: Bearer <setup>")
    path: str
    at_s: float  # harness seconds at which the body was made


@dataclass(frozen=True)
class Target:
    """One exporter, with the target labels a ServiceMonitor gives its pod."""

    job: str  # scrape job name and `job` label (Prometheus Operator: the Service's name)
    path: str  # HTTP path the body is served at, e.g. "/metrics/ksm"
    body: Body
    namespace: str
    pod: str
    container: str
    service: str
    endpoint: str = "http"  # the Service port's name
    instance: str = "10.244.0.10:8080"  # pod IP:port
    node: str | None = None  # no ServiceMonitor default: only where a site's relabeling adds it
    extra_labels: Mapping[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        """Target labels (without ``job``, which Prometheus sets from the job name)."""
        out = {
            "namespace": self.namespace, "pod": self.pod, "container": self.container,
            "service": self.service, "endpoint": self.endpoint, "instance": self.instance,
        }
        if self.node is not None:
            out["node"] = self.node
        out.update(self.extra_labels)
        return out


def kube_state_metrics(body: Body, **changes) -> Target:
    """kube-state-metrics as the prometheus-community chart deploys it (release in monitoring)."""
    base = Target(
        job="kube-state-metrics", path="/metrics/kube-state-metrics", body=body,
        namespace="monitoring", pod="kube-state-metrics-6d5f8b9c4-x2x7k",
        container="kube-state-metrics", service="kube-state-metrics", endpoint="http",
        instance="10.244.0.17:8080",
    )
    return replace(base, **changes)


def dcgm_exporter(body: Body, **changes) -> Target:
    """dcgm-exporter as the NVIDIA GPU Operator deploys it (one pod per GPU node)."""
    base = Target(
        job="nvidia-dcgm-exporter", path="/metrics/dcgm-exporter", body=body,
        namespace="gpu-operator", pod="nvidia-dcgm-exporter-7xk2p",
        container="nvidia-dcgm-exporter", service="nvidia-dcgm-exporter",
        endpoint="gpu-metrics", instance="10.244.3.5:9400",
    )
    return replace(base, **changes)


def kueue_controller(body: Body, **changes) -> Target:
    """Kueue's controller manager behind its own metrics Service (kueue-system)."""
    base = Target(
        job="kueue-controller-manager-metrics-service", path="/metrics/kueue", body=body,
        namespace="kueue-system", pod="kueue-controller-manager-7b9c6d5f4-q8w2n",
        container="manager", service="kueue-controller-manager-metrics-service",
        endpoint="https", instance="10.244.1.9:8443",
    )
    return replace(base, **changes)


# --------------------------------------------------------------------------- the exporter


class _Handler(BaseHTTPRequestHandler):
    harness: ScrapeHarness  # set on the subclass made per harness
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        auth = self.headers.get("Authorization", "")
        setup = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        try:
            text = self.harness._render(url.path, setup)
        except KeyError:
            self._send(404, f"no exposition at {url.path}\n")
            return
        except Exception:  # a test's body callable failed: answer 500, remember it
            detail = traceback.format_exc()
            self.harness._note_error(f"body of {url.path} raised:\n{detail}")
            self._send(500, detail)
            return
        self._send(200, text, TEXT_FORMAT)

    def _send(self, status: int, text: str, content_type: str = "text/plain") -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows stderr
        return


# --------------------------------------------------------------------------- the harness


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _utc_now_ms() -> datetime:
    now = datetime.now(UTC).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass
class _Server:
    setup: str
    data_dir: Path
    port: int
    proc: subprocess.Popen
    log: object  # the open log file

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class ScrapeHarness:
    """Our exporter (HTTP thread) plus one private Prometheus per setup, scraping it."""

    def __init__(
        self,
        targets: Sequence[Target],
        base_dir: Path,
        *,
        prometheus: str = "prometheus",
        interval_s: float = 1.0,
        setups: Mapping[str, bool | Mapping[str, bool]] | None = None,
    ) -> None:
        self.targets = list(targets)
        self.base_dir = Path(base_dir)
        self.prometheus = prometheus
        self.interval_s = interval_s
        self.setups = dict(DEFAULT_SETUPS if setups is None else setups)
        self._check()
        self._bodies: dict[str, Body] = {t.path: t.body for t in self.targets}
        self._lock = threading.Lock()
        self.served: list[Served] = []
        self.errors: list[str] = []
        self._t0 = 0.0
        self.started_at: datetime | None = None
        self._frozen = False
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[str, _Server] = {}
        self._sources: list[PrometheusHttpSource] = []
        self._session = requests.Session()

    def _check(self) -> None:
        if not self.targets:
            msg = "expected at least one Target, found none"
            raise ScrapeHarnessError(msg)
        for what, values in (("job", [t.job for t in self.targets]),
                             ("path", [t.path for t in self.targets])):
            dup = sorted({v for v in values if values.count(v) > 1})
            if dup:
                msg = f"expected each target {what} once, found {dup} more than once"
                raise ScrapeHarnessError(msg)
        reserved = sorted({k for t in self.targets for k in t.extra_labels
                           if k == "job" or k.startswith("__")})
        if reserved:
            msg = f"expected no job or __ labels in extra_labels, found {reserved}"
            raise ScrapeHarnessError(msg)
        bad = [t.path for t in self.targets if not t.path.startswith("/")]
        if bad:
            msg = f"expected target paths starting with '/', found {bad}"
            raise ScrapeHarnessError(msg)
        if not self.setups:
            msg = "expected at least one setup, found none"
            raise ScrapeHarnessError(msg)
        jobs = {t.job for t in self.targets}
        for setup, honor in self.setups.items():
            unknown = [] if isinstance(honor, bool) else sorted(set(honor) - jobs)
            if unknown:
                msg = f"expected setup {setup!r} to name jobs among {sorted(jobs)}, found {unknown}"
                raise ScrapeHarnessError(msg)
        if not 0.05 <= self.interval_s <= 60:
            msg = f"expected a scrape interval between 0.05 and 60 s, found {self.interval_s}"
            raise ScrapeHarnessError(msg)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ScrapeHarness:
        if self._httpd is not None:
            return self
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = time.monotonic()
        self.started_at = _utc_now_ms()
        handler = type("Handler", (_Handler,), {"harness": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
            name="scrape-harness-exporter", daemon=True,
        )
        self._thread.start()
        try:
            for setup in self.setups:
                self._servers[setup] = self._start_server(setup)
            for server in self._servers.values():
                self._wait_ready(server)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the Prometheus servers (SIGTERM, then SIGKILL) and the exporter. Idempotent."""
        for source in self._sources:
            source.close()
        self._sources.clear()
        problems = []
        for server in self._servers.values():
            proc = server.proc
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
                    problems.append(f"prometheus {server.setup} (pid {proc.pid}) needed SIGKILL")
            server.log.close()
        self._servers.clear()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            assert self._thread is not None
            self._thread.join(5)
            self._httpd = None
        self._session.close()
        if problems:
            raise ScrapeHarnessError("; ".join(problems))

    def __enter__(self) -> ScrapeHarness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ prometheus

    def _config(self, setup: str) -> dict:
        honor = self.setups[setup]
        port = self.exporter_port
        interval = f"{round(self.interval_s * 1000)}ms"
        jobs = []
        for t in self.targets:
            flag = honor if isinstance(honor, bool) else bool(honor.get(t.job, False))
            jobs.append({
                "job_name": t.job,
                "honor_labels": flag,
                "metrics_path": t.path,
                # which server scrapes, in a header: not in the URL, which (with the target
                # labels) seeds the scrape offset -- so every server scrapes a target at the same
                # phase of the interval and time-dependent bodies agree across setups
                "authorization": {"type": "Bearer", "credentials": setup},
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": t.labels()}],
            })
        return {
            "global": {"scrape_interval": interval, "scrape_timeout": interval,
                       "evaluation_interval": "1m"},
            "scrape_configs": jobs,
        }

    def _start_server(self, setup: str) -> _Server:
        data_dir = self.base_dir / setup
        data_dir.mkdir(parents=True, exist_ok=True)
        config = data_dir / "prometheus.yml"
        config.write_text(json.dumps(self._config(setup), indent=2) + "\n", encoding="utf-8")
        last = ""
        for _attempt in range(3):  # the free port may be taken between pick and bind
            port = _free_port()
            log_path = data_dir / "prometheus.log"
            log = log_path.open("a", encoding="utf-8")
            proc = subprocess.Popen(
                [self.prometheus, f"--config.file={config}",
                 f"--storage.tsdb.path={data_dir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=1d", "--web.enable-lifecycle"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
            server = _Server(setup, data_dir, port, proc, log)
            try:
                proc.wait(0.3)  # a bad flag/config or a taken port ends it at once
            except subprocess.TimeoutExpired:
                return server
            log.close()
            last = _tail(log_path)
            if "address already in use" not in last:
                break
        msg = f"prometheus for setup {setup!r} exited at start-up:\n{last}"
        raise ScrapeHarnessError(msg)

    def _wait_ready(self, server: _Server) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                msg = (f"prometheus for setup {server.setup!r} exited with "
                       f"{server.proc.returncode}:\n{_tail(server.data_dir / 'prometheus.log')}")
                raise ScrapeHarnessError(msg)
            try:
                if self._session.get(f"{server.url}/-/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        msg = f"prometheus for setup {server.setup!r} not ready after {READY_TIMEOUT_S:.0f} s"
        raise ScrapeHarnessError(msg)

    # ------------------------------------------------------------------ exporter side

    @property
    def exporter_port(self) -> int:
        if self._httpd is None:
            msg = "the harness is not started"
            raise ScrapeHarnessError(msg)
        return self._httpd.server_address[1]

    @property
    def exporter_url(self) -> str:
        return f"http://127.0.0.1:{self.exporter_port}"

    def elapsed(self) -> float:
        """Seconds since start() began (what body callables receive)."""
        return time.monotonic() - self._t0

    def set_body(self, path: str, body: Body) -> None:
        """Serve `body` at `path` from the next scrape on."""
        with self._lock:
            if path not in self._bodies:
                msg = f"expected one of the target paths {sorted(self._bodies)}, found {path!r}"
                raise KeyError(msg)
            self._bodies[path] = body

    def _render(self, path: str, setup: str) -> str:
        with self._lock:
            body = self._bodies[path]
        at = self.elapsed()
        text = body(at) if callable(body) else body
        if not isinstance(text, str):
            msg = f"expected the body callable of {path} to return str, found {type(text)}"
            raise TypeError(msg)
        with self._lock:
            self.served.append(Served(setup, path, at))
        return text

    def _note_error(self, text: str) -> None:
        with self._lock:
            self.errors.append(text)

    # ------------------------------------------------------------------ reading side

    def _server(self, setup: str) -> _Server:
        try:
            return self._servers[setup]
        except KeyError:
            msg = f"expected a setup among {sorted(self.setups)}, found {setup!r}"
            raise KeyError(msg) from None

    def pid(self, setup: str) -> int:
        """Process id of the Prometheus of `setup`."""
        return self._server(setup).proc.pid

    def url(self, setup: str) -> str:
        """Base URL of the Prometheus of `setup` (for PrometheusConfig or --prometheus-url)."""
        return self._server(setup).url

    def source(self, setup: str, **config: object) -> PrometheusHttpSource:
        """A `PrometheusHttpSource` on `setup`'s server (closed when the harness stops)."""
        src = PrometheusHttpSource(PrometheusConfig(self.url(setup), **config))  # type: ignore[arg-type]
        self._sources.append(src)
        return src

    def _up(self, setup: str) -> dict[str, list[tuple[float, float]]]:
        """``up`` samples per job since the start: [(unix seconds, value), ...]."""
        span = max(1, int(self.elapsed()) + 5)
        response = self._session.get(
            f"{self.url(setup)}/api/v1/query",
            params={"query": f"up[{span}s]", "time": f"{time.time():.3f}"}, timeout=10,
        )
        response.raise_for_status()
        out: dict[str, list[tuple[float, float]]] = {t.job: [] for t in self.targets}
        for series in response.json()["data"]["result"]:
            job = series["metric"].get("job", "")
            out.setdefault(job, []).extend((float(t), float(v)) for t, v in series["values"])
        for points in out.values():
            points.sort()
        return out

    def freeze(self) -> Window:
        """Stop all scraping; the servers keep answering queries. The window of every scrape.

        Each server reloads a configuration without scrape jobs (``POST /-/reload``), then the
        harness waits until no new scrape lands. Reads of any window -- whole UTC days included,
        as ``ingest_kubernetes_window`` reads some metrics -- then see exactly what was scraped.
        Returns ``[start, last scrape + 1 ms)``. ``wait_for_samples`` cannot be used afterwards.
        """
        if self.started_at is None:
            msg = "the harness is not started"
            raise ScrapeHarnessError(msg)
        for server in self._servers.values():
            config = server.data_dir / "prometheus.yml"
            frozen = {**self._config(server.setup), "scrape_configs": []}
            config.write_text(json.dumps(frozen, indent=2) + "\n", encoding="utf-8")
            response = self._session.post(f"{server.url}/-/reload", timeout=30)
            if response.status_code != 200:
                msg = (f"expected prometheus {server.setup!r} to reload without scrape jobs, "
                       f"found HTTP {response.status_code}: {response.text[:300]}")
                raise ScrapeHarnessError(msg)
        self._frozen = True
        last = None
        deadline = time.monotonic() + 10 + 5 * self.interval_s
        while time.monotonic() < deadline:  # quiet for two intervals: nothing more will come
            time.sleep(self.interval_s)
            now = max((t for s in self._servers for points in self._up(s).values()
                       for t, _ in points), default=None)
            if now == last:
                break
            last = now
        else:
            msg = f"prometheus kept scraping after the reload without jobs (last {last})"
            raise ScrapeHarnessError(msg)
        end = _naive(last) + timedelta(milliseconds=1) if last is not None else self.started_at
        return Window(self.started_at, end)

    def scrapes(self, setup: str) -> dict[str, list[datetime]]:
        """Times (naive UTC) of the successful scrapes of each job on `setup`'s server."""
        return {job: [_naive(t) for t, v in points if v == 1.0]
                for job, points in self._up(setup).items()}

    def wait_for_samples(self, n: int, *, timeout_s: float | None = None,
                         common: bool = False) -> Window:
        """Wait until every job on every server has `n` scrapes in the returned window.

        ``common=True``: the window starts at the latest first scrape over all (setup, job), so
        every server has scraped every job throughout it (compare setups on that window).
        """
        if n < 1:
            msg = f"expected n >= 1, found {n}"
            raise ValueError(msg)
        if self.started_at is None or self._frozen:
            msg = "the harness is not started" if self.started_at is None else "it is frozen"
            raise ScrapeHarnessError(msg)
        timeout = timeout_s if timeout_s is not None else 15 + 3 * n * self.interval_s
        deadline = time.monotonic() + timeout
        counts: dict[tuple[str, str], int] = {}
        while True:
            if self.errors:
                raise ScrapeTimeout("a body callable failed:\n" + self.errors[0])
            up = {setup: self._up(setup) for setup in self._servers}
            ok = {(setup, job): [t for t, v in points if v == 1.0]
                  for setup, per_job in up.items() for job, points in per_job.items()}
            ticks = [t for per_job in up.values() for points in per_job.values()
                     for t, _ in points]
            if all(ok.values()):
                # end: between scrapes, before every (setup, job)'s latest one (see docstring)
                end_s = _between_scrapes(ticks, min(p[-1][0] for p in _all(up)), self.interval_s)
                start_s = (_between_scrapes(ticks, max(times[0] for times in ok.values()),
                                            self.interval_s) if common else -math.inf)
                counts = {key: sum(1 for t in times if start_s <= t < end_s)
                          for key, times in ok.items()}
                if all(c >= n for c in counts.values()):
                    start = _naive(start_s) if common else self.started_at
                    return Window(start, _naive(end_s))
            else:
                counts = {key: len(times) for key, times in ok.items()}
            if time.monotonic() > deadline:
                raise ScrapeTimeout(self._timeout_message(n, timeout, counts))
            time.sleep(min(0.2, self.interval_s / 2))

    def _timeout_message(self, n: int, timeout: float, counts: Mapping[tuple[str, str], int]
                         ) -> str:
        found = ", ".join(f"{setup}/{job}: {c}" for (setup, job), c in sorted(counts.items()))
        lines = [f"expected at least {n} successful scrapes of every job within {timeout:.0f} s, "
                 f"found {found or 'no up samples'}"]
        for setup in self._servers:
            with contextlib.suppress(Exception):  # details only: never mask the timeout
                body = self._session.get(f"{self.url(setup)}/api/v1/targets", timeout=5).json()
                for t in body["data"]["activeTargets"]:
                    if t.get("lastError"):
                        lines.append(f"  {setup}/{t['labels'].get('job')}: {t['health']}: "
                                     f"{t['lastError']}")
        lines.extend(self.errors[:3])
        return "\n".join(lines)


def _all(up: Mapping[str, Mapping[str, list[tuple[float, float]]]]
         ) -> list[list[tuple[float, float]]]:
    return [points for per_job in up.values() for points in per_job.values()]


def _between_scrapes(ticks: Iterable[float], at: float, interval_s: float) -> float:
    """A time (unix s, whole ms) in the widest gap between scrapes of ``(at - interval, at]``.

    Servers scrape a target within a few ms of each other, so a boundary there never falls
    between two servers' scrapes of the same tick, and it lies before the scrape at `at`.
    """
    lo = at - interval_s
    points = sorted({lo, *(t for t in ticks if lo < t <= at)})
    a, b = max(itertools.pairwise(points), key=lambda g: g[1] - g[0])
    return math.floor((a + b) / 2 * 1000) / 1000


def _naive(unix_s: float) -> datetime:
    return datetime(1970, 1, 1) + timedelta(milliseconds=round(unix_s * 1000))


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def exposition(lines: Iterable[str]) -> str:
    """Join exposition lines into a body (one trailing newline)."""
    return "".join(f"{line}\n" for line in lines)


PHASES = ("Failed", "Pending", "Running", "Succeeded", "Unknown")


def kube_pod_status_phase(namespace: str, pod: str, uid: str, phase: str) -> str:
    """kube-state-metrics' five ``kube_pod_status_phase`` lines for a pod in `phase` (label order
    and HELP as in KSM's internal/store/pod_test.go)."""
    if phase not in PHASES:
        msg = f"expected a phase among {PHASES}, found {phase!r}"
        raise ValueError(msg)
    return exposition([
        "# HELP kube_pod_status_phase [STABLE] The pods current phase.",
        "# TYPE kube_pod_status_phase gauge",
        *(f'kube_pod_status_phase{{namespace="{namespace}",phase="{p}",pod="{pod}",'
          f'uid="{uid}"}} {int(p == phase)}' for p in PHASES),
    ])
