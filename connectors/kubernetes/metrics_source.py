"""The contract of a metrics source (``MetricsSource``: raw samples and series of a window, as
long Polars frames) and how to reach the real one, a Prometheus-compatible HTTP API
(``PrometheusConfig``). Implementations: ``prometheus.PrometheusHttpSource`` (the real one) and
``openmetrics_file.OpenMetricsFileSource`` (its fixture twin)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol, runtime_checkable

import polars as pl

from connectors.kubernetes.promql_selectors import check_matchers
from connectors.secrets import without_credentials

DEFAULT_CHUNK = timedelta(hours=24)  # the longest raw-sample window of one request
# Samples one request should return (~25 bytes of JSON each): windows shrink or grow toward it.
DEFAULT_SAMPLES_PER_REQUEST = 2_000_000


@runtime_checkable
class MetricsSource(Protocol):
    """What the KSM / DCGM / Kueue readers need from a metrics store."""

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        """Every stored sample of the series matching `selector` with ``start <= ts < end``."""
        ...

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        """One row per series matching `match` with a sample in the window (labels only)."""
        ...


@dataclass(frozen=True)
class PrometheusConfig:
    """How to reach a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics).

    ``bearer_token_file`` is re-read before every request (projected service-account tokens
    rotate). ``basic_auth_password_file`` wins over ``basic_auth_password``. ``ca_bundle`` is a PEM
    file used to verify the server; ``verify_tls=False`` disables verification (not recommended).
    """

    url: str
    bearer_token_file: Path | None = None
    basic_auth_user: str | None = None
    basic_auth_password: str | None = field(default=None, repr=False)
    basic_auth_password_file: Path | None = None
    ca_bundle: Path | None = None
    verify_tls: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    # Total deadline of one request, connect and whole body (a server that accepts the
    # connection and trickles or never answers is cut off here), and the connect part alone.
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    retries: int = 3
    # Wall-clock budget of one ingest window (every request and retry of it); None: unbounded.
    window_budget_s: float | None = 1800.0
    backoff_s: float = 1.0  # sleep backoff_s * 2**attempt between attempts
    chunk: timedelta = DEFAULT_CHUNK  # longest raw-sample window per request
    # Windows are sized so one response holds about this many samples (bounded memory on big
    # clusters, few requests on small ones); see PrometheusHttpSource.iter_raw_samples.
    samples_per_request: int = DEFAULT_SAMPLES_PER_REQUEST
    method: str = "GET"
    # gzip responses: Prometheus compresses ~16 MB/s per request (measured: a 7 MB body took
    # 0.45 s gzip vs 0.11 s identity on loopback). Off by default (in-cluster / LAN reads);
    # turn on across slow links.
    compress: bool = False
    # label matchers added to every selector this source sends (raw samples and series), for a
    # Prometheus or Thanos holding several clusters: 'cluster="a"' (no braces)
    selector: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "selector", check_matchers(self.selector))
        if not self.url.startswith(("http://", "https://")):
            msg = f"expected an http(s) URL for Prometheus, found {self.url!r}"
            raise ValueError(msg)
        if self.retries < 0 or self.timeout_s <= 0 or self.backoff_s < 0 \
                or self.connect_timeout_s <= 0:
            msg = (f"expected retries >= 0, timeout_s > 0, connect_timeout_s > 0 and "
                   f"backoff_s >= 0, found {self.retries}, {self.timeout_s}, "
                   f"{self.connect_timeout_s} and {self.backoff_s}")
            raise ValueError(msg)
        if self.window_budget_s is not None and self.window_budget_s <= 0:
            msg = f"expected a positive window_budget_s (or none), found {self.window_budget_s}"
            raise ValueError(msg)
        if self.chunk <= timedelta(0) or self.samples_per_request <= 0:
            msg = (f"expected a positive chunk and samples_per_request, found {self.chunk} and "
                   f"{self.samples_per_request}")
            raise ValueError(msg)
        if self.method.upper() not in ("GET", "POST"):
            msg = f"expected method GET or POST, found {self.method!r}"
            raise ValueError(msg)

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")

    @property
    def display_url(self) -> str:
        """`base_url` without any user:password@ part (for messages)."""
        return without_credentials(self.base_url)
