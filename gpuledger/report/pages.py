"""The report's HTML pages: self-contained (inline CSS and SVG, no script, no external URL).

Every piece of data goes through ``esc``. Numeric cells carry their exact value in ``data-*``
attributes, so a reader (or a test) can check the page against the ledger without parsing text.
"""

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from html import escape
from typing import Any

from gpuledger.report import svg
from gpuledger.report.lines import Row, WeekData
from gpuledger.report.totals import UNATTRIBUTED, Totals

TOP_INCIDENTS = 10
USAGE_LABELS = {"measured_gpu_hours": "measured GPU-h", "busy_gpu_hours": "busy GPU-h",
                "idle_gpu_hours": "idle GPU-h"}

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1d2433;
max-width:1200px}
h1{margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #d7dbe3;padding-bottom:.2rem}
.sub{color:#5b6475;margin-top:0}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{padding:.25rem .6rem;border-bottom:1px solid #e6e8ee;text-align:left;vertical-align:top}
th{background:#f3f5f9}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:600;border-top:2px solid #1d2433}
tr.unattributed td{background:#fff4e5}
.cards{display:flex;flex-wrap:wrap;gap:1rem;margin:1rem 0}
.card{border:1px solid #d7dbe3;border-radius:6px;padding:.6rem 1rem;min-width:11rem}
.card .value{font-size:1.4rem;font-weight:600}.card .label{color:#5b6475;font-size:.85rem}
.card.alert{border-color:#e8a33d;background:#fff4e5}
.note{color:#5b6475;font-size:.85rem}
.warn{border-left:4px solid #e8a33d;background:#fff4e5;padding:.4rem .8rem}
.wide{overflow-x:auto}#lines td,#incidents td.num,#incidents td:first-child{white-space:nowrap}
#incidents td.evidence{font-size:.8rem;word-break:break-all;min-width:16rem}
svg.chart text{font-size:12px;fill:#1d2433}svg.chart rect.outer{fill:#a9c1e8}
svg.chart rect.inner{fill:#2f5fae}
@media print{body{margin:0}a{color:inherit;text-decoration:none}}
"""


def esc(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def hours(value: Decimal | None) -> str:
    return "—" if value is None else f"{cents(value):,}"


def money(amounts: dict[str, Decimal]) -> str:
    if not amounts:
        return "—"
    return " + ".join(f"{cents(a):,} {c}".rstrip() for c, a in sorted(amounts.items()))


def money_value(amounts: dict[str, Decimal]) -> str:
    """Exact, machine-readable: ``EUR=31901.43;USD=12.00`` (sorted by currency)."""
    return ";".join(f"{c}={a}" for c, a in sorted(amounts.items()))


def cell(value: object) -> str:
    """A raw ledger value as a table cell (invoice lines, incidents)."""
    if value is None:
        return "<td></td>"
    if isinstance(value, Decimal | int | float) and not isinstance(value, bool):
        text = format(value, "f") if isinstance(value, Decimal) else value
        return f'<td class="num">{esc(text)}</td>'
    if isinstance(value, list | tuple):
        return f"<td>{esc(', '.join(str(v) for v in value))}</td>"
    if isinstance(value, datetime):
        return f"<td>{esc(value.isoformat(sep=' '))}</td>"
    if isinstance(value, date):
        return f"<td>{esc(value.isoformat())}</td>"
    return f"<td>{esc(value)}</td>"


def page(title: str, body: Iterable[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def header(data: WeekData, title: str, generated_at: datetime) -> str:
    week = data.week
    return (f"<h1>{esc(title)}</h1><p class=\"sub\">ISO week {esc(week)}: Monday "
            f"{esc(week.monday)} 00:00 UTC to Monday {esc(week.end)} 00:00 UTC (end exclusive). "
            f"Allocated time is charged; busy and idle time are shown beside it. Generated "
            f"{esc(generated_at.strftime('%Y-%m-%d %H:%M:%S'))} UTC.</p>")


def cards(overall: Totals, unattributed: Totals, incomplete: Totals,
          usage: Sequence[str]) -> str:
    """Key figures; the unattributed bucket is always a card, highlighted when not empty."""
    items = [
        ("gpu_hours", "allocated GPU-hours", hours(overall.gpu_hours), str(overall.gpu_seconds),
         ""),
        ("amount", "amount", money(overall.amounts), money_value(overall.amounts), ""),
    ]
    items += [(c, USAGE_LABELS[c].replace("GPU-h", "GPU-hours"), hours(overall.usage.get(c)),
               "" if overall.usage.get(c) is None else str(overall.usage[c]), "")
              for c in usage]
    for key, label, part in (
        ("unattributed", "unattributed: no cost centre known", unattributed),
        ("incomplete", "cost centre known, team or person unattributed", incomplete),
    ):
        items.append((key, label, f"{hours(part.gpu_hours)} GPU-h · {money(part.amounts)}",
                      f"{part.gpu_seconds}|{money_value(part.amounts)}",
                      " alert" if part.lines else ""))
    if overall.unpriced_lines:
        items.append(("unpriced", "GPU-hours without a rate (not priced, flagged)",
                      hours(Decimal(overall.unpriced_seconds) / 3600),
                      str(overall.unpriced_seconds), " alert"))
    return '<div class="cards">' + "".join(
        f'<div class="card{extra}" data-card="{esc(key)}" data-value="{esc(value)}">'
        f'<div class="value">{esc(text)}</div><div class="label">{esc(label)}</div></div>'
        for key, label, text, value, extra in items) + "</div>"


UNATTRIBUTED_KEYS = ("cost_centre", "team", "person", "domain", "slurm_user", "slurm_account",
                     "k8s_namespace", "k8s_service_account", "kueue_queue", "gpu_seconds")


def unattributed_section(keys: Sequence[Row], limit: int = 20) -> str:
    """The raw keys behind unattributed hours, largest first: what the identity map lacks."""
    if not keys:
        return ('<h2>Unattributed GPU-hours by raw key</h2><p class="note" id="unattributed-keys">'
                "every GPU-hour of the week has a cost centre, team and person</p>")
    columns = [c for c in UNATTRIBUTED_KEYS if c in keys[0]]
    head = "".join(f"<th>{esc('GPU-hours' if c == 'gpu_seconds' else c.replace('_', ' '))}</th>"
                   for c in columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num" data-value="{int(r[c])}">{hours(Decimal(int(r[c])) / 3600)}</td>'
            if c == "gpu_seconds" else cell(r.get(c)) for c in columns) + "</tr>"
        for r in keys[:limit])
    more = f" (the largest {limit} of {len(keys)})" if len(keys) > limit else ""
    return ("<h2>Unattributed GPU-hours by raw key</h2><p class=\"note\">Add these keys to the "
            f"identity map to charge their owners{more}.</p><table id=\"unattributed-keys\">"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def totals_table(table_id: str, label: str, groups: Sequence[Totals], overall: Totals,
                 usage: Sequence[str], link: Callable[[str], str | None] | None = None) -> str:
    """One row per group plus a total row; unattributed rows are highlighted, never hidden."""
    head = "".join(f'<th class="num">{esc(USAGE_LABELS[c])}</th>' for c in usage)
    unpriced = overall.unpriced_lines > 0  # the column only when some line has no rate
    if unpriced:
        head += '<th class="num">amount</th><th class="num">unpriced GPU-h</th>'
    else:
        head += '<th class="num">amount</th>'
    rows = [f'<table id="{esc(table_id)}"><thead><tr><th>{esc(label)}</th>'
            f'<th class="num">invoice lines</th><th class="num">allocated GPU-h</th>{head}'
            "</tr></thead><tbody>"]
    for t in [*groups, overall]:
        is_total = t is overall
        css = "total" if is_total else ("unattributed" if UNATTRIBUTED in t.label else "")
        target = None if is_total or link is None else link(t.label)
        name = (f'<a href="{esc(target)}">{esc(t.label)}</a>' if target else
                esc(t.label if t.label != "" else "(empty)"))
        usage_cells = "".join(
            f'<td class="num" data-col="{esc(c)}" data-value="'
            f'{esc("" if t.usage.get(c) is None else t.usage[c])}">{hours(t.usage.get(c))}</td>'
            for c in usage)
        key = "" if is_total else f' data-key="{esc(t.label)}"'
        unpriced_cell = (f'<td class="num" data-col="unpriced" data-value="{t.unpriced_seconds}">'
                         f"{hours(Decimal(t.unpriced_seconds) / 3600)}</td>" if unpriced else "")
        rows.append(
            f'<tr class="{css}"{key}>'
            f"<td>{'total' if is_total else name}</td>"
            f'<td class="num" data-col="lines" data-value="{t.lines}">{t.lines:,}</td>'
            f'<td class="num" data-col="gpu_hours" data-value="{t.gpu_seconds}">'
            f"{hours(t.gpu_hours)}</td>{usage_cells}"
            f'<td class="num" data-col="amount" data-value="{esc(money_value(t.amounts))}">'
            f"{esc(money(t.amounts))}</td>{unpriced_cell}</tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def hours_chart(title: str, groups: Sequence[Totals], usage: Sequence[str]) -> str:
    """Allocated GPU-hours per group, with the busy part drawn inside when it is known."""
    busy = "busy_gpu_hours" in usage
    bars = [svg.Bar(t.label or "(empty)", float(t.gpu_hours),
                    float(t.usage["busy_gpu_hours"]) if busy and t.usage.get("busy_gpu_hours")
                    is not None else None,
                    f"{hours(t.gpu_hours)} GPU-h") for t in groups]
    return svg.bar_chart(title, bars, outer_legend="allocated" if busy else "",
                         inner_legend="busy" if busy else "")


def amount_chart(title: str, groups: Sequence[Totals]) -> str:
    """One chart per currency: bars of two currencies are neither added nor compared."""
    currencies = sorted({c for t in groups for c in t.amounts})
    charts = []
    for currency in currencies or [""]:
        bars = [svg.Bar(t.label or "(empty)", float(t.amounts[currency]),
                        text=money({currency: t.amounts[currency]}))
                for t in groups if currency in t.amounts]
        named = f"{title} ({currency})" if len(currencies) > 1 else title
        charts.append(svg.bar_chart(named, sorted(bars, key=lambda b: -b.value)))
    return "".join(charts)


def _owner(row: Row, prefix: str = "") -> str:
    parts = [row.get(f"{prefix}{c}") for c in ("cost_centre", "team", "person")]
    return " / ".join(str(p) for p in parts if p not in (None, ""))


def _incident_row(row: Row, level: bool, other_owner: bool) -> str:
    seconds = row.get("gpu_seconds")
    cost = row.get("cost")
    cells = [
        cell(row.get("day")), cell(row.get("kind")),
        *([cell(row.get("evidence_level"))] if level else []),
        cell(row.get("node")), cell(_owner(row)),
        *([cell(_owner(row, "other_"))] if other_owner else []),
        f'<td class="num">{hours(None if seconds is None else Decimal(seconds) / 3600)}</td>',
        f'<td class="num">'
        f"{esc(money({} if cost is None else {row.get('currency') or '': Decimal(cost)}))}</td>",
        cell(row.get("slurm_job")), cell(row.get("k8s_workload")),
        f'<td class="evidence">{esc(_clip(row.get("evidence")))}</td>',
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def incidents_section(incidents: Sequence[Row] | None, scope: str) -> str:
    """The largest incidents of the week (already ordered by cost), or why there are none."""
    if incidents is None:
        return ('<h2>Largest incidents</h2><p class="note" id="incidents">no incident data '
                "(the ledger has no incidents table yet)</p>")
    if not incidents:
        return (f'<h2>Largest incidents</h2><p class="note" id="incidents">no incident {esc(scope)}'
                " this week</p>")
    shown_rows = incidents[:TOP_INCIDENTS]
    # optional columns only when some listed incident fills them
    level = any(r.get("evidence_level") for r in shown_rows)
    other_owner = any(r.get("other_cost_centre") for r in shown_rows)
    by_kind: dict[str, list[Row]] = {}
    for row in incidents:
        by_kind.setdefault(str(row.get("kind", "")), []).append(row)
    kinds = "; ".join(f"{esc(k)}: {len(v)}" for k, v in sorted(by_kind.items()))
    names = ["day", "kind", *(["evidence level"] if level else []), "node", "owner",
             *(["other owner"] if other_owner else []), "GPU-h", "cost", "Slurm job",
             "Kubernetes workload", "evidence"]
    head = "".join(f"<th>{esc(n)}</th>" for n in names)
    body = "".join(_incident_row(r, level, other_owner) for r in shown_rows)
    return (f'<h2>Largest incidents</h2><p class="note">{len(incidents)} incident(s) '
            f"{esc(scope)} this week ({kinds}); the {len(shown_rows)} with the highest cost:</p>"
            f'<div class="wide"><table id="incidents"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _clip(value: Any, width: int = 160) -> Any:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def lines_table(columns: Sequence[str], lines: Sequence[Row]) -> str:
    shown = [c for c in columns if c not in ("period_kind", "period", "period_start")]
    head = "".join(f"<th>{esc(c)}</th>" for c in shown)
    body = "".join("<tr>" + "".join(cell(line.get(c)) for c in shown) + "</tr>" for line in lines)
    return (f'<div class="wide"><table id="lines"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def adjustments_section(adjustments: Sequence[Row], close: Row | None, csv_name: str) -> str:
    """Whether the week is closed (frozen as issued), and the adjustment lines it carries: what
    late data changed in closed weeks, with the week, reason and run."""
    parts = []
    if close is not None:
        parts.append(
            f'<p class="note" id="closed">This week is closed: its invoice lines are frozen as '
            f"issued on {esc(close['closed_at'])} UTC by {esc(close['closed_by'])} (revision "
            f"{esc(close['revision'])}, {esc(close['reason'])}; checksum "
            f"{esc(str(close['checksum'])[:12])}). Late data for it is adjusted in the next open "
            "week.</p>")
    parts.append("<h2>Adjustments (late data for closed weeks)</h2>")
    if not adjustments:
        parts.append('<p id="no-adjustments">No adjustment: no closed week changed after its '
                     "close.</p>")
        return "".join(parts)
    by_currency: dict[str, Decimal] = {}
    for row in adjustments:
        if row.get("amount") is not None:
            currency = str(row.get("currency") or "")
            by_currency[currency] = by_currency.get(currency, Decimal(0)) + row["amount"]
    shown = ("original_period", "cost_centre", "team", "person", "domain", "gpu_model",
             "rate_per_gpu_hour", "gpu_hours", "amount", "currency", "reason", "run_id")
    head = "".join(f"<th>{esc(c)}</th>" for c in shown)
    body = "".join("<tr>" + "".join(cell(row.get(c)) for c in shown) + "</tr>"
                   for row in adjustments)
    parts.append(
        f"<p>{len(adjustments)} adjustment lines, {esc(money(by_currency))} in all "
        f'(<a href="{esc(csv_name)}">{esc(csv_name)}</a>): the rebuilt lines of a closed week '
        "minus its frozen lines, billed here; the closed invoices stay as issued.</p>"
        f'<div class="wide"><table id="adjustments"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>")
    return "".join(parts)
