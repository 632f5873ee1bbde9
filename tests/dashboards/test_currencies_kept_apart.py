"""Two currencies on the chargeback and incidents pages: no chart stacks, no metric adds and no
daily cost sums amounts of two currencies."""

import base64
import json
import shutil
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from dashboards import access, data
from models.runner import read_snapshot, snapshot_path
from tests.dashboards.pages import metrics, open_page

WEEK = (date(2026, 1, 5), date(2026, 1, 12))
GRANTED = "CC-PHY-100"


def sql(db: Path, text: str, params: list | None = None) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.execute(text, params or []).pl()


def values(array: object) -> list:
    """A Plotly array from a chart's JSON: a list, or a typed array in base64."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


@pytest.fixture(scope="module")
def mixed_ledger(sample_ledger: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample ledger with some lines and incidents in USD and one week line without a rate."""
    db = tmp_path_factory.mktemp("mixed") / "ledger.duckdb"
    shutil.copy(snapshot_path(sample_ledger), snapshot_path(db))
    con = duckdb.connect(str(snapshot_path(db)))
    try:
        # one cost centre and domain billed in two currencies
        con.execute("UPDATE chargeback_periods SET currency = 'USD' "
                    "WHERE cost_centre = ? AND gpu_model = 'h100'", [GRANTED])
        con.execute("UPDATE chargeback_periods SET currency = '', amount = NULL, "
                    "rate_per_gpu_hour = NULL WHERE cost_centre = 'CC-INF-700' "
                    "AND period_kind = 'week'")
        # two incidents of one day and kind, in two currencies
        con.execute("UPDATE incidents SET currency = 'USD' WHERE incident_id = (SELECT "
                    "min(incident_id) FROM incidents WHERE day = DATE '2026-01-06' "
                    "AND kind = 'double_scheduled')")
    finally:
        con.close()
    return db


def test_the_amount_chart_never_stacks_two_currencies(mixed_ledger: Path, monkeypatch):
    monkeypatch.delenv(access.ACCESS_FILE_ENV, raising=False)
    expected = sql(mixed_ledger, "SELECT cost_centre, currency, sum(amount) AS amount "
                   "FROM chargeback_periods WHERE period_kind = 'week' AND period = '2026-W02' "
                   "AND amount IS NOT NULL GROUP BY ALL")
    assert expected.filter(pl.col("cost_centre") == GRANTED).height == 2  # EUR and USD
    at = open_page("chargeback", mixed_ledger, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "amount" in c.proto.spec)
    per_bar: dict[str, float] = {}
    for trace in spec["data"]:
        for x, y in zip(values(trace["x"]), values(trace["y"]), strict=True):
            per_bar[x] = per_bar.get(x, 0.0) + (y or 0.0)
    # every drawn bar is the amount of one cost centre in one currency
    assert sorted(round(v, 2) for v in per_bar.values()) == sorted(
        round(float(v), 2) for v in expected["amount"])


def test_the_amount_metric_names_no_empty_currency(mixed_ledger: Path, monkeypatch):
    monkeypatch.delenv(access.ACCESS_FILE_ENV, raising=False)
    amounts = sql(mixed_ledger, "SELECT currency, sum(amount) AS amount FROM chargeback_periods "
                  "WHERE period_kind = 'week' AND period = '2026-W02' AND amount IS NOT NULL "
                  "GROUP BY ALL ORDER BY currency")
    at = open_page("chargeback", mixed_ledger, monkeypatch)
    expected = " + ".join(f"{Decimal(a):,.2f} {c}" for c, a in amounts.iter_rows())
    assert metrics(at)["Amount"] == expected


def test_incident_costs_per_day_keep_currencies_apart(mixed_ledger: Path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_DB", str(mixed_ledger))
    monkeypatch.setattr(access, "current_scope", lambda: access.UNRESTRICTED)
    expected = sql(mixed_ledger, "SELECT day, kind, currency, sum(cost) AS cost FROM incidents "
                   "WHERE day >= ? AND day < ? GROUP BY ALL", list(WEEK))
    assert expected.filter(pl.col("currency") == "USD").height == 1
    got = data.incidents_by_day(*WEEK)
    assert "currency" in got.columns
    key = ["day", "kind", "currency"]
    assert got.select(*key, "cost").sort(key).to_dicts() == expected.sort(key).to_dicts()
