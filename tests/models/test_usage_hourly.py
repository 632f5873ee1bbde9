"""Hourly usage (allocation_usage_hourly, gpu_usage_hourly, node_usage_hourly).

A hand-made ledger pins the matching rules (requeued runs sharing a JobIDRaw, pods by uid or by
name, a pod's own GPUs, hour clipping) with figures worked out by hand. The sample world is then
compared with the simulator's truth:

* allocated GPU-seconds per hour are the allocations clipped at hour boundaries (computed here in
  Python), exact to the second, and the sum over identities, over nodes and over allocations rows
  all agree;
* busy GPU-seconds per GPU and day from the readings matched to allocations are within the
  scrape interval Δ per allocation end of ``truth/gpu_busy_seconds.csv``: a reading at t stands
  for [t, t + Δ), so clipping it to an allocation that starts or ends between two scrapes moves
  at most Δ x busy fraction (on double-scheduled GPUs each holder also sees the other's busy
  time; the planted exporter outage can only lose busy time);
* node busy GPU-seconds (whoever held the GPU) per node-day equal the truth exactly outside the
  outage.
"""

import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.ingest.nodenames import NodeNamer
from models import load_sql
from models.build import (
    build_allocations,
    build_chargeback,
    build_gpu_usage_hourly,
    create_usage_matches,
    data_days,
)
from models.runner import ensure_schema

ROOT = Path(__file__).resolve().parents[2]
DAY = date(2026, 1, 5)
EPSILON = 1e-6


def at(hhmm: str) -> datetime:
    hours, minutes = hhmm.split(":")
    return datetime(2026, 1, 5, int(hours), int(minutes))


def minutes(first: str, last: str) -> list[datetime]:
    start, end = at(first), at(last)
    return [start + timedelta(minutes=i) for i in range(int((end - start).seconds / 60) + 1)]


# --------------------------------------------------------------------------- a hand-made ledger


def _allocation(con, domain, key, name, gpus, start, end, *, uuids=None, namespace=None):
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, pool, "
        "gpu_model, gpus, gpu_uuids, start_ts, end_ts, gpu_seconds, k8s_namespace, person, team, "
        "cost_centre, outcome) VALUES (?, ?, 'c', ?, ?, ?, 'n1', 'p', 'a100', ?, ?, ?, ?, ?, ?, "
        "'ann', 't', 'CC-1', 'completed')",
        [DAY, domain, key, name, name, gpus, uuids, start, end,
         gpus * int((end - start).total_seconds()), namespace],
    )


def _readings(con, gpu, buckets, busy, *, namespace=None, pod=None, pod_uid=None, job=None):
    con.executemany(
        "INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, gpu_model, "
        "bucket_start, busy_fraction, samples, namespace, pod, pod_uid, hpc_job) "
        "VALUES ('c', ?, 'n1', ?, 'a100', ?, ?, 1, ?, ?, ?, ?)",
        [[gpu, int(gpu[-1]), b, busy, namespace, pod, pod_uid, job] for b in buckets],
    )


@pytest.fixture
def hand_made() -> duckdb.DuckDBPyConnection:
    """Node n1 (3 GPUs G0..G2), 60-s scrapes on 2026-01-05.

    * Slurm job 100 was requeued: run 1 holds 1 GPU 10:30-11:15, run 2 11:30-12:00. G0 carries
      hpc_job=100 during both runs (busy 0.5, then 1.0) and also at 11:20, between them (a stale
      label: neither run's).
    * Pod ns/pod-a (uid u1, GPU G1 named by the ledger) 10:00-10:20, busy 0.25; a pod-a reading on
      G0 at 10:05 is not on its GPU.
    * Pod ns/pod-c (uid u2) 10:40-11:00 on G2, busy 0.75, with pod_uid labels; a reading at 10:50
      of an older pod of the same name (uid u0) is not its.
    """
    con = duckdb.connect()
    ensure_schema(con)
    con.executemany(
        "INSERT INTO nodes VALUES ('c', 'n1', 'p', 'a100', 3, ?, ?, 'p')",
        [[i, f"G{i}"] for i in range(3)],
    )
    con.executemany("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw) "
                    "VALUES (?, 'c', '100', 100)", [["c:100:1"], ["c:100:2"]])
    con.executemany("INSERT INTO gpu_busy_daily (cluster, gpu_uuid, day, scrape_interval_s) "
                    "VALUES ('c', ?, ?, 60)", [[f"G{i}", DAY] for i in range(3)])
    _allocation(con, "slurm", "c:100:1", "100", 1, at("10:30"), at("11:15"))
    _allocation(con, "slurm", "c:100:2", "100", 1, at("11:30"), at("12:00"))
    _allocation(con, "kubernetes", "u1", "pod-a", 1, at("10:00"), at("10:20"),
                uuids=["G1"], namespace="ns")
    _allocation(con, "kubernetes", "u2", "pod-c", 1, at("10:40"), at("11:00"), namespace="ns")
    _readings(con, "G0", minutes("10:30", "11:14"), 0.5, job="100")
    _readings(con, "G0", [m for m in minutes("11:15", "11:29") if m != at("11:20")], 0.0)
    _readings(con, "G0", [at("11:20")], 0.8, job="100")
    _readings(con, "G0", minutes("11:30", "11:59"), 1.0, job="100")
    _readings(con, "G0", [at("10:05")], 0.25, namespace="ns", pod="pod-a")
    _readings(con, "G1", minutes("10:00", "10:19"), 0.25, namespace="ns", pod="pod-a")
    _readings(con, "G2", [m for m in minutes("10:40", "10:59") if m != at("10:50")], 0.75,
              namespace="ns", pod="pod-c", pod_uid="u2")
    _readings(con, "G2", [at("10:50")], 0.1, namespace="ns", pod="pod-c", pod_uid="u0")
    yield con
    con.close()


def test_hand_made_allocations_get_their_own_readings_per_hour(hand_made):
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    got = hand_made.execute(
        "SELECT source_key, hour::TIME::VARCHAR, allocated_gpu_seconds, "
        "round(measured_gpu_seconds, 6), round(busy_gpu_seconds, 6), round(idle_gpu_seconds, 6) "
        "FROM allocation_usage_hourly ORDER BY ALL").fetchall()
    assert got == ([
        # run 1: 30 min in hour 10, 15 min in hour 11, busy 0.5; the 11:20 reading is neither run's
        ("c:100:1", "10:00:00", 1800, 1800.0, 900.0, 900.0),
        ("c:100:1", "11:00:00", 900, 900.0, 450.0, 450.0),
        ("c:100:2", "11:00:00", 1800, 1800.0, 1800.0, 0.0),
        # pod-a: its 20 minutes on G1 only
        ("u1", "10:00:00", 1200, 1200.0, 300.0, 900.0),
        # pod-c: 19 minutes with its uid; the older pod's minute is measured for nobody
        ("u2", "10:00:00", 1200, 1140.0, 855.0, 285.0),
    ])


def test_hand_made_identity_and_node_hours(hand_made):
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    identities = hand_made.execute(
        "SELECT domain, hour::TIME::VARCHAR, allocated_gpu_seconds, round(measured_gpu_seconds, "
        "6), round(busy_gpu_seconds, 6), allocations FROM gpu_usage_hourly ORDER BY ALL"
    ).fetchall()
    assert identities == ([
        ("kubernetes", "10:00:00", 2400, 2340.0, 1155.0, 2),
        ("slurm", "10:00:00", 1800, 1800.0, 900.0, 1),
        ("slurm", "11:00:00", 2700, 2700.0, 2250.0, 2),
    ])
    nodes = {r[0]: r[1:] for r in hand_made.execute(
        "SELECT hour::TIME::VARCHAR, capacity_gpu_seconds, allocated_gpu_seconds, "
        "unallocated_gpu_seconds, round(measured_gpu_seconds, 6), round(busy_gpu_seconds, 6) "
        "FROM node_usage_hourly ORDER BY hour").fetchall()}
    assert len(nodes) == 24  # every hour of the day, allocated or not
    assert nodes["09:00:00"] == (10800, 0, 10800, 0.0, 0.0)
    # hour 10: G0 10:05 (0.25) and 10:30-10:59 (0.5), G1 10:00-10:19 (0.25), G2 10:40-10:59
    # (0.75, and 0.1 for the older pod's minute): every reading counts, whoever held the GPU
    assert nodes["10:00:00"] == (10800, 4200, 6600, 60 + 1800 + 1200 + 1200,
                                 15 + 900 + 300 + 19 * 45 + 6)
    # hour 11: G0 all hour: 0.5 x 15 min, idle, 0.8 at 11:20, 1.0 x 30 min
    assert nodes["11:00:00"] == (10800, 2700, 8100, 3600, 450 + 48 + 1800)


def test_chargeback_shows_the_same_pieces_busy_and_idle(hand_made):
    hand_made.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.0, 'EUR')")
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    build_chargeback(hand_made, DAY, DAY)
    lines = hand_made.execute(
        "SELECT domain, gpu_seconds, measured_gpu_hours, busy_gpu_hours, idle_gpu_hours, amount "
        "FROM chargeback_periods WHERE period_kind = 'day' ORDER BY domain").fetchall()
    def hours(seconds: int) -> Decimal:
        return round(Decimal(seconds) / 3600, 6)

    assert lines == [
        ("kubernetes", 2400, hours(2340), hours(1155), hours(2340) - hours(1155),
         Decimal("1.33")),  # the amount is on allocated GPU-seconds only: 2,400 s x 2.0 / 3,600
        ("slurm", 4500, hours(4500), hours(3150), hours(1350), Decimal("2.50")),
    ]


def test_more_gpus_labelled_than_allocated_are_scaled_down_to_the_allocation(hand_made):
    # a wrong label: pod-a also seen on G2 for its whole interval; the ledger names no GPUs
    hand_made.execute("UPDATE allocations SET gpu_uuids = NULL WHERE source_key = 'u1'")
    _readings(hand_made, "G2", minutes("10:00", "10:19"), 1.0, namespace="ns", pod="pod-a")
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    row = hand_made.execute(
        "SELECT allocated_gpu_seconds, measured_gpu_seconds::DOUBLE, busy_gpu_seconds::DOUBLE "
        "FROM allocation_usage_hourly WHERE source_key = 'u1'").fetchone()
    # G1 and G2 for 20 min (busy 0.25, 1.0) and G0 for 1 min (0.25): 2,460 s measured for
    # 1,200 allocated, so everything is scaled by 1,200 / 2,460
    assert row == (1200, 1200.0, round((300 + 1200 + 15) * 1200 / 2460, 6))


# ------------------------------------------------------------------------------- the sample world


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):
    world = ROOT / "sample_data"
    db = tmp_path_factory.mktemp("usage-sample") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    info = json.loads((world / "world.json").read_text())
    _build(db)
    return world, db, info


def _build(db: Path) -> None:
    """What `gpuledger build` does for the usage tables: every day with data."""
    with duckdb.connect(str(db)) as con:
        first, last = data_days(con)
        build_allocations(con, first, last)
        build_gpu_usage_hourly(con, first, last)
        build_chargeback(con, first, last)


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def _query(db: Path, sql: str, params=None) -> pl.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql(sql, params=params).pl()


def _clip_to_hours(rows: pl.DataFrame) -> pl.DataFrame:
    """Allocated GPU-seconds per hour from allocations rows, in Python: seconds are whole."""
    per_hour: dict[datetime, int] = {}
    for gpus, start, end in rows.select("gpus", "start_ts", "end_ts").iter_rows():
        cut = start.replace(minute=0, second=0, microsecond=0)
        while cut < end:
            following = cut + timedelta(hours=1)
            lo, hi = max(start, cut), min(end, following)
            seconds = int(hi.timestamp()) - int(lo.timestamp())  # whole-second boundaries
            per_hour[cut] = per_hour.get(cut, 0) + gpus * seconds
            cut = following
    return pl.DataFrame({"hour": list(per_hour), "expected": list(per_hour.values())},
                        schema={"hour": pl.Datetime("us"), "expected": pl.Int64})


def test_allocated_per_hour_is_exact_and_adds_up_everywhere(sample):
    _, db, _ = sample
    rows = _query(db, "SELECT gpus, start_ts, end_ts FROM allocations")
    expected = _clip_to_hours(rows).filter(pl.col("expected") > 0)
    for table in ("gpu_usage_hourly", "node_usage_hourly", "allocation_usage_hourly"):
        ours = _query(db, f"SELECT hour, sum(allocated_gpu_seconds)::BIGINT AS ours "
                          f"FROM {table} GROUP BY hour").filter(pl.col("ours") > 0)
        both = expected.join(ours, on="hour", how="full", coalesce=True)
        wrong = both.filter(pl.col("expected").fill_null(-1) != pl.col("ours").fill_null(-1))
        assert wrong.is_empty(), (table, wrong)
    assert expected["expected"].sum() == _query(
        db, "SELECT sum(gpu_seconds)::BIGINT FROM allocations").item()
    # and each allocations row is split without a second lost or gained
    per_row = _query(db, """
        SELECT a.gpu_seconds, sum(u.allocated_gpu_seconds)::BIGINT AS hours
        FROM allocations AS a
        LEFT JOIN allocation_usage_hourly AS u USING (day, domain, source_key, node, start_ts)
        GROUP BY a.day, a.domain, a.source_key, a.node, a.start_ts, a.gpu_seconds""")
    assert per_row.height > 1000
    assert per_row.filter(pl.col("gpu_seconds") != pl.col("hours")).is_empty()


def test_busy_per_gpu_and_day_matches_truth_within_one_scrape_per_allocation_end(sample):
    world, db, info = sample
    step = info["scrape"]["step_seconds"]
    w0, w1 = _iso(info["window"]["start"]), _iso(info["window"]["end"])
    outage = info["irregularities"]["exporter_outages"][0]
    with duckdb.connect(str(db)) as con:
        create_usage_matches(con, w0.date(), (w1 - timedelta(days=1)).date())
        ours = con.sql("SELECT gpu_uuid, day, sum(busy_seconds) AS ours FROM usage_matched "
                       "GROUP BY ALL").pl()
        nodes = con.sql("SELECT gpu_uuid, node FROM nodes").pl()
    truth = pl.read_csv(world / "truth" / "gpu_busy_seconds.csv", try_parse_dates=True)
    charged = pl.read_csv(world / "truth" / "allocations.csv", try_parse_dates=True).filter(
        pl.col("charged")).with_columns(pl.col("start").clip(w0, w1), pl.col("end").clip(w0, w1),
                                        pl.col("gpu_uuids").str.split(";"))
    held = charged.filter(pl.col("end") > pl.col("start")).explode("gpu_uuids")
    # allocation ends per GPU-day (the window's end is exact, its start is a cut too: Kubernetes
    # intervals there begin at the first kube-state-metrics scrape)
    ends = pl.concat([held.select(gpu_uuid="gpu_uuids", ts=c) for c in ("start", "end")])
    ends = ends.filter(pl.col("ts") < w1).group_by(
        "gpu_uuid", day=pl.col("ts").dt.date()).agg(ends=pl.len())
    doubled = pl.read_csv(world / "truth" / "incidents.csv", try_parse_dates=True).filter(
        pl.col("kind") == "double_scheduled").select(
        gpu_uuid=pl.col("gpu_uuids").str.split(";"), day=pl.col("start").dt.date(),
        overlap=(pl.col("end") - pl.col("start")).dt.total_seconds()).explode("gpu_uuid")
    both = (
        truth.join(ours, on=["gpu_uuid", "day"], how="full", coalesce=True)
        .join(ends, on=["gpu_uuid", "day"], how="left")
        .join(doubled.group_by("gpu_uuid", "day").agg(pl.col("overlap").sum()),
              on=["gpu_uuid", "day"], how="left")
        .join(nodes, on="gpu_uuid", how="left")
        .with_columns(pl.col("busy_seconds", "ours", "ends", "overlap").fill_null(0))
        .with_columns(diff=pl.col("ours") - pl.col("busy_seconds"),
                      bound=pl.col("ends") * step + EPSILON,
                      in_outage=(pl.col("node") == outage["node"])
                      & (pl.col("day") == _iso(outage["start"]).date()))
    )
    assert both.filter(pl.col("node").is_null()).is_empty()  # every GPU is in the inventory
    normal = both.filter(~pl.col("in_outage"))
    # a double-scheduled GPU's busy time is seen by both holders during the overlap
    over = normal.filter((pl.col("diff") > pl.col("bound") + pl.col("overlap"))
                         | (pl.col("diff") < -pl.col("bound")))
    assert over.is_empty(), over
    gap = both.filter(pl.col("in_outage"))
    assert gap.height > 0
    assert (gap["diff"] <= gap["bound"]).all()  # the outage only loses busy time
    assert both.filter(pl.col("overlap") > 0)["diff"].sum() > 0  # the overlap really counts twice
    total = truth["busy_seconds"].sum()
    # edges are a small part of the week: with exact pod boundaries (kube_pod_start_time) an
    # allocation starts before the first 10-minute dcgm sample that names the pod, so each start
    # loses what the GPU did until then (measured 2.57 %; the per-GPU-day bound above is the guard)
    assert both["diff"].abs().sum() / total < 0.03


def test_node_busy_is_what_the_gpus_did_whoever_held_them(sample):
    world, db, info = sample
    outage = info["irregularities"]["exporter_outages"][0]
    truth = pl.read_csv(world / "truth" / "gpu_busy_seconds.csv", try_parse_dates=True).join(
        _query(db, "SELECT gpu_uuid, node FROM nodes"), on="gpu_uuid").group_by(
        "node", "day").agg(pl.col("busy_seconds").sum())
    ours = _query(db, "SELECT node, day, sum(busy_gpu_seconds) AS ours, "
                      "sum(measured_gpu_seconds) AS measured, sum(capacity_gpu_seconds) AS cap "
                      "FROM node_usage_hourly GROUP BY ALL")
    w0, w1 = _iso(info["window"]["start"]).date(), _iso(info["window"]["end"]).date()
    both = ours.filter((pl.col("day") >= w0) & (pl.col("day") < w1)).join(
        truth, on=["node", "day"], how="left").with_columns(
        pl.col("busy_seconds").fill_null(0.0),
        in_outage=(pl.col("node") == outage["node"])
        & (pl.col("day") == _iso(outage["start"]).date()))
    normal = both.filter(~pl.col("in_outage"))
    assert normal.height == 12 * 7 - 1
    assert (normal["ours"] - normal["busy_seconds"]).abs().max() < 1e-3
    assert (normal["measured"] == normal["cap"]).all()  # every GPU scraped all day
    gap = both.filter(pl.col("in_outage"))
    # dcgm-exporter scrapes at multiples of the step: those inside the outage are lost
    step = info["scrape"]["step_seconds"]
    o0, o1 = (int(_iso(outage[k]).timestamp()) for k in ("start", "end"))
    lost = step * len(range(-(-o0 // step) * step, o1, step))
    gpus = _query(db, "SELECT count(*) FROM nodes WHERE node = ?", [outage["node"]]).item()
    assert gap["measured"].cast(pl.Float64).to_list() == [gap["cap"][0] - gpus * lost]
    assert (gap["ours"] <= gap["busy_seconds"] + 1e-3).all()


def test_measured_is_allocated_minus_at_most_one_scrape_per_allocation_end(sample):
    _, db, info = sample
    step = info["scrape"]["step_seconds"]
    w0 = _iso(info["window"]["start"])
    outage = info["irregularities"]["exporter_outages"][0]
    rows = _query(db, """
        SELECT a.day, a.domain, a.source_key, a.node, a.gpus, a.gpu_seconds, a.start_ts,
               a.end_ts, (a.start_ts > a.day::TIMESTAMP)::INT
                 + (a.end_ts < a.day::TIMESTAMP + INTERVAL 1 DAY)::INT AS ends,
               coalesce(sum(u.measured_gpu_seconds), 0)::DOUBLE AS measured
        FROM allocations AS a
        LEFT JOIN allocation_usage_hourly AS u USING (day, domain, source_key, node, start_ts)
        WHERE a.day >= $w0
        GROUP BY ALL""", {"w0": w0.date()})
    in_outage = (pl.col("node") == outage["node"]) & (
        pl.col("start_ts") < _iso(outage["end"])) & (pl.col("end_ts") > _iso(outage["start"]))
    rows = rows.filter(~in_outage).with_columns(gap=pl.col("gpu_seconds") - pl.col("measured"))
    assert (rows["gap"] >= -EPSILON).all()
    assert rows.filter(pl.col("gap") > pl.col("gpus") * step * pl.col("ends") + EPSILON).is_empty()
    for domain in ("slurm", "kubernetes"):
        assert rows.filter(pl.col("domain") == domain)["measured"].sum() > 0


def test_chargeback_busy_idle_measured_follow_the_hourly_pieces(sample):
    _, db, _ = sample
    lines = _query(db, "SELECT * FROM chargeback_periods")
    for column in ("measured_gpu_hours", "busy_gpu_hours", "idle_gpu_hours"):
        assert lines[column].null_count() == 0, column
    assert (lines["busy_gpu_hours"] + lines["idle_gpu_hours"] == lines["measured_gpu_hours"]).all()
    assert (lines["measured_gpu_hours"] <= lines["gpu_hours"]).all()
    assert (lines["busy_gpu_hours"] >= 0).all()
    assert (lines["idle_gpu_hours"] >= 0).all()
    # the day lines carry exactly the hourly table's figures per day, domain and owner
    key = ["day", "domain", "person", "team", "cost_centre"]
    days = lines.filter(pl.col("period_kind") == "day").group_by(
        pl.col("period_start").alias("day"), *key[1:]).agg(
        pl.col("measured_gpu_hours", "busy_gpu_hours").sum().cast(pl.Float64))
    hourly = _query(db, "SELECT day, domain, person, team, cost_centre, "
                        "sum(measured_gpu_seconds) / 3600 AS m, sum(busy_gpu_seconds) / 3600 AS b "
                        "FROM gpu_usage_hourly GROUP BY ALL")
    both = days.join(hourly, on=key, how="full", coalesce=True)
    assert both.height == days.height
    # each line is rounded to 1e-6 GPU-hours
    lines_per_key = lines.filter(pl.col("period_kind") == "day").group_by(
        pl.col("period_start").alias("day"), *key[1:]).len()
    both = both.join(lines_per_key, on=key)
    assert ((both["measured_gpu_hours"] - both["m"]).abs() <= both["len"] * 5e-7 + 1e-9).all()
    assert ((both["busy_gpu_hours"] - both["b"]).abs() <= both["len"] * 5e-7 + 1e-9).all()
    week = lines.filter(pl.col("period_kind") == "week")
    assert float(week["measured_gpu_hours"].sum()) > 0.9 * float(week["gpu_hours"].sum())


def test_invariant_queries_find_nothing_on_the_sample_world(sample):
    _, db, _ = sample
    days = {"first_day": date(2026, 1, 4), "end_day": date(2026, 1, 12)}
    assert _query(db, load_sql("gpu_usage_hourly_check_totals"), days).is_empty()
    assert _query(db, load_sql("gpu_usage_hourly_check_measured"), days).is_empty()


def test_rebuilding_a_day_changes_nothing(sample):
    _, db, _ = sample
    tables = ("allocation_usage_hourly", "gpu_usage_hourly", "node_usage_hourly",
              "chargeback_periods")
    with duckdb.connect(str(db)) as con:
        before = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
        assert build_gpu_usage_hourly(con, date(2026, 1, 7), date(2026, 1, 7)) > 0
        build_chargeback(con, date(2026, 1, 7), date(2026, 1, 7))
        after = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
    for t in tables:
        assert after[t] == before[t], t


def test_slurm_readings_match_when_the_exporter_names_the_node_by_its_fqdn(hand_made):
    """The exporter's FQDN reaches the model canonical (gpuledger/ingest/nodenames.py, on ingest):
    the rule lives there, not in the join."""
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    query = ("SELECT source_key, hour::TIME::VARCHAR, round(measured_gpu_seconds, 6), "
             "round(busy_gpu_seconds, 6) FROM allocation_usage_hourly WHERE domain = 'slurm' "
             "ORDER BY ALL")
    short = hand_made.execute(query).fetchall()
    readings = hand_made.execute("SELECT * FROM gpu_utilization").pl()
    fqdn = readings.with_columns(
        pl.when(pl.col("hpc_job").is_not_null()).then(pl.lit("n1.cluster.example.org"))
        .otherwise(pl.col("node")).alias("node"))
    canonical = NodeNamer().canonical_frame(fqdn)  # what the Kubernetes ingest stores
    hand_made.execute("DELETE FROM gpu_utilization")
    hand_made.register("canonical_readings", canonical.to_arrow())
    hand_made.execute("INSERT INTO gpu_utilization BY NAME SELECT * FROM canonical_readings")
    build_gpu_usage_hourly(hand_made, DAY, DAY)
    assert hand_made.execute(query).fetchall() == short
    assert short[0][2] == 1800.0
