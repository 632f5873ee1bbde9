import dagster as dg

from gpuledger.export.focus import site_focus
from gpuledger.report.location import reports_dir
from gpuledger.report.weekly import write_weekly_report
from models.weeks import IsoWeek
from pipelines.defs.partitions import weekly_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource


@dg.asset(
    partitions_def=weekly_partitions,
    group_name="reports",
    pool=LEDGER_POOL,
    kinds={"html", "csv"},
    deps=["chargeback", "incidents"],
    description="The weekly chargeback report of one ISO week: reports/<YYYY-Www>/ with a summary "
    "page, one page and one invoice-line CSV per cost centre, and every invoice line of the week "
    "and the week's FOCUS file (folder from GPULEDGER_REPORTS, else the reports_dir setting; "
    "replaced atomically).",
)
def weekly_report(context: dg.AssetExecutionContext, ledger: LedgerResource,
                  site: SiteResource) -> dg.MaterializeResult:
    week = IsoWeek.containing(context.partition_time_window.start.date())
    focus = site_focus(site.load())
    with ledger.ledger() as con:  # the writer's own connection: the run already holds the lock
        report = write_weekly_report(con, week, reports_dir(), focus=focus)
    for warning in report.warnings:
        context.log.warning(warning)
    context.log.info(report.summary())
    folder = report.folder.resolve()
    metadata: dict[str, object] = {
        "path": dg.MetadataValue.path(str(folder)),
        "summary": dg.MetadataValue.path(str(folder / "summary.html")),
        "week": week.name,
        "invoice_lines": report.lines,
        "cost_centres": report.cost_centres,
        "gpu_hours": float(round(report.gpu_hours, 6)),
        "amounts": dg.MetadataValue.json({c: str(a) for c, a in sorted(report.amounts.items())}),
        "unattributed_gpu_hours": float(round(report.unattributed_gpu_seconds / 3600, 6)),
        "unattributed_amounts": dg.MetadataValue.json(
            {c: str(a) for c, a in sorted(report.unattributed_amounts.items())}),
        "unpriced_lines": report.unpriced_lines,
        "incidents": "no incident data" if report.incidents is None else report.incidents,
    }
    return dg.MaterializeResult(metadata=metadata)
