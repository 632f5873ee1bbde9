"""The pages' charts, built with Plotly's graph objects (no queries here).

Plotly Express spent about 0.1 s per bar chart on the benchmark machine (trace grouping,
templates, subplot grids), more than the queries behind a page; these builders make the same
traces, colours, hover texts and axis titles directly, in about 4 ms.
"""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.colors import qualitative

COLOURS = qualitative.Plotly  # the default template's colourway, as Plotly Express uses it
DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot")


def _label(labels: dict[str, str], column: str) -> str:
    return labels.get(column, column)


def _groups(frame: pl.DataFrame, column: str | None,
            order: Sequence[object] | None = None) -> list[tuple[object, pl.DataFrame]]:
    """``frame`` split by ``column`` in order of first appearance (or ``order``)."""
    if column is None:
        return [(None, frame)]
    values = order if order is not None else frame[column].unique(maintain_order=True).to_list()
    return [(v, frame.filter(pl.col(column) == v) if v is not None
             else frame.filter(pl.col(column).is_null())) for v in values]


def _values(series: pl.Series) -> np.ndarray:
    """A column as a NumPy array: Plotly copies and validates Python lists element by element,
    typed arrays in one go (a year of hourly points is tens of thousands of them)."""
    if series.dtype.is_decimal():
        series = series.cast(pl.Float64)
    return series.to_numpy()


def _layout(figure: go.Figure, labels: dict[str, str], x: str, y: str,
            legend: str | None) -> go.Figure:
    figure.update_layout(xaxis_title=_label(labels, x), yaxis_title=_label(labels, y),
                         legend_title_text=legend, legend_tracegroupgap=0)
    return figure


def bars(frame: pl.DataFrame, x: str, y: str, color: str | None = None, *,
         barmode: str = "relative", labels: dict[str, str] | None = None,
         x_order: Sequence[object] | None = None) -> go.Figure:
    """Bars of ``y`` over ``x``, one trace (colour) per value of ``color``."""
    labels = labels or {}
    legend = _label(labels, color) if color else None
    traces = []
    for i, (value, part) in enumerate(_groups(frame, color)):
        prefix = f"{legend}={value}<br>" if color else ""
        traces.append(go.Bar(
            x=_values(part[x]), y=_values(part[y]), name=str(value) if color else "",
            legendgroup=str(value), showlegend=color is not None,
            marker_color=COLOURS[i % len(COLOURS)],
            hovertemplate=f"{prefix}{_label(labels, x)}=%{{x}}<br>{_label(labels, y)}=%{{y}}"
                          "<extra></extra>",
        ))
    figure = _layout(go.Figure(traces), labels, x, y, legend)
    figure.update_layout(barmode=barmode)
    if x_order is not None:
        figure.update_xaxes(categoryorder="array", categoryarray=list(x_order))
    return figure


def lines(frame: pl.DataFrame, x: str, y: str, color: str, dash: str, *,
          labels: dict[str, str] | None = None) -> go.Figure:
    """Lines of ``y`` over ``x``: colour by ``color``, dash pattern by ``dash``."""
    labels = labels or {}
    colours = {v: COLOURS[i % len(COLOURS)] for i, v in
               enumerate(frame[color].unique(maintain_order=True).to_list())}
    dashes = {v: DASHES[i % len(DASHES)] for i, v in
              enumerate(frame[dash].unique(maintain_order=True).to_list())}
    traces = []
    for (c, d), part in frame.group_by([color, dash], maintain_order=True):
        # name only what varies, as Plotly Express does
        name = ", ".join(str(v) for v, n in ((c, len(colours)), (d, len(dashes))) if n > 1)
        traces.append(go.Scatter(
            x=_values(part[x]), y=_values(part[y]), mode="lines", name=name or str(c),
            legendgroup=name, line={"color": colours[c], "dash": dashes[d]},
            hovertemplate=f"{_label(labels, color)}={c}<br>{_label(labels, dash)}={d}<br>"
                          f"{_label(labels, x)}=%{{x}}<br>{_label(labels, y)}=%{{y}}"
                          "<extra></extra>",
        ))
    return _layout(go.Figure(traces), labels, x, y, "")


def bubbles(frame: pl.DataFrame, x: str, y: str, size: str, color: str, *,
            labels: dict[str, str] | None = None, size_max: int = 20) -> go.Figure:
    """Markers of ``y`` over ``x`` whose area follows ``size``, one colour per ``color``."""
    labels = labels or {}
    largest = frame[size].max() if frame.height else None
    sizeref = 2.0 * float(largest) / size_max**2 if largest else 1.0
    traces = []
    for i, (value, part) in enumerate(_groups(frame, color)):
        traces.append(go.Scatter(
            x=_values(part[x]), y=_values(part[y]), mode="markers", name=str(value),
            legendgroup=str(value),
            marker={"color": COLOURS[i % len(COLOURS)], "size": _values(part[size]),
                    "sizemode": "area", "sizeref": sizeref},
            hovertemplate=f"{_label(labels, color)}={value}<br>{_label(labels, x)}=%{{x}}<br>"
                          f"{_label(labels, y)}=%{{y}}<br>{_label(labels, size)}="
                          "%{marker.size}<extra></extra>",
        ))
    figure = _layout(go.Figure(traces), labels, x, y, _label(labels, color))
    figure.update_layout(legend_itemsizing="constant")
    return figure


def heatmap(z: object, x: list, y: list, *, x_title: str, y_title: str, colour_title: str,
            zmin: float = 0, zmax: float = 1, colorscale: str = "Viridis") -> go.Figure:
    """A matrix as a heatmap, first row on top."""
    figure = go.Figure(go.Heatmap(
        z=z, x=x, y=y, coloraxis="coloraxis",
        hovertemplate=f"{x_title}: %{{x}}<br>{y_title}: %{{y}}<br>{colour_title}: %{{z}}"
                      "<extra></extra>",
    ))
    figure.update_layout(
        xaxis_title=x_title, yaxis_title=y_title, yaxis_autorange="reversed",
        coloraxis={"colorscale": colorscale, "cmin": zmin, "cmax": zmax,
                   "colorbar": {"title": {"text": colour_title}}},
    )
    return figure


def timeline(frame: pl.DataFrame, start: str, end: str, y: str, color: str, *,
             hover: Sequence[str] = (), colour_map: dict[str, str] | None = None) -> go.Figure:
    """Horizontal bars from ``start`` to ``end`` per ``y`` row, coloured by ``color``."""
    colour_map = colour_map or {}
    traces = []
    for i, (value, part) in enumerate(_groups(frame, color)):
        lengths = (part[end] - part[start]).dt.total_milliseconds()
        custom = list(zip(*(part[c].to_list() for c in (end, *hover)), strict=True))
        details = "".join(f"<br>{c}=%{{customdata[{k + 1}]}}" for k, c in enumerate(hover))
        traces.append(go.Bar(
            base=part[start].to_list(), x=lengths.to_list(), y=part[y].to_list(),
            orientation="h", name=str(value), legendgroup=str(value), customdata=custom,
            marker_color=colour_map.get(str(value), COLOURS[i % len(COLOURS)]),
            hovertemplate=f"{color}={value}<br>{start}=%{{base}}<br>{end}=%{{customdata[0]}}"
                          f"<br>{y}=%{{y}}{details}<extra></extra>",
        ))
    figure = go.Figure(traces)
    figure.update_layout(barmode="overlay", legend_title_text=color, legend_tracegroupgap=0)
    figure.update_xaxes(type="date")
    return figure
