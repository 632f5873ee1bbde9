"""Where every GPU-hour went, in the weekly report: per pool and domain, each physical GPU-hour
of capacity in one state (charged per scheduler, conflict, infrastructure, unaccounted use,
idle), from the ledger's ``gpu_conservation_hourly`` (docs/accounting.md, "Conservation"). A
stacked bar per pool (inline SVG) and a table with the same figures."""

from collections.abc import Sequence
from decimal import Decimal
from html import escape

import duckdb

from gpuledger.report import pages
from gpuledger.report.lines import Row, table_columns
from models.weeks import IsoWeek

# state column -> (legend, colour); the order they stack in
STATES = (
    ("charged_slurm_gpu_seconds", "charged: Slurm", "#2f5fae"),
    ("charged_kubernetes_gpu_seconds", "charged: Kubernetes", "#3f9c6d"),
    ("conflict_gpu_seconds", "conflict (held twice)", "#c0392b"),
    ("infrastructure_gpu_seconds", "infrastructure (scheduler agent)", "#8e6bb8"),
    ("unaccounted_gpu_seconds", "unaccounted use", "#e8a33d"),
    ("idle_gpu_seconds", "idle capacity", "#c9ced8"),
)
CSV = "where-gpu-hours-went.csv"
COLUMNS = ("pool", "capacity_gpu_hours", *(f"{c.removesuffix('_gpu_seconds')}_gpu_hours"
                                            for c, _, _ in STATES))


def read_conservation(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> tuple[Row, ...]:
    """GPU-hours per pool and state of the week (none when the ledger predates the table)."""
    if table_columns(con, "gpu_conservation_hourly") is None:
        return ()
    sums = ", ".join(f"CAST(sum({c}) / 3600 AS DECIMAL(38, 6)) AS {name}"
                     for (c, _, _), name in zip(STATES, COLUMNS[2:], strict=True))
    cur = con.execute(
        "SELECT coalesce(pool, 'unknown') AS pool, "
        f"CAST(sum(capacity_gpu_seconds) / 3600 AS DECIMAL(38, 6)) AS capacity_gpu_hours, {sums} "
        "FROM gpu_conservation_hourly WHERE day >= ? AND day < ? GROUP BY ALL ORDER BY pool",
        [week.monday, week.end])
    names = [d[0] for d in cur.description]
    return tuple(dict(zip(names, row, strict=True)) for row in cur.fetchall())


def _stacked(rows: Sequence[Row], width: int = 720) -> str:
    """One horizontal bar per pool, its states stacked, all drawn to one scale."""
    label_w, row_h, legend_h = 150, 24, 20 * ((len(STATES) + 1) // 2)
    plot = width - label_w - 20
    peak = max((float(r["capacity_gpu_hours"]) for r in rows), default=0.0) or 1.0
    height = legend_h + row_h * len(rows) + 6
    parts = [f'<svg class="chart" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}"><title>Where every GPU-hour went, by pool</title>']
    for i, (_, legend, colour) in enumerate(STATES):
        x, y = label_w + (i % 2) * 270, 4 + (i // 2) * 20
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="10" fill="{colour}"/>'
                     f'<text x="{x + 16}" y="{y + 9}">{escape(legend)}</text>')
    for i, row in enumerate(rows):
        y, x = legend_h + i * row_h, float(label_w)
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
                     f'{escape(str(row["pool"]))}</text>')
        for (_, legend, colour), name in zip(STATES, COLUMNS[2:], strict=True):
            value = float(row[name])
            length = max(value, 0.0) / peak * plot
            if length > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y + 4}" width="{length:.1f}" height="16" '
                             f'fill="{colour}"><title>{escape(str(row["pool"]))} · '
                             f'{escape(legend)}: {value:.2f} GPU-hours</title></rect>')
            x += length
    parts.append("</svg>")
    return "".join(parts)


def conservation_section(rows: Sequence[Row]) -> str:
    """The section: "" when the ledger has no conservation rows for the week."""
    if not rows:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in
                   ("pool", "capacity", *(legend for _, legend, _ in STATES)))
    body = []
    for r in rows:
        cells = "".join(f'<td class="num">{pages.hours(Decimal(r[c]))}</td>'
                        for c in COLUMNS[1:])
        body.append(f'<tr><td>{escape(str(r["pool"]))}</td>{cells}</tr>')
    return ('<h2>Where every GPU-hour went</h2><p class="note">Each physical GPU-hour of '
            "capacity in exactly one state: charged (per scheduler), conflict (held by two "
            "holders at once), infrastructure (a scheduler's own agent, e.g. a Slinky slurmd "
            "pod), unaccounted use (busy with no holder) or idle; each row adds up to its "
            f'capacity (<a href="{CSV}">{CSV}</a>).</p>' + _stacked(rows)
            + f'<table id="where-gpu-hours-went"><tr>{head}</tr>{"".join(body)}</table>')
