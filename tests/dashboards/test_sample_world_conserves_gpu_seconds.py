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


def test_every_gpu_of_the_sample_world_is_accounted_each_hour(sample_ledger):
    with duckdb.connect(str(sample_ledger), read_only=True) as c:
        # every GPU of the inventory, every hour the node has a conservation row
        missing = c.execute(
            "SELECT n.hour, i.node, i.gpu_uuid FROM gpu_conservation_hourly AS n "
            "JOIN nodes AS i ON i.node = n.node AND i.gpu_uuid IS NOT NULL "
            "ANTI JOIN gpu_conservation_gpu_hourly AS g "
            "ON g.hour = n.hour AND g.node = i.node AND g.gpu_uuid = i.gpu_uuid").fetchall()
        assert missing == []
        rows, gpu_states, read, unaccounted, node_unaccounted = c.execute(
            "SELECT count(*), sum(charged_gpu_seconds + conflict_gpu_seconds "
            "+ infrastructure_gpu_seconds + unaccounted_gpu_seconds + idle_gpu_seconds "
            "+ not_observed_gpu_seconds), sum(observed_gpu_seconds), "
            "sum(unaccounted_gpu_seconds), "
            "(SELECT sum(unaccounted_gpu_seconds) FROM gpu_conservation_hourly) "
            "FROM gpu_conservation_gpu_hourly").fetchone()
        assert gpu_states == rows * 3600
        assert 0 < read <= gpu_states
        assert unaccounted == node_unaccounted
        # the holders behind a GPU's charged seconds are allocations rows
        unknown = c.execute(
            "SELECT DISTINCT h FROM (SELECT unnest(holders) AS h FROM "
            "gpu_conservation_gpu_hourly) ANTI JOIN allocations AS a "
            "ON h = a.domain || '|' || a.source_key").fetchall()
        assert unknown == []


def test_the_utilization_page_shows_one_nodes_gpus(sample_ledger, monkeypatch):
    from tests.dashboards.pages import open_page

    page = open_page("utilization", sample_ledger, monkeypatch)
    assert not page.exception
    node = page.selectbox(key="ut_conservation_node").value
    [table] = [d for d in page.dataframe if "not observed" in d.value.columns]
    first, last = page.date_input(key="ut_days").value
    shown = table.value
    with duckdb.connect(str(sample_ledger), read_only=True) as c:
        gpus = c.execute("SELECT count(DISTINCT gpu_uuid), sum(capacity_gpu_seconds) / 3600 "
                         "FROM gpu_conservation_gpu_hourly WHERE node = ? AND day >= ? "
                         "AND day <= ?", [node, first, last]).fetchone()
    assert len(shown) == gpus[0] > 0
    states = ["charged", "conflict", "infrastructure", "unaccounted use", "idle", "not observed"]
    assert abs(float(shown[states].to_numpy().sum()) - float(gpus[1])) < 0.01
