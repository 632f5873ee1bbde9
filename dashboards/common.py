"""Frame elements and formats every page shares."""

from datetime import date, timedelta

import polars as pl
import streamlit as st

from dashboards import data


def freshness_line() -> None:
    """One line: the last successful load per source."""
    if not data.ledger_available():
        st.warning("No published ledger yet: run `make demo` or `gpuledger build`.")
        st.stop()
    fresh = data.freshness()
    if fresh.is_empty():
        st.caption("Freshness: nothing loaded yet.")
        return
    parts = [
        f"{row['source']} {row['last_success']:%Y-%m-%d %H:%M} UTC"
        for row in fresh.iter_rows(named=True)
    ]
    st.caption("Last successful load — " + " · ".join(parts))


def hours(value: object) -> str:
    """GPU-hours as the pages show them (one decimal); a dash when unknown."""
    return "–" if value is None else f"{float(value):,.1f}"


def money(amounts: pl.DataFrame) -> str:
    """Amounts per currency (columns ``currency``, ``amount``) as one string."""
    parts = [
        f"{row['amount']:,.2f} {row['currency']}"
        for row in amounts.filter(pl.col("amount").is_not_null()).iter_rows(named=True)
    ]
    return " + ".join(parts) or "–"


def day_range_picker(label: str, first: date, last: date, *, default_days: int = 7,
                     key: str) -> tuple[date, date]:
    """A date-range input over ``[first, last]``; returns the half-open ``[start, end)``."""
    default_start = max(first, last - timedelta(days=default_days - 1))
    picked = st.date_input(label, value=(default_start, last), min_value=first,
                           max_value=last, key=key)
    # the widget holds one date while the viewer is between the two clicks of a range
    chosen = list(picked) if isinstance(picked, list | tuple) else [picked]
    start = chosen[0] if chosen else default_start
    stop = chosen[-1] if chosen else last
    return start, stop + timedelta(days=1)


def grain_for(start: date, end: date) -> str:
    """Hourly buckets for up to two weeks, daily beyond (keeps charts readable and fast)."""
    return "hour" if (end - start).days <= 14 else "day"


def restricted_note() -> None:
    st.info("Cluster-wide figures are hidden: you see only the cost centres granted to you.")
