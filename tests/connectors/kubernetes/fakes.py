"""Test doubles for the Kubernetes connectors (imported as ``tests.connectors.kubernetes.fakes``).

* ``om_file``: write a small OpenMetrics file from Python data, for ``OpenMetricsFileSource``.
* ``FakePrometheus``: a loopback HTTP server answering ``/api/v1/query`` raw-sample requests
  (``selector[<n>ms]`` at ``time``) from in-memory series with 2.x (closed) or 3.x (left-open)
  range semantics, plus scripted failures, and recording every request.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

Point = tuple[float, float]  # (unix seconds, value)
Series = tuple[str, dict[str, str], list[Point]]

T0 = datetime(2025, 1, 6, 8, 0, 0)  # naive UTC, like the fixture
T0_S = int(T0.replace(tzinfo=UTC).timestamp())


def at(seconds: float) -> float:
    """Unix seconds `seconds` after T0."""
    return T0_S + seconds


def grid(first: float, last: float, step: float = 30.0) -> list[float]:
    """Unix timestamps T0+first, T0+first+step, ... <= T0+last."""
    out = []
    t = first
    while t <= last + 1e-9:
        out.append(at(t))
        t += step
    return out


def _fmt(value: float) -> str:
    if value != value:  # NaN
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def om_text(series: Iterable[Series]) -> str:
    lines = []
    for name, labels, points in series:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        prefix = f"{name}{{{body}}}" if labels else name
        lines.extend(f"{prefix} {_fmt(v)} {_fmt(t)}" for t, v in points)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def om_file(path: Path, series: Iterable[Series], *, gz: bool = False) -> Path:
    text = om_text(series)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- fake HTTP API

_RAW = re.compile(r"^(?P<sel>.+)\[(?P<ms>\d+)ms\]$")


@dataclass
class FakePrometheus:
    """Loopback Prometheus double. Use as a context manager; ``url`` is set once started."""

    series: list[Series] = field(default_factory=list)
    closed_ranges: bool = True  # 2.x: [t - r, t]; False: 3.x (t - r, t]
    # called with the request path and params before answering; may return (status, body)
    script: Callable[[str, dict[str, str]], tuple[int, bytes] | None] | None = None
    delay_s: float = 0.0
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    url: str = ""

    def __enter__(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = self.rfile.read(length).decode()
                self._serve({k: v[-1] for k, v in parse_qs(form).items()})

            def do_GET(self) -> None:
                self._serve({})

            def _serve(self, form: dict[str, str]) -> None:
                parsed = urlparse(self.path)
                params = {k: v[-1] for k, v in parse_qs(parsed.query).items()} | form
                fake.requests.append((parsed.path, params, dict(self.headers.items())))
                fake.methods.append(self.command)
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                answer = fake.script(parsed.path, params) if fake.script else None
                if answer is None:
                    answer = fake.answer(parsed.path, params)
                status, body = answer
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, bytes]:
        if path == "/api/v1/series":
            lo, hi = float(params["start"]), float(params["end"])
            name = params["match[]"]
            data = [
                {"__name__": n, **labels}
                for n, labels, points in self.series
                if n == name and any(lo <= t <= hi for t, _ in points)
            ]
            return 200, json.dumps({"status": "success", "data": data}).encode()
        if path != "/api/v1/query":
            return 404, b"not found"
        m = _RAW.match(params["query"])
        if m is None:
            return 400, json.dumps({"status": "error", "errorType": "bad_data",
                                    "error": "fake handles raw selectors only"}).encode()
        name = m.group("sel").split("{")[0]
        t = float(params["time"])
        r = int(m.group("ms")) / 1000
        result = []
        for n, labels, points in self.series:
            if n != name:
                continue
            if self.closed_ranges:
                values = [[p, _fmt(v)] for p, v in points if t - r <= p <= t]
            else:
                values = [[p, _fmt(v)] for p, v in points if t - r < p <= t]
            if values:
                result.append({"metric": {"__name__": n, **labels}, "values": values})
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return 200, json.dumps(body).encode()
