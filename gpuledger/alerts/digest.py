"""The weekly digest: per person, the GPU-hours their allocations held at 0 % last ISO week.

Source: the ledger's ``idle_allocation`` incidents (models/sql/detect_idle.sql: whole idle
stretches of allocations, with their cost by the ledger's rate rule) filed under the days of the
week. A person whose idle GPU-hours reach ``digest_min_gpu_hours`` gets one message listing their
workloads, costliest first; the log key ``digest:<person>:<week>`` is never sent twice (same
rules as the warnings: gpuledger/alerts/log.py). In quiet hours nothing is sent; the next run
outside them sends it (the alert tick runs the digest of the week before too).
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from gpuledger.alerts import log
from gpuledger.alerts.message import Alert
from gpuledger.alerts.recipients import UNATTRIBUTED, load_contacts, recipients
from gpuledger.alerts.run import Connect, Deliver, Sent, in_quiet_hours, log_row, send_logged
from gpuledger.site import Site
from gpuledger.site.alerts import AlertsSite
from models.runner import connect as ledger_connect


def week_bounds(week: str) -> tuple[date, date]:
    """``2026-W02`` -> (Monday, next Monday)."""
    try:
        year, number = week.split("-W")
        monday = date.fromisocalendar(int(year), int(number), 1)
    except ValueError:
        msg = f"expected an ISO week such as 2026-W02, found {week!r}"
        raise ValueError(msg) from None
    return monday, monday + timedelta(days=7)


def previous_week(at: datetime) -> str:
    year, number, _ = (at.date() - timedelta(days=7)).isocalendar()
    return f"{year}-W{number:02d}"


@dataclass(frozen=True)
class DigestReport:
    week: str
    dry_run: bool
    quiet: bool
    sent: tuple[Sent, ...] = ()
    below_threshold: int = 0

    def summary(self) -> str:
        mode = "dry run: would send" if self.dry_run else "sent"
        head = (f"digest {self.week}: {len(self.sent)} {mode}, {self.below_threshold} "
                "person(s) below the threshold" + (", held by quiet hours" if self.quiet else ""))
        return "\n".join([head] + [
            f"  {s.status}: {s.alert.person} {s.alert.gpu_hours_idle:.1f} idle GPU-h -> "
            f"{', '.join(s.recipients.to)}" for s in self.sent])


def idle_by_person(con: object, first: date, end: date) -> dict[str, dict]:
    rows = con.execute(  # type: ignore[attr-defined]
        "SELECT person, team, cost_centre, coalesce(slurm_job, k8s_workload, node) AS workload, "
        "sum(gpu_seconds) / 3600.0, sum(cost), string_agg(DISTINCT currency, ',') "
        "FROM incidents WHERE kind = 'idle_allocation' AND day >= ? AND day < ? "
        "GROUP BY ALL ORDER BY person, 6 DESC NULLS LAST, 5 DESC", [first, end]).fetchall()
    people: dict[str, dict] = {}
    for person, team, centre, workload, hours, cost, currency in rows:
        p = people.setdefault(person, {"team": team, "cost_centre": centre, "rows": [],
                                       "currencies": set()})
        p["rows"].append((workload, float(hours), Decimal(cost) if cost is not None else None))
        p["currencies"].update((currency or "").split(",") if currency else [])
    return people


def run_digest(site: Site, week: str, *, dry_run: bool | None = None,
               deliver: Deliver | None = None, connect: Connect | None = None,
               now: datetime | None = None) -> DigestReport:
    policy = site.alerts or AlertsSite()
    dry = policy.dry_run if dry_run is None else dry_run
    connect = connect or (lambda: ledger_connect(site.db))
    first, end = week_bounds(week)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    if in_quiet_hours(now, policy):
        return DigestReport(week, dry, True)
    with connect() as con:
        people = idle_by_person(con, first, end)
        keys = [f"digest:{p}:{week}" for p in people]
        seen = log.keys_seen(con, keys, dry_run=dry)
    contacts = load_contacts(policy.contacts)
    sent, below = [], 0
    for person, p in sorted(people.items()):
        hours = sum(h for _, h, _ in p["rows"])
        key = f"digest:{person}:{week}"
        if hours < policy.digest_min_gpu_hours or person in UNATTRIBUTED:
            below += 1
            continue
        if key in seen:
            continue
        costs = [c for _, _, c in p["rows"] if c is not None]
        single = len(p["currencies"]) == 1
        alert = Alert(
            key=key, kind="digest", domain="", cluster="", workload=f"week {week}", node=None,
            gpus=(), idle_since=datetime.combine(first, datetime.min.time()),
            as_of=datetime.combine(end, datetime.min.time()), idle_minutes=None,
            gpu_hours_idle=round(hours, 2), cost_so_far=sum(costs) if costs and single else None,
            currency=next(iter(p["currencies"])) if single else None, person=person,
            team=p["team"], cost_centre=p["cost_centre"],
            link=(f"{policy.dashboard_url}/incidents?kind=idle_allocation&person={person}"
                  if policy.dashboard_url else None),
            next_step=None, action_taken=None, digest_rows=tuple(p["rows"]))
        rcpt, source = recipients(person, p["team"], contacts, policy.admins)
        row = log_row(alert, None, rcpt, source, family="digest", allocation=None,
                      incident_start=None, dry_run=dry)
        status, detail = send_logged(connect, alert, rcpt, row, policy, deliver, dry_run=dry)
        sent.append(Sent(alert, rcpt, source, status, detail))
    return DigestReport(week, dry, False, tuple(sent), below)
