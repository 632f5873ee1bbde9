"""Frame elements every page shows."""

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
