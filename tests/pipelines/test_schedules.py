from datetime import UTC, datetime

import dagster as dg

from pipelines.definitions import defs as load_defs


def _schedule(defs: dg.Definitions, name: str) -> dg.ScheduleDefinition:
    return defs.resolve_schedule_def(name)


def test_weekly_close_runs_monday_0600_utc_for_the_week_that_ended():
    defs = load_defs()
    schedule = _schedule(defs, "weekly_close_schedule")
    assert schedule.cron_schedule == "0 6 * * 1"
    job = defs.resolve_job_def("weekly_close")
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {"chargeback",
                                                                              "weekly_report"}
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 12, 6, 0,
                                                                          tzinfo=UTC))
    assert schedule(context).partition_key == "2026-01-05"


def test_daily_ingest_runs_each_night_for_the_day_before():
    defs = load_defs()
    schedule = _schedule(defs, "daily_ingest_schedule")
    assert schedule.cron_schedule == "0 1 * * *"
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 8, 1, 0,
                                                                          tzinfo=UTC))
    assert schedule(context).partition_key == "2026-01-07"
    keys = {k.to_user_string()
            for k in defs.resolve_job_def("daily_ingest").asset_layer.executable_asset_keys}
    assert {"slurm_jobs", "k8s_pod_allocations", "allocations", "gpu_usage_hourly",
            "incidents"} <= keys


def test_a_successful_ledger_run_publishes_the_snapshot():
    defs = load_defs()
    sensor = defs.resolve_sensor_def("publish_after_ledger_runs")
    job = defs.resolve_job_def("publish_ledger")
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {
        "published_ledger"}
    with dg.instance_for_test() as instance:
        run = instance.create_run_for_job(job_def=job)  # any run stands in for the monitored one
        context = dg.build_run_status_sensor_context(
            sensor_name=sensor.name, dagster_instance=instance, dagster_run=run,
            dagster_event=dg.DagsterEvent(event_type_value="PIPELINE_SUCCESS", job_name=job.name),
        )
        request = sensor(context)
    assert request.run_key == f"publish-after-{run.run_id}"
