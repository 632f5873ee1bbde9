"""The data-quality gate (issue #15 item 5): a day with a dcgm-exporter outage is provisional,
with the reason, in data_quality_days, on the invoice lines, on the Chargeback page, in the
weekly report and in its CSVs; a clean day is not; the site's thresholds decide.

The world is the simulator's (no irregularities, so the only outage is the one made here by
removing two hours of one node's dcgm samples, as an exporter that was down leaves them)."""

import csv
import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.site import SiteError, load_site
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.dashboards.pages import everything_shown, open_page

OUTAGE_DAY = date(2026, 1, 6)
CLEAN_DAY = date(2026, 1, 5)
# the simulator plants unattributed owners on purpose: the owners gate is tested apart
QUALITY = "\n[gpuledger.quality]\nmin_attributed_share = 0.5\n{extra}"


def _world(root: Path, extra: str = "") -> Path:
    world = root / "world"
    simulate(SimConfig(seed=9151, days=2, nodes=NodeCounts(hpc=2, k8s=2, shared=1),
                       irregularities=False), world)
    site = world / "gpuledger.toml"
    site.write_text(site.read_text() + QUALITY.format(extra=extra))
    return site


def _build(site: Path) -> Path:
    assert main(["--config", str(site), "load"]) == 0
    assert main(["--config", str(site), "build"]) == 0
    return site.parent / "data" / "gpuledger.duckdb"


def _outage(db: Path) -> str:
    """Remove 2 hours of one busy node's dcgm samples on OUTAGE_DAY; returns the node."""
    with duckdb.connect(str(db)) as con:
        node = con.execute(
            "SELECT node FROM allocations WHERE day = ? AND node IN (SELECT node FROM "
            "gpu_utilization) GROUP BY node ORDER BY sum(gpu_seconds) DESC, node LIMIT 1",
            [OUTAGE_DAY]).fetchone()[0]
        con.execute("DELETE FROM gpu_utilization WHERE node = ? AND bucket_start >= ? "
                    "AND bucket_start < ?", [node, f"{OUTAGE_DAY} 10:00", f"{OUTAGE_DAY} 12:00"])
    return node


@pytest.fixture(scope="module")
def outage_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    site = _world(tmp_path_factory.mktemp("quality"))
    db = _build(site)
    node = _outage(db)
    assert main(["--config", str(site), "build"]) == 0
    return site, node


def _days(db: Path) -> dict[date, tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {r[0]: r[1:] for r in con.execute(
            "SELECT day, provisional, reasons, longest_scrape_gap_minutes, scrape_gap_node "
            "FROM data_quality_days ORDER BY day").fetchall()}


def test_the_outage_day_is_provisional_with_the_reason_and_the_clean_day_is_not(outage_world):
    site, node = outage_world
    days = _days(site.parent / "data" / "gpuledger.duckdb")
    provisional, reasons, gap, gap_node = days[OUTAGE_DAY]
    assert provisional, days
    assert gap == 120
    assert gap_node == node
    assert f"scrape gap: expected at most 30 min without dcgm samples on a node, found 120 min " \
           f"on {node}" in reasons
    clean = days[CLEAN_DAY]
    assert clean[0] is False, clean
    assert clean[1] is None, clean


def test_invoice_lines_of_the_outage_day_carry_the_mark(outage_world):
    site, node = outage_world
    with duckdb.connect(str(site.parent / "data" / "gpuledger.duckdb"), read_only=True) as con:
        by_day = dict(con.execute(
            "SELECT period, bool_or(provisional) FROM invoice_lines WHERE period_kind = 'day' "
            "GROUP BY period").fetchall())
        on_node = con.execute(
            "SELECT DISTINCT cost_centre, team, person, domain, gpu_model FROM allocations "
            "WHERE day = ? AND node = ?", [OUTAGE_DAY, node]).fetchall()
        marked = con.execute(
            "SELECT DISTINCT cost_centre, team, person, domain, gpu_model, provisional_reasons "
            "FROM invoice_lines WHERE period_kind = 'day' AND period = ? AND provisional",
            [str(OUTAGE_DAY)]).fetchall()
    assert by_day[str(OUTAGE_DAY)] is True
    assert by_day[str(CLEAN_DAY)] is False
    assert set(on_node) <= {m[:5] for m in marked}
    assert all(m[5].startswith(f"{OUTAGE_DAY} ") and "scrape gap" in m[5] for m in marked)


def test_the_weekly_report_and_its_csvs_show_the_mark(outage_world, tmp_path):
    site, node = outage_world
    out = tmp_path / "reports"
    assert main(["--config", str(site), "report", "weekly", "--week", "2026-W02",
                 "--out", str(out)]) == 0
    folder = out / "2026-W02"
    summary = (folder / "summary.html").read_text()
    assert 'id="provisional-days"' in summary
    assert f"found 120 min on {node}" in summary
    with (folder / "invoice-lines.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    marked = [r for r in rows if r["provisional"] == "true"]
    assert marked
    assert {r["provisional"] for r in rows} <= {"true", "false"}
    assert all(f"{OUTAGE_DAY} " in r["provisional_reasons"] and f"found 120 min on {node}"
               in r["provisional_reasons"] for r in marked)
    assert all(r["provisional_reasons"] == "" for r in rows if r["provisional"] == "false")


def test_the_chargeback_page_shows_the_reason_and_its_csv_the_mark(outage_world, monkeypatch):
    site, node = outage_world
    at = open_page("chargeback", site.parent / "data" / "gpuledger.duckdb", monkeypatch)
    assert not at.exception, at.exception
    shown = everything_shown(at)
    assert "Provisional:" in shown
    assert f"found 120 min on {node}" in shown
    assert "provisional" in shown  # the totals tables carry the mark as a column


def test_site_thresholds_change_the_outcome(tmp_path):
    site = _world(tmp_path, extra="max_scrape_gap_minutes = 180\n")
    db = _build(site)
    _outage(db)
    assert main(["--config", str(site), "build"]) == 0
    provisional, reasons, gap, _ = _days(db)[OUTAGE_DAY]
    assert gap == 120
    assert provisional is False
    assert reasons is None
    # the owners gate, at its default: the simulator's planted unattributed owners fail it
    shutil.rmtree(site.parent / "data")
    site.write_text(site.read_text().replace("min_attributed_share = 0.5\n", ""))
    db = _build(site)
    provisional, reasons, _, _ = _days(db)[CLEAN_DAY]
    assert provisional
    assert "owners: expected at least 95.0 % of jobs and pods" in reasons


@pytest.mark.parametrize(("line", "message"), [
    ("min_sample_coverage = 1.5", "[gpuledger.quality.min_sample_coverage]: expected a share"),
    ("max_scrape_gap_minutes = -1", "expected a number of at least 0, found -1.0"),
    ("max_k8s_warnings = \"many\"", "[gpuledger.quality.max_k8s_warnings]: expected a number"),
    ("min_coverage = 0.5", "[gpuledger.quality]: expected only the keys"),
])
def test_bad_thresholds_are_refused_naming_the_key(tmp_path, line, message):
    site = tmp_path / "gpuledger.toml"
    site.write_text('[gpuledger]\nfirst_day = "2026-01-05"\n[gpuledger.clusters.a.prometheus]\n'
                    f'openmetrics = "m.om"\n[gpuledger.quality]\n{line}\n')
    with pytest.raises(SiteError) as caught:
        load_site(site)
    assert message in str(caught.value)


def test_double_scheduling_no_detector_can_see_is_named_by_the_gate(tmp_path):
    """On a shared node whose dcgm-exporter has no pod labels, the planted double-schedulings
    (a Slurm job and a pod on 6 of the node's 8 GPUs) have no evidence: the simulator lists them
    in truth/undetectable_incidents.csv, no detector reports them, and the gate names the node
    and the GPU-time both schedulers held there; set as a threshold, it makes the day
    provisional."""
    world = tmp_path / "world"
    simulate(SimConfig(seed=9152, days=2, nodes=NodeCounts(hpc=1, k8s=1, shared=1),
                       irregularities=False, no_pod_labels_nodes=("gpu-shr-01",)), world)
    with (world / "truth" / "undetectable_incidents.csv").open() as fh:
        hidden = list(csv.DictReader(fh))
    assert hidden, "expected the planted double-schedulings on gpu-shr-01 to be undetectable"
    assert {h["node"] for h in hidden} == {"gpu-shr-01"}
    assert "no pod labels" in hidden[0]["why"]
    with (world / "truth" / "incidents.csv").open() as fh:
        assert not [r for r in csv.DictReader(fh) if r["kind"] == "double_scheduled"]
    site = world / "gpuledger.toml"
    site.write_text(site.read_text() + QUALITY.format(extra=""))
    db = _build(site)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM incidents "
                           "WHERE kind = 'double_scheduled'").fetchone()[0] == 0
        named = dict(con.execute(
            "SELECT day, unverified_overlap_nodes FROM data_quality_days "
            "WHERE unverified_overlap_gpu_seconds > 0").fetchall())
        # at least the GPUs both held at once: 2 of the pod's over the overlap
        held = dict(con.execute(
            "SELECT day, unverified_overlap_gpu_seconds FROM data_quality_days").fetchall())
        reasons = con.execute("SELECT string_agg(reasons, '; ') FROM data_quality_days"
                              ).fetchone()[0] or ""
    for h in hidden:
        day = date.fromisoformat(h["start"][:10])
        assert named.get(day) == "gpu-shr-01", (h, named)
        assert held[day] >= int(h["gpu_seconds"])
    assert "unverified" not in reasons  # shown, not gated by default
    site.write_text(site.read_text() + "max_unverified_overlap_gpu_hours = 0\n")
    assert main(["--config", str(site), "build"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        reasons = con.execute("SELECT reasons FROM data_quality_days WHERE day = ?",
                              [date.fromisoformat(hidden[0]["start"][:10])]).fetchone()[0]
    assert "unverified overlap: expected at most 0 GPU-h held by both schedulers on one node " \
           "with the pods' GPUs unknown, found" in reasons
    assert "on gpu-shr-01" in reasons
