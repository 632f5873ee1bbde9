from collections.abc import Sequence

import dagster as dg
import duckdb

from connectors.slurm.sanity import REASON_PREFIX, RULES
from models import load_sql
from pipelines.defs.check_results import offending_rows_result, query_rows
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource

UNIQUE_RUNS_CHECK = "no_duplicate_runs"
DURATIONS_CHECK = "durations_are_possible"
GPU_FIELD_CHECK = "gpu_field_parsed_on_every_gpu_job"
SANITY_CHECK = "sacct_lines_within_sanity_limits"


def no_duplicate_runs(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = query_rows(con, "SELECT run_key, count(*) AS copies FROM slurm_runs "
                       "GROUP BY run_key HAVING count(*) > 1 ORDER BY run_key")
    return offending_rows_result(rows, cols, check_name=UNIQUE_RUNS_CHECK)


def durations_are_possible(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = query_rows(con, """
        SELECT run_key, job_id, start, "end", elapsed_s, source_file, line_no
        FROM slurm_runs
        WHERE ("end" IS NOT NULL AND start IS NOT NULL AND "end" < start)
           OR elapsed_s < 0
           OR ("end" IS NOT NULL AND start IS NOT NULL
               AND abs(date_diff('second', start, "end") - elapsed_s) > 1)
           OR (start IS NOT NULL AND submit IS NOT NULL AND start < submit)
        ORDER BY run_key""")
    return offending_rows_result(rows, cols, check_name=DURATIONS_CHECK)


def gpu_field_parsed(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = query_rows(con, """
        SELECT run_key, job_id, alloc_tres, source_file, line_no FROM slurm_runs
        WHERE alloc_tres LIKE '%gres/gpu%' AND alloc_tres NOT LIKE '%gres/gpu=0%'
          AND (alloc_gpus IS NULL OR alloc_gpus <= 0)
          AND regexp_matches(alloc_tres, 'gres/gpu(:[^=,]+)?=[1-9]')
        ORDER BY run_key""")
    return offending_rows_result(rows, cols, check_name=GPU_FIELD_CHECK)


def lines_within_sanity_limits(con: duckdb.DuckDBPyConnection,
                               source_files: Sequence[str]) -> dg.AssetCheckResult:
    """WARN when the day's sacct loads (``source_files``, one per cluster) rejected lines for
    breaking a sanity limit (GPUs beyond the inventory or a ceiling, End before Start, absurd
    durations, times in the future: connectors.slurm.sanity); returns those rejects (file, line,
    field, reason) and the count per rule. Those lines are not charged: the day's invoice misses
    them until the source is fixed."""
    rows, cols = query_rows(con, """
        SELECT source_file AS file, line_no AS line, field, reason FROM rejects
        WHERE source = 'sacct' AND list_contains(?, source_file) AND starts_with(reason, ?)
        ORDER BY source_file, line_no""", [list(source_files), REASON_PREFIX])
    by_rule = dict.fromkeys(RULES, 0)
    for *_, reason in rows:
        rule = reason[len(REASON_PREFIX):].split(":", 1)[0]
        by_rule[rule] = by_rule.get(rule, 0) + 1
    return offending_rows_result(
        rows, cols, severity=dg.AssetCheckSeverity.WARN, check_name=SANITY_CHECK,
        metadata={"offending_rows": len(rows), "by_rule": dg.MetadataValue.json(by_rule),
                  "source_files": ", ".join(source_files)},
    )


@dg.asset_check(
    asset="sreport_gpu",
    additional_deps=["slurm_jobs"],
    partitions_def=daily_partitions,
    pool=LEDGER_POOL,
    description="Our GPU-seconds per (account, user) equal sreport's for every stored sreport "
    "window; returns the rows that differ.",
)
def slurm_reconciles_with_sreport(ledger: LedgerResource) -> dg.AssetCheckResult:
    with ledger.ledger() as con:
        windows = con.execute(
            "SELECT DISTINCT report_start, report_end FROM sreport_account_usage ORDER BY 1"
        ).fetchall()
        rows: list[tuple] = []
        cols: list[str] = []
        for start, end in windows:
            rel = con.sql(load_sql("slurm_sreport_reconciliation"),
                          params={"window_start": start, "window_end": end})
            cols = ["report_start", *rel.columns]
            rows += [(start, *r) for r in rel.fetchall() if r[-1] != 0]
    return offending_rows_result(rows, cols,
                                 metadata={"offending_rows": len(rows), "windows": len(windows)})
