"""The planted world backfilled into a real Prometheus (tests/services/prometheus/, via the
``real_prometheus`` fixture of tests/prometheus_real/): the tick reads dcgm-exporter and
kube-state-metrics over the HTTP API and gives the same warnings as from the OpenMetrics file.
Skipped where Prometheus cannot run, unless GPULEDGER_REQUIRE_SERVICES=1."""

import shutil
from dataclasses import replace
from pathlib import Path

from gpuledger.alerts.run import run_alerts
from gpuledger.site import load_site
from tests.alerts.helpers_ticks import Recorder, world_site
from tests.alerts.helpers_world import at
from tests.prometheus_real.conftest import prometheus_tools, real_prometheus

__all__ = ["prometheus_tools", "real_prometheus"]  # fixtures used here


def test_same_warnings_over_the_http_api(tmp_path: Path, real_prometheus) -> None:
    site = world_site(tmp_path)
    (tmp_path / "http").mkdir()
    shutil.copy(site.db, tmp_path / "http" / "ledger.duckdb")  # the same owners and rates
    from_file = Recorder()
    run_alerts(site, at(61), deliver=from_file)
    server = real_prometheus(tmp_path / "metrics.om", fresh=True)
    text = site.path.read_text().replace('openmetrics = "metrics.om"',
                                         f'url = "{server.url}"\nscrape_interval_s = 30')
    site.path.write_text(text)
    live = replace(load_site(site.path), alerts=site.alerts)
    from_http = Recorder()
    # a copy of the ledger taken before the file's tick: its log does not dedupe these
    live = replace(live, db=tmp_path / "http" / "ledger.duckdb")
    report = run_alerts(live, at(61), deliver=from_http)
    assert from_http.workloads() == from_file.workloads()
    assert len(from_file.sent) == 2
    def facts(r: Recorder) -> list[tuple]:
        return [(a.workload, a.gpus, a.idle_minutes, a.cost_so_far, rc.to) for a, rc in r.sent]
    assert facts(from_http) == facts(from_file)
    assert not any("sources not read" in w for w in report.warnings)
