"""The weekly chargeback report: ``<out>/<YYYY-Www>/`` with a summary, a page and invoice lines
per cost centre. The CLI (``gpuledger report weekly``) and the Dagster asset ``weekly_report``
both call :func:`write_weekly_report`."""

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from gpuledger.report import pages
from gpuledger.report.conservation import COLUMNS as CONSERVATION_COLUMNS
from gpuledger.report.conservation import CSV as CONSERVATION_CSV
from gpuledger.report.conservation import conservation_section, read_conservation
from gpuledger.report.files import replace_folder, slugs, write_csv, write_text
from gpuledger.report.kueue_quota import kueue_quota_section, read_kueue_quota
from gpuledger.report.lines import USAGE_COLUMNS, WeekData, read_week
from gpuledger.report.quality import provisional_lines, provisional_section
from gpuledger.report.shared import shared_section
from gpuledger.report.totals import column, group, is_incomplete, is_unattributed, total
from models.weeks import IsoWeek, parse_iso_week

if TYPE_CHECKING:
    from gpuledger.export.focus import FocusSite

SUMMARY = "summary.html"
LINES_CSV = "invoice-lines.csv"
ADJUSTMENTS_CSV = "adjustments.csv"


@dataclass(frozen=True)
class WeeklyReport:
    week: IsoWeek
    folder: Path
    files: tuple[str, ...]
    lines: int
    gpu_seconds: int
    amounts: dict[str, Decimal]
    unattributed_gpu_seconds: int
    unattributed_amounts: dict[str, Decimal]
    unpriced_lines: int
    cost_centres: int
    incidents: int | None  # None: the ledger has no incidents table
    adjustments: int = 0  # adjustment lines the week carries (late data for closed weeks)
    closed: bool = False  # the week's invoice lines are frozen (closed_periods)
    # what a person must read: the FOCUS export's warnings, or why it could not be written
    warnings: tuple[str, ...] = ()
    provisional_lines: int = 0  # lines holding days the data-quality gate did not pass

    @property
    def gpu_hours(self) -> Decimal:
        return Decimal(self.gpu_seconds) / 3600

    def summary(self) -> str:
        incidents = "no incident data" if self.incidents is None else f"{self.incidents} incidents"
        provisional = f"; {self.provisional_lines} provisional lines" if self.provisional_lines \
            else ""
        return (f"weekly report {self.week}: {self.lines} invoice lines, {self.cost_centres} cost "
                f"centres, {pages.hours(self.gpu_hours)} GPU-hours, {pages.money(self.amounts)}; "
                f"unattributed {pages.hours(Decimal(self.unattributed_gpu_seconds) / 3600)} "
                f"GPU-hours ({pages.money(self.unattributed_amounts)}); {incidents}; "
                f"{self.adjustments} adjustment lines{'; closed' if self.closed else ''}"
                f"{provisional} "
                f"-> {self.folder}")


def write_weekly_report(con: duckdb.DuckDBPyConnection, week: IsoWeek | str, out_dir: Path, *,
                        generated_at: datetime | None = None,
                        focus: "FocusSite | None" = None) -> WeeklyReport:
    """Read the week from ``con`` and replace ``out_dir/<week>/`` with its report, atomically.
    With ``focus`` (the site's [gpuledger.focus]) the folder holds the week's FOCUS file(s) too,
    so re-writing a report never leaves its folder without them (docs/focus.md)."""
    week = parse_iso_week(week) if isinstance(week, str) else week
    data = read_week(con, week)
    quota = kueue_quota_section(read_kueue_quota(con, week))  # "" without Kueue quota gauges
    went = read_conservation(con, week)  # where every GPU-hour went, per pool
    when = generated_at or datetime.now(UTC).replace(tzinfo=None)
    centres = sorted({str(line["cost_centre"]) for line in data.lines})
    slug = slugs(centres)
    files = [SUMMARY, LINES_CSV, ADJUSTMENTS_CSV] + ([CONSERVATION_CSV] if went else [])
    for centre in centres:
        files += [f"cost-centre-{slug[centre]}.html", f"invoice-lines-{slug[centre]}.csv"]

    def fill(folder: Path) -> None:
        write_csv(folder / LINES_CSV, data.columns, data.lines)
        write_csv(folder / ADJUSTMENTS_CSV, data.adjustment_columns, data.adjustments)
        write_text(folder / SUMMARY, summary_page(data, slug, when, kueue_quota=quota,
                                                  conservation=conservation_section(went)))
        if went:
            write_csv(folder / CONSERVATION_CSV, CONSERVATION_COLUMNS, went)
        for centre in centres:
            mine = [line for line in data.lines if str(line["cost_centre"]) == centre]
            write_csv(folder / f"invoice-lines-{slug[centre]}.csv", data.columns, mine)
            write_text(folder / f"cost-centre-{slug[centre]}.html",
                       cost_centre_page(data, centre, mine, slug[centre], when))
        if focus is not None:
            files.extend(_write_focus(con, week, folder, focus, warnings))

    warnings: list[str] = []
    folder = out_dir / week.name
    replace_folder(folder, fill)
    overall = total(data.lines)
    unattributed = total(line for line in data.lines if is_unattributed(line))
    return WeeklyReport(
        week=week, folder=folder, files=tuple(files), lines=overall.lines,
        gpu_seconds=overall.gpu_seconds, amounts=overall.amounts,
        unattributed_gpu_seconds=unattributed.gpu_seconds,
        unattributed_amounts=unattributed.amounts, unpriced_lines=overall.unpriced_lines,
        cost_centres=len(centres),
        incidents=None if data.incidents is None else len(data.incidents),
        adjustments=len(data.adjustments), closed=data.close is not None,
        provisional_lines=len(provisional_lines(data.lines)),
        warnings=tuple(warnings),
    )


def _write_focus(con: duckdb.DuckDBPyConnection, week: IsoWeek, folder: Path,
                 focus: "FocusSite", warnings: list[str]) -> list[str]:
    """The week's FOCUS files in ``folder``; an export that cannot be made (e.g. unpriced rows
    without a currency) is a warning, not a lost report: `gpuledger export focus` says why too."""
    from gpuledger.export.focus import export_focus, file_name

    out = {fmt: folder / file_name(focus.version, fmt) for fmt in focus.formats}
    try:
        result = export_focus(con, week.name, focus=focus, out=out)
    except ValueError as exc:
        warnings.append(f"FOCUS file of {week.name} not written: {exc}")
        return []
    warnings.extend(result.rows.warnings)
    return [path.name for path in out.values()]


def _cards(lines: list | tuple, usage: tuple[str, ...]) -> str:
    overall = total(lines)
    unattributed = total(line for line in lines if is_unattributed(line))
    incomplete = total(line for line in lines if is_incomplete(line))
    return pages.cards(overall, unattributed, incomplete, usage)


def summary_page(data: WeekData, slug: dict[str, str], when: datetime, *,
                 kueue_quota: str = "", conservation: str = "") -> str:
    usage = USAGE_COLUMNS
    overall = total(data.lines)
    by_centre = group(data.lines, column("cost_centre"))
    by_team = group(data.lines, column("team"))
    by_domain = group(data.lines, column("domain"))
    by_model = group(data.lines, column("gpu_model"))
    by_domain_model = group(data.lines, lambda r: f"{r['domain']} · {r['gpu_model']}")
    links = "".join(
        f'<li><a href="cost-centre-{pages.esc(slug[t.label])}.html">{pages.esc(t.label)}</a> '
        f'(<a href="invoice-lines-{pages.esc(slug[t.label])}.csv">CSV</a>)</li>'
        for t in sorted(by_centre, key=lambda t: t.label))
    body = [
        pages.header(data, f"Weekly chargeback {data.week}", when),
        _cards(data.lines, usage),
        _usage_note(usage),
        provisional_section(data.lines),
        "<h2>By cost centre</h2>",
        pages.totals_table("by-cost-centre", "cost centre", by_centre, overall, usage,
                           link=lambda label: f"cost-centre-{slug[label]}.html"),
        pages.amount_chart("Amount by cost centre", by_centre),
        "<h2>By team</h2>",
        pages.totals_table("by-team", "team", by_team, overall, usage),
        "<h2>By domain</h2>",
        pages.totals_table("by-domain", "domain", by_domain, overall, usage),
        "<h2>By GPU model</h2>",
        pages.totals_table("by-gpu-model", "GPU model", by_model, overall, usage),
        pages.hours_chart("GPU-hours by domain and GPU model", by_domain_model, usage),
        shared_section(data.shared),
        conservation,  # where every GPU-hour went (gpuledger/report/conservation.py)
        kueue_quota,  # Kueue quota per ClusterQueue and cohort (gpuledger/report/kueue_quota.py)
        pages.adjustments_section(data.adjustments, data.close, ADJUSTMENTS_CSV),
        pages.unattributed_section(data.unattributed_keys),
        pages.incidents_section(data.incidents, "in the cluster"),
        "<h2>Files</h2>",
        f'<p><a href="{LINES_CSV}">{LINES_CSV}</a>: every invoice line of the week, exactly as '
        "in the ledger's chargeback table (a closed week's frozen lines); "
        f'<a href="{ADJUSTMENTS_CSV}">{ADJUSTMENTS_CSV}</a>: the adjustment lines the week '
        "carries. Per cost centre:</p>",
        f"<ul>{links}</ul>",
    ]
    return pages.page(f"gpuledger weekly chargeback {data.week}", body)


def cost_centre_page(data: WeekData, centre: str, lines: list, own_slug: str,
                     when: datetime) -> str:
    usage = USAGE_COLUMNS
    overall = total(lines)
    incidents = None if data.incidents is None else tuple(  # either owner of a conflict
        r for r in data.incidents if centre in (r.get("cost_centre"), r.get("other_cost_centre")))
    body = [
        pages.header(data, f"Cost centre {centre}: weekly chargeback {data.week}", when),
        '<p><a href="summary.html">Back to the summary</a> · '
        f'<a href="invoice-lines-{pages.esc(own_slug)}.csv">invoice lines (CSV)</a></p>',
        _cards(lines, usage),
        _usage_note(usage),
        provisional_section(lines),
        "<h2>By team</h2>",
        pages.totals_table("by-team", "team", group(lines, column("team")), overall, usage),
        "<h2>By person</h2>",
        pages.totals_table("by-person", "team · person",
                           group(lines, lambda r: f"{r['team']} · {r['person']}"), overall, usage),
        "<h2>By domain and GPU model</h2>",
        pages.totals_table("by-domain-model", "domain · GPU model",
                           group(lines, lambda r: f"{r['domain']} · {r['gpu_model']}"),
                           overall, usage),
        pages.hours_chart("GPU-hours by person",
                          group(lines, lambda r: f"{r['team']} · {r['person']}"), usage),
        pages.adjustments_section(
            [a for a in data.adjustments if str(a.get("cost_centre")) == centre], data.close,
            ADJUSTMENTS_CSV),
        pages.unattributed_section(
            [k for k in data.unattributed_keys if str(k.get("cost_centre")) == centre]),
        pages.incidents_section(incidents, "involving this cost centre"),
        "<h2>Invoice lines</h2>",
        pages.lines_table(data.columns, lines),
    ]
    return pages.page(f"gpuledger {centre} {data.week}", body)


def _usage_note(usage: tuple[str, ...]) -> str:
    if "busy_gpu_hours" in usage:
        return ('<p class="note">Busy and idle GPU-hours come from dcgm-exporter where it measured '
                "the GPUs; they do not change the amount.</p>")
    return ('<p class="note">Busy and idle GPU-hours: not in this ledger\'s chargeback table '
            "yet.</p>")
