"""The Kueue Workload history sensor: Workloads are deleted with their Jobs, so one snapshot a
day loses most finished gangs. Every ``[kueue] every_minutes`` the sensor of each API cluster
lists its Workloads through the Kubernetes API, with no ledger connection open (another
process may be writing), spools the list as ``<db folder>/spool/kueue/<cluster>/<UTC
time>.json.gz`` and asks for a run of ``kueue_workload_history_ingest``, whose asset takes the
ledger pool and stores every spooled file in order."""

import re

import dagster as dg

from gpuledger.ingest.kubernetes import workload_history
from gpuledger.site import ClusterSite, Site
from pipelines.defs.kueue.assets import HISTORY, api_clusters
from pipelines.site import current_site

history_ingest = dg.define_asset_job(
    "kueue_workload_history_ingest", selection=dg.AssetSelection.assets(HISTORY),
    description="Store the spooled Kueue Workload snapshots in kueue_workload_history.",
)


def sensor_name(cluster: str) -> str:
    # Dagster names are letters, digits and '_'; cluster names may also hold '-' and '.'
    return "kueue_workload_history_" + re.sub(r"[^A-Za-z0-9_]", "_", cluster)


def workload_history_sensor(site: Site, cluster: ClusterSite) -> dg.SensorDefinition:
    """The sensor of one API cluster, at its ``every_minutes``; running by default when the
    site's ``[schedules] enabled``."""
    kueue = cluster.kueue
    assert kueue is not None
    name = cluster.name

    @dg.sensor(
        name=sensor_name(name),
        job=history_ingest,
        minimum_interval_seconds=max(30, round(kueue.every_minutes * 60)),
        default_status=(dg.DefaultSensorStatus.RUNNING if site.schedules.enabled
                        else dg.DefaultSensorStatus.STOPPED),
        description=f"List the Kueue Workloads of cluster {name} through the Kubernetes API "
        f"every {kueue.every_minutes:g} min and keep every change (kueue_workload_history).",
    )
    def _sensor(context: dg.SensorEvaluationContext):
        the_site = current_site()  # read again: the file may have changed since the load
        live = the_site.cluster(name)
        if live.kueue is None or live.kueue.kubeconfig is None:
            return dg.SkipReason(f"cluster {name} has no [kueue] kubeconfig any more")
        folder = workload_history.spool_folder(the_site.db, name)
        path = workload_history.snapshot_to_spool(live.kueue, folder)
        context.log.info(f"{name}: spooled {path}")
        return dg.RunRequest(run_key=f"{name}-{path.name}", tags={"cluster": name})

    return _sensor


@dg.definitions
def kueue_sensors() -> dg.Definitions:
    site = current_site()
    return dg.Definitions(
        jobs=[history_ingest],
        sensors=[workload_history_sensor(site, c) for c in api_clusters(site)],
    )
