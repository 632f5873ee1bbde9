"""A dry run sends nothing and logs what it would have sent (once, however many ticks); a later
real run still sends it."""

from pathlib import Path

from gpuledger.alerts.run import run_alerts
from tests.alerts.helpers_ticks import Recorder, log_rows, world_site
from tests.alerts.helpers_world import at


def test_dry_run_then_real_run(tmp_path: Path) -> None:
    site, sent = world_site(tmp_path), Recorder()
    report = run_alerts(site, at(61), dry_run=True, deliver=sent)
    run_alerts(site, at(69), dry_run=True, deliver=sent)
    assert sent.sent == []
    assert [s.status for s in report.sent] == ["dry_run", "dry_run"]
    rows = log_rows(site)
    assert [(r["status"], r["dry_run"]) for r in rows] == [("dry_run", True)] * 2
    real = Recorder()
    run_alerts(site, at(70), deliver=real)
    assert len(real.sent) == 2
    assert sorted(r["status"] for r in log_rows(site)) == ["dry_run", "dry_run", "sent", "sent"]


def test_dry_run_from_the_site_file(tmp_path: Path) -> None:
    site, sent = world_site(tmp_path, "dry_run = true"), Recorder()
    assert run_alerts(site, at(61), deliver=sent).dry_run
    assert sent.sent == []
    assert len(log_rows(site)) == 2
