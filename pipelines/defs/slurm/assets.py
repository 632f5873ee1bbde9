import dagster as dg

from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource
from pipelines.defs.slurm.checks import (
    DURATIONS_CHECK,
    GPU_FIELD_CHECK,
    SANITY_CHECK,
    UNIQUE_RUNS_CHECK,
    durations_are_possible,
    gpu_field_parsed,
    lines_within_sanity_limits,
    no_duplicate_runs,
)
from pipelines.defs.slurm.resources import SlurmSourceResource


@dg.multi_asset(
    partitions_def=daily_partitions,
    group_name="slurm",
    pool=LEDGER_POOL,
    specs=[
        dg.AssetSpec(
            "slurm_jobs",
            kinds={"duckdb", "slurm"},
            description="Slurm runs (one per run of a requeued job) and their GPUs per node, "
            "from sacct for one UTC day with a trailing lookback that re-pulls jobs still "
            "running or changed later; every cluster of the site file, each read before the "
            "ledger is opened.",
        ),
        dg.AssetSpec(
            "slurm_steps",
            kinds={"duckdb", "slurm"},
            description="Slurm job steps (.batch, .extern, .0 …) from the same sacct pull.",
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(UNIQUE_RUNS_CHECK, asset="slurm_jobs"),
        dg.AssetCheckSpec(DURATIONS_CHECK, asset="slurm_jobs"),
        dg.AssetCheckSpec(GPU_FIELD_CHECK, asset="slurm_jobs"),
        dg.AssetCheckSpec(SANITY_CHECK, asset="slurm_jobs",
                          description="WARN: the day's sacct lines rejected for breaking a "
                          "sanity limit (GPUs beyond the node inventory or a ceiling, End "
                          "before Start, absurd durations, times in the future), with file, "
                          "line, field and reason; those lines are not charged."),
    ],
)
def slurm_jobs(
    context: dg.AssetExecutionContext, ledger: LedgerResource, slurm: SlurmSourceResource
):
    window = context.partition_time_window
    start = window.start.replace(tzinfo=None)
    end = window.end.replace(tzinfo=None)
    loads = {}
    for cluster in slurm.clusters():
        # sacct (perhaps over ssh, perhaps slow) answers before the ledger is opened
        read = slurm.read_window(cluster, start, end)
        with ledger.ledger() as con:
            loads[cluster.name] = slurm.write_window(con, read)
        context.log.info(f"{cluster.name}: {loads[cluster.name].summary()}")
    with ledger.ledger() as con:
        checks = [no_duplicate_runs(con), durations_are_possible(con), gpu_field_parsed(con),
                  lines_within_sanity_limits(con, [x.source_file for x in loads.values()])]
    span = f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC"
    per_cluster = {
        name: {"source": x.source_file, "lines_read": x.lines_read, "runs": x.runs,
               "steps": x.steps, "node_allocations": x.node_allocations,
               "rejected": len(x.rejects), "runs_kept_later_observation": x.kept}
        for name, x in loads.items()
    }
    everything = list(loads.values())
    yield dg.MaterializeResult(
        asset_key="slurm_jobs",
        metadata={
            "clusters": ", ".join(loads) or "none",
            "lines_read": sum(x.lines_read for x in everything),
            "runs": sum(x.runs for x in everything),
            "node_allocations": sum(x.node_allocations for x in everything),
            "rejected": sum(len(x.rejects) for x in everything),
            "rejected_by_sanity_rule": dg.MetadataValue.json(_by_rule(everything)),
            "runs_kept_later_observation": sum(x.kept for x in everything),
            "per_cluster": dg.MetadataValue.json(per_cluster),
            "window": span,
        },
    )
    yield dg.MaterializeResult(
        asset_key="slurm_steps",
        metadata={"steps": sum(x.steps for x in everything),
                  "rejected": sum(len(x.rejects) for x in everything),
                  "per_cluster": dg.MetadataValue.json(
                      {n: {"steps": x.steps} for n, x in loads.items()}),
                  "window": span},
    )
    yield from checks


def _by_rule(loads: list) -> dict[str, int]:
    total: dict[str, int] = {}
    for load in loads:
        for rule, n in load.rejected_by_rule.items():
            total[rule] = total.get(rule, 0) + n
    return total


@dg.asset(
    partitions_def=daily_partitions,
    group_name="slurm",
    kinds={"duckdb", "slurm"},
    pool=LEDGER_POOL,
    description="sreport -T gres/gpu cluster utilization and AccountUtilizationByUser "
    "for the day (live mode) or as exported (dump mode), for every cluster of the site file.",
)
def sreport_gpu(
    context: dg.AssetExecutionContext, ledger: LedgerResource, slurm: SlurmSourceResource
) -> dg.MaterializeResult:
    window = context.partition_time_window
    start, end = window.start.replace(tzinfo=None), window.end.replace(tzinfo=None)
    per_cluster: dict[str, dict[str, int]] = {}
    for cluster in slurm.clusters():
        read = slurm.read_sreport(cluster, start, end)  # the ledger is still closed
        if read is None:
            continue
        with ledger.ledger() as con:
            util, accounts = slurm.write_sreport(con, read)
        per_cluster[cluster.name] = {"utilization_rows": util, "account_rows": accounts}
    return dg.MaterializeResult(metadata={
        "utilization_rows": sum(c["utilization_rows"] for c in per_cluster.values()),
        "account_rows": sum(c["account_rows"] for c in per_cluster.values()),
        "per_cluster": dg.MetadataValue.json(per_cluster),
    })
