"""The alert tick as an asset: read the live window, evaluate, act, send through
``gpuledger.alerts.delivery.deliver`` and log (gpuledger/alerts/run.py; docs/alerts.md).

The sensor (sensors.py) asks for one run per tick with the tick's time in the run tag
``gpuledger/as_of``; the asset evaluates at that time, so a run that waited in the queue for the
ledger pool still evaluates the tick it was asked for.
"""

from datetime import UTC, datetime

import dagster as dg

from gpuledger.alerts.digest import previous_week, run_digest
from gpuledger.alerts.run import run_alerts
from models.schema import ALERT_LOG
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource

ALERTS = dg.AssetKey("idle_gpu_alerts")
DIGEST = dg.AssetKey("idle_gpu_digest")
AS_OF_TAG = "gpuledger/as_of"
WEEK_TAG = "gpuledger/week"
SENT_ONCE = "alert_keys_sent_once"


def _as_of(context: dg.AssetExecutionContext) -> datetime:
    tag = context.run.tags.get(AS_OF_TAG)
    if tag:
        return datetime.fromisoformat(tag)
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


@dg.asset(
    key=ALERTS, group_name="alerts", kinds={"duckdb", "python"}, pool=LEDGER_POOL,
    description="Warnings to the owners of GPUs idle now (first at 60 min, second at 105 min "
    "at 0 % by default), the optional action, and last week's digest once: evaluated from the "
    "live window of the site's sources, sent by SMTP/webhook, logged in alert_log "
    "(docs/alerts.md).",
)
def idle_gpu_alerts(context: dg.AssetExecutionContext, ledger: LedgerResource,
                    site: SiteResource) -> dg.MaterializeResult:
    the_site = site.load()
    if the_site.alerts is None or not the_site.alerts.enabled:
        context.log.info("alerts are off ([gpuledger.alerts] enabled = false): nothing evaluated")
        return dg.MaterializeResult(metadata={"enabled": False})
    as_of = _as_of(context)
    report = run_alerts(the_site, as_of, connect=ledger.ledger)
    for w in report.warnings:
        context.log.warning(w)
    context.log.info(report.summary())
    digest = run_digest(the_site, previous_week(as_of), connect=ledger.ledger, now=as_of)
    context.log.info(digest.summary())
    statuses = [s.status for s in report.sent]
    return dg.MaterializeResult(metadata={
        "as_of": as_of.isoformat(), "dry_run": report.dry_run, "quiet_hours": report.quiet,
        "findings": len(report.evaluation.findings), "held": report.held,
        "sent": statuses.count("sent"), "failed": statuses.count("failed"),
        "dry_run_logged": statuses.count("dry_run"), "warnings": len(report.warnings),
        "digest_sent": len(digest.sent),
    })


@dg.asset(
    key=DIGEST, group_name="alerts", kinds={"duckdb", "python"}, pool=LEDGER_POOL,
    description="The weekly digest: per person, GPU-hours of idle_allocation incidents last "
    "ISO week above digest_min_gpu_hours, one message each, never repeated (alert_log).",
)
def idle_gpu_digest(context: dg.AssetExecutionContext, ledger: LedgerResource,
                    site: SiteResource) -> dg.MaterializeResult:
    now = datetime.now(UTC).replace(tzinfo=None)
    week = context.run.tags.get(WEEK_TAG) or previous_week(now)
    the_site = site.load()
    if the_site.alerts is None or not the_site.alerts.enabled:
        context.log.info("alerts are off ([gpuledger.alerts] enabled = false): no digest")
        return dg.MaterializeResult(metadata={"enabled": False, "week": week})
    report = run_digest(the_site, week, connect=ledger.ledger)
    context.log.info(report.summary())
    return dg.MaterializeResult(metadata={"week": week, "sent": len(report.sent),
                                          "quiet_hours": report.quiet,
                                          "below_threshold": report.below_threshold})


OFFENDING_SQL = f"""
SELECT alert_key, 'sent more than once' AS problem, count(*) AS rows
FROM {ALERT_LOG.name} WHERE status = 'sent' GROUP BY alert_key HAVING count(*) > 1
UNION ALL
SELECT alert_key, 'pending for over an hour (interrupted delivery: did it arrive?)', count(*)
FROM {ALERT_LOG.name} WHERE status = 'pending' AND logged_at < ? GROUP BY alert_key
ORDER BY 1
"""


@dg.asset_check(asset=ALERTS, name=SENT_ONCE, pool=LEDGER_POOL,
                description="no alert key was sent twice, and no delivery is left pending "
                "(offending rows listed)")
def alert_keys_sent_once(ledger: LedgerResource) -> dg.AssetCheckResult:
    from datetime import timedelta
    hour_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    with ledger.ledger() as con:
        rows = con.execute(OFFENDING_SQL, [hour_ago]).fetchall()
    sample = "\n".join(f"- {k}: {p} ({n} rows)" for k, p, n in rows[:20])
    return dg.AssetCheckResult(passed=not rows, metadata={
        "offending_rows": len(rows), "sample": dg.MetadataValue.md(sample or "none")})
