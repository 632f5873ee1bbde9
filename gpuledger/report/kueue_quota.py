"""Kueue quota in the weekly report: the average % of quota used last week per ClusterQueue and
per cohort, with borrowed and lent GPU-hours and the hours the gauges covered, from the ledger's
``kueue_quota_weekly`` (docs/kubernetes.md "Kueue quota history")."""

from collections.abc import Sequence
from decimal import Decimal

import duckdb

from gpuledger.report import pages
from gpuledger.report.lines import Row, table_columns
from models.weeks import IsoWeek

COLUMNS = ("cluster", "scope", "cohort", "cluster_queue", "flavor", "resource", "hours",
           "known_hours", "nominal_gpu_hours", "usage_gpu_hours", "borrowed_gpu_hours",
           "lent_gpu_hours", "quota_used_share", "pending_active_seconds",
           "pending_inadmissible_seconds")


def read_kueue_quota(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...]:
    """The week's rows of ``kueue_quota_weekly`` (none when the ledger predates the table)."""
    if table_columns(con, "kueue_quota_weekly") is None:
        return ()
    cur = con.execute(
        f"SELECT {', '.join(COLUMNS)} FROM kueue_quota_weekly WHERE week_start = ? "
        "ORDER BY cluster, scope DESC, cohort, cluster_queue, flavor, resource", [week.monday])
    names = [d[0] for d in cur.description]
    return tuple(dict(zip(names, row, strict=True)) for row in cur.fetchall())


def _percent(share: float | None) -> str:
    return "unknown" if share is None else f"{100 * share:.1f} %"


def _hours(value: float | None) -> str:
    return pages.hours(None if value is None else Decimal(str(value)))


def _pending(seconds: float | None) -> str:
    return "—" if seconds is None else pages.hours(Decimal(str(seconds)) / 3600)


def _table(table_id: str, label: str, rows: Sequence[Row], *, queues: bool) -> str:
    head = (f"<th>cluster</th><th>{label}</th>" + ("<th>cohort</th>" if queues else "")
            + "<th>flavor · resource</th><th>average % of quota used</th>"
            "<th>nominal GPU-hours</th><th>used GPU-hours</th><th>borrowed GPU-hours</th>"
            "<th>lent GPU-hours</th>"
            + ("<th>hours with active pending</th><th>hours with inadmissible pending</th>"
               if queues else "")
            + "<th>hours known / of</th>")
    body = []
    for r in rows:
        cells = [("cluster", r["cluster"]),
                 ("name", r["cluster_queue"] if queues else r["cohort"])]
        if queues:
            cells.append(("cohort", r["cohort"] or "(none)"))
        cells.append(("flavor_resource", f'{r["flavor"] or ""} · {r["resource"]}'))
        figures = [("quota_used", _percent(r["quota_used_share"])),
                   ("nominal_gpu_hours", _hours(r["nominal_gpu_hours"])),
                   ("usage_gpu_hours", _hours(r["usage_gpu_hours"])),
                   ("borrowed_gpu_hours", _hours(r["borrowed_gpu_hours"])),
                   ("lent_gpu_hours", _hours(r["lent_gpu_hours"]))]
        if queues:
            figures += [("pending_active_hours", _pending(r["pending_active_seconds"])),
                        ("pending_inadmissible_hours",
                         _pending(r["pending_inadmissible_seconds"]))]
        figures.append(("known_hours", f'{r["known_hours"]} / {r["hours"]}'))
        body.append("<tr>" + "".join(f'<td data-col="{k}">{pages.esc(v)}</td>' for k, v in cells)
                    + "".join(f'<td class="num" data-col="{k}">{v}</td>' for k, v in figures)
                    + "</tr>")
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def kueue_quota_section(rows: Sequence[Row]) -> str:
    """The "Kueue quota" section, or nothing when the week has no Kueue quota gauges."""
    if not rows:
        return ""
    queues = [r for r in rows if r["scope"] == "queue"]
    cohorts = [r for r in rows if r["scope"] == "cohort"]
    return (
        '<h2>Kueue quota</h2><p class="note" id="kueue-quota">Average % of quota used last week: '
        "a ClusterQueue's admitted GPU usage over its nominal quota, both time-weighted over "
        "the hours Kueue's quota gauges were scraped (hours without samples are unknown, not "
        "0 %). Borrowed: usage above nominal quota; lent: unused nominal quota (within the "
        "lending limit) that the cohort's borrowers took. Quota bookkeeping, not device "
        "use (docs/kubernetes.md).</p>"
        "<h3>Per ClusterQueue</h3>"
        + _table("kueue-quota-queues", "ClusterQueue", queues, queues=True)
        + "<h3>Per cohort</h3>"
        + _table("kueue-quota-cohorts", "cohort", cohorts, queues=False)
    )
