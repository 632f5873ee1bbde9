"""The Utilization page's "Kueue quota" section: the chosen week's average % of quota used per
ClusterQueue and cohort (as the stored gauges give it), borrowed and lent GPU-hours, a queue's
hours against its nominal quota, and beside it the Slurm side's GPU-hours of the same week."""

from pathlib import Path

import polars as pl
import pytest

from dashboards import access
from models.runner import read_snapshot
from tests.dashboards.pages import everything_shown, frame, metrics, open_page

SECTION = "Kueue quota"


def sql(db: Path, text: str, params: list | None = None) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.execute(text, params or []).pl()


def gauge_pct(db: Path, week: str, key: str) -> dict[tuple[str, str], float]:
    """(name, flavor) -> % of quota used, straight from kueue_queue_resources (not the model)."""
    rows = sql(db, f"SELECT {key} AS name, flavor, 100 * "
               "sum(value_seconds) FILTER (WHERE metric = 'usage') "
               "/ sum(value_seconds) FILTER (WHERE metric = 'nominal_quota') AS pct "
               "FROM kueue_queue_resources WHERE strftime(window_start, '%G-W%V') = ? "
               "GROUP BY ALL", [week])
    return {(r["name"], r["flavor"]): r["pct"] for r in rows.iter_rows(named=True)}


@pytest.fixture
def page(sample_ledger: Path, monkeypatch: pytest.MonkeyPatch):
    return open_page("utilization", sample_ledger, monkeypatch)


def test_the_section_shows_the_weeks_quota_used_per_queue_and_cohort(page, sample_ledger):
    assert not page.exception
    assert SECTION in [s.value for s in page.subheader]
    week = page.selectbox(key="ut_kueue_week").value
    queues = frame(page, "cluster_queue", "quota_used_pct", "borrowed_gpu_hours")
    expected = gauge_pct(sample_ledger, week, "cluster_queue")
    assert len(expected) >= 2
    shown = {(r["cluster_queue"], r["flavor"]): r["quota_used_pct"]
             for r in queues.iter_rows(named=True)}
    assert shown.keys() == expected.keys()
    for key, pct in expected.items():
        assert shown[key] == pytest.approx(pct, rel=1e-9), key
    cohorts = [pl.from_pandas(e.value) for e in page.dataframe
               if "quota_used_pct" in e.value.columns and "cluster_queue" not in e.value.columns]
    assert len(cohorts) == 1
    want = gauge_pct(sample_ledger, week, "cohort")
    got = {(r["cohort"], r["flavor"]): r["quota_used_pct"]
           for r in cohorts[0].iter_rows(named=True)}
    assert got.keys() == want.keys()
    for key, pct in want.items():
        assert got[key] == pytest.approx(pct, rel=1e-9), key


def test_borrowed_and_lent_totals_are_the_weeks_queue_rows(page, sample_ledger):
    week = page.selectbox(key="ut_kueue_week").value
    totals = sql(sample_ledger, "SELECT sum(borrowed_gpu_hours) AS b, sum(lent_gpu_hours) AS l "
                 "FROM kueue_quota_weekly WHERE week = ? AND scope = 'queue'", [week]).row(0)
    shown = metrics(page)
    assert shown["Borrowed GPU-hours"] == f"{totals[0]:,.2f}"
    assert shown["Lent GPU-hours"] == f"{totals[1]:,.2f}"


def test_slurm_gpu_hours_of_the_same_week_sit_beside_it(page, sample_ledger):
    week = page.selectbox(key="ut_kueue_week").value
    slurm = frame(page, "slurm_account", "gpu_hours", "jobs")
    allocations = sql(sample_ledger, "SELECT slurm_account, gpu_seconds, physical_gpu_seconds, "
                      "day FROM allocations WHERE domain = 'slurm' "
                      "AND strftime(day, '%G-W%V') = ?", [week])
    expected = allocations.group_by("slurm_account").agg(
        (pl.coalesce(pl.col("physical_gpu_seconds").cast(pl.Float64),
                     pl.col("gpu_seconds").cast(pl.Float64)).sum() / 3600).alias("h"))
    assert expected.height >= 1
    got = dict(zip(slurm["slurm_account"], slurm["gpu_hours"], strict=True))
    for account, hours in expected.iter_rows():
        assert got[account] == pytest.approx(hours, rel=1e-9), account


def test_a_queues_hourly_chart_draws_its_usage_against_nominal_quota(page, sample_ledger):
    chosen = page.selectbox(key="ut_kueue_queue")
    assert len(chosen.options) >= 2
    other = chosen.options[-1]
    page = chosen.set_value(other).run()
    assert not page.exception
    assert other.split(" / ", 1)[1] in everything_shown(page)
    assert "nominal quota" in everything_shown(page)


def test_a_restricted_viewer_sees_no_kueue_quota_figures(sample_ledger: Path, monkeypatch,
                                                         tmp_path: Path):
    grants = tmp_path / "access.toml"
    grants.write_text('anonymous = []\n[viewers]\n"alice@example.org" = ["CC-PHY-100"]\n',
                      encoding="utf-8")
    monkeypatch.setenv(access.ACCESS_FILE_ENV, str(grants))
    page = open_page("utilization", sample_ledger, monkeypatch,
                     user={"is_logged_in": True, "email": "alice@example.org"})
    assert not page.exception
    assert not [s for s in page.selectbox if s.key == "ut_kueue_week"]
    assert "average % of quota used" not in everything_shown(page)
