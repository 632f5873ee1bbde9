"""The alert sensor: every ``[gpuledger.alerts] every_minutes`` (15 by default) it asks for one
run of ``idle_gpu_alerts_job`` with the tick's time (run_key per tick); and the weekly digest
schedule. Both are running by default when the site's ``[schedules] enabled`` and
``[alerts] enabled``."""

from datetime import UTC, datetime

import dagster as dg

from gpuledger.alerts.digest import previous_week
from gpuledger.site import Site
from gpuledger.site.alerts import AlertsSite
from pipelines.defs.alerts.assets import ALERTS, AS_OF_TAG, DIGEST, WEEK_TAG
from pipelines.site import current_site

alerts_job = dg.define_asset_job(
    "idle_gpu_alerts_job", selection=dg.AssetSelection.assets(ALERTS),
    description="One alert tick: evaluate the live window, send what is due, log it.")
digest_job = dg.define_asset_job(
    "idle_gpu_digest_job", selection=dg.AssetSelection.assets(DIGEST),
    description="The weekly digest of idle GPU-hours per person.")


def _status(site: Site) -> dg.DefaultSensorStatus:
    on = site.schedules.enabled and site.alerts is not None and site.alerts.enabled
    return dg.DefaultSensorStatus.RUNNING if on else dg.DefaultSensorStatus.STOPPED


def alerts_sensor(site: Site) -> dg.SensorDefinition:
    policy = site.alerts or AlertsSite()

    @dg.sensor(
        name="idle_gpu_alerts_sensor", job=alerts_job,
        minimum_interval_seconds=max(60, round(policy.every_minutes * 60)),
        default_status=_status(site),
        description=f"Every {policy.every_minutes:g} min: one alert tick (idle_gpu_alerts).",
    )
    def _sensor(context: dg.SensorEvaluationContext):
        now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
        live = current_site()  # read again: alerts may have been switched off since the load
        if live.alerts is None or not live.alerts.enabled:
            return dg.SkipReason("[gpuledger.alerts] enabled = false")
        return dg.RunRequest(run_key=f"alerts-{now:%Y%m%dT%H%M%S}",
                             tags={AS_OF_TAG: now.isoformat()})

    return _sensor


def digest_schedule(site: Site) -> dg.ScheduleDefinition:
    policy = site.alerts or AlertsSite()

    def tags(context: dg.ScheduleEvaluationContext) -> dict[str, str]:
        at = context.scheduled_execution_time.astimezone(UTC).replace(tzinfo=None)
        return {WEEK_TAG: previous_week(at)}

    return dg.ScheduleDefinition(
        name="idle_gpu_digest_weekly", job=digest_job, cron_schedule=policy.digest_schedule,
        execution_timezone=policy.timezone, tags_fn=tags,
        default_status=(dg.DefaultScheduleStatus.RUNNING
                        if _status(site) == dg.DefaultSensorStatus.RUNNING
                        and policy.digest_enabled else dg.DefaultScheduleStatus.STOPPED),
        description="The weekly digest of last ISO week's idle GPU-hours per person.")


@dg.definitions
def alerts_definitions() -> dg.Definitions:
    site = current_site()
    return dg.Definitions(jobs=[alerts_job, digest_job], sensors=[alerts_sensor(site)],
                          schedules=[digest_schedule(site)])
