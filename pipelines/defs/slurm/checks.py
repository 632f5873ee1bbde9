import dagster as dg
import duckdb

from models import load_sql
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource

UNIQUE_RUNS_CHECK = "no_duplicate_runs"
DURATIONS_CHECK = "durations_are_possible"
GPU_FIELD_CHECK = "gpu_field_parsed_on_every_gpu_job"
SAMPLE_ROWS = 20


def _result(name: str, rows: list[tuple], columns: list[str],
            severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR) -> dg.AssetCheckResult:
    table = "\n".join(" | ".join(str(v) for v in row) for row in rows[:SAMPLE_ROWS])
    return dg.AssetCheckResult(
        check_name=name,
        passed=not rows,
        severity=severity,
        metadata={
            "offending_rows": len(rows),
            "sample": dg.MetadataValue.md(
                f"{' | '.join(columns)}\n{table}" if rows else "none"),
        },
    )


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[tuple], list[str]]:
    rel = con.sql(sql)
    return rel.fetchall(), rel.columns


def no_duplicate_runs(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = _rows(con, "SELECT run_key, count(*) AS copies FROM slurm_runs "
                       "GROUP BY run_key HAVING count(*) > 1 ORDER BY run_key")
    return _result(UNIQUE_RUNS_CHECK, rows, cols)


def durations_are_possible(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = _rows(con, """
        SELECT run_key, job_id, start, "end", elapsed_s, source_file, line_no
        FROM slurm_runs
        WHERE ("end" IS NOT NULL AND start IS NOT NULL AND "end" < start)
           OR elapsed_s < 0
           OR ("end" IS NOT NULL AND start IS NOT NULL
               AND abs(date_diff('second', start, "end") - elapsed_s) > 1)
           OR (start IS NOT NULL AND submit IS NOT NULL AND start < submit)
        ORDER BY run_key""")
    return _result(DURATIONS_CHECK, rows, cols)


def gpu_field_parsed(con: duckdb.DuckDBPyConnection) -> dg.AssetCheckResult:
    rows, cols = _rows(con, """
        SELECT run_key, job_id, alloc_tres, source_file, line_no FROM slurm_runs
        WHERE alloc_tres LIKE '%gres/gpu%' AND alloc_tres NOT LIKE '%gres/gpu=0%'
          AND (alloc_gpus IS NULL OR alloc_gpus <= 0)
          AND regexp_matches(alloc_tres, 'gres/gpu(:[^=,]+)?=[1-9]')
        ORDER BY run_key""")
    return _result(GPU_FIELD_CHECK, rows, cols)


@dg.asset_check(
    asset="sreport_gpu",
    additional_deps=["slurm_jobs"],
    partitions_def=daily_partitions,
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
    result = _result("slurm_reconciles_with_sreport", rows, cols)
    return dg.AssetCheckResult(
        passed=result.passed, metadata={**result.metadata, "windows": len(windows)}
    )
