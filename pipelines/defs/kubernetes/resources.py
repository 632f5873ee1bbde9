import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg

from connectors.kubernetes.dra_claims import ClaimRead
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.secrets import without_credentials
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.dra import DraInput, DraSetup, read_fresh
from gpuledger.site import ClusterSite, PrometheusSite
from gpuledger.site.sources import prometheus_config
from pipelines.site import read_site

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
    """The Kubernetes metrics of every cluster of the site file with a ``[prometheus]`` table:
    a Prometheus-compatible HTTP API (URL, auth, TLS, the cluster's label selector) or an
    OpenMetrics backfill file read by the fixture twin."""

    site_file: str

    def clusters(self) -> list[ClusterSite]:
        return [c for c in read_site(self.site_file).clusters if c.prometheus is not None]

    def gpu_resources(self) -> tuple[str, ...]:
        return read_site(self.site_file).gpu_resources

    def source(self, cluster: ClusterSite) -> MetricsSource:
        p = _prometheus(cluster)
        if p.openmetrics is not None:
            return _file_source(p.openmetrics)
        return PrometheusHttpSource(prometheus_config(p))

    def describe(self, cluster: ClusterSite) -> str:
        p = _prometheus(cluster)
        return without_credentials(p.url) if p.url else str(p.openmetrics)

    def read_window(self, cluster: ClusterSite, start: datetime, end: datetime,
                    dra: DraInput | None = None) -> tuple[MetricsSource, object]:
        """Read one cluster's window; no ledger connection is open. `dra`: the ResourceClaims
        and DRA names (gpuledger/ingest/kubernetes/dra.py; default: the site's names, no claims)."""
        p = _prometheus(cluster)
        interval = timedelta(seconds=p.scrape_interval_s) if p.scrape_interval_s > 0 else None
        source = self.source(cluster)
        read = k8s_ingest.read_kubernetes_window(
            source, start, end, lookback=timedelta(minutes=p.lookback_minutes),
            scrape_interval=interval, gpu_resources=self.gpu_resources(),
            sharing=read_site(self.site_file).sharing,  # [gpuledger.sharing] resource names
            dra=dra or DraInput(read_site(self.site_file).dra.names),
        )
        return source, read

    def load_window(self, ledger: Callable[[], AbstractContextManager], cluster: ClusterSite,
                    start: datetime, end: datetime) -> k8s_ingest.KubernetesLoad:
        """Read the window with the ledger closed, then write it in one short transaction
        (the cluster's [dra] ResourceClaims with the stored ones, read in a short one first)."""
        site = read_site(self.site_file)
        fresh = ClaimRead()
        if cluster.dra is not None:
            d = cluster.dra
            fresh = read_fresh(kubeconfig=d.kubeconfig, context=d.context,
                               namespace=d.namespace, timeout_s=d.timeout_s, snapshot=d.snapshot)
        dra = DraSetup(site.dra.names, fresh).opened_input(ledger, cluster.name, start)
        source, read = self.read_window(cluster, start, end, dra)
        with ledger() as con:
            return k8s_ingest.write_kubernetes_window(con, read, source, start, end,  # type: ignore[arg-type]
                                                      cluster=cluster.name)


def _prometheus(cluster: ClusterSite) -> PrometheusSite:
    if cluster.prometheus is None:
        msg = f"expected a [gpuledger.clusters.{cluster.name}.prometheus] table, found none"
        raise ValueError(msg)
    return cluster.prometheus
