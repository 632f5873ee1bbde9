"""Warnings due in quiet hours (site time zone) wait until they end, then go out once."""

from pathlib import Path

from gpuledger.alerts.run import run_alerts
from tests.alerts.helpers_ticks import Recorder, log_rows, world_site
from tests.alerts.helpers_world import at


def test_quiet_hours_hold_then_send_once(tmp_path: Path) -> None:
    # at(61) is 09:31 UTC = 10:31 in Berlin (CET): inside 10:00-11:00 local
    site = world_site(tmp_path, 'quiet_hours = "10:00-11:00"\ntimezone = "Europe/Berlin"')
    held = Recorder()
    report = run_alerts(site, at(61), deliver=held)
    assert report.quiet
    assert report.held == 2
    assert held.sent == []
    assert log_rows(site) == []
    run_alerts(site, at(85), deliver=held)  # 10:55 local, still quiet
    assert held.sent == []
    after = Recorder()
    run_alerts(site, at(91), deliver=after)  # 11:01 local
    planted = [("idle_first", "job 5001 (train-5001)"), ("idle_first", "pod research/train-0")]
    # job 5003 (idle 80 min by now) comes due in its own right
    assert after.workloads() == [*planted[:1], ("idle_first", "job 5003 (train-5003)"),
                                 planted[1]]
    run_alerts(site, at(100), deliver=after)
    assert len(after.sent) == 3


def test_quiet_hours_across_midnight() -> None:
    from datetime import datetime, time

    from gpuledger.alerts.run import in_quiet_hours
    from gpuledger.site.alerts import AlertsSite
    policy = AlertsSite(quiet_hours=(time(22), time(7)), timezone="UTC")
    assert in_quiet_hours(datetime(2026, 1, 12, 23, 30), policy)
    assert in_quiet_hours(datetime(2026, 1, 12, 6, 59), policy)
    assert not in_quiet_hours(datetime(2026, 1, 12, 7, 0), policy)
    assert not in_quiet_hours(datetime(2026, 1, 12, 21, 59), policy)
