from datetime import timedelta

import dagster as dg

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


@dg.schedule(job=daily_ingest, cron_schedule="0 1 * * *", execution_timezone="UTC")
def daily_ingest_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = (context.scheduled_execution_time - timedelta(days=1)).date().isoformat()
    return dg.RunRequest(run_key=f"daily-{day}", partition_key=day)


@dg.schedule(job=weekly_close, cron_schedule="0 6 * * 1", execution_timezone="UTC")
def weekly_close_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    monday = (context.scheduled_execution_time - timedelta(days=7)).date().isoformat()
    return dg.RunRequest(run_key=f"weekly-{monday}", partition_key=monday)


@dg.definitions
def schedules() -> dg.Definitions:
    return dg.Definitions(
        jobs=[daily_ingest, weekly_close],
        schedules=[daily_ingest_schedule, weekly_close_schedule],
    )
