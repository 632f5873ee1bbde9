"""One alert tick: read the live window, evaluate, act, send, log (the CLI and Dagster share it).

Order of work (docs/alerts.md): the ledger's identity data and the log are read in short
connections closed before any source is read or any message sent; each alert is an intent row,
then the delivery with no connection open, then the outcome row.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import duckdb
import polars as pl

from gpuledger.alerts import log
from gpuledger.alerts.action import action_logged, run_action
from gpuledger.alerts.evaluate import SAMPLE_COLUMNS, Due, Evaluation, evaluate
from gpuledger.alerts.evaluate import due as due_alerts
from gpuledger.alerts.live import ClusterRead, held_allocations, read_cluster, read_ledger_context
from gpuledger.alerts.message import Alert, Recipients
from gpuledger.alerts.recipients import load_contacts, recipients
from gpuledger.site import Site
from gpuledger.site.alerts import AlertsSite
from models.runner import connect as ledger_connect

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
Deliver = Callable[[Alert, Recipients, object], list]


@dataclass(frozen=True)
class Sent:
    alert: Alert
    recipients: Recipients
    recipient_source: str
    status: str  # sent | failed | dry_run
    detail: str = ""


@dataclass(frozen=True)
class TickReport:
    as_of: datetime
    dry_run: bool
    quiet: bool
    sent: tuple[Sent, ...] = ()
    held: int = 0  # alerts due but held by quiet hours
    evaluation: Evaluation = field(default_factory=lambda: Evaluation((), ()))
    warnings: tuple[str, ...] = ()

    def summary(self) -> str:
        mode = "dry run: would send" if self.dry_run else "sent"
        lines = [f"alerts at {self.as_of:%Y-%m-%d %H:%M:%S} UTC: "
                 f"{len(self.evaluation.findings)} finding(s), {len(self.sent)} {mode}"
                 + (f", {self.held} held by quiet hours" if self.quiet else "")]
        for s in self.sent:
            a = s.alert
            lines.append(f"  {s.status}: {a.kind} {a.cluster} {a.workload} on {a.node} "
                         f"GPUs {','.join(a.gpus)} idle {a.idle_minutes:.0f} min -> "
                         f"to {', '.join(s.recipients.to) or '(nobody)'}"
                         + (f" cc {', '.join(s.recipients.cc)}" if s.recipients.cc else "")
                         + (f" [{s.recipient_source}]" if s.recipient_source != "person" else "")
                         + (f" ({s.detail})" if s.detail and s.status == "failed" else ""))
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def in_quiet_hours(as_of: datetime, policy: AlertsSite) -> bool:
    """``as_of`` (UTC) falls in the quiet hours, read in the policy's time zone."""
    if policy.quiet_hours is None:
        return False
    local = as_of.replace(tzinfo=ZoneInfo("UTC")).astimezone(ZoneInfo(policy.timezone)).time()
    start, end = policy.quiet_hours
    if start < end:
        return start <= local < end
    return local >= start or local < end  # across midnight: 22:00-07:00


def _default_connect(site: Site) -> Connect:
    return lambda: ledger_connect(site.db)


def _link(policy: AlertsSite, d: Due) -> str | None:
    if not policy.dashboard_url:
        return None
    a = d.finding.allocation
    query = {"node": a.node, "day": f"{d.finding.idle_since:%Y-%m-%d}"}
    query["job" if a.domain == "slurm" else "pod"] = (
        a.job_id if a.domain == "slurm" else f"{a.namespace}/{a.pod}")
    return f"{policy.dashboard_url}/incidents?{urlencode(query)}"


def _next_step(level: str, policy: AlertsSite, domain: str) -> str | None:
    act = policy.action
    acting = act.enabled and bool(act.command(domain))
    what = "job will be cancelled" if domain == "slurm" else "pod will be deleted"
    if level == "idle_first":
        return ("if the GPUs are not needed, please end it or release them; otherwise a second "
                f"warning follows at {policy.second_warning_minutes:g} min"
                + (f" and the {what} at {act.after_minutes:g} min" if acting else ""))
    if level == "idle_second":
        return (f"the {what} at {act.after_minutes:g} min" if acting
                else "please end it or release the GPUs if they are not needed")
    return None


def alert_of(d: Due, policy: AlertsSite, action_taken: str | None = None) -> Alert:
    f, a = d.finding, d.finding.allocation
    return Alert(
        key=d.key, kind=f.level, domain=a.domain, cluster=a.cluster, workload=a.workload,
        node=a.node, gpus=f.gpus, idle_since=f.idle_since, as_of=f.as_of,
        idle_minutes=round(f.idle_minutes, 1), gpu_hours_idle=round(f.gpu_hours, 3),
        cost_so_far=f.cost, currency=f.currency, person=a.person, team=a.team,
        cost_centre=a.cost_centre, link=_link(policy, d),
        next_step=_next_step(f.level, policy, a.domain), action_taken=action_taken,
        idle_threshold=policy.idle_threshold)


def log_row(alert: Alert, d: Due | None, rcpt: Recipients, source: str, *, family: str,
            allocation: str | None, incident_start: datetime | None,
            dry_run: bool) -> dict[str, object]:
    return {
        "alert_key": alert.key, "kind": alert.kind, "family": family, "domain": alert.domain,
        "cluster": alert.cluster, "allocation": allocation, "workload": alert.workload,
        "node": alert.node, "gpus": list(alert.gpus), "incident_start": incident_start,
        "idle_since": alert.idle_since, "as_of": alert.as_of, "idle_minutes": alert.idle_minutes,
        "gpu_hours_idle": alert.gpu_hours_idle, "cost": alert.cost_so_far,
        "currency": alert.currency, "person": alert.person, "team": alert.team,
        "cost_centre": alert.cost_centre, "recipients_to": list(rcpt.to),
        "recipients_cc": list(rcpt.cc), "recipient_source": source, "link": alert.link,
        "dry_run": dry_run,
    }


def send_logged(connect: Connect, alert: Alert, rcpt: Recipients, row: dict[str, object],
                policy: AlertsSite, deliver: Deliver | None, *, dry_run: bool) -> tuple[str, str]:
    """Intent row, delivery with no connection open, outcome row; (status, detail)."""
    with connect() as con:
        attempt = log.record_intent(con, row)
    if dry_run:
        return "dry_run", ""
    if deliver is None:
        from gpuledger.alerts.delivery import deliver as deliver_fn
        deliver = deliver_fn
    results = [] if policy.delivery is None else deliver(alert, rcpt, policy.delivery)
    with connect() as con:
        status = log.record_outcome(con, attempt, alert.key, results)
    detail = "; ".join(f"{r.channel}: {r.detail}" for r in results) or "no delivery channel"
    return status, detail


def read_live(site: Site, as_of: datetime, policy: AlertsSite
              ) -> tuple[pl.DataFrame, list, list[str]]:
    """Samples, held allocations and warnings of every cluster (no ledger connection open
    while a source is read)."""
    context = read_ledger_context(site.db)
    warnings = list(context.warnings)
    lookback = timedelta(minutes=policy.lookback_minutes)
    reads: dict[str, ClusterRead] = {}
    for c in site.clusters:
        try:
            reads[c.name] = read_cluster(c, site, as_of, lookback, context.node_models)
        except Exception as exc:  # one unreachable cluster must not silence the others
            warnings.append(f"{c.name}: sources not read, no alerts for it: "
                            f"{type(exc).__name__}: {exc}")
            continue
        warnings += reads[c.name].warnings
    frames = [r.samples for r in reads.values() if r.samples.height]
    samples = pl.concat(frames) if frames else pl.DataFrame(schema=SAMPLE_COLUMNS)
    return samples, held_allocations(reads, context, as_of), warnings


def run_alerts(site: Site, as_of: datetime, *, dry_run: bool | None = None,
               deliver: Deliver | None = None, connect: Connect | None = None) -> TickReport:
    """One tick at ``as_of`` (UTC naive): see the module docstring and docs/alerts.md."""
    policy = site.alerts or AlertsSite()
    dry = policy.dry_run if dry_run is None else dry_run
    connect = connect or _default_connect(site)
    quiet = in_quiet_hours(as_of, policy)
    samples, allocations, warnings = read_live(site, as_of, policy)
    evaluation = evaluate(samples, allocations, policy, as_of)
    with connect() as con:
        seen = log.logged(con, dry_run=dry)
    dues = due_alerts(evaluation.findings, seen)
    warnings += evaluation.warnings
    if quiet:
        return TickReport(as_of, dry, True, (), len(dues), evaluation, tuple(warnings))
    contacts = load_contacts(policy.contacts)
    sent = []
    for d in dues:
        a = d.finding.allocation
        action_taken = None
        if d.finding.level == "idle_action":
            with connect() as con:
                done = action_logged(con, d.key, dry_run=dry)
            if not done:
                result = run_action(connect, d.key, a, policy.action, dry_run=dry)
                action_taken = result.describe() if result else None
        alert = alert_of(d, policy, action_taken)
        rcpt, source = recipients(a.person, a.team, contacts, policy.admins)
        row = log_row(alert, d, rcpt, source, family=d.finding.family, allocation=a.ident,
                      incident_start=d.incident_start, dry_run=dry)
        status, detail = send_logged(connect, alert, rcpt, row, policy, deliver, dry_run=dry)
        sent.append(Sent(alert, rcpt, source, status, detail))
    return TickReport(as_of, dry, False, tuple(sent), 0, evaluation, tuple(warnings))
