"""The Slurm vs Kubernetes card shows what a viewer reads, per measure: counts as whole numbers,
queue waits in hours and minutes, shares as percentages, while the table keeps the numbers
(tests/dashboards/test_pages.py checks those against the ledger)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from streamlit import dataframe_util

from tests.dashboards.pages import open_page
from tests.dashboards.test_pages import sql

DOMAINS = ("slurm", "kubernetes")


def shown_cells(element) -> pd.DataFrame:
    """The card's cells as the viewer sees them: a Styler's display values when the page sends
    them, else each number in its column's printf format (else as it is)."""
    styler = element.proto.arrow_data.styler
    if element.proto.arrow_data.HasField("styler") and styler.display_values:
        shown = dataframe_util.convert_arrow_bytes_to_pandas_df(styler.display_values)
        shown.columns = element.value.columns
        return shown
    config = json.loads(element.proto.columns or "{}")
    shown = element.value.copy()
    for column in shown.columns:
        fmt = config.get(column, {}).get("type_config", {}).get("format")
        if fmt and "%" in fmt:
            shown[column] = [fmt % v if pd.notna(v) else "" for v in shown[column]]
        else:
            shown[column] = shown[column].astype(str)
    return shown


def card(at) -> tuple[dict[str, dict], dict[str, dict]]:
    """(numbers, shown text) per measure."""
    element = next(e for e in at.dataframe if {"measure", *DOMAINS} <= set(e.value.columns))
    numbers = {r["measure"]: r for r in element.value.to_dict("records")}
    shown = {r["measure"]: r for r in shown_cells(element).to_dict("records")}
    return numbers, shown


def wait_matches(text: str, minutes: float) -> bool:
    """'16 h 18 min' or '18 min' to the nearest minute; under a minute, '2 s'."""
    if round(minutes * 60) < 60:
        return text == f"{round(minutes * 60)} s"
    found = re.fullmatch(r"(?:(\d+) h )?(\d+) min", text)
    assert found, f"expected a wait as 'H h M min' or 'M min', found {text!r}"
    assert int(found.group(2)) < 60 or not found.group(1), text
    return int(found.group(1) or 0) * 60 + int(found.group(2)) == round(minutes)


@pytest.fixture(scope="module")
def scorecard(sample_ledger: Path):
    with pytest.MonkeyPatch.context() as mp:
        at = open_page("scorecard", sample_ledger, mp)
    assert not at.exception, [e.value for e in at.exception]
    return card(at)


def test_counts_are_whole_numbers(sample_ledger: Path, scorecard):
    numbers, shown = scorecard
    finished = sql(sample_ledger, "SELECT domain, count(DISTINCT source_key) AS n FROM "
                   "allocations WHERE outcome <> 'running' GROUP BY domain")
    expected = dict(finished.iter_rows())
    for domain in DOMAINS:
        assert shown["jobs / pods finished"][domain] == f"{expected[domain]:,}"
        assert numbers["jobs / pods finished"][domain] == expected[domain]


def test_waits_are_hours_and_minutes(scorecard):
    numbers, shown = scorecard
    waits = [m for m in numbers if m.startswith("queue wait")]
    assert waits
    long_wait = False
    for measure in waits:
        for domain in DOMAINS:
            value = numbers[measure][domain]  # minutes
            assert wait_matches(shown[measure][domain], value), (measure, domain, value)
            long_wait |= value >= 60
    # the sample has waits of hours (943.5 min is shown as 15 h 44 min)
    assert long_wait


def test_shares_are_percentages(scorecard):
    numbers, shown = scorecard
    for domain in DOMAINS:
        share = numbers["failure rate"][domain]
        assert shown["failure rate"][domain] == f"{100 * share:.1f} %"
