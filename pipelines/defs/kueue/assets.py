from pathlib import Path

import dagster as dg

from connectors.errors import SourceError
from gpuledger.ingest import service
from gpuledger.ingest.kubernetes import pod_groups, workload_history
from gpuledger.site import ClusterSite, Site
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource

RAW = dg.AssetKey("kueue_workload_snapshot")
READ = dg.AssetKey("kueue_workloads")
HISTORY = dg.AssetKey("kueue_workload_history")
CHECK = "every_workload_read"
POD_GROUPS = dg.AssetKey("k8s_pod_groups")
POD_GROUPS_CHECK = "every_pod_group_read"


def snapshot_clusters(site: Site) -> list[ClusterSite]:
    """Clusters whose Workloads come from a kubectl snapshot file (or a folder of them)."""
    return [c for c in site.clusters if c.kueue is not None and c.kueue.snapshot is not None]


def api_clusters(site: Site) -> list[ClusterSite]:
    """Clusters whose Workloads the history sensor lists through the Kubernetes API."""
    return [c for c in site.clusters if c.kueue is not None and c.kueue.kubeconfig is not None
            and c.kueue.snapshot is None]


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            RAW, group_name="kubernetes", kinds={"duckdb", "json"},
            description="Kueue Workload objects from a kubectl snapshot, one row per workload "
            "(kueue_workloads_raw): the latest state seen of each. Filled by the same read as "
            "kueue_workloads.",
        ),
        dg.AssetSpec(
            READ, group_name="kubernetes", kinds={"duckdb", "json"},
            description="Kueue Workloads from the kubectl snapshot with their conditions read: "
            "queue, ClusterQueue, owner, pod-set counts, GPUs (the gpu_resources setting), "
            "quota reserved / admitted / PodsReady times, evictions (Preempted, "
            "PodsReadyTimeout, ...), requeues, finished. Each snapshot is one observation of "
            "kueue_workload_history; Workloads deleted since keep their last state.",
        ),
    ],
    check_specs=[dg.AssetCheckSpec(CHECK, asset=READ, description="every Workload item of "
                                   "the snapshot could be read (bad items are in rejects)")],
    can_subset=True,
    pool=LEDGER_POOL,
)
def kueue_workload_tables(
    context: dg.AssetExecutionContext, ledger: LedgerResource, site: SiteResource
):
    """``service.import_workloads`` (the CLI's path) for each cluster's ``[kueue] snapshot``:
    a file is one observation; a folder of time-named files is read in order (the API's
    fixture twin). GPU resource names come from the site's ``gpu_resources``."""
    the_site = site.load()
    gpu_resources = the_site.gpu_resources
    results, files = [], []
    for cluster in snapshot_clusters(the_site):
        path = cluster.kueue.snapshot  # type: ignore[union-attr]
        if path.is_dir():
            stored = workload_history.ingest_spool(
                ledger.ledger, path, cluster=cluster.name, namespace=cluster.kueue.namespace,
                gpu_resources=gpu_resources, archive=False)
            results += [r for r, _ in stored]
        else:
            with ledger.ledger() as con:
                results.append(service.import_workloads(con, path, gpu_resources=gpu_resources,
                                                        cluster=cluster.name))
        files.append(str(path))
    with ledger.ledger() as con:
        counts = con.execute(
            "SELECT count(*) FILTER (WHERE evicted), count(*) FILTER (WHERE eviction_count > 0), "
            "count(*) FILTER (WHERE preempted), count(*) FILTER (WHERE finished), "
            "count(*) FILTER (WHERE NOT quota_reserved AND NOT finished) FROM kueue_workloads"
        ).fetchone()
    rejects = [r for result in results for r in result.rejects]
    common = {"rows": sum(r.rows for r in results), "rejected": len(rejects),
              "source_file": ", ".join(files), "gpu_resources": ", ".join(gpu_resources)}
    selected = context.selected_asset_keys
    if RAW in selected:
        yield dg.MaterializeResult(asset_key=RAW, metadata=common)
    if READ in selected:
        yield dg.MaterializeResult(asset_key=READ, metadata={
            **common, "evicted_now": counts[0], "evicted_ever": counts[1],
            "preempted": counts[2], "finished": counts[3], "pending": counts[4],
        })
    if any(k.name == CHECK for k in context.selected_asset_check_keys):
        sample = "\n".join(f"- {r.describe()}" for r in rejects[:20])
        yield dg.AssetCheckResult(
            asset_key=READ, check_name=CHECK, passed=not rejects,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"offending_rows": len(rejects),
                      "sample": dg.MetadataValue.md(sample or "none")},
        )


@dg.asset(
    key=HISTORY,
    group_name="kueue_history",
    kinds={"duckdb", "json"},
    pool=LEDGER_POOL,
    description="Every state of every Kueue Workload the history sensor listed through the "
    "Kubernetes API (kueue_workload_history, with deleted_seen_at once a Workload is gone), "
    "and kueue_workloads refreshed to the latest state of each: the spooled snapshots "
    "(<db folder>/spool/kueue/<cluster>/) in time order, each archived to done/ after commit.",
)
def kueue_workload_history(ledger: LedgerResource, site: SiteResource) -> dg.MaterializeResult:
    the_site = site.load()
    per_cluster: dict[str, dict[str, int]] = {}
    for cluster in api_clusters(the_site):
        stored = workload_history.ingest_spool(
            ledger.ledger, workload_history.spool_folder(the_site.db, cluster.name),
            cluster=cluster.name, namespace=cluster.kueue.namespace,  # type: ignore[union-attr]
            gpu_resources=the_site.gpu_resources)
        per_cluster[cluster.name] = {
            "files": len(stored),
            "workloads_listed": sum(o.listed for _, o in stored),
            "new_states": sum(o.new_states for _, o in stored),
            "deleted": sum(o.deleted for _, o in stored),
            "rejected": sum(len(r.rejects) for r, _ in stored),
        }
    return dg.MaterializeResult(metadata={
        key: sum(c[key] for c in per_cluster.values())
        for key in ("files", "new_states", "deleted", "rejected")
    } | {"per_cluster": dg.MetadataValue.json(per_cluster)})


def pod_group_clusters(site: Site) -> list[ClusterSite]:
    """Clusters whose scheduler gang objects are read: a ``[kueue] pod_groups`` snapshot, or
    the API through the kubeconfig (a cluster read from a Workload snapshot file alone has
    none)."""
    return [c for c in site.clusters if c.kueue is not None
            and (c.kueue.pod_groups is not None or c.kueue.snapshot is None)]


@dg.asset(
    key=POD_GROUPS,
    group_name="kubernetes",
    kinds={"duckdb", "json"},
    pool=LEDGER_POOL,
    check_specs=[dg.AssetCheckSpec(POD_GROUPS_CHECK, asset=POD_GROUPS, description="every "
                                   "Workload/PodGroup item could be read (bad items are in "
                                   "rejects)")],
    description="Gangs the scheduler itself knows (k8s_pod_groups): Kubernetes' Workload API "
    "(scheduling.k8s.io Workloads and PodGroups with a gang minCount) and coscheduling "
    "PodGroups (scheduling.x-k8s.io minMember), from the [kueue] pod_groups snapshot or listed "
    "through the kubeconfig (kept under <db folder>/spool/pod_groups/<cluster>/). "
    "detect_partial_gang.sql sizes a gang by them.",
)
def k8s_pod_groups(context: dg.AssetExecutionContext, ledger: LedgerResource,
                   site: SiteResource):
    """``gpuledger.ingest.kubernetes.pod_groups`` (the CLI's path): each list read with no ledger
    connection
    open, then stored in one short transaction. An API that cannot be read is reported (the
    check fails) but fails no run: the objects are extra gang evidence, and the day's
    incidents wait on this asset."""
    the_site = site.load()
    results, per_cluster, errors = [], {}, []
    for cluster in pod_group_clusters(the_site):
        kueue = cluster.kueue
        if kueue.pod_groups is not None:  # type: ignore[union-attr]
            reads = pod_groups.read_snapshots(kueue.pod_groups)  # type: ignore[union-attr]
        else:
            spool = Path(the_site.db).parent / "spool" / "pod_groups" / cluster.name
            try:
                reads = [pod_groups.read_api(kueue, spool=spool)]  # type: ignore[arg-type]
            except SourceError as exc:
                errors.append(f"{cluster.name}: {exc}")
                context.log.warning(f"pod groups of {cluster.name} not read: {exc}")
                continue
        done = []
        for read in reads:
            with ledger.ledger() as con:
                done.append(pod_groups.store(con, read, cluster=cluster.name))
        results += done
        per_cluster[cluster.name] = {"rows": sum(r.rows for r in done),
                                     "warnings": [w for r in done for w in r.warnings]}
    rejects = [r for result in results for r in result.rejects]
    yield dg.MaterializeResult(metadata={
        "rows": sum(r.rows for r in results), "rejected": len(rejects),
        "per_cluster": dg.MetadataValue.json(per_cluster),
        "errors": dg.MetadataValue.md("\n".join(f"- {e}" for e in errors) or "none")})
    sample = "\n".join([f"- {e}" for e in errors] + [f"- {r.describe()}" for r in rejects[:20]])
    yield dg.AssetCheckResult(
        asset_key=POD_GROUPS, check_name=POD_GROUPS_CHECK, passed=not rejects and not errors,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"offending_rows": len(rejects), "sample": dg.MetadataValue.md(sample or "none")},
    )
