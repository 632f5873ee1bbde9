"""Inline SVG bar charts: no script, no external file, readable when printed."""

from dataclasses import dataclass
from html import escape

ROW_HEIGHT = 22
LABEL_WIDTH = 190
VALUE_WIDTH = 150
MAX_ROWS = 25  # the rest is named in a note under the chart


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    # a part of value drawn darker inside the bar (busy inside allocated); None draws none
    inner: float | None = None
    text: str = ""


def _clip(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def bar_chart(title: str, bars: list[Bar], *, inner_legend: str = "", outer_legend: str = "",
              width: int = 720) -> str:
    """A horizontal bar chart; labels and texts are escaped here."""
    shown = bars[:MAX_ROWS]
    peak = max((b.value for b in shown), default=0.0) or 1.0
    plot = width - LABEL_WIDTH - VALUE_WIDTH
    legend = 18 if inner_legend else 0
    height = legend + ROW_HEIGHT * len(shown) + 6
    parts = [f'<svg class="chart" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}"><title>{escape(title)}</title>']
    if inner_legend:
        parts.append(
            f'<rect x="{LABEL_WIDTH}" y="3" width="12" height="10" class="outer"/>'
            f'<text x="{LABEL_WIDTH + 16}" y="12">{escape(outer_legend)}</text>'
            f'<rect x="{LABEL_WIDTH + 150}" y="3" width="12" height="10" class="inner"/>'
            f'<text x="{LABEL_WIDTH + 166}" y="12">{escape(inner_legend)}</text>')
    for i, bar in enumerate(shown):
        y = legend + i * ROW_HEIGHT
        length = max(bar.value, 0.0) / peak * plot
        parts.append(
            f'<g><title>{escape(bar.label)}: {escape(bar.text)}</title>'
            f'<text x="{LABEL_WIDTH - 6}" y="{y + 15}" text-anchor="end">'
            f'{escape(_clip(bar.label))}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y + 4}" width="{length:.1f}" height="14" '
            f'class="outer"/>')
        if bar.inner is not None:
            inner = max(min(bar.inner, bar.value), 0.0) / peak * plot
            parts.append(f'<rect x="{LABEL_WIDTH}" y="{y + 4}" width="{inner:.1f}" '
                         f'height="14" class="inner"/>')
        parts.append(f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{y + 15}">'
                     f'{escape(bar.text)}</text></g>')
    parts.append("</svg>")
    if len(bars) > len(shown):
        parts.append(f'<p class="note">{len(bars) - len(shown)} more not drawn; '
                     "all are in the table.</p>")
    return "".join(parts)
