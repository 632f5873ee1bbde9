import json
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg

from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import MetricsSource, PrometheusConfig, PrometheusHttpSource
from gpuledger import k8s_ingest
from gpuledger.config import load_settings

# OpenMetrics files parsed once per process (Dagster runs every partition in the same process
# when materialized in-process; a week of the sample world takes seconds to parse).
_PARSED: dict[tuple[str, int, int], OpenMetricsFileSource] = {}
_LOCK = threading.Lock()


def _file_source(path: Path) -> OpenMetricsFileSource:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    with _LOCK:
        source = _PARSED.get(key)
        if source is None:
            _PARSED.clear()  # keep one file in memory
            source = OpenMetricsFileSource(path)
            _PARSED[key] = source
        return source


class KubernetesSourceResource(dg.ConfigurableResource):
    """Where Kubernetes metrics come from: a Prometheus-compatible HTTP API
    (``mode="prometheus"``) or an OpenMetrics backfill file read by the fixture twin
    (``mode="openmetrics"``, the simulated world's ``prometheus/metrics.om[.gz]``)."""

    mode: str = "openmetrics"
    openmetrics_path: str = ""
    prometheus_url: str = ""
    bearer_token_file: str = ""
    basic_auth_user: str = ""
    basic_auth_password_file: str = ""
    ca_bundle: str = ""
    insecure: bool = False
    headers: dict[str, str] = {}  # noqa: RUF012 (pydantic copies field defaults)
    timeout_s: float = 120.0  # total per request, connect and whole answer
    connect_timeout_s: float = 10.0
    window_budget_s: float = 1800.0  # one day's reads with their retries
    retries: int = 3
    cluster: str = ""
    lookback_minutes: float = 60.0
    scrape_interval_s: float = 0.0  # 0: inferred from the data

    def source(self) -> MetricsSource:
        if self.mode == "prometheus":
            return PrometheusHttpSource(PrometheusConfig(
                url=self.prometheus_url,
                bearer_token_file=Path(self.bearer_token_file) if self.bearer_token_file
                else None,
                basic_auth_user=self.basic_auth_user or None,
                basic_auth_password_file=Path(self.basic_auth_password_file)
                if self.basic_auth_password_file else None,
                ca_bundle=Path(self.ca_bundle) if self.ca_bundle else None,
                verify_tls=not self.insecure,
                headers=dict(self.headers),
                timeout_s=self.timeout_s,
                connect_timeout_s=self.connect_timeout_s,
                window_budget_s=self.window_budget_s,
                retries=self.retries,
            ))
        if self.mode != "openmetrics":
            msg = ("expected kubernetes source mode 'prometheus' or 'openmetrics', found "
                   f"{self.mode!r}")
            raise ValueError(msg)
        return _file_source(Path(self.openmetrics_path))

    def describe(self) -> str:
        return self.prometheus_url if self.mode == "prometheus" else self.openmetrics_path

    def load_window(self, ledger: Callable[[], AbstractContextManager], start: datetime,
                    end: datetime) -> k8s_ingest.KubernetesLoad:
        """Read the window with the ledger closed, then write it in one short transaction."""
        interval = (timedelta(seconds=self.scrape_interval_s) if self.scrape_interval_s > 0
                    else None)
        source = self.source()
        read = k8s_ingest.read_kubernetes_window(
            source, start, end, lookback=timedelta(minutes=self.lookback_minutes),
            scrape_interval=interval, gpu_resources=load_settings().gpu_resources,
        )
        with ledger() as con:
            return k8s_ingest.write_kubernetes_window(
                con, read, source, start, end,
                cluster=self.cluster or k8s_ingest.default_cluster(con),
            )


def _world_metrics(root: Path) -> Path:
    for name in ("metrics.om", "metrics.om.gz"):
        if (root / "prometheus" / name).is_file():
            return root / "prometheus" / name
    return root / "prometheus" / "metrics.om.gz"


def kubernetes_source_from_environment(world_root: str) -> KubernetesSourceResource:
    """The fixture twin on the world's metrics file unless ``GPULEDGER_PROMETHEUS_URL`` is set
    (then the real server; ``GPULEDGER_PROMETHEUS_BEARER_TOKEN_FILE``, ``..._CA_BUNDLE``,
    ``..._BASIC_AUTH_USER``, ``..._BASIC_AUTH_PASSWORD_FILE``, ``..._HEADERS`` (JSON object)
    configure access). ``GPULEDGER_K8S_CLUSTER`` names the cluster (default: world.json's)."""
    root = Path(world_root)
    env = os.environ
    cluster = env.get("GPULEDGER_K8S_CLUSTER", "")
    world_file = root / "world.json"
    if not cluster and world_file.is_file():
        cluster = str(json.loads(world_file.read_text(encoding="utf-8")).get("cluster", ""))
    url = env.get("GPULEDGER_PROMETHEUS_URL", "")
    headers = json.loads(env["GPULEDGER_PROMETHEUS_HEADERS"]) if env.get(
        "GPULEDGER_PROMETHEUS_HEADERS") else {}
    return KubernetesSourceResource(
        mode="prometheus" if url else "openmetrics",
        openmetrics_path=str(_world_metrics(root)),
        prometheus_url=url,
        bearer_token_file=env.get("GPULEDGER_PROMETHEUS_BEARER_TOKEN_FILE", ""),
        basic_auth_user=env.get("GPULEDGER_PROMETHEUS_BASIC_AUTH_USER", ""),
        basic_auth_password_file=env.get("GPULEDGER_PROMETHEUS_BASIC_AUTH_PASSWORD_FILE", ""),
        ca_bundle=env.get("GPULEDGER_PROMETHEUS_CA_BUNDLE", ""),
        headers={str(k): str(v) for k, v in headers.items()},
        cluster=cluster,
    )
