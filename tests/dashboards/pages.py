"""Helpers for the page tests: open a page on a ledger, read what it shows."""

from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")
PAGES = ("overview", "chargeback", "utilization", "incidents", "scorecard")


def open_page(page: str, db: Path, monkeypatch: pytest.MonkeyPatch, *,
              user: dict | None = None) -> AppTest:
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=120)
    if user is not None:
        at.user = user
    at.switch_page(f"views/{page}.py")
    return at.run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def frame(at: AppTest, *columns: str) -> pl.DataFrame:
    """The first dataframe on the page that has all ``columns``."""
    for element in at.dataframe:
        if set(columns) <= set(element.value.columns):
            return pl.from_pandas(element.value)
    shown = [list(e.value.columns) for e in at.dataframe]
    msg = f"expected a dataframe with columns {columns}, found {shown}"
    raise AssertionError(msg)


def everything_shown(at: AppTest) -> str:
    """All text a viewer can read on the page: tables, charts, metrics, captions, options."""
    parts = [e.value.to_csv() for e in at.dataframe]
    parts += [e.proto.spec for e in at.get("plotly_chart")]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    for kind in ("markdown", "caption", "info", "warning", "title", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    for widget in (*at.selectbox, *at.multiselect, *at.radio):
        parts += [str(o) for o in widget.options]
    return "\n".join(parts)
