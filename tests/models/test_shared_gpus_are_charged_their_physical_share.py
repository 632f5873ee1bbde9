"""The charging rule of docs/shared-gpus.md on hand-made ledgers: MIG instances are charged
their compute slices over the GPU's, a time-shared GPU's seconds are split among the holders
present on it, an unplaced holder shares the node's GPUs, a priced MIG profile is charged per
instance-hour, and invoice lines show physical GPU-hours beside the slice-hours."""

from datetime import date, datetime
from decimal import Decimal

import duckdb
import pytest

from models.build import build_allocations, build_chargeback
from models.runner import ensure_schema

DAY = date(2026, 1, 5)


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', ?, 'h100', 2, ?, ?)",
                  [(n, i, f"GPU-{n}-{i}") for n in ("mig1", "ts1") for i in range(2)])
    c.execute("INSERT INTO rate_card VALUES ('h100', '', '', NULL, NULL, 7.00, 'EUR')")
    yield c
    c.close()


def _pod(con, uid: str, units: int, start: datetime, end: datetime, *, node: str,
         sharing: str | None, profile: str | None = None, gpus_on: list[str] | None = None,
         resource: str = "nvidia_com_gpu") -> None:
    con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                "start_ts, end_ts, samples, scrape_interval_s, gpu_resource, sharing, "
                "slice_profile) VALUES ('c', 'ns', ?, ?, ?, ?, ?, ?, 1, 60, ?, ?, ?)",
                [f"pod-{uid}", uid, node, units, start, end, resource, sharing, profile])
    for gpu in gpus_on or ():
        con.execute("INSERT INTO k8s_pod_gpus VALUES ('c', 'ns', ?, ?, ?, ?, ?, ?)",
                    [f"pod-{uid}", node, gpu, start.date(), start, end])


def _layout(con, node: str, sharing: str, profile: str | None, units: int, per_gpu: int,
            gpu_slices: int | None = None) -> None:
    con.execute("INSERT INTO node_gpu_slices VALUES ('c', ?, ?, ?, ?, 2, ?, ?, NULL, 'ksm', "
                "'2026-01-01', NULL)", [node, sharing, profile, units, per_gpu, gpu_slices])


def _build(con) -> dict[str, tuple]:
    build_allocations(con, DAY, DAY)
    rows = con.execute("SELECT source_key, gpu_seconds, slices, physical_gpu_seconds, "
                       "capacity_gpus FROM allocations ORDER BY source_key").fetchall()
    return {r[0]: r[1:] for r in rows}


def test_a_mig_instance_is_its_compute_slices_over_the_gpus(con):
    _layout(con, "mig1", "mig", "1g.10gb", 7, 1, 7)
    _layout(con, "mig1", "mig", "3g.40gb", 2, 3, 7)
    _pod(con, "a", 1, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb",
         resource="nvidia_com_mig_1g_10gb")
    _pod(con, "b", 2, _at(8), _at(9), node="mig1", sharing="mig", profile="3g.40gb",
         resource="nvidia_com_mig_3g_40gb")
    rows = _build(con)
    assert rows["a"][:3] == (3600, 1, Decimal("514.286"))  # 3600 / 7
    assert rows["b"][:3] == (7200, 2, Decimal("3085.714"))  # 2 x 3/7 x 3600
    assert rows["a"][3] == pytest.approx(1 / 7)
    # without a layout row the profile's slices are still read from its name (7 on an H100)
    con.execute("DELETE FROM node_gpu_slices")
    assert _build(con)["b"][2] == Decimal("3085.714")


def test_a_time_sliced_gpu_is_split_among_the_holders_present(con):
    _layout(con, "ts1", "time_slicing", None, 8, 4)
    # GPU 0: x alone 8-9, then x and y 9-10; GPU 1: z alone 8-10
    _pod(con, "x", 1, _at(8), _at(10), node="ts1", sharing="time_slicing", gpus_on=["GPU-ts1-0"])
    _pod(con, "y", 1, _at(9), _at(10), node="ts1", sharing="time_slicing", gpus_on=["GPU-ts1-0"])
    _pod(con, "z", 1, _at(8), _at(10), node="ts1", sharing="time_slicing", gpus_on=["GPU-ts1-1"])
    rows = _build(con)
    assert rows["x"][2] == Decimal("5400.000")  # 3600 + 1800
    assert rows["y"][2] == Decimal("1800.000")
    assert rows["z"][2] == Decimal("7200.000")
    # the GPU-seconds add up to the two physical GPUs' 2 hours, never more
    assert sum(r[2] for r in rows.values()) == 2 * 7200
    assert rows["x"][3] == pytest.approx(0.25)  # 1 replica of 4


def test_unplaced_holders_share_the_nodes_gpus_never_more_than_their_units(con):
    _layout(con, "ts1", "time_slicing", None, 8, 4)
    for uid in ("p", "q", "r"):  # three 1-replica pods on the 2-GPU node, GPUs unknown
        _pod(con, uid, 1, _at(8), _at(9), node="ts1", sharing="time_slicing")
    _pod(con, "s", 1, _at(9), _at(10), node="ts1", sharing="time_slicing")  # alone: 1 GPU
    rows = _build(con)
    assert [rows[u][2] for u in "pqr"] == [Decimal("2400.000")] * 3  # 2 GPUs x 1 h / 3
    assert rows["s"][2] == Decimal("3600.000")


def test_invoice_lines_charge_the_physical_share_and_show_slice_hours(con):
    _layout(con, "mig1", "mig", "1g.10gb", 7, 1, 7)
    _pod(con, "a", 7, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb")
    _build(con)
    build_chargeback(con, DAY, DAY)
    line = con.execute("SELECT gpu_model, gpu_seconds, gpu_hours, slice_hours, amount "
                       "FROM chargeback_periods WHERE period_kind = 'day'").fetchone()
    # 7 instances of 1/7 for an hour = one physical GPU-hour at the H100 rate
    assert line == ("h100", 3600, Decimal("1.000000"), Decimal("7.000000"), Decimal("7.00"))


def test_a_priced_mig_profile_is_charged_per_instance_hour(con):
    con.execute("INSERT INTO rate_card VALUES ('1g.10gb', '', '', NULL, NULL, 1.50, 'EUR')")
    _layout(con, "mig1", "mig", "1g.10gb", 7, 1, 7)
    _pod(con, "a", 2, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb")
    _build(con)
    build_chargeback(con, DAY, DAY)
    line = con.execute("SELECT gpu_model, rate_per_gpu_hour, gpu_seconds, slice_hours, amount "
                       "FROM chargeback_periods WHERE period_kind = 'day'").fetchone()
    assert line == ("1g.10gb", Decimal("1.500000"), 7200, Decimal("2.000000"), Decimal("3.00"))


def test_whole_gpus_are_charged_as_before(con):
    _pod(con, "w", 2, _at(8), _at(9, 30), node="ts1", sharing=None)
    rows = _build(con)
    assert rows["w"] == (10800, None, Decimal("10800.000"), 2.0)
    build_chargeback(con, DAY, DAY)
    assert con.execute("SELECT gpu_seconds, slice_hours, amount FROM chargeback_periods "
                       "WHERE period_kind = 'day'").fetchone() == (
        10800, Decimal("0.000000"), Decimal("21.00"))


def _incidents(con) -> list[tuple]:
    from models.incidents import build_incidents

    build_incidents(con, DAY, DAY)
    return con.execute("SELECT kind, node, gpu_uuids, start_ts, end_ts, gpu_seconds, share, "
                       "detail FROM incidents WHERE kind = 'shared_overcommit' "
                       "ORDER BY start_ts").fetchall()


def test_the_invariant_holds_on_a_full_mig_gpu_and_breaks_when_overcommitted(con):
    _layout(con, "mig1", "mig", "1g.10gb", 14, 1, 7)
    for i in range(7):  # seven 1g instances fill GPU 0 exactly: no incident
        _pod(con, f"m{i}", 1, _at(8), _at(10), node="mig1", sharing="mig", profile="1g.10gb",
             gpus_on=["GPU-mig1-0"])
    _build(con)
    assert _incidents(con) == []
    # an eighth 1g instance seen on the same GPU for 30 minutes: 8/7 charged per second
    _pod(con, "m7", 1, _at(9), _at(9, 30), node="mig1", sharing="mig", profile="1g.10gb",
         gpus_on=["GPU-mig1-0"])
    _build(con)
    [row] = _incidents(con)
    assert row[:5] == ("shared_overcommit", "mig1", ["GPU-mig1-0"], _at(9), _at(9, 30))
    assert row[5] == round(1800 / 7)  # the excess 1/7 GPU x 30 min
    assert row[6] == pytest.approx(8 / 7)


def test_a_whole_gpu_job_on_a_time_shared_gpu_breaks_the_invariant(con):
    _layout(con, "ts1", "time_slicing", None, 8, 4)
    _pod(con, "x", 1, _at(8), _at(10), node="ts1", sharing="time_slicing", gpus_on=["GPU-ts1-0"])
    _pod(con, "y", 1, _at(8), _at(10), node="ts1", sharing="time_slicing", gpus_on=["GPU-ts1-0"])
    _build(con)
    assert _incidents(con) == []  # two replicas on one GPU: split, never over one
    _pod(con, "w", 1, _at(9), _at(9, 20), node="ts1", sharing=None, gpus_on=["GPU-ts1-0"])
    _build(con)
    [row] = _incidents(con)
    assert (row[3], row[4], row[5]) == (_at(9), _at(9, 20), 1200)
    assert "whole GPU" in row[7]
    assert "time_slicing" in row[7]


def test_an_idle_mig_slice_wastes_its_fraction_of_the_gpu(con):
    from datetime import timedelta

    _layout(con, "mig1", "mig", "3g.40gb", 2, 3, 7)
    _pod(con, "i", 1, _at(8), _at(10), node="mig1", sharing="mig", profile="3g.40gb",
         gpus_on=["GPU-mig1-0"])
    rows, t = [], _at(8)
    while t < _at(10):  # dcgm-exporter's series of MIG instance 1 on GPU 0: 0 % all along
        rows.append(("c", "GPU-mig1-0", "1", "3g.40gb", "mig1", 0, t, 0.0, "ns", "pod-i"))
        t += timedelta(minutes=1)
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, gpu_instance, "
                    "gpu_instance_profile, node, gpu_index, bucket_start, busy_fraction, "
                    "samples, namespace, pod) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)", rows)
    _build(con)
    from models.incidents import build_incidents

    build_incidents(con, DAY, DAY)
    [(kind, seconds)] = con.execute("SELECT kind, gpu_seconds FROM incidents").fetchall()
    assert (kind, seconds) == ("idle_allocation", round(7200 * 3 / 7))


def test_a_mig_layout_change_mid_day_is_a_finding_naming_the_holders_across_it(con):
    con.execute("INSERT INTO node_gpu_slices VALUES "
                "('c', 'mig1', 'mig', '1g.10gb', 14, 2, 1, 7, 'all-1g.10gb', 'ksm', "
                "'2026-01-01', '2026-01-05 12:00'), "
                "('c', 'mig1', 'mig', '3g.40gb', 4, 2, 3, 7, 'all-3g.40gb', 'ksm', "
                "'2026-01-05 12:00', NULL)")
    _pod(con, "a", 1, _at(11), _at(13), node="mig1", sharing="mig", profile="1g.10gb")
    _build(con)
    from models.incidents import build_incidents

    build_incidents(con, DAY, DAY)
    [(kind, node, start, seconds, detail)] = con.execute(
        "SELECT kind, node, start_ts, gpu_seconds, detail FROM incidents").fetchall()
    assert (kind, node, start, seconds) == ("mig_layout_change", "mig1", _at(12), 0)
    assert "1g.10gb x14 -> 3g.40gb x4" in detail
    assert "(mig.config all-1g.10gb -> all-3g.40gb)" in detail
    assert "1 allocation(s) held MIG instances across it" in detail


def test_a_slices_busy_and_idle_hours_are_in_its_physical_share_too(con):
    from datetime import timedelta

    from models.build import build_gpu_usage_hourly

    _layout(con, "mig1", "mig", "1g.10gb", 7, 1, 7)
    _pod(con, "h", 1, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb",
         gpus_on=["GPU-mig1-0"])
    rows, t = [], _at(8)
    while t < _at(9):  # instance 3 of GPU 0 at 50 % busy for the hour
        rows.append(("c", "GPU-mig1-0", "3", "1g.10gb", "mig1", 0, t, 0.5, "ns", "pod-h"))
        t += timedelta(minutes=1)
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, gpu_instance, "
                    "gpu_instance_profile, node, gpu_index, bucket_start, busy_fraction, "
                    "samples, namespace, pod) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)", rows)
    _build(con)
    build_gpu_usage_hourly(con, DAY, DAY)
    build_chargeback(con, DAY, DAY)
    line = con.execute("SELECT gpu_hours, measured_gpu_hours, busy_gpu_hours, idle_gpu_hours, "
                       "slice_hours FROM chargeback_periods WHERE period_kind = 'day'").fetchone()
    # allocated 1/7 GPU-hour, all of it measured, half busy; 1 slice-hour
    assert line == (Decimal("0.142857"), Decimal("0.142857"), Decimal("0.071429"),
                    Decimal("0.071428"), Decimal("1.000000"))
    daily = con.execute("SELECT sharing, slice_profile, allocations, slice_seconds, "
                        "physical_gpu_seconds, busy_slice_seconds, amount, "
                        "cost_per_busy_slice_hour FROM shared_gpu_daily").fetchall()
    # 1/7 h x 7.00 = 1.00; half an instance-hour busy: 2.00 per busy slice-hour
    assert daily == [("mig", "1g.10gb", 1, 3600, Decimal("514.286"), Decimal("1800.000000"),
                      Decimal("1.00"), pytest.approx(2.0, abs=1e-3))]


def test_the_utilization_page_shows_the_shared_estate(tmp_path, monkeypatch):
    from models.build import build_gpu_usage_hourly
    from models.runner import publish_snapshot
    from tests.dashboards.pages import everything_shown, frame, metrics, open_page

    db = tmp_path / "ledger.duckdb"
    with duckdb.connect(str(db)) as c:
        ensure_schema(c)
        c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                      "gpu_uuid) VALUES ('c', ?, 'h100', 2, ?, ?)",
                      [(n, i, f"GPU-{n}-{i}") for n in ("mig1", "w1") for i in range(2)])
        c.execute("INSERT INTO rate_card VALUES ('h100', '', '', NULL, NULL, 7.00, 'EUR')")
        _layout(c, "mig1", "mig", "1g.10gb", 14, 1, 7)
        _pod(c, "a", 7, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb")
        _pod(c, "w", 3, _at(8), _at(9), node="w1", sharing=None)
        build_allocations(c, DAY, DAY)
        build_gpu_usage_hourly(c, DAY, DAY)
        build_chargeback(c, DAY, DAY)
        publish_snapshot(c, db)
    at = open_page("utilization", db, monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    # 1 physical GPU-hour of MIG instances among 4 charged: 25 %
    assert metrics(at)["Share of charged GPU-hours on shared GPUs"] == "25.0 %"
    shared = frame(at, "sharing", "slice_profile", "slice_hours", "physical_gpu_hours")
    assert shared.select("sharing", "slice_hours", "physical_gpu_hours").rows() == [
        ("mig", 7.0, 1.0), ("whole", 3.0, 3.0)]
    assert "docs/shared-gpus.md" in everything_shown(at)
    # the weekly report: the same shares, and slice_hours on every invoice line of its CSV
    from gpuledger.report.weekly import write_weekly_report

    with duckdb.connect(str(db), read_only=True) as c:
        write_weekly_report(c, "2026-W02", tmp_path / "reports")
    folder = tmp_path / "reports" / "2026-W02"
    summary = (folder / "summary.html").read_text()
    assert "25.0 % of the week's charged GPU-hours ran on shared GPUs" in summary
    assert '<td>mig</td><td>1g.10gb</td><td class="num">1</td><td class="num">7.00</td>' \
        '<td class="num">1.00</td>' in summary
    lines = (folder / "invoice-lines.csv").read_text().splitlines()
    assert "slice_hours" in lines[0].split(",")


def test_a_mig_nodes_capacity_is_its_physical_gpus_not_its_instance_count(con):
    """scontrol's inventory of a MIG node counts instances per GRES type (3 GPUs of 7 x 1g and
    one of 2 x 3g: rows of 21 and 2); the sweeps take the physical GPUs (4) instead."""
    con.execute("DELETE FROM nodes")
    con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index) "
                    "VALUES ('c', 'mig1', ?, ?, ?)",
                    [("1g.10gb", 21, i) for i in range(21)]
                    + [("3g.40gb", 2, 21), ("3g.40gb", 2, 22)])
    con.execute("INSERT INTO node_gpu_slices VALUES "
                "('c', 'mig1', 'mig', '1g.10gb', 21, 4, 1, 7, NULL, 'scontrol', '2026-01-01', "
                "NULL), "
                "('c', 'mig1', 'mig', '3g.40gb', 2, 4, 3, 7, NULL, 'scontrol', '2026-01-01', NULL)")
    _pod(con, "a", 21, _at(8), _at(9), node="mig1", sharing="mig", profile="1g.10gb")
    _pod(con, "b", 2, _at(8), _at(9), node="mig1", sharing="mig", profile="3g.40gb")
    _build(con)
    from models import load_sql

    # 3 + 6/7 GPUs held on a 4-GPU node: within capacity (a capacity of 2 would not be)
    params = {"day": DAY, "min_seconds": 0}
    assert con.execute(load_sql("node_overcommit"), params).fetchall() == []
    # one whole GPU more: 4 + 6/7 on 4 GPUs is over (a capacity of 21 would not be)
    _pod(con, "c", 1, _at(8), _at(9), node="mig1", sharing=None)
    _build(con)
    [row] = con.execute(load_sql("node_overcommit"), params).fetchall()
    assert row[3] == pytest.approx(4 + 6 / 7)
    assert row[4] == 4
