from datetime import datetime, time, timedelta

import dagster as dg

from models import load_sql
from models.incidents import scrape_tolerance
from pipelines.defs.check_results import offending_rows_result, query_rows
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource

COLUMNS = ("incident_id, node, start_ts, end_ts, gpu_seconds, cost, currency, slurm_job, "
           "k8s_workload, person, other_person, evidence_level, detail")


def _incidents_of(kind: str, context: dg.AssetCheckExecutionContext,
                  ledger: LedgerResource) -> dg.AssetCheckResult:
    """WARN with the day's incidents of ``kind``, largest first (passes when there are none)."""
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        rows, columns = query_rows(
            con, f"SELECT {COLUMNS} FROM incidents WHERE day = $day AND kind = $kind "
            "ORDER BY gpu_seconds DESC, incident_id", {"day": day, "kind": kind})
    seconds = sum(r[4] for r in rows)
    cost = sum(r[5] for r in rows if r[5] is not None)
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN, metadata={
        "incidents": len(rows),
        "gpu_hours": round(seconds / 3600, 3),
        "cost": float(cost),
    })


def _incidents_check(name: str, kind: str, description: str) -> dg.AssetChecksDefinition:
    """The day's check ``name`` on the incidents of ``kind`` (the three differ only in kind)."""

    @dg.asset_check(asset="incidents", name=name, partitions_def=daily_partitions,
                    pool=LEDGER_POOL, description=description)
    def check(context: dg.AssetCheckExecutionContext,
              ledger: LedgerResource) -> dg.AssetCheckResult:
        return _incidents_of(kind, context, ledger)

    return check


no_double_scheduled_gpus = _incidents_check(
    "no_double_scheduled_gpus", "double_scheduled",
    "GPUs placed by both Slurm and Kubernetes at once, with both owners, the overlapped "
    "GPU-hours and the evidence level (gpu or node).")

no_partial_gangs = _incidents_check(
    "no_partial_gangs", "partial_gang",
    "Gang workloads that ran with fewer pods than they need while the running ones held GPUs, "
    "with the GPU-hours wasted until all ran or the workload was evicted.")

no_idle_allocations = _incidents_check(
    "no_idle_allocations", "idle_allocation",
    "Slurm jobs and pods whose GPUs (some or all) stayed below the busy threshold for the "
    "minimum time, with the idle GPU-hours and their cost.")

shared_gpus_within_one_gpu = _incidents_check(
    "shared_gpus_within_one_gpu", "shared_overcommit",
    "The shared-GPU invariant (docs/shared-gpus.md): physical GPUs whose charged shares (MIG "
    "fractions, whole-GPU holders, time-shared holders) came to more than one GPU-second per "
    "second, with the excess GPU-hours and the holders.")

nodes_within_their_gpus = _incidents_check(
    "nodes_within_their_gpus", "over_capacity",
    "One scheduler's holders on a node held more physical GPUs than it has (docs/accounting.md, "
    "\"Conservation\"), with the GPU-hours charged beyond the GPUs and the holders.")

no_unaccounted_use = _incidents_check(
    "no_unaccounted_use", "unaccounted_use",
    "GPUs dcgm-exporter saw busy while no Slurm run or pod held them, with the GPUs, the busy "
    "share, every holder the series name and the likely cause (docs/accounting.md, "
    "\"Conservation\").")


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="incidents",
    partitions_def=daily_partitions,
    description="Conservation, per node and per physical GPU and hour: charged + conflict + "
    "infrastructure + unaccounted + idle (+ not observed, per GPU) = capacity to the "
    "GPU-second, the invoices' GPU-seconds equal what the sweep holds, the GPUs' unaccounted "
    "seconds add up to the node's, nothing charged on a node the inventory lacks, and GPU-time "
    "held twice is an incident (docs/accounting.md, \"Conservation\"). Fails with the node-hours "
    "and GPU-hours (gpu_uuid) that break it.",
)
def every_gpu_second_accounted_once(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        # the detectors' tolerance: Kubernetes ends are known to one scrape interval
        start = datetime.combine(day, time())
        tolerance = scrape_tolerance(con, start, start + timedelta(days=1))
        rows, columns = query_rows(con, load_sql("gpu_conservation_hourly_check"),
                                   {"first_day": day, "end_day": day + timedelta(days=1),
                                    "tolerance_s": float(tolerance)})
    return offending_rows_result(rows, columns, metadata={
        "node_hours": len({(r[0], r[1]) for r in rows}),
        "gpu_hours": sum(1 for r in rows if r[3] is not None),
        "problems": ", ".join(sorted({str(r[2]) for r in rows})) or "none",
    })
