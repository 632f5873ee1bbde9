"""Running alert ticks on the planted world (tests/alerts/helpers_world.py) with a recording
delivery, and reading the alert log back."""

from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from gpuledger.alerts.delivery import DeliveryResult
from gpuledger.alerts.delivery_config import DeliverySettings
from gpuledger.alerts.message import Alert, Recipients
from gpuledger.site import Site, load_site
from tests.alerts.helpers_world import write_world


@dataclass
class Recorder:
    """A delivery that records what it was asked to send and reports success."""

    sent: list[tuple[Alert, Recipients]] = field(default_factory=list)

    def __call__(self, alert: Alert, rcpt: Recipients, settings: object) -> list:
        self.sent.append((alert, rcpt))
        return [DeliveryResult("recorder", True, "250 recorded")]

    def workloads(self) -> list[tuple[str, str]]:
        return sorted((a.kind, a.workload) for a, _ in self.sent)


def world_site(folder: Path, alerts: str = "", **kwargs: object) -> Site:
    site = load_site(write_world(folder, alerts=alerts, **kwargs))
    assert site.alerts is not None
    if site.alerts.delivery is None:  # the recorder stands for the channels
        site = replace(site, alerts=replace(site.alerts, delivery=DeliverySettings()))
    return site


def log_rows(site: Site) -> list[dict]:
    con = duckdb.connect(str(site.db), read_only=True)
    try:
        cur = con.execute("SELECT * FROM alert_log ORDER BY logged_at")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
