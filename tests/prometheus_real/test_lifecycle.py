"""Stopping and killing the real Prometheus: what later ingest tests can rely on.

* ``kill()`` (SIGKILL, a crash) returns once the process is gone; from then on every request
  fails with ``requests.ConnectionError`` -- also a request loop running in another thread, as an
  ingest would be.
* ``stop()`` is a graceful SIGTERM stop through stop-prom.sh; both are idempotent.
* The factory restarts a stopped/killed shared server on the same data dir: no new backfill, and
  the data survive a SIGKILL.
"""

from __future__ import annotations

import threading
import time

import pytest
import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

pytestmark = pytest.mark.prometheus

END = 1736164800
QUERY = '{__name__!=""}[14400s]'  # every raw sample of the fixture
# (count_over_time over all metrics would fail: dropping __name__ makes e.g. the two DCGM metrics'
# series collide -> "vector cannot contain metrics with the same labelset")


def total_samples(url: str) -> int:
    r = requests.get(f"{url}/api/v1/query", params={"query": QUERY, "time": END}, timeout=10)
    r.raise_for_status()
    return sum(len(s["values"]) for s in r.json()["data"]["result"])


def test_kill_mid_run_makes_server_unreachable(real_prometheus, small_cluster_om, small_cluster):
    server = real_prometheus(small_cluster_om, fresh=True)
    assert total_samples(server.url) == small_cluster.total_samples

    # an "ingest" hammering the server from another thread
    errors: list[BaseException] = []
    answered = threading.Event()
    done = threading.Event()

    def reader() -> None:
        with requests.Session() as session:
            while not done.is_set():
                try:
                    r = session.get(f"{server.url}/api/v1/query",
                                    params={"query": QUERY, "time": END}, timeout=5)
                    r.raise_for_status()
                    answered.set()
                except requests.RequestException as exc:
                    errors.append(exc)
                    return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    assert answered.wait(10), "reader never got an answer"
    t0 = time.monotonic()
    server.kill()
    kill_seconds = time.monotonic() - t0
    thread.join(10)
    done.set()
    assert not thread.is_alive()
    assert len(errors) == 1
    # refused between requests, or cut off inside an answer when the kill lands mid-response
    assert isinstance(errors[0], (requests.ConnectionError,
                                  requests.exceptions.ChunkedEncodingError)), repr(errors[0])
    assert kill_seconds < 5

    assert not server.is_running()
    assert not server.is_ready()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.url}/-/ready", timeout=5)
    # prometheus-api-client surfaces the same exception (retries disabled: its default Retry
    # would back off for a few seconds first)
    with (
        PrometheusConnect(url=server.url, disable_ssl=True, retry=Retry(total=0)) as pc,
        pytest.raises(requests.ConnectionError),
    ):
        pc.custom_query("up")
    server.kill()  # idempotent
    server.stop()  # stale pid file: nothing to do, no error
    assert not (server.data_dir / "prometheus.pid").exists()


def test_stop_is_graceful_and_idempotent(real_prometheus, small_cluster_om):
    server = real_prometheus(small_cluster_om, fresh=True)
    assert server.is_ready()
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 15
    assert not server.is_running()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.url}/-/ready", timeout=5)
    server.stop()
    log = (server.data_dir / "prometheus.log").read_text()
    assert "See you next time!" in log  # Prometheus' clean-shutdown message


def test_shared_server_is_restarted_after_kill_without_new_backfill(
    real_prometheus, small_cluster_om, small_cluster
):
    first = real_prometheus(small_cluster_om)
    assert real_prometheus(small_cluster_om) is first  # shared while alive
    first.kill()
    second = real_prometheus(small_cluster_om)
    assert second is not first
    assert second.data_dir == first.data_dir
    assert second.pid != first.pid
    assert second.is_ready()
    assert total_samples(second.url) == small_cluster.total_samples  # survived the SIGKILL
    log = (second.data_dir / "start-prom.log").read_text().splitlines()
    assert sum("backfilled" in line for line in log) == 1
    assert any("backfill skipped" in line for line in log)
