"""``scontrol show job -d`` snapshots into ``slurm_gpu_indices`` (Slurm's GPU indices per job and
node, the GPU-level double-scheduling evidence), as ``gpuledger load-world`` and
``import-scontrol`` load them.

Dump mode: the site's ``scontrol_snapshots`` folder (``scontrol-YYYYmmddTHHMMSSZ.txt``). Live
(``mode = "sacct"`` with ``scontrol_every_minutes``): a sensor runs ``scontrol --all --details
show job`` through the cluster's prefix with no ledger connection open, saves the answer in a spool
folder beside the ledger and asks for a run of the import, which takes the ledger pool like
every other writer. A file already loaded with the same content is not read again.
"""

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from connectors.slurm.scontrol import SCONTROL_ENVIRONMENT, SOURCE, scontrol_command
from connectors.textfiles import file_digest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from gpuledger.site import ClusterSite, Site
from gpuledger.site.sources import slurm_runner
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource
from pipelines.site import current_site

ASSET = "slurm_gpu_indices"
snapshot_time = scontrol_ingest.snapshot_time


def spool_folder(site: Site, cluster: ClusterSite) -> Path:
    """Where the sensor saves a live cluster's snapshots: beside the ledger."""
    return site.db.parent / "spool" / "scontrol" / cluster.name


def snapshot_files(site: Site, cluster: ClusterSite) -> list[Path]:
    """A cluster's snapshot files, oldest first: the dump folder, or the live spool."""
    slurm = cluster.slurm
    if slurm is None:
        return []
    folder = slurm.scontrol_snapshots if slurm.mode == "dump" else spool_folder(site, cluster)
    return scontrol_ingest.snapshot_folder_files(folder)


def _in_window(path: Path, start: datetime, end: datetime) -> bool:
    taken = snapshot_time(path)
    return taken is None or start <= taken < end  # an undated file is read by every day


@dg.asset(
    name=ASSET,
    partitions_def=daily_partitions,
    group_name="slurm",
    kinds={"duckdb", "slurm"},
    pool=LEDGER_POOL,
    description="Slurm's GPU indices per job and node from the day's `scontrol show job -d` "
    "snapshots of every cluster (the site's scontrol_snapshots folder, or the live snapshots "
    "the scontrol sensor took); a file already loaded unchanged is skipped.",
)
def slurm_gpu_indices(context: dg.AssetExecutionContext, ledger: LedgerResource,
                      site: SiteResource) -> dg.MaterializeResult:
    window = context.partition_time_window
    start, end = window.start.replace(tzinfo=None), window.end.replace(tzinfo=None)
    the_site = site.load()
    per_cluster: dict[str, dict[str, int]] = {}
    for cluster in the_site.clusters:
        if cluster.slurm is None:
            continue
        files = [p for p in snapshot_files(the_site, cluster) if _in_window(p, start, end)]
        # hashes first, with the ledger closed; a spooled live snapshot carries its time in its name
        digests = {p: file_digest(p)[0] for p in files}
        counts = {"files": 0, "skipped_unchanged": 0, "jobs": 0, "gpu_rows": 0, "rejected": 0}
        with ledger.ledger() as con:
            loaded = dict(con.execute(
                "SELECT path, sha256 FROM source_files WHERE kind = ?", [SOURCE]).fetchall())
            for path in files:
                if loaded.get(str(path)) == digests[path]:
                    counts["skipped_unchanged"] += 1
                    continue
                live = cluster.slurm.mode != "dump"
                load = scontrol_ingest.import_scontrol_file(
                    con, path, observed_at=snapshot_time(path) if live else None)
                counts["files"] += 1
                counts["jobs"] += load.jobs
                counts["gpu_rows"] += load.gpu_rows
                counts["rejected"] += len(load.rejects)
        per_cluster[cluster.name] = counts
    return dg.MaterializeResult(metadata={
        "files": sum(c["files"] for c in per_cluster.values()),
        "gpu_rows": sum(c["gpu_rows"] for c in per_cluster.values()),
        "rejected": sum(c["rejected"] for c in per_cluster.values()),
        "per_cluster": dg.MetadataValue.json(per_cluster),
    })


scontrol_import = dg.define_asset_job(
    "scontrol_import", selection=dg.AssetSelection.assets(ASSET), partitions_def=daily_partitions)


def take_snapshot(site: Site, cluster: ClusterSite, now: datetime | None = None) -> Path:
    """Run scontrol through the cluster's prefix (no ledger connection) and save its answer in
    the spool, atomically (a reader never meets half a file)."""
    assert cluster.slurm is not None
    taken = (now or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None, microsecond=0)
    text = slurm_runner(cluster.slurm).run(scontrol_command(), SCONTROL_ENVIRONMENT)
    folder = spool_folder(site, cluster)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"scontrol-{taken:%Y%m%dT%H%M%S}Z.txt"
    partial = folder / f".{target.name}.partial"
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    return target


def live_clusters(site: Site) -> list[ClusterSite]:
    return [c for c in site.clusters if c.slurm is not None and c.slurm.mode == "sacct"
            and c.slurm.scontrol_every_minutes > 0]


def scontrol_sensor(site: Site) -> dg.SensorDefinition:
    """The live snapshot sensor, at the shortest ``scontrol_every_minutes`` of the site."""
    minutes = min((c.slurm.scontrol_every_minutes for c in live_clusters(site)  # type: ignore
                   if c.slurm), default=5.0)
    running = site.schedules.enabled and bool(live_clusters(site))

    @dg.sensor(
        name="scontrol_snapshot_sensor",
        job=scontrol_import,
        minimum_interval_seconds=max(30, int(minutes * 60)),
        default_status=(dg.DefaultSensorStatus.RUNNING if running
                        else dg.DefaultSensorStatus.STOPPED),
        description="Take `scontrol --all --details show job` on every live Slurm cluster of "
        "the site (through its prefix) and import it (GPU indices per job and node).",
    )
    def _sensor(context: dg.SensorEvaluationContext):
        the_site = current_site()
        now = datetime.now(UTC)
        for cluster in live_clusters(the_site):
            path = take_snapshot(the_site, cluster, now)
            context.log.info(f"{cluster.name}: saved {path}")
            day = snapshot_time(path) or now.replace(tzinfo=None)
            yield dg.RunRequest(run_key=f"{cluster.name}-{path.name}",
                                partition_key=f"{day:%Y-%m-%d}")

    return _sensor


@dg.definitions
def scontrol_definitions() -> dg.Definitions:
    return dg.Definitions(assets=[slurm_gpu_indices], jobs=[scontrol_import],
                          sensors=[scontrol_sensor(current_site())])
