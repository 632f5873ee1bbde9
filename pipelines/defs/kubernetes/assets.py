import dagster as dg

from pipelines.defs.kubernetes.checks import WINDOW_CHECKS
from pipelines.defs.kubernetes.resources import KubernetesSourceResource
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource

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
    # the source is read with the ledger closed: a slow Prometheus never holds the writer lock
    load = kubernetes.load_window(ledger.ledger, start, end)
    with ledger.ledger() as con:
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


# kueue_workloads (the Workload snapshot read) is in pipelines/defs/kueue/assets.py: one
# import fills kueue_workloads_raw and kueue_workloads, as the CLI's import-workloads does.
