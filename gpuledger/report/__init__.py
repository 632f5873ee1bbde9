"""Weekly chargeback reports (HTML and CSV) written from the ledger; used by CLI and Dagster."""

from gpuledger.report.lines import EmptyWeekError
from gpuledger.report.weekly import WeeklyReport, write_weekly_report
from models.weeks import IsoWeek, parse_iso_week

__all__ = ["EmptyWeekError", "IsoWeek", "WeeklyReport", "parse_iso_week", "write_weekly_report"]
