import dagster as dg

from pipelines.defs.schedules import daily_ingest, weekly_close
from pipelines.site import current_site

# Dashboards, `gpuledger sql` and `gpuledger report` read the published snapshot, never the live
# ledger: after each scheduled ledger run succeeds, publish it (one small unpartitioned run, as a
# partitioned job cannot also run the unpartitioned publish asset).
publish_ledger = dg.define_asset_job(
    "publish_ledger", selection=dg.AssetSelection.assets("published_ledger")
)


def publish_request(context: dg.RunStatusSensorContext) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"publish-after-{context.dagster_run.run_id}")


def publish_after_ledger_runs(enabled: bool) -> dg.SensorDefinition:
    """RUNNING in a site deployment ([gpuledger.schedules] enabled, the default)."""
    return dg.run_status_sensor(
        name="publish_after_ledger_runs",
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[daily_ingest, weekly_close],
        request_job=publish_ledger,
        default_status=(dg.DefaultSensorStatus.RUNNING if enabled
                        else dg.DefaultSensorStatus.STOPPED),
        description="Publish the read-only snapshot after a daily ingest or weekly close "
        "succeeds.",
    )(publish_request)


@dg.definitions
def serving_sensors() -> dg.Definitions:
    enabled = current_site().schedules.enabled
    return dg.Definitions(jobs=[publish_ledger], sensors=[publish_after_ledger_runs(enabled)])
