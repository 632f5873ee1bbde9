"""Fixtures for tests against a real Prometheus backfilled from OpenMetrics files.

``real_prometheus`` (session scope) is a factory::

    server = real_prometheus(om_path)              # shared server for that file (started if needed)
    server = real_prometheus(om_path, fresh=True)  # a private server: own data dir, own port
    server.url, server.data_dir, server.port, server.pid
    server.stop()   # SIGTERM via stop-prom.sh, waits for exit; no-op if already gone
    server.kill()   # SIGKILL, waits for exit (simulates a crash mid-ingest)

Servers come from ``tests/services/prometheus/start-prom.sh`` (installs Prometheus with apt-get if
missing, backfills with promtool, starts on 127.0.0.1 with no scrape jobs). Every server started
in the session is stopped at session end.

If this machine cannot run it (not Linux, Prometheus missing and no apt-get / no root), tests
using the fixture are skipped with the reason -- unless ``GPULEDGER_REQUIRE_SERVICES=1`` (CI),
where they fail instead.

Also here: ``small_cluster_om`` (path of the committed fixture) and ``small_cluster`` (that file
parsed, so tests can count what was written).

``prometheus_scrape`` (session scope) is the factory of the scrape harness (``scrape.py``: real
Prometheus servers scraping exposition text we serve, one per ``honor_labels`` setup)::

    with prometheus_scrape([kube_state_metrics(text)], interval_s=1.0) as harness:
        start, end = harness.wait_for_samples(5)

A harness not stopped by its test is stopped at session end. Same skip/fail policy.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import requests

from tests.prometheus_real.scrape import ScrapeHarness, ScrapeHarnessError, Target

ROOT = Path(__file__).resolve().parents[2]
SERVICE_DIR = ROOT / "tests" / "services" / "prometheus"
START_SCRIPT = SERVICE_DIR / "start-prom.sh"
STOP_SCRIPT = SERVICE_DIR / "stop-prom.sh"
FIXTURE_DIR = ROOT / "tests" / "fixtures" / "openmetrics"
SMALL_CLUSTER_OM = FIXTURE_DIR / "small-cluster.om.gz"
REQUIRE_ENV = "GPULEDGER_REQUIRE_SERVICES"

INSTALL_TIMEOUT_S = 1800  # apt-get update + install on a slow mirror, waiting for the dpkg lock
START_TIMEOUT_S = 600  # backfill of a large file + start-up


# --------------------------------------------------------------------------- skip / fail policy


def services_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"  # same test as tests/conftest.py


def unavailable(reason: str) -> NoReturn:
    """Skip (developer machine) or fail (CI, GPULEDGER_REQUIRE_SERVICES=1)."""
    if services_required():
        pytest.fail(f"{reason} [{REQUIRE_ENV}=1: failing instead of skipping]", pytrace=False)
    pytest.skip(f"real Prometheus unavailable: {reason}")


def environment_problem() -> str | None:
    """Why this machine cannot run start-prom.sh, or None."""
    if sys.platform != "linux":
        return f"needs Linux (this is {sys.platform})"
    if shutil.which("bash") is None:
        return "needs bash"
    if shutil.which("prometheus") and shutil.which("promtool"):
        return None
    if shutil.which("apt-get") is None:
        return "prometheus/promtool are not installed and there is no apt-get to install them"
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        ok = sudo is not None and subprocess.run(
            [sudo, "-n", "true"], capture_output=True, check=False, stdin=subprocess.DEVNULL
        ).returncode == 0
        if not ok:
            return "prometheus/promtool are not installed and installing needs root or sudo -n"
    return None


# --------------------------------------------------------------------------- process helpers


def _pid_alive(pid: int, data_dir: Path) -> bool:
    """True if `pid` is a live (non-zombie) prometheus serving `data_dir`/tsdb."""
    proc = Path("/proc") / str(pid)
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    want = f"--storage.tsdb.path={data_dir / 'tsdb'}".encode()
    return state not in {"Z", "X"} and want in argv


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class PrometheusServer:
    """A Prometheus started by start-prom.sh. Immutable; stop()/kill() act on the process."""

    url: str
    data_dir: Path
    port: int
    pid: int
    om_path: Path

    def is_running(self) -> bool:
        return _pid_alive(self.pid, self.data_dir)

    def is_ready(self, timeout: float = 2.0) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop (SIGTERM; SIGKILL after `timeout`). Returns once the process is gone.

        No-op if this server is already gone -- also when a newer server (the factory's restart
        of a shared server) now owns the data dir: that one is not ours to stop.
        """
        try:
            owner = int((self.data_dir / "prometheus.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            owner = None
        if owner != self.pid:
            self._signal_and_wait(signal.SIGTERM, timeout)
            return
        proc = subprocess.run(
            ["bash", str(STOP_SCRIPT), str(self.data_dir), str(int(timeout))],
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
            timeout=timeout + 30,
        )
        if proc.returncode != 0 or self.is_running():
            msg = f"stop-prom.sh failed for pid {self.pid}: {proc.stderr.strip()}"
            raise RuntimeError(msg)

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the server (a crash, no clean shutdown) and wait until it is gone."""
        self._signal_and_wait(signal.SIGKILL, timeout)

    def _signal_and_wait(self, sig: signal.Signals, timeout: float) -> None:
        if not self.is_running():  # checks pid *and* command line: never signal a recycled pid
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while self.is_running():
            if time.monotonic() > deadline:
                msg = f"prometheus pid {self.pid} still running {timeout}s after {sig.name}"
                raise RuntimeError(msg)
            time.sleep(0.02)


class PrometheusFactory:
    """Callable behind the ``real_prometheus`` fixture."""

    def __init__(self, base_dir: Path) -> None:
        self._base = base_dir
        self._started: list[PrometheusServer] = []
        self._shared: dict[tuple[Path, str], PrometheusServer] = {}
        self._fresh = 0

    def __call__(self, om_path: str | os.PathLike[str], *, fresh: bool = False) -> PrometheusServer:
        """A ready server holding `om_path` (plain or .gz OpenMetrics).

        Default: one shared server per file content, restarted (same data dir, so no new backfill)
        if an earlier test stopped or killed it. ``fresh=True``: a new private server (own data
        dir and port) -- use it when the test stops/kills the server or must not see others' state.
        """
        path = Path(om_path).resolve()
        if not path.is_file():
            msg = f"OpenMetrics file not found: {path}"
            raise FileNotFoundError(msg)
        digest = _sha256(path)
        key = (path, digest)
        if not fresh:
            current = self._shared.get(key)
            if current is not None and current.is_running() and current.is_ready():
                return current
            data_dir = self._base / f"shared-{path.name}-{digest[:12]}"
        else:
            self._fresh += 1
            data_dir = self._base / f"fresh-{self._fresh:03d}-{path.name}-{digest[:12]}"
        server = self._start(path, data_dir)
        if not fresh:
            self._shared[key] = server
        return server

    def _start(self, path: Path, data_dir: Path) -> PrometheusServer:
        last = ""
        for _attempt in range(3):  # the free port can be taken between pick and bind: retry
            port = _free_port()
            proc = subprocess.run(
                ["bash", str(START_SCRIPT), str(path), str(data_dir), str(port)],
                capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
                timeout=START_TIMEOUT_S,
            )
            if proc.returncode == 3:
                unavailable(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else
                            "start-prom.sh could not install prometheus")
            if proc.returncode == 0:
                pid = int((data_dir / "prometheus.pid").read_text().strip())
                server = PrometheusServer(  # resolved: start-prom.sh uses the physical path
                    url=proc.stdout.strip().splitlines()[-1], data_dir=data_dir.resolve(),
                    port=port,
                    pid=pid, om_path=path,
                )
                self._started.append(server)
                return server
            last = f"start-prom.sh exit {proc.returncode}:\n{proc.stderr}"
            if "address already in use" not in _tail(data_dir / "prometheus.log"):
                break
        pytest.fail(last, pytrace=False)

    def stop_all(self) -> list[str]:
        errors = []
        for server in reversed(self._started):
            try:
                server.stop()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors.append(str(exc))
        return errors


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def prometheus_tools() -> dict[str, str]:
    """Paths of `prometheus` and `promtool`, installing them (start-prom.sh) when missing."""
    problem = environment_problem()
    if problem:
        unavailable(problem)
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        proc = subprocess.run(
            ["bash", str(START_SCRIPT), "--install-only"], capture_output=True, text=True,
            check=False, stdin=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT_S,
        )
        if proc.returncode == 3:
            unavailable(proc.stderr.strip() or "start-prom.sh --install-only failed")
        if proc.returncode != 0:
            pytest.fail(f"installing prometheus failed:\n{proc.stderr}", pytrace=False)
    tools = {name: shutil.which(name) for name in ("prometheus", "promtool")}
    missing = [name for name, where in tools.items() if where is None]
    if missing:
        unavailable(f"{', '.join(missing)} not on PATH after installation")
    return {name: str(where) for name, where in tools.items()}


@pytest.fixture(scope="session")
def real_prometheus(
    prometheus_tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusFactory]:
    factory = PrometheusFactory(tmp_path_factory.mktemp("prometheus"))
    yield factory
    errors = factory.stop_all()
    assert not errors, errors


class ScrapeFactory:
    """Callable behind the ``prometheus_scrape`` fixture: starts `ScrapeHarness` es."""

    def __init__(self, base_dir: Path, prometheus: str) -> None:
        self._base = base_dir
        self._prometheus = prometheus
        self._started: list[ScrapeHarness] = []

    def __call__(self, targets: list[Target], *, interval_s: float = 1.0,
                 setups: dict | None = None) -> ScrapeHarness:
        """A started harness scraping `targets` (see scrape.py); use it as a context manager."""
        base = self._base / f"scrape-{len(self._started) + 1:03d}"
        harness = ScrapeHarness(targets, base, prometheus=self._prometheus,
                                interval_s=interval_s, setups=setups)
        self._started.append(harness)
        try:
            harness.start()
        except ScrapeHarnessError as exc:
            pytest.fail(str(exc), pytrace=False)
        return harness

    def stop_all(self) -> list[str]:
        errors = []
        for harness in reversed(self._started):
            try:
                harness.stop()
            except ScrapeHarnessError as exc:
                errors.append(str(exc))
        return errors


@pytest.fixture(scope="session")
def prometheus_scrape(
    prometheus_tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ScrapeFactory]:
    factory = ScrapeFactory(tmp_path_factory.mktemp("scrape"), prometheus_tools["prometheus"])
    yield factory
    errors = factory.stop_all()
    assert not errors, errors


@pytest.fixture(scope="session")
def small_cluster_om() -> Path:
    return SMALL_CLUSTER_OM


# --------------------------------------------------------------------------- OpenMetrics parsing

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (\S+))?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class OpenMetricsFile:
    """Samples of an OpenMetrics file, keyed like Prometheus stores them.

    ``series[(name, labels)]`` = [(unix_seconds, value), ...]; `labels` is a sorted tuple without
    ``__name__`` and without empty-valued labels (Prometheus drops ``label=""`` on ingest).
    """

    path: Path
    series: dict[tuple[str, Labels], list[tuple[float, float]]]

    @property
    def total_samples(self) -> int:
        return sum(len(points) for points in self.series.values())

    @property
    def min_time(self) -> float:
        return min(points[0][0] for points in self.series.values())

    @property
    def max_time(self) -> float:
        return max(points[-1][0] for points in self.series.values())

    def select(self, name: str, **match: str) -> dict[Labels, list[tuple[float, float]]]:
        """Series of metric `name` whose labels include `match` (value "" = label absent)."""
        out = {}
        for (n, labels), points in self.series.items():
            if n != name:
                continue
            d = dict(labels)
            if all(d.get(k, "") == v for k, v in match.items()):
                out[labels] = points
        return out

    @classmethod
    def read(cls, path: Path) -> OpenMetricsFile:
        opener = gzip.open if path.suffix == ".gz" else Path.open
        series: dict[tuple[str, Labels], list[tuple[float, float]]] = {}
        with opener(path, "rt", encoding="utf-8") as fh:
            for raw in fh:
                line = raw.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                m = _SAMPLE.match(line)
                if m is None or m.group(4) is None:
                    msg = f"cannot parse (or no timestamp): {line!r}"
                    raise ValueError(msg)
                name, body, value, ts = m.groups()
                labels = tuple(sorted(
                    (k, v) for k, v in _LABEL.findall(body or "") if v != ""
                ))
                series.setdefault((name, labels), []).append((float(ts), float(value)))
        return cls(path=path, series=series)


@pytest.fixture(scope="session")
def small_cluster(small_cluster_om: Path) -> OpenMetricsFile:
    return OpenMetricsFile.read(small_cluster_om)
