"""Data-quality gate: when the newest samples are older than two scrape intervals (or the
configured max age) at as_of, no alert goes out and a warning says why."""

from pathlib import Path

from gpuledger.alerts.run import run_alerts
from tests.alerts.helpers_ticks import Recorder, world_site
from tests.alerts.helpers_world import at


def test_exporter_stopped_means_no_alert(tmp_path: Path) -> None:
    # the exporter's last scrape is at +70 min; the job still runs at +80
    site, sent = world_site(tmp_path, data_end=at(70)), Recorder()
    report = run_alerts(site, at(80), deliver=sent)
    assert sent.sent == []
    assert any("stale source" in w and "job 5001" in w for w in report.warnings)


def test_max_sample_age_is_configurable(tmp_path: Path) -> None:
    site = world_site(tmp_path, "max_sample_age_minutes = 15", data_end=at(70))
    sent = Recorder()
    run_alerts(site, at(80), deliver=sent)  # 10 min old: young enough
    # the pod is not seen by kube-state-metrics after +70 either: not held any more
    assert sent.workloads() == [("idle_first", "job 5001 (train-5001)")]
