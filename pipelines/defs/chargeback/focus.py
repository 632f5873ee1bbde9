import dagster as dg

from gpuledger.export.focus import default_path, export_focus, site_focus
from gpuledger.report.location import reports_dir
from models.focus import ROWS_OFF_INVOICE, build_focus_rows, parse_period
from pipelines.defs.check_results import offending_rows_result, query_rows
from pipelines.defs.partitions import weekly_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource


def _week(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> str:
    return context.partition_time_window.start.strftime("%G-W%V")


@dg.asset(
    partitions_def=weekly_partitions,
    group_name="chargeback",
    pool=LEDGER_POOL,
    kinds={"duckdb", "csv", "parquet"},
    # after the weekly report: the report replaces reports/<week>/ whole, this file goes in it
    deps=["chargeback", "weekly_report"],
    description="The FOCUS 1.2 file of one ISO week for finance tools: "
    "reports/<YYYY-Www>/focus-1.2.csv (and .parquet when [gpuledger.focus] formats says so), "
    "one row per charged allocation piece per day, Correction rows for the adjustments the "
    "week carries; a closed week's rows are those frozen at its close (docs/focus.md).",
)
def focus_export(context: dg.AssetExecutionContext, ledger: LedgerResource,
                 site: SiteResource) -> dg.MaterializeResult:
    period = parse_period(_week(context))
    focus = site_focus(site.load())
    folder = reports_dir()
    out = {fmt: default_path(folder, period, focus.version, fmt) for fmt in focus.formats}
    with ledger.ledger() as con:
        result = export_focus(con, period, focus=focus, out=out)
    for warning in result.rows.warnings:
        context.log.warning(warning)
    context.log.info(result.summary())
    rows = result.rows
    return dg.MaterializeResult(metadata={
        "week": period.name,
        "files": dg.MetadataValue.json([str(f.resolve()) for f in result.files]),
        "rows": rows.rows,
        "allocation_rows": rows.usage_rows,
        "line_grain_rows": rows.line_grain_rows,
        "correction_rows": rows.correction_rows,
        "unpriced_rows": rows.unpriced_rows,
        "warnings": dg.MetadataValue.json(rows.warnings),
    })


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="focus_export",
    partitions_def=weekly_partitions,
    description="The week's FOCUS rows add up to its invoice as issued: per invoice line, "
    "BilledCost summed and rounded half up to cents is the line's amount and PricingQuantity "
    "x 3600 rounded to the second is its GPU-seconds. Returns the lines that do not.",
)
def focus_rows_sum_to_invoice(context: dg.AssetCheckExecutionContext, ledger: LedgerResource,
                              site: SiteResource) -> dg.AssetCheckResult:
    period = parse_period(_week(context))
    with ledger.ledger() as con:
        built = build_focus_rows(con, period, site_focus(site.load()).identity)
        rows, columns = query_rows(con, ROWS_OFF_INVOICE, {"period": period.name})
    return offending_rows_result(rows, columns, metadata={
        "offending_lines": len(rows), "focus_rows": built.rows})
