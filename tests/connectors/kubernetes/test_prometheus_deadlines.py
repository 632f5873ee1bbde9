"""Every Prometheus request has a total deadline and a window a budget (issue #13, item 6):
a server on 127.0.0.1 that accepts and never answers, or trickles its answer, ends the read in
bounded time with a message that says why; the first retry says what it waits for."""

import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.prometheus import PrometheusHttpSource
from gpuledger.cli import main

START, END = datetime(2026, 1, 5), datetime(2026, 1, 6)


class _Server:
    """A TCP server on 127.0.0.1: `mode` 'hang' accepts and never answers; 'trickle' sends an
    HTTP 200 head then one byte of body every 0.2 s, for ever."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.accepted = 0
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + 60  # stops by itself
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self.conns.append(conn)
            if self.mode == "trickle":
                threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n")
            while not self.stop.is_set():
                conn.sendall(b" ")
                time.sleep(0.2)
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture(params=["hang", "trickle"])
def server(request) -> Iterator[_Server]:
    s = _Server(request.param)
    yield s
    s.close()


def source(port: int, **kw) -> PrometheusHttpSource:
    cfg = PrometheusConfig(url=f"http://127.0.0.1:{port}", backoff_s=0.1, **kw)
    return PrometheusHttpSource(cfg)


def test_each_request_ends_at_its_total_deadline(server: _Server):
    src = source(server.port, timeout_s=1.0, retries=1, window_budget_s=None)
    t0 = time.monotonic()
    with pytest.raises(SourceError, match="did not answer"):
        src.raw_samples("kube_pod_info", START, END)
    took = time.monotonic() - t0
    assert server.accepted == 2  # the first try and one retry
    assert 2.0 <= took < 4.0  # two deadlines and a 0.1 s pause; a trickle never resets it


def test_the_window_budget_ends_a_read_of_many_requests(server: _Server):
    src = source(server.port, timeout_s=1.0, retries=10, window_budget_s=2.5)
    t0 = time.monotonic()
    with src.window_budget(), pytest.raises(SourceError, match=r"budget of 2.5 s"):
        src.raw_samples("kube_pod_info", START, END)
    assert time.monotonic() - t0 < 4.0


def test_the_first_retry_says_what_it_waits_for(server: _Server, caplog):
    src = source(server.port, timeout_s=0.5, retries=2, window_budget_s=None)
    with caplog.at_level(logging.WARNING, logger="gpuledger.sources.prometheus"), \
            pytest.raises(SourceError):
        src.raw_samples("kube_pod_info", START, END)
    retries = [r.getMessage() for r in caplog.records]
    assert len(retries) == 1, retries  # the first retry only, not every one
    assert f"127.0.0.1:{server.port}" in retries[0]
    assert "retrying in 0.1 s (attempt 2 of 3, each within 0.5 s)" in retries[0]


def test_the_cli_ingest_fails_in_bounded_time_with_one_line(server: _Server, tmp_path, capsys):
    t0 = time.monotonic()
    code = main(["--db", str(tmp_path / "l.duckdb"), "ingest", "kubernetes",
                 "--prometheus-url", f"http://127.0.0.1:{server.port}", "--start", "2026-01-05",
                 "--end", "2026-01-06", "--timeout", "1", "--retries", "5",
                 "--window-budget", "3", "--cluster", "c1"])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 1
    assert took < 8.0
    assert "gpuledger ingest: error: Prometheus at" in err
    assert "window's budget of 3 s" in err
    assert "Traceback" not in err


def test_a_nonsense_deadline_is_refused():
    with pytest.raises(ValueError, match="expected retries >= 0, timeout_s > 0"):
        PrometheusConfig(url="http://127.0.0.1:1", connect_timeout_s=0)
    with pytest.raises(ValueError, match="expected a positive window_budget_s"):
        PrometheusConfig(url="http://127.0.0.1:1", window_budget_s=-1)


def test_no_source_is_read_while_the_ledger_is_held(tmp_path):
    """A Prometheus that never answers does not keep other writers out (issue #13, item 6)."""
    import subprocess
    import sys
    from pathlib import Path

    hung = _Server("hang")
    db = tmp_path / "l.duckdb"
    identity = tmp_path / "identity.csv"
    identity.write_text("source_kind,key,person,team,cost_centre,valid_from,valid_to\n"
                        "slurm_user,alice,Alice,phys,CC1,,\n", encoding="utf-8")
    root = Path(__file__).resolve().parents[3]
    ingest = subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "--db", str(db), "ingest", "kubernetes",
         "--prometheus-url", f"http://127.0.0.1:{hung.port}", "--start", "2026-01-05",
         "--end", "2026-01-06", "--timeout", "4", "--retries", "0", "--cluster", "c1"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while hung.accepted == 0 and time.monotonic() < deadline:  # the ingest is reading now
            time.sleep(0.05)
        assert hung.accepted >= 1
        assert main(["--db", str(db), "import-identity", str(identity)]) == 0
        _, err = ingest.communicate(timeout=60)
    finally:
        if ingest.poll() is None:
            ingest.kill()
            ingest.communicate()
        hung.close()
    assert ingest.returncode == 1
    assert "did not answer" in err
