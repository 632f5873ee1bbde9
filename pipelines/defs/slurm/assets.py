import dagster as dg

from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource
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
    specs=[
        dg.AssetSpec(
            "slurm_jobs",
            kinds={"duckdb", "slurm"},
            description="Slurm runs (one per run of a requeued job) and their GPUs per node, "
            "from sacct for one UTC day with a trailing lookback that re-pulls jobs still "
            "running or changed later.",
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
    with ledger.ledger() as con:
        load = slurm.load_window(con, start, end)
        checks = [no_duplicate_runs(con), durations_are_possible(con), gpu_field_parsed(con),
                  lines_within_sanity_limits(con, load.source_file)]
    span = f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC"
    yield dg.MaterializeResult(
        asset_key="slurm_jobs",
        metadata={
            "lines_read": load.lines_read,
            "runs": load.runs,
            "node_allocations": load.node_allocations,
            "rejected": len(load.rejects),
            "rejected_by_sanity_rule": dg.MetadataValue.json(load.rejected_by_rule),
            "runs_kept_later_observation": load.kept,
            "window": span,
        },
    )
    yield dg.MaterializeResult(
        asset_key="slurm_steps",
        metadata={"steps": load.steps, "rejected": len(load.rejects), "window": span},
    )
    yield from checks


@dg.asset(
    partitions_def=daily_partitions,
    group_name="slurm",
    kinds={"duckdb", "slurm"},
    description="sreport -T gres/gpu cluster utilization and AccountUtilizationByUser "
    "for the day (live mode) or as exported (dump mode).",
)
def sreport_gpu(
    context: dg.AssetExecutionContext, ledger: LedgerResource, slurm: SlurmSourceResource
) -> dg.MaterializeResult:
    window = context.partition_time_window
    with ledger.ledger() as con:
        util, accounts = slurm.load_sreport(
            con, window.start.replace(tzinfo=None), window.end.replace(tzinfo=None)
        )
    return dg.MaterializeResult(metadata={"utilization_rows": util, "account_rows": accounts})
