import dagster as dg

from gpuledger import k8s_ingest
from pipelines.defs.kubernetes.checks import WINDOW_CHECKS
from pipelines.defs.kubernetes.resources import KubernetesSourceResource
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource, WorldFilesResource

GROUP = "kubernetes_metrics"


@dg.multi_asset(
    partitions_def=daily_partitions,
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
    """One read of the day from Prometheus (or the fixture twin), written in one transaction."""
    window = context.partition_time_window
    start = window.start.replace(tzinfo=None)
    end = window.end.replace(tzinfo=None)
    with ledger.ledger() as con:
        load = kubernetes.load_window(con, start, end)
        checks = [check(con, load.cluster, start, end) for _, _, check, _ in WINDOW_CHECKS]
    common = {
        "window": f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC",
        "cluster": load.cluster,
        "source": kubernetes.describe(),
        "scrape_interval_s": load.scrape_interval_s or 0.0,
        "warnings": len(load.warnings),
    }
    yield dg.MaterializeResult(asset_key="k8s_pod_allocations", metadata={
        **common, "pods": load.pods, "pod_intervals": load.pod_intervals,
        "node_intervals": load.node_intervals,
    })
    yield dg.MaterializeResult(asset_key="gpu_utilization", metadata={
        **common, "gpu_minute_rows": load.utilization_rows, "gpu_days": load.busy_days,
    })
    yield dg.MaterializeResult(asset_key="kueue_metrics", metadata={
        **common, "rows": load.kueue_rows,
    })
    yield from checks


@dg.asset(
    group_name="kubernetes", kinds={"duckdb", "json"},
    description="Kueue Workloads from the kubectl snapshot with their conditions read: queue, "
    "ClusterQueue, owner, pod-set counts, quota reserved / admitted / PodsReady times, "
    "evictions (Preempted, PodsReadyTimeout, ...), requeues, finished.",
    check_specs=[dg.AssetCheckSpec("every_workload_read", asset="kueue_workloads")],
)
def kueue_workloads(ledger: LedgerResource, world: WorldFilesResource):
    path = world.path("kueue", "workloads.json")
    with ledger.ledger() as con:
        result = k8s_ingest.import_workload_conditions(con, path)
        counts = con.execute(
            "SELECT count(*) FILTER (WHERE evicted), count(*) FILTER (WHERE eviction_count > 0), "
            "count(*) FILTER (WHERE finished), count(*) FILTER (WHERE NOT quota_reserved "
            "AND NOT finished) FROM kueue_workloads").fetchone()
    yield dg.MaterializeResult(metadata={
        "rows": result.rows, "rejected": len(result.rejects), "source_file": str(path),
        "evicted_now": counts[0], "evicted_ever": counts[1], "finished": counts[2],
        "pending": counts[3],
    })
    sample = "\n".join(f"- {r.describe()}" for r in result.rejects[:20])
    yield dg.AssetCheckResult(
        check_name="every_workload_read", passed=not result.rejects,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"offending_rows": len(result.rejects),
                  "sample": dg.MetadataValue.md(sample or "none")},
    )
