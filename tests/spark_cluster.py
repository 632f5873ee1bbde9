"""A real standalone Spark cluster on 127.0.0.1 for the engine tests (a pytest plugin).

``spark_cluster`` (session scope) starts one master and one worker with the pyspark package's own
``bin/spark-class`` (``tests/services/spark/start-spark.sh``, Java 17), yields a
:class:`SparkCluster` (``.url``, ``.json()`` the master's state, ``.worker_json()`` the worker's)
and stops both at the end of the session (``stop-spark.sh``, by pid). ``spark_master`` is its URL,
``spark://127.0.0.1:<port>``. The start-up time is in ``.started_in_s`` and in the terminal
summary.

Registered for the whole suite by ``tests/conftest.py`` (``pytest_plugins``); mark the tests
``spark``. On a machine without Java or pyspark the tests using it skip with the reason, unless
``GPULEDGER_REQUIRE_SERVICES=1``: then they fail (and the conftest rule fails a run where tests
marked ``spark`` were skipped).
"""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICE_DIR = ROOT / "tests" / "services" / "spark"
START_SCRIPT = SERVICE_DIR / "start-spark.sh"
STOP_SCRIPT = SERVICE_DIR / "stop-spark.sh"
REQUIRE_ENV = "GPULEDGER_REQUIRE_SERVICES"
START_TIMEOUT_S = 120  # start-spark.sh gives up after 60 s itself, with the logs' tails
WORKER_CORES = 2
WORKER_MEMORY = "2g"

_STARTED: list["SparkCluster"] = []


@dataclass(frozen=True)
class SparkCluster:
    url: str  # spark://127.0.0.1:<port>
    data_dir: Path  # the daemons' logs, pid files, worker and local dirs
    webui_port: int
    worker_webui_port: int
    started_in_s: float
    cores: int = WORKER_CORES
    memory: str = WORKER_MEMORY
    pids: tuple[int, ...] = field(default_factory=tuple)

    def json(self) -> dict:
        """The master's state: workers, active and completed applications."""
        return _get_json(f"http://127.0.0.1:{self.webui_port}/json/")

    def worker_json(self) -> dict:
        """The worker's state: the executors it runs."""
        return _get_json(f"http://127.0.0.1:{self.worker_webui_port}/json/")

    def stop(self) -> None:
        subprocess.run([str(STOP_SCRIPT), str(self.data_dir)], check=False,
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=90)


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def unavailable(reason: str) -> NoReturn:
    """Skip (developer machine) or fail (CI, GPULEDGER_REQUIRE_SERVICES=1)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} [{REQUIRE_ENV}=1: failing instead of skipping]", pytrace=False)
    pytest.skip(f"real Spark cluster unavailable: {reason}")


def environment_problem() -> str | None:
    """Why this machine cannot start the cluster, or None."""
    if sys.platform != "linux":
        return f"needs Linux (this is {sys.platform})"
    if shutil.which("bash") is None or shutil.which("curl") is None:
        return "needs bash and curl"
    home = os.environ.get("JAVA_HOME")
    if not (home and (Path(home) / "bin" / "java").is_file()) and shutil.which("java") is None:
        return ("needs Java 17 (JAVA_HOME or java on PATH; Debian: openjdk-17-jre-headless, "
                "which tests/services/install-system-packages.sh installs as root)")
    if importlib.util.find_spec("pyspark") is None:
        return "needs pyspark (pip install -e '.[dev]' or '.[spark]')"
    return None


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def start_cluster(data_dir: Path) -> SparkCluster:
    """Start a master and a worker under ``data_dir``; raises with the script's output."""
    import pyspark
    ports = _free_ports(4)
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent),
           "SPARK_WORKER_CORES": str(WORKER_CORES), "SPARK_WORKER_MEMORY": WORKER_MEMORY}
    started = time.monotonic()
    # close_fds (the default): the daemons hold nothing of pytest's, such as a flock
    done = subprocess.run([str(START_SCRIPT), str(data_dir), *map(str, ports)], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=START_TIMEOUT_S, check=False)
    took = time.monotonic() - started
    if done.returncode != 0:
        msg = (f"start-spark.sh exited with {done.returncode} after {took:.1f} s:\n"
               f"{done.stderr[-4000:]}")
        raise RuntimeError(msg)
    url = done.stdout.strip().splitlines()[-1]
    pids = tuple(int((data_dir / f"{role}.pid").read_text()) for role in ("master", "worker"))
    return SparkCluster(url=url, data_dir=data_dir, webui_port=ports[1],
                        worker_webui_port=ports[3], started_in_s=took, pids=pids)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A real standalone Spark master with one worker on 127.0.0.1, one per test session (a
    second definition of this fixture, e.g. imported into a conftest, gets the same cluster)."""
    problem = environment_problem()
    if problem:
        unavailable(problem)
    if _STARTED:
        yield _STARTED[0]
        return
    data_dir = tmp_path_factory.mktemp("spark-cluster")
    try:
        cluster = start_cluster(data_dir)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        subprocess.run([str(STOP_SCRIPT), str(data_dir)], check=False, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=90)
        pytest.fail(f"the Spark cluster did not start: {exc}", pytrace=False)
    _STARTED.append(cluster)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_master(spark_cluster: SparkCluster) -> str:
    """The master URL of :func:`spark_cluster`: ``spark://127.0.0.1:<port>``."""
    return spark_cluster.url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for cluster in _STARTED:
        terminalreporter.write_line(
            f"spark: standalone master + worker ({cluster.cores} cores, {cluster.memory}) "
            f"at {cluster.url} started in {cluster.started_in_s:.1f} s")
