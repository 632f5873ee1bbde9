"""The Incidents chart draws its UTC days in calendar order, whichever kinds have incidents on
which days (Plotly orders a category axis by first appearance across traces, so a day that only
a later kind has would otherwise stand after the days of the first kind)."""

import json
from pathlib import Path

from tests.dashboards.pages import open_page
from tests.dashboards.test_pages import sql

WEEK = ("2026-01-05", "2026-01-12")


def drawn_order(figure: dict) -> list[str]:
    """The x categories in the order Plotly draws them (categoryorder rules of layout.xaxis)."""
    appearance: list[str] = []
    for trace in figure["data"]:
        appearance += [x for x in trace.get("x", []) if x not in appearance]
    axis = figure["layout"].get("xaxis", {})
    order = axis.get("categoryorder", "trace")
    if order == "array":
        listed = [x for x in axis.get("categoryarray", []) if x in appearance]
        return listed + [x for x in appearance if x not in listed]
    if order in ("category ascending", "category descending"):
        return sorted(appearance, reverse=order.endswith("descending"))
    return appearance


def per_day_chart(at) -> dict:
    for chart in at.get("plotly_chart"):
        figure = json.loads(chart.proto.spec)
        if figure["layout"].get("xaxis", {}).get("title", {}).get("text") == "UTC day":
            return figure
    msg = "expected a chart with the x axis 'UTC day' on the incidents page, found none"
    raise AssertionError(msg)


def test_incident_days_stand_in_calendar_order(sample_ledger: Path, monkeypatch):
    at = open_page("incidents", sample_ledger, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    days = sql(sample_ledger, "SELECT DISTINCT day::VARCHAR AS day FROM incidents "
               "WHERE day >= ? AND day < ? ORDER BY day", list(WEEK))["day"].to_list()
    figure = per_day_chart(at)
    # the sample week has a day (2026-01-07) that the first kind drawn has no incident on
    first_kind = figure["data"][0].get("x", [])
    assert set(first_kind) < set(days), (first_kind, days)
    assert drawn_order(figure) == days


def test_incident_days_stay_in_order_for_the_kinds_picked(sample_ledger: Path, monkeypatch):
    at = open_page("incidents", sample_ledger, monkeypatch)
    at.multiselect(key="in_kinds").set_value(["partial_gang", "double_scheduled"]).run()
    assert not at.exception, [e.value for e in at.exception]
    days = sql(sample_ledger, "SELECT DISTINCT day::VARCHAR AS day FROM incidents WHERE day >= ? "
               "AND day < ? AND kind IN ('partial_gang', 'double_scheduled') ORDER BY day",
               list(WEEK))["day"].to_list()
    assert drawn_order(per_day_chart(at)) == days
