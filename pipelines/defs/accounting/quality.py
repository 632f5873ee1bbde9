import dagster as dg

from models.build import open_build_days
from models.quality import build_data_quality
from models.schema import DATA_QUALITY_DAYS
from pipelines.defs.check_results import offending_rows_result, query_rows
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource


@dg.asset(
    pool=LEDGER_POOL,
    partitions_def=daily_partitions,
    group_name="accounting",
    kinds={"duckdb", "sql"},
    deps=["allocations", "gpu_usage_hourly", "gpu_utilization", "k8s_pod_allocations",
          "slurm_jobs", "sreport_gpu", "gpu_inventory"],
    description="The data-quality gate of one UTC day, per cluster (data_quality_days): dcgm "
    "sample coverage, the longest scrape gap, owners found, nodes outside the inventory, the "
    "difference from sreport, Kubernetes ingest warnings and rejects. A cluster-day beyond a "
    "[gpuledger.quality] threshold is provisional, and so are its invoice lines.",
)
def data_quality_days(context: dg.AssetExecutionContext, ledger: LedgerResource,
                      site: SiteResource) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    thresholds = site.load().quality  # read with the ledger closed
    with ledger.ledger() as con:
        # the days the partition's build covers; and every day of their sreport windows
        first, last = open_build_days(con, day)
        provisional = build_data_quality(con, first, last, thresholds)
        clusters = con.execute(
            f"SELECT count(*) FROM {DATA_QUALITY_DAYS.name} WHERE day = ?", [day]).fetchone()[0]
    return dg.MaterializeResult(metadata={"clusters": clusters,
                                          "provisional_clusters": provisional})


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="data_quality_days",
    partitions_def=daily_partitions,
    description="The day is final on every cluster; the provisional cluster-days are returned "
    "with their reasons (their invoice lines carry the mark).",
)
def day_not_provisional(context: dg.AssetCheckExecutionContext,
                        ledger: LedgerResource) -> dg.AssetCheckResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        rows, columns = query_rows(
            con, f"SELECT cluster, day, sample_coverage, longest_scrape_gap_minutes, "
            f"attributed_share, unknown_nodes, sreport_difference, k8s_rejects, reasons "
            f"FROM {DATA_QUALITY_DAYS.name} WHERE day = $day AND provisional ORDER BY cluster",
            {"day": day})
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN,
                                 metadata={"provisional_clusters": len(rows)})
