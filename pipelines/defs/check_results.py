"""How every asset check reports: the rows a query found wrong, counted, with a markdown preview,
so a failed check names its offenders. Plain functions, no Dagster definitions."""

from collections.abc import Mapping

import dagster as dg
import duckdb

SAMPLE_ROWS = 20  # rows shown in the preview; the counts cover them all


def query_rows(con: duckdb.DuckDBPyConnection, sql: str,
               params: list[object] | Mapping[str, object] | None = None,
               ) -> tuple[list[tuple], list[str]]:
    """The rows of ``sql`` and their column names."""
    rel = con.sql(sql, params=params)
    return rel.fetchall(), rel.columns


def rows_preview(columns: list[str], rows: list[tuple]) -> dg.MetadataValue:
    """The first SAMPLE_ROWS rows under their column names, or "none"."""
    body = "\n".join(" | ".join(str(v) for v in row) for row in rows[:SAMPLE_ROWS])
    return dg.MetadataValue.md(f"{' | '.join(columns)}\n{body}" if rows else "none")


def offending_rows_result(
    rows: list[tuple],
    columns: list[str],
    *,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    metadata: Mapping[str, object] | None = None,
    asset_key: str | None = None,
    check_name: str | None = None,
) -> dg.AssetCheckResult:
    """Passed when ``rows`` is empty. Metadata: ``metadata`` (by default the row count as
    ``offending_rows``), then the preview of the rows as ``sample``."""
    figures = {"offending_rows": len(rows)} if metadata is None else dict(metadata)
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=check_name,
        passed=not rows,
        severity=severity,
        metadata={**figures, "sample": rows_preview(columns, rows)},
    )
