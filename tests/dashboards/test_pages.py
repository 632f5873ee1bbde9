"""Every page on a ledger of the sample world: no exception, and the numbers shown equal the
model's, recomputed here with SQL (and Polars) straight from the ledger's tables."""

import shutil
from datetime import date, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from models.runner import publish_snapshot, read_snapshot, snapshot_path
from tests.dashboards.pages import PAGES, frame, metrics, open_page

WEEK = ("2026-W02", date(2026, 1, 5), date(2026, 1, 12))


def sql(db: Path, text: str, params: list | None = None) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.execute(text, params or []).pl()


def one(db: Path, text: str, params: list | None = None):
    return sql(db, text, params).row(0)[0]


def by_key(table: pl.DataFrame, key: str, value: str) -> dict:
    return {r[key]: float(r[value]) for r in table.iter_rows(named=True)}


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_without_exception(sample_ledger: Path, monkeypatch, page: str):
    at = open_page(page, sample_ledger, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    assert "Last successful load" in at.caption[0].value


# --- chargeback -----------------------------------------------------------------------------

def test_chargeback_week_totals_equal_the_ledger(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    assert at.selectbox(key="cb_week").value == WEEK[0]
    shown = metrics(at)
    days = [WEEK[1], WEEK[2]]
    allocated = one(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations "
                    "WHERE day >= ? AND day < ?", days)
    unattributed = one(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE "
                       "day >= ? AND day < ? AND cost_centre = 'unattributed'", days)
    amount, currency, busy, idle = sql(
        sample_ledger, "SELECT sum(amount), any_value(currency), sum(busy_gpu_hours), "
        "sum(idle_gpu_hours) FROM chargeback_periods WHERE period_kind = 'week' AND period = ?",
        [WEEK[0]]).row(0)
    assert shown["Allocated GPU-hours"] == f"{allocated:,.1f}"
    assert shown[f"Amount ({currency})"] == f"{amount:,.2f}"
    assert shown["Busy GPU-hours"] == f"{busy:,.1f}"
    assert shown["Idle GPU-hours"] == f"{idle:,.1f}"
    assert shown["Unattributed GPU-hours"] == f"{unattributed:,.1f}"
    assert unattributed > 0

    table = frame(at, "cost_centre", "gpu_hours", "amount")
    hours = sql(sample_ledger, "SELECT cost_centre, sum(gpu_seconds) / 3600 AS h FROM "
                "allocations WHERE day >= ? AND day < ? GROUP BY 1", days)
    amounts = sql(sample_ledger, "SELECT cost_centre, sum(amount) AS a FROM chargeback_periods "
                  "WHERE period_kind = 'week' AND period = ? GROUP BY 1", [WEEK[0]])
    assert by_key(table, "cost_centre", "gpu_hours") == pytest.approx(
        by_key(hours, "cost_centre", "h"), abs=1e-5)
    assert by_key(table, "cost_centre", "amount") == pytest.approx(
        by_key(amounts, "cost_centre", "a"), abs=0.005)
    # the unattributed bucket is a row of its own, in plain sight
    assert "unattributed" in table["cost_centre"].to_list()


def test_chargeback_person_level_split_by_domain(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    at.radio(key="cb_level").set_value("person")
    at.radio(key="cb_split").set_value("domain").run()
    assert not at.exception
    table = frame(at, "cost_centre", "team", "person", "domain", "gpu_hours")
    expected = sql(
        sample_ledger, "SELECT cost_centre, team, person, domain, sum(gpu_seconds) / 3600 AS h "
        "FROM allocations WHERE day >= ? AND day < ? GROUP BY ALL", [WEEK[1], WEEK[2]])
    key = ["cost_centre", "team", "person", "domain"]
    joined = table.join(expected, on=key, how="full", coalesce=True)
    assert joined.height == expected.height == table.height
    assert (joined["gpu_hours"] - joined["h"]).abs().max() < 1e-5


def test_chargeback_drill_down_lists_the_jobs_behind_a_line(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    line = at.selectbox(key="cb_line")
    index = next(i for i, label in enumerate(line.options)
                 if label.startswith("CC-ML-200 / ml / bob / slurm / a100"))
    line.select_index(index).run()
    assert not at.exception
    behind = frame(at, "source_key", "job_id", "node", "start_ts", "end_ts", "gpu_seconds",
                   "outcome")
    expected = sql(
        sample_ledger, "SELECT source_key, node, day, gpu_seconds FROM allocations "
        "WHERE day >= ? AND day < ? AND cost_centre = 'CC-ML-200' AND person = 'bob' "
        "AND domain = 'slurm' AND gpu_model = 'a100'", [WEEK[1], WEEK[2]])
    assert behind.height == expected.height > 0
    assert behind["gpu_seconds"].sum() == expected["gpu_seconds"].sum()
    assert set(behind["source_key"]) == set(expected["source_key"])


def test_chargeback_custom_range_and_month(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    at.radio(key="cb_kind").set_value("Custom range").run()
    at.date_input(key="cb_days").set_value((date(2026, 1, 6), date(2026, 1, 7))).run()
    assert not at.exception
    allocated = one(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations "
                    "WHERE day BETWEEN DATE '2026-01-06' AND DATE '2026-01-07'")
    assert metrics(at)["Allocated GPU-hours"] == f"{allocated:,.1f}"

    at.radio(key="cb_kind").set_value("Month").run()
    assert not at.exception
    assert at.selectbox(key="cb_month").value == "2026-01"
    allocated, amount = sql(
        sample_ledger, "SELECT (SELECT sum(gpu_seconds) / 3600 FROM allocations "
        "WHERE day >= DATE '2026-01-01' AND day < DATE '2026-02-01'), (SELECT sum(amount) "
        "FROM chargeback_periods WHERE period_kind = 'month' AND period = '2026-01')").row(0)
    shown = metrics(at)
    assert shown["Allocated GPU-hours"] == f"{allocated:,.1f}"
    assert shown["Amount (EUR)"] == f"{amount:,.2f}"


def test_chargeback_filters_are_applied(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    at.multiselect(key="cb_domains").set_value(["kubernetes"])
    at.multiselect(key="cb_models").set_value(["h100"]).run()
    assert not at.exception
    allocated = one(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE "
                    "day >= ? AND day < ? AND domain = 'kubernetes' AND gpu_model = 'h100'",
                    [WEEK[1], WEEK[2]])
    assert metrics(at)["Allocated GPU-hours"] == f"{allocated:,.1f}"


def test_chargeback_offers_csv_and_excel(sample_ledger: Path, monkeypatch):
    at = open_page("chargeback", sample_ledger, monkeypatch)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Invoice lines (CSV)", "Workbook (Excel)",
                      "Jobs and pods of the line (CSV)"]


# --- utilization ----------------------------------------------------------------------------

def test_utilization_fractions_equal_the_ledger(sample_ledger: Path, monkeypatch):
    at = open_page("utilization", sample_ledger, monkeypatch)
    assert not at.exception
    # the default range is the last seven days with allocations
    first, end = date(2026, 1, 5), date(2026, 1, 12)
    summary = frame(at, "pool", "capacity_gpu_seconds", "allocated_gpu_seconds",
                    "allocated_fraction", "busy_fraction")
    # independently: capacity from the inventory, allocated from the ledger by node pool
    expected = sql(
        sample_ledger,
        "WITH cap AS (SELECT pool, count(*) * 86400 * 7 AS capacity FROM nodes GROUP BY pool), "
        "used AS (SELECT n.pool, sum(a.gpu_seconds) AS allocated FROM allocations AS a "
        "JOIN (SELECT DISTINCT node, pool FROM nodes) AS n USING (node) "
        "WHERE a.day >= ? AND a.day < ? GROUP BY n.pool), "
        "busy AS (SELECT pool, sum(busy_gpu_seconds) AS busy FROM node_usage_hourly "
        "WHERE day >= ? AND day < ? GROUP BY pool) "
        "SELECT pool, capacity, allocated, busy FROM cap JOIN used USING (pool) "
        "JOIN busy USING (pool) ORDER BY pool", [first, end, first, end],
    ).cast({"capacity": pl.Float64, "allocated": pl.Float64, "busy": pl.Float64})
    got = summary.sort("pool")
    assert got["pool"].to_list() == expected["pool"].to_list()
    assert got["capacity_gpu_seconds"].to_list() == expected["capacity"].cast(pl.Int64).to_list()
    assert got["allocated_gpu_seconds"].to_list() == expected["allocated"].cast(
        pl.Int64).to_list()
    assert got["allocated_fraction"].to_list() == pytest.approx(
        (expected["allocated"] / expected["capacity"]).to_list())
    assert got["busy_fraction"].to_list() == pytest.approx(
        (expected["busy"] / expected["capacity"]).to_list())

    at.radio(key="ut_group").set_value("domain").run()
    assert not at.exception
    by_domain = frame(at, "domain", "allocated_gpu_seconds")
    expected = sql(sample_ledger, "SELECT domain, sum(gpu_seconds) AS s FROM allocations "
                   "WHERE day >= ? AND day < ? GROUP BY domain", [first, end])
    assert by_key(by_domain, "domain", "allocated_gpu_seconds") == by_key(expected, "domain", "s")


def test_utilization_queue_waits_equal_the_runs(sample_ledger: Path, monkeypatch):
    at = open_page("utilization", sample_ledger, monkeypatch)
    start, end = datetime(2026, 1, 5), datetime(2026, 1, 12)
    runs = sql(sample_ledger, "SELECT partition, submit, start, alloc_gpus, bridge_pods "
               "FROM slurm_runs")
    waits = (
        runs.filter(pl.col("start").is_not_null() & (pl.col("alloc_gpus") > 0)
                    & (pl.col("bridge_pods").list.len().fill_null(0) == 0)
                    & (pl.col("start") >= start) & (pl.col("start") < end))
        .with_columns(((pl.col("start") - pl.col("submit")).dt.total_seconds() / 60)
                      .alias("wait_min"))
        .group_by("partition")
        .agg(pl.len().alias("waits"),
             pl.col("wait_min").quantile(0.5, interpolation="linear").alias("p50"))
        .sort("partition")
    )
    shown = frame(at, "partition", "waits", "p50_min").sort("partition")
    assert shown["partition"].to_list() == waits["partition"].to_list()
    assert shown["waits"].to_list() == waits["waits"].to_list()
    assert shown["p50_min"].to_list() == pytest.approx(waits["p50"].round(1).to_list(),
                                                       abs=0.051)

    workloads = sql(sample_ledger, "SELECT cluster_queue, created_at, admitted_at, "
                    "eviction_count FROM kueue_workloads")
    kueue = (
        workloads.filter(pl.col("admitted_at").is_not_null()
                         & (pl.col("eviction_count").fill_null(0) == 0)
                         & (pl.col("admitted_at") >= start) & (pl.col("admitted_at") < end))
        .group_by("cluster_queue").agg(pl.len().alias("waits")).sort("cluster_queue")
    )
    shown = frame(at, "ClusterQueue", "waits").sort("ClusterQueue")
    assert shown["waits"].to_list() == kueue["waits"].to_list()


# --- incidents ------------------------------------------------------------------------------

def _without_incidents(db: Path, tmp_path: Path) -> Path:
    """A copy of the ledger whose detectors never ran (no ``incidents`` table)."""
    copy = tmp_path / "no_incidents.duckdb"
    shutil.copyfile(snapshot_path(db), copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute("DROP TABLE IF EXISTS incidents")
        publish_snapshot(con, copy)
    finally:
        con.close()
    return copy


def test_incidents_page_says_plainly_when_there_is_no_incident_data(
        sample_ledger: Path, monkeypatch, tmp_path: Path):
    db = _without_incidents(sample_ledger, tmp_path)
    at = open_page("incidents", db, monkeypatch)
    assert not at.exception
    assert "No incident data yet" in at.info[0].value
    # the timeline of one node still works from the ledger: a double-scheduled morning
    at.selectbox(key="in_node").set_value("gpu-shr-02")
    at.date_input(key="in_day").set_value(date(2026, 1, 5)).run()
    assert not at.exception
    table = frame(at, "domain", "source_key", "gpu_seconds")
    expected = sql(db, "SELECT domain, sum(gpu_seconds) AS s FROM allocations "
                   "WHERE node = 'gpu-shr-02' AND day = DATE '2026-01-05' GROUP BY domain")
    assert by_key(table.group_by("domain").agg(pl.col("gpu_seconds").sum()), "domain",
                  "gpu_seconds") == by_key(expected, "domain", "s")
    assert set(table["domain"]) == {"slurm", "kubernetes"}


def test_incidents_equal_the_incidents_table(sample_ledger: Path, monkeypatch):
    with read_snapshot(sample_ledger) as con:
        built = con.execute("SELECT count(*) FROM duckdb_tables() "
                            "WHERE table_name = 'incidents'").fetchone()[0]
    if not built:
        pytest.skip("the detectors do not build an incidents table in this tree yet")
    at = open_page("incidents", sample_ledger, monkeypatch)
    assert not at.exception
    counts = sql(sample_ledger, "SELECT kind, count(*) AS n FROM incidents GROUP BY kind")
    shown = metrics(at)
    for kind, n in counts.iter_rows():
        assert shown[kind.replace("_", " ").capitalize()] == f"{n:,}"
    table = frame(at, "kind", "node", "gpu_hours", "cost", "evidence")
    assert table.height == counts["n"].sum()
    total_cost = one(sample_ledger, "SELECT sum(cost) FROM incidents")
    assert table["cost"].sum() == pytest.approx(float(total_cost or 0), abs=0.01)

    focus = at.selectbox(key="in_focus")
    index = next(i for i, label in enumerate(focus.options)
                 if label.startswith("double_scheduled"))
    focus.select_index(index).run()
    assert not at.exception
    timeline = frame(at, "domain", "source_key", "start_ts", "end_ts")
    assert set(timeline["domain"]) == {"slurm", "kubernetes"}


# --- scorecard ------------------------------------------------------------------------------

def test_scorecard_equals_the_ledger(sample_ledger: Path, monkeypatch):
    at = open_page("scorecard", sample_ledger, monkeypatch)
    assert not at.exception
    card = {r["measure"]: r for r in frame(at, "measure", "slurm", "kubernetes")
            .iter_rows(named=True)}
    # the default range covers every day with allocations
    allocations = sql(sample_ledger, "SELECT domain, source_key, outcome, gpu_seconds "
                      "FROM allocations")
    per_job = allocations.group_by("domain", "source_key").agg(
        pl.col("outcome").first(), pl.col("gpu_seconds").sum())
    for domain in ("slurm", "kubernetes"):
        jobs = per_job.filter(pl.col("domain") == domain)
        finished = jobs.filter(pl.col("outcome") != "running")
        failed = jobs.filter(pl.col("outcome").is_in(["failed", "timeout", "node_fail"]))
        evicted = jobs.filter(pl.col("outcome").is_in(["preempted", "evicted", "requeued"]))
        assert card["jobs / pods finished"][domain] == finished.height
        assert card["failure rate"][domain] == pytest.approx(failed.height / finished.height)
        assert card["eviction rate"][domain] == pytest.approx(evicted.height / finished.height)
        assert card["GPU-hours lost to failures"][domain] == pytest.approx(
            failed["gpu_seconds"].sum() / 3600)
        assert card["GPU-hours lost to evictions"][domain] == pytest.approx(
            evicted["gpu_seconds"].sum() / 3600)
        amount, busy = sql(sample_ledger, "SELECT sum(amount), sum(busy_gpu_hours) FROM "
                           "chargeback_periods WHERE period_kind = 'day' AND domain = ?",
                           [domain]).row(0)
        assert card["cost per busy GPU-hour (EUR)"][domain] == pytest.approx(
            float(amount) / float(busy))

    workloads = sql(sample_ledger, "SELECT admitted_at, pods_ready_at, eviction_count "
                    "FROM kueue_workloads")
    startup = workloads.filter(
        pl.col("admitted_at").is_not_null() & (pl.col("pods_ready_at") >= pl.col("admitted_at"))
        & (pl.col("eviction_count").fill_null(0) == 0)
    ).select((pl.col("pods_ready_at") - pl.col("admitted_at")).dt.total_seconds())
    assert card["start-up time, median"]["kubernetes"] == pytest.approx(
        startup.to_series().quantile(0.5, interpolation="linear"))


def test_a_links_query_is_shown_as_text_never_as_markdown(sample_ledger, monkeypatch):
    # the probe's link (issue #28): a live link and a remote image inside the app's own message
    from streamlit.testing.v1 import AppTest

    from tests.dashboards.pages import APP

    monkeypatch.setenv("GPULEDGER_DB", str(sample_ledger))
    at = AppTest.from_file(APP, default_timeout=120)
    bait = "[Your session expired](https://evil.example/login) ![t](https://evil.example/p.png)"
    at.query_params["incident"] = bait
    at.switch_page("views/incidents.py")
    at.run()
    assert not at.exception
    shown = [str(e.value) for e in (*at.info, *at.warning)]
    assert any("Your session expired" in text for text in shown)
    for text in shown:
        assert "](https://" not in text  # no Markdown link or image survives
        assert "https://evil" not in text  # nor a bare URL to autolink
