"""The weekly report's "Kueue quota" section: the average % of quota used last week per
ClusterQueue and per cohort, as the ledger's quota gauges give it."""

from datetime import date
from pathlib import Path

import duckdb

from gpuledger.report.weekly import write_weekly_report
from models.runner import ensure_schema, publish_snapshot, read_snapshot
from tests.reports.conftest import SIM_WEEKS, SYNTHETIC_LINES, insert_lines
from tests.reports.html_tables import read_page


def _summary(db: Path, week: str, out: Path):
    with read_snapshot(db) as con:
        write_weekly_report(con, week, out)
    html = (out / week / "summary.html").read_text(encoding="utf-8")
    return html, read_page(html)


def _gauge_shares(db: Path, week: str, key: str) -> dict[tuple[str, str], str]:
    """(name, flavor) -> "xx.x %" straight from the stored gauges (usage over nominal quota,
    time-weighted), not from the model."""
    with read_snapshot(db) as con:
        rows = con.execute(
            f"SELECT {key}, flavor, "
            "sum(value_seconds) FILTER (WHERE metric = 'usage') "
            "/ sum(value_seconds) FILTER (WHERE metric = 'nominal_quota') "
            "FROM kueue_queue_resources WHERE strftime(window_start, '%G-W%V') = ? "
            "GROUP BY ALL", [week]).fetchall()
    return {(name, flavor): f"{100 * share:.1f} %" for name, flavor, share in rows}


def _shown(page, table: str) -> dict[tuple[str, str], str]:
    out = {}
    for row in page.tables[table]:
        cells = row.by_col()
        flavor = cells["flavor_resource"].text.split(" · ")[0]
        out[(cells["name"].text, flavor)] = cells["quota_used"].text
    return out


def test_average_quota_used_per_queue_and_cohort_is_the_gauges_share(sim_db: Path,
                                                                      tmp_path: Path):
    week = SIM_WEEKS[0]
    html, page = _summary(sim_db, week, tmp_path)
    assert "<h2>Kueue quota</h2>" in html
    assert "average % of quota used" in html.lower()
    queues = _shown(page, "kueue-quota-queues")
    assert len(queues) >= 2
    assert queues == _gauge_shares(sim_db, week, "cluster_queue")
    cohorts = _shown(page, "kueue-quota-cohorts")
    assert cohorts
    assert cohorts == _gauge_shares(sim_db, week, "cohort")


def test_a_week_without_kueue_quota_gauges_has_no_section(synthetic_db: Path, tmp_path: Path):
    html, page = _summary(synthetic_db, "2026-W02", tmp_path)
    assert "Kueue quota" not in html
    assert "kueue-quota-queues" not in page.tables


def test_a_queue_without_known_hours_reads_unknown_and_names_are_escaped(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        insert_lines(con, SYNTHETIC_LINES)
        for scope, queue, cohort, share, known in (
                ("queue", "<b>cq</b>", None, None, 0), ("queue", "cq-half", "c1", 0.5, 24),
                ("cohort", None, "c1", 0.5, 24)):
            con.execute(
                "INSERT INTO kueue_quota_weekly (week_start, week, cluster, scope, cohort, "
                "cluster_queue, flavor, resource, hours, known_hours, nominal_gpu_hours, "
                "usage_gpu_hours, quota_used_share) VALUES (?, '2026-W02', 'k8s', ?, ?, ?, "
                "'h100', 'nvidia.com/gpu', 168, ?, ?, ?, ?)",
                [date(2026, 1, 5), scope, cohort, queue, known,
                 None if share is None else 48.0, None if share is None else 24.0, share])
        publish_snapshot(con, db)
    html, page = _summary(db, "2026-W02", tmp_path / "out")
    assert "<b>cq</b>" not in html
    rows = {r.by_col()["name"].text: r.by_col() for r in page.tables["kueue-quota-queues"]}
    assert rows["<b>cq</b>"]["quota_used"].text == "unknown"
    assert rows["<b>cq</b>"]["known_hours"].text == "0 / 168"
    assert rows["<b>cq</b>"]["cohort"].text == "(none)"
    assert rows["cq-half"]["quota_used"].text == "50.0 %"
    assert rows["cq-half"]["usage_gpu_hours"].text == "24.00"
