"""One real Prometheus holding two clusters' series (as a Thanos or a shared Prometheus does,
told apart by a ``cluster`` label): the site's ``selector`` reads only one.

The data is the committed small-cluster fixture (tests/fixtures/openmetrics/small-cluster.om.gz),
written twice into one backfill file: once with ``cluster="a"``, once with ``cluster="b"`` and
every pod, uid and node renamed ``b-…`` so the two clusters cannot be mistaken for each other.
"""

from __future__ import annotations

import gzip
import re
from datetime import datetime
from pathlib import Path

import pytest

from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from gpuledger.cli import main
from models.runner import read_snapshot

pytestmark = pytest.mark.prometheus

START, END = datetime(2025, 1, 6, 8), datetime(2025, 1, 6, 12)
SELECTORS = ["kube_node_status_capacity", 'kube_pod_status_phase{phase="Running"}',
             "DCGM_FI_DEV_GPU_UTIL", "kube_pod_info"]
_RENAMED = re.compile(r'\b(pod|uid|node|Hostname|exported_pod)="')


def _labelled(line: str, cluster: str) -> str:
    if cluster == "b":
        line = _RENAMED.sub(lambda m: f'{m.group(1)}="b-', line)
    brace = line.find("{")
    space = line.find(" ")
    if brace != -1 and brace < space:
        return f'{line[:brace + 1]}cluster="{cluster}",{line[brace + 1:]}'
    return f'{line[:space]}{{cluster="{cluster}"}}{line[space:]}'


@pytest.fixture(scope="module")
def two_clusters_om(tmp_path_factory: pytest.TempPathFactory, small_cluster_om) -> Path:
    out = tmp_path_factory.mktemp("two-clusters") / "two-clusters.om"
    with gzip.open(small_cluster_om, "rt", encoding="utf-8") as src, \
            out.open("w", encoding="utf-8") as dst:
        for line in src:
            if line.startswith("#") or not line.strip():
                dst.write(line)  # HELP/TYPE once per family, and # EOF
            else:
                dst.write(_labelled(line, "a"))
                dst.write(_labelled(line, "b"))
    return out


@pytest.fixture(scope="module")
def prom(real_prometheus, two_clusters_om):
    return real_prometheus(two_clusters_om)


@pytest.mark.parametrize("selector", SELECTORS)
def test_the_selector_reads_one_cluster_of_the_server(prom, small_cluster_om, selector):
    both = PrometheusHttpSource(PrometheusConfig(prom.url)).raw_samples(selector, START, END)
    only_a = PrometheusHttpSource(PrometheusConfig(prom.url, selector='cluster="a"')
                                  ).raw_samples(selector, START, END)
    twin = OpenMetricsFileSource(small_cluster_om).raw_samples(selector, START, END)
    assert twin.height > 0
    assert set(both["cluster"]) == {"a", "b"}
    assert set(only_a["cluster"]) == {"a"}
    assert only_a.height == twin.height == both.height // 2
    assert only_a.drop("cluster").equals(twin.select(only_a.drop("cluster").columns))


def test_series_calls_carry_the_selector_too(prom):
    b = PrometheusHttpSource(PrometheusConfig(prom.url, selector='cluster="b"'))
    found = b.series("kube_node_status_capacity", START, END)
    assert found.height > 0
    assert set(found["cluster"]) == {"b"}
    assert all(n.startswith("b-") for n in found["node"])


def test_ingest_from_a_site_file_files_only_its_cluster(prom, small_cluster_om, tmp_path: Path):
    site = tmp_path / "gpuledger.toml"
    site.write_text('[gpuledger]\nfirst_day = "2025-01-06"\n\n'
                    f'[gpuledger.clusters.a.prometheus]\nurl = "{prom.url}"\n'
                    "selector = 'cluster=\"a\"'\n", encoding="utf-8")
    db = tmp_path / "site.duckdb"
    assert main(["--config", str(site), "--db", str(db), "ingest", "kubernetes",
                 "--start", "2025-01-06", "--end", "2025-01-07"]) == 0
    file_db = tmp_path / "file.duckdb"
    assert main(["--db", str(file_db), "ingest", "kubernetes", "--openmetrics",
                 str(small_cluster_om), "--cluster", "a",
                 "--start", "2025-01-06", "--end", "2025-01-07"]) == 0
    query = ("SELECT cluster, uid, namespace, pod, node, gpus, start_ts, end_ts "
             "FROM k8s_pod_allocations ORDER BY ALL")
    with read_snapshot(db) as con:
        from_server = con.sql(query).fetchall()
    with read_snapshot(file_db) as con:
        from_file = con.sql(query).fetchall()
    assert from_server
    assert not any(row[1].startswith("b-") or row[3].startswith("b-") for row in from_server)
    assert from_server == from_file
