"""Conservation on the sample world the page tests share (docs/accounting.md, "Conservation"):
every node-hour's capacity is charged, in conflict, infrastructure, unaccounted or idle, and the
invoices' GPU-seconds are what the sweep holds."""

from datetime import date

import duckdb

from models import load_sql


def _values(y: object):
    """A trace's y values as plotly's JSON holds them: a list, or typed binary data."""
    import base64

    import numpy as np

    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"]))
    return np.asarray(y, dtype=float)


def test_the_sample_world_conserves_every_gpu_second(sample_ledger):
    with duckdb.connect(str(sample_ledger), read_only=True) as c:
        assert c.execute(load_sql("gpu_conservation_hourly_check"),
                         {"first_day": date(2026, 1, 1), "end_day": date(2026, 2, 1),
                          "tolerance_s": 600}
                         ).fetchall() == []
        cap, states, held, invoiced = c.execute(
            "SELECT sum(capacity_gpu_seconds), sum(charged_gpu_seconds + conflict_gpu_seconds "
            "+ infrastructure_gpu_seconds + unaccounted_gpu_seconds + idle_gpu_seconds), "
            "sum(held_gpu_seconds), sum(invoiced_gpu_seconds) FROM gpu_conservation_hourly"
        ).fetchone()
        assert cap == states > 0
        assert held == invoiced
        charged = c.execute("SELECT sum(physical_gpu_seconds) FROM allocations").fetchone()[0]
        assert abs(float(invoiced) - float(charged)) < 0.01


def test_the_utilization_page_shows_where_every_gpu_hour_went(sample_ledger, monkeypatch):
    import json

    from tests.dashboards.pages import open_page

    page = open_page("utilization", sample_ledger, monkeypatch)
    assert not page.exception
    assert "Where every GPU-hour went" in [s.value for s in page.subheader]
    [chart] = [c for c in page.get("plotly_chart")
               if "idle capacity" in c.proto.spec and "charged: Slurm" in c.proto.spec]
    traces = json.loads(chart.proto.spec)["data"]
    shown = sum(float(_values(t["y"]).sum()) for t in traces)
    first, last = page.date_input(key="ut_days").value  # the days the page shows
    with duckdb.connect(str(sample_ledger), read_only=True) as c:
        capacity = c.execute("SELECT sum(capacity_gpu_seconds) / 3600 FROM "
                             "gpu_conservation_hourly WHERE day >= ? AND day <= ?",
                             [first, last]).fetchone()[0]
    # the bars of every state add up to the capacity of the days shown
    assert abs(shown - float(capacity)) < 0.01
