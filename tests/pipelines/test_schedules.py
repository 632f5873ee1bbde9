"""The schedules and sensors come from the site file: its cron, time zone and default status
(RUNNING in a deployment, STOPPED when [gpuledger.schedules] enabled = false)."""

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from tests.helpers import load_definitions

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_SITE = ROOT / "sample_data" / "gpuledger.toml"


def _site(tmp_path: Path, schedules: str) -> Path:
    """The sample site moved to tmp with another [gpuledger.schedules] table."""
    text = SAMPLE_SITE.read_text(encoding="utf-8")
    head, rest = text.split("[gpuledger.schedules]\n", 1)
    rest = rest.split("\n", 1)[1]  # drop the sample's `enabled = false` line
    text = head + schedules + rest
    for folder in ("sacct", "sreport", "prometheus", "kueue", "slurm"):
        text = text.replace(f'"{folder}/', f'"{SAMPLE_SITE.parent}/{folder}/').replace(
            f'= "{folder}"', f'= "{SAMPLE_SITE.parent}/{folder}"')
    for name in ("nodes", "accounts", "identity_map", "rate_card"):
        text = text.replace(f'"{name}.csv"', f'"{SAMPLE_SITE.parent}/{name}.csv"')
    path = tmp_path / "gpuledger.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _statuses(defs: dg.Definitions) -> dict[str, object]:
    found = {s.name: s.default_status for s in defs.schedules}
    found.update({s.name: s.default_status for s in defs.sensors})
    return found


def test_a_site_deployment_runs_its_schedules_and_sensors_by_default(tmp_path: Path):
    # no `enabled` key: the default of a site is on
    defs = load_definitions(_site(tmp_path, "[gpuledger.schedules]\n"))
    statuses = _statuses(defs)
    assert statuses["daily_ingest_schedule"] == dg.DefaultScheduleStatus.RUNNING
    assert statuses["weekly_close_schedule"] == dg.DefaultScheduleStatus.RUNNING
    assert statuses["publish_after_ledger_runs"] == dg.DefaultSensorStatus.RUNNING


def test_schedules_stay_stopped_when_the_site_disables_them(tmp_path: Path):
    defs = load_definitions(_site(tmp_path, "[gpuledger.schedules]\nenabled = false\n"))
    statuses = _statuses(defs)
    assert statuses["daily_ingest_schedule"] == dg.DefaultScheduleStatus.STOPPED
    assert statuses["weekly_close_schedule"] == dg.DefaultScheduleStatus.STOPPED
    assert statuses["publish_after_ledger_runs"] == dg.DefaultSensorStatus.STOPPED
    # no live Slurm cluster takes scontrol snapshots in the sample site
    assert statuses["scontrol_snapshot_sensor"] == dg.DefaultSensorStatus.STOPPED


def test_cron_and_time_zone_come_from_the_site(tmp_path: Path):
    defs = load_definitions(_site(tmp_path, '[gpuledger.schedules]\ndaily = "30 2 * * *"\n'
                                  'weekly = "15 7 * * 2"\ntimezone = "Europe/Berlin"\n'))
    daily = defs.resolve_schedule_def("daily_ingest_schedule")
    weekly = defs.resolve_schedule_def("weekly_close_schedule")
    assert (daily.cron_schedule, daily.execution_timezone) == ("30 2 * * *", "Europe/Berlin")
    assert (weekly.cron_schedule, weekly.execution_timezone) == ("15 7 * * 2", "Europe/Berlin")
    # a Tuesday close still closes the ISO week before the tick's week
    tick = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 13, 7, 15,
                                                                       tzinfo=UTC))
    assert weekly(tick).partition_key == "2026-01-05"


@pytest.fixture
def sample_defs() -> dg.Definitions:
    return load_definitions(SAMPLE_SITE)


def test_weekly_close_runs_monday_0600_utc_for_the_week_that_ended(sample_defs):
    schedule = sample_defs.resolve_schedule_def("weekly_close_schedule")
    assert schedule.cron_schedule == "0 6 * * 1"
    job = sample_defs.resolve_job_def("weekly_close")
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {
        "chargeback", "weekly_report", "focus_export"}
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 12, 6, 0,
                                                                          tzinfo=UTC))
    assert schedule(context).partition_key == "2026-01-05"


def test_daily_ingest_runs_each_night_for_the_day_before(sample_defs):
    schedule = sample_defs.resolve_schedule_def("daily_ingest_schedule")
    assert schedule.cron_schedule == "0 1 * * *"
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 1, 8, 1, 0,
                                                                          tzinfo=UTC))
    assert schedule(context).partition_key == "2026-01-07"
    keys = {k.to_user_string()
            for k in sample_defs.resolve_job_def("daily_ingest").asset_layer.executable_asset_keys}
    assert {"slurm_jobs", "slurm_gpu_indices", "k8s_pod_allocations", "allocations",
            "gpu_usage_hourly", "incidents"} <= keys


def test_a_successful_ledger_run_publishes_the_snapshot(sample_defs):
    sensor = sample_defs.resolve_sensor_def("publish_after_ledger_runs")
    job = sample_defs.resolve_job_def("publish_ledger")
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
