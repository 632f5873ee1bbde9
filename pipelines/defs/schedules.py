from datetime import timedelta

import dagster as dg

from gpuledger.site import ScheduleSite
from pipelines.site import current_site

# Daily ingest of yesterday's UTC day: Slurm and Kubernetes sources (each pulls with its own
# trailing lookback, so late changes to earlier days are picked up), the day's ledger and its
# incidents.
daily_ingest = dg.define_asset_job(
    "daily_ingest",
    selection=dg.AssetSelection.groups(
        "slurm", "kubernetes", "kubernetes_metrics", "accounting", "detectors"),
)

# Weekly close: the ISO week's invoice lines and then its report (reports/<YYYY-Www>/),
# Monday 06:00 UTC for the week just ended.
weekly_close = dg.define_asset_job(
    "weekly_close", selection=dg.AssetSelection.groups("chargeback", "reports")
)


def default_status(site: ScheduleSite) -> dg.DefaultScheduleStatus:
    """RUNNING in a site deployment ([gpuledger.schedules] enabled = true, the default)."""
    return dg.DefaultScheduleStatus.RUNNING if site.enabled else dg.DefaultScheduleStatus.STOPPED


def daily_ingest_request(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = (context.scheduled_execution_time - timedelta(days=1)).date().isoformat()
    return dg.RunRequest(run_key=f"daily-{day}", partition_key=day)


def weekly_close_request(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    # the Monday of the ISO week before the one the tick falls in
    tick = context.scheduled_execution_time.date()
    monday = (tick - timedelta(days=tick.weekday() + 7)).isoformat()
    return dg.RunRequest(run_key=f"weekly-{monday}", partition_key=monday)


def build_schedules(site: ScheduleSite) -> list[dg.ScheduleDefinition]:
    """The two schedules, with the site's cron, time zone and default status."""
    status = default_status(site)
    return [
        dg.schedule(
            name="daily_ingest_schedule", job=daily_ingest, cron_schedule=site.daily,
            execution_timezone=site.timezone, default_status=status,
            description="Yesterday's UTC day: sources, ledger, usage, incidents.",
        )(daily_ingest_request),
        dg.schedule(
            name="weekly_close_schedule", job=weekly_close, cron_schedule=site.weekly,
            execution_timezone=site.timezone, default_status=status,
            description="The ISO week just ended: invoice lines and the weekly report.",
        )(weekly_close_request),
    ]


@dg.definitions
def schedules() -> dg.Definitions:
    return dg.Definitions(jobs=[daily_ingest, weekly_close],
                          schedules=build_schedules(current_site().schedules))
