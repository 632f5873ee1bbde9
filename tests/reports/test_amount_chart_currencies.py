"""The weekly report's amount chart draws one chart per currency and never adds two currencies."""

import re
from decimal import Decimal

import pytest

from gpuledger.report import pages
from gpuledger.report.totals import Totals


def _bars(html: str) -> list[tuple[str, float]]:
    """(label, drawn length) of every bar of every chart in ``html``."""
    found = re.findall(r"<g><title>([^<]*?): [^<]*</title>.*?"
                       r'<rect x="\d+" y="[\d.]+" width="([\d.]+)"', html)
    return [(label, float(width)) for label, width in found]


def test_the_amount_chart_never_adds_two_currencies():
    mixed = Totals("CC-A", amounts={"EUR": Decimal("100.00"), "USD": Decimal("80.00")})
    euro = Totals("CC-B", amounts={"EUR": Decimal("120.00")})
    html = pages.amount_chart("Amount by cost centre", [mixed, euro])
    bars = _bars(html)
    # one bar per cost centre and currency: CC-A's 180 "mixed" units are drawn nowhere
    assert len(bars) == 3, bars
    # bars of one chart compare amounts of one currency: EUR 100 vs EUR 120
    charts = html.split("</svg>")[:-1]
    assert len(charts) == 2, "expected one chart per currency"
    eur = dict(_bars(charts[0]))
    assert eur["CC-A"] / eur["CC-B"] == pytest.approx(100 / 120, rel=1e-3)
