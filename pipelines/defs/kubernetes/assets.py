import dagster as dg

from pipelines.defs.kubernetes.checks import WINDOW_CHECKS
from pipelines.defs.kubernetes.resources import KubernetesSourceResource
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource

GROUP = "kubernetes_metrics"


@dg.multi_asset(
    partitions_def=daily_partitions,
    pool=LEDGER_POOL,
    specs=[
        dg.AssetSpec(
            "k8s_pod_allocations", group_name=GROUP, kinds={"duckdb", "prometheus"},
            description="Pod GPU allocation intervals (kube-state-metrics: GPU requests of "
            "pods Running on a node) for one UTC day, merged with the neighbouring days' "
            "intervals of the same pod; node GPU capacity and terminal pod phases.",
        ),
        dg.AssetSpec(
            "gpu_utilization", group_name=GROUP, kinds={"duckdb", "prometheus"},
            description="dcgm-exporter busy fraction per GPU per minute with the pod or Slurm "
            "job holding it, and busy GPU-seconds per GPU-day, for one UTC day.",
        ),
        dg.AssetSpec(
            "kueue_metrics", group_name=GROUP, kinds={"duckdb", "prometheus"},
            description="Kueue admissions/evictions (reset-aware), pending workloads, "
            "admission wait and ClusterQueue quota per hour of one UTC day.",
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(name, asset=asset, description=description)
        for asset, name, _, description in WINDOW_CHECKS
    ],
)
def kubernetes_day(
    context: dg.AssetExecutionContext, ledger: LedgerResource,
    kubernetes: KubernetesSourceResource,
):
    """One read of the day per cluster from Prometheus (or the fixture twin), each written in one
    transaction."""
    window = context.partition_time_window
    start = window.start.replace(tzinfo=None)
    end = window.end.replace(tzinfo=None)
    loads = {}
    for cluster in kubernetes.clusters():
        # the source is read with the ledger closed: a slow Prometheus never holds the writer lock
        loads[cluster.name] = (kubernetes.load_window(ledger.ledger, cluster, start, end),
                               kubernetes.describe(cluster))
    with ledger.ledger() as con:
        checks = [_merged(check_name, asset, {name: check(con, name, start, end) for name in loads})
                  for asset, check_name, check, _ in WINDOW_CHECKS]
    every = [load for load, _ in loads.values()]
    common = {
        "window": f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC",
        "clusters": ", ".join(loads) or "none",
        "sources": dg.MetadataValue.json({n: src for n, (_, src) in loads.items()}),
        "warnings": sum(len(x.warnings) for x in every),
    }

    def per_cluster(**fields: str) -> dg.MetadataValue:
        return dg.MetadataValue.json({
            name: {"scrape_interval_s": load.scrape_interval_s or 0.0,
                   **{k: getattr(load, attr) for k, attr in fields.items()}}
            for name, (load, _) in loads.items()})

    yield dg.MaterializeResult(asset_key="k8s_pod_allocations", metadata={
        **common, "pods": sum(x.pods for x in every),
        "pod_intervals": sum(x.pod_intervals for x in every),
        "node_intervals": sum(x.node_intervals for x in every),
        "per_cluster": per_cluster(pods="pods", pod_intervals="pod_intervals",
                                   node_intervals="node_intervals"),
    })
    yield dg.MaterializeResult(asset_key="gpu_utilization", metadata={
        **common, "gpu_minute_rows": sum(x.utilization_rows for x in every),
        "gpu_days": sum(x.busy_days for x in every),
        "per_cluster": per_cluster(gpu_minute_rows="utilization_rows", gpu_days="busy_days"),
    })
    yield dg.MaterializeResult(asset_key="kueue_metrics", metadata={
        **common, "rows": sum(x.kueue_rows for x in every),
        "per_cluster": per_cluster(rows="kueue_rows"),
    })
    yield from checks


def _merged(name: str, asset: str,
            by_cluster: dict[str, dg.AssetCheckResult]) -> dg.AssetCheckResult:
    """One check result over every cluster: passed when each passed, the worst severity, the
    offending rows added up and each cluster's preview."""
    results = list(by_cluster.values())
    if not results:
        return dg.AssetCheckResult(asset_key=asset, check_name=name, passed=True,
                                   metadata={"offending_rows": 0, "clusters": 0})
    if len(results) == 1:
        return results[0]
    failed = [r for r in results if not r.passed]
    metadata: dict[str, object] = {"offending_rows": sum(
        int(getattr(r.metadata.get("offending_rows"), "value", 0) or 0) for r in results)}
    for cluster, r in by_cluster.items():
        if "sample" in r.metadata:
            metadata[f"sample_{cluster}"] = r.metadata["sample"]
    severity = (dg.AssetCheckSeverity.ERROR
                if any(r.severity == dg.AssetCheckSeverity.ERROR for r in failed)
                else dg.AssetCheckSeverity.WARN)
    return dg.AssetCheckResult(asset_key=asset, check_name=name, passed=not failed,
                               severity=severity, metadata=metadata)


# kueue_workloads (the Workload snapshot read) is in pipelines/defs/kueue/assets.py: one
# import fills kueue_workloads_raw and kueue_workloads, as the CLI's import-workloads does.
