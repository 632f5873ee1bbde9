"""The arithmetic of benchmarks/engine_scale.py and its DuckDB run on a small generated world."""

import json
import math
import os
import subprocess
import sys
from argparse import Namespace
from datetime import UTC, date, datetime

import duckdb
import pytest

from benchmarks import engine_scale, engine_world
from benchmarks.engine_world import WorldSpec


@pytest.fixture(scope="module")
def duckdb_run(tmp_path_factory) -> tuple[dict, dict, object]:
    base = tmp_path_factory.mktemp("scale")
    root, work = base / "lake", base / "work"
    work.mkdir()
    meta = engine_world.generate(WorldSpec(gpus=48, days=2, start=date(2026, 1, 5), seed=3,
                                           idle_job_every=4, gap_every=2), root)
    config = json.dumps({"memory_limit": "2GB"})
    engine_scale._child("load", str(root), str(work), config)  # the ledger, as ingest leaves it
    engine_scale._child("duckdb", str(root), str(work), config)
    loaded = json.loads((work / "result-load.json").read_text())
    return {**loaded, **json.loads((work / "result-duckdb.json").read_text())}, meta, root


def test_the_duckdb_run_loads_every_sample_and_measures_every_held_minute(duckdb_run):
    out, meta, root = duckdb_run
    glob = engine_world.utilization_glob(root)
    alloc = engine_world.table_file(root, "allocations")
    allocated, held, busy, rows = duckdb.sql(
        f"SELECT (SELECT sum(gpu_seconds) FROM read_parquet('{alloc}')), "
        f"count(*) FILTER (WHERE attribution IS NOT NULL), "
        f"sum(busy_fraction * 60) FILTER (WHERE attribution IS NOT NULL), count(*) "
        f"FROM read_parquet('{glob}')").fetchone()
    t = out["totals"]
    assert out["rows"] == rows == meta["utilization_rows"]
    assert t["allocated_gpu_s"] == allocated
    assert t["measured_gpu_s"] == 60 * held  # a 2-sample bucket at 30 s stands for 60 s
    assert t["busy_gpu_s"] == pytest.approx(busy, rel=1e-9)
    assert t["node_measured_gpu_s"] == 60 * rows
    assert out["load"] > 0
    assert out["usage"] > 0
    assert out["incidents"] > 0


def test_the_idle_allocations_are_found_and_nothing_is_double_scheduled(duckdb_run):
    out, _, _ = duckdb_run
    assert out["by_kind"]["idle_allocation"] > 0
    assert out["by_kind"]["double_scheduled"] == 0
    assert out["totals"]["incidents_idle_allocation"] == out["by_kind"]["idle_allocation"]


def test_exact_totals_must_agree_to_the_digit_and_decimal_ones_closely():
    a = {"allocated_gpu_s": 100.0, "busy_gpu_s": 1e9, "incidents_idle_allocation": 3}
    b = {"allocated_gpu_s": 101.0, "busy_gpu_s": 1e9 + 0.5, "incidents_idle_allocation": 3}
    same = {name: ok for name, _, _, ok in engine_scale.compare(a, b)}
    assert same == {"allocated_gpu_s": False, "busy_gpu_s": True,
                    "incidents_idle_allocation": True}
    b["busy_gpu_s"] = 1e9 + 5
    b["incidents_partial_gang"] = 1
    same = {name: ok for name, _, _, ok in engine_scale.compare(a, b)}
    assert not same["busy_gpu_s"]
    assert not same["incidents_partial_gang"]


def test_growth_is_the_time_ratio_over_the_row_ratio():
    one, seven = {"usage": 2.0, "rows": 10}, {"usage": 28.0, "rows": 70}
    assert engine_scale.growth(one, seven, "usage") == pytest.approx(2.0)


def test_the_projection_scales_the_measured_rate_by_rows_and_cores():
    world = {"spec": {"gpus": 8, "days": 1}, "utilization_rows": 11_520,
             "utilization_bytes": 23_040}
    run = {"usage": 1.0, "incidents": 1.0, "rows": 11_520}
    p = engine_scale.projection(world, run, gpus=100_000)
    assert p["rows_day"] == pytest.approx(144_000_000)
    assert p["bytes_day"] == pytest.approx(288_000_000)
    # 2 s on 2 threads for 11,520 rows -> 4 core-seconds per 11,520 rows
    assert p["core_s_day"] == pytest.approx(50_000)
    assert p["s_day_16"] == pytest.approx(3_125)
    assert "ledger_bytes_day" not in p
    steep = engine_scale.projection(world, {**run, "work_bytes": 11_520 * 10}, 1.5,
                                    gpus=100_000)
    assert steep["core_s_day"] == pytest.approx(2 * 12_500 ** 1.5 * 2)
    assert steep["ledger_bytes_day"] == pytest.approx(1_440_000_000)


def test_the_exponent_is_log_time_ratio_over_log_row_ratio():
    small = {"usage": 1.0, "incidents": 1.0, "rows": 10}
    large = {"usage": 50.0, "incidents": 50.0, "rows": 100}
    assert engine_scale.exponent(small, large) == pytest.approx(math.log10(50))


def test_jvm_peaks_reads_live_processes_and_skips_gone_ones():
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    peaks = engine_scale.jvm_peaks({"me": os.getpid(), "gone": int(gone.stdout)})
    assert set(peaks) == {"me"}
    assert peaks["me"] > 1 << 20


def test_a_disagreement_between_engines_fails_the_report():
    world = {"spec": {"gpus": 8, "days": 1}, "utilization_rows": 11_520,
             "utilization_bytes": 23_040, "seconds": 1.0, "rows_per_s": 11_520}
    run = {"gpus": 8, "days": 1, "rows": 11_520, "load": 1.0, "usage": 1.0, "incidents": 1.0,
           "cpu": 2.0, "rss": 1 << 28, "load_rss": 1 << 27}
    duck = {**run, "engine": "duckdb", "totals": {"allocated_gpu_s": 5.0}}
    spark = {**run, "engine": "spark", "totals": {"allocated_gpu_s": 6.0},
             "jvm_peaks": {"driver": 1 << 29}}
    args = Namespace(gpus=[8], days=[1], engines=["duckdb", "spark"], seed=1,
                     memory_limit="1GB", worker_memory="1g", executor_memory="1g",
                     driver_memory="1g", shuffle_partitions=2)
    started = datetime(2026, 12, 2, tzinfo=UTC)
    text, ok = engine_scale.report({(8, 1): world}, [duck, spark], args, started)
    assert not ok
    assert "**FAIL**" in text
    assert "| allocated_gpu_s | 5.000000 | 6.000000 | NO |" in text
    spark["totals"] = {"allocated_gpu_s": 5.0}
    text, ok = engine_scale.report({(8, 1): world}, [duck, spark], args, started)
    assert ok
    assert "**PASS**" in text


def test_a_run_past_its_timeout_is_stopped_and_reported_unfinished(duckdb_run, monkeypatch,
                                                                    tmp_path):
    _, meta, root = duckdb_run
    monkeypatch.setattr(engine_scale, "OUT", tmp_path)
    run = engine_scale.measure("duckdb", root, {"memory_limit": "1GB"}, timeout=0.05)
    assert run["timed_out"] == 0.05
    assert "usage" not in run
    args = Namespace(gpus=[48], days=[2], engines=["duckdb"], seed=3, memory_limit="1GB",
                     worker_memory="1g", executor_memory="1g", driver_memory="1g",
                     shuffle_partitions=2)
    finished = {"gpus": 48, "days": 2, "engine": "duckdb", "rows": meta["utilization_rows"],
                "load": 1.0, "usage": 1.0, "incidents": 1.0, "cpu": 1.0, "rss": 1 << 28,
                "load_rss": 1 << 27}
    text, ok = engine_scale.report({(48, 2): meta}, [finished, {"gpus": 48, "days": 2, **run}],
                                   args, datetime(2026, 12, 2, tzinfo=UTC))
    assert "- 48 GPUs x 2 d, duckdb: stopped after 0 s, unfinished" in text
    assert "**INCOMPLETE" in text
    assert not ok


def test_time_growing_faster_than_the_days_fails_the_report():
    def world(days: int) -> dict:
        return {"spec": {"gpus": 8, "days": days}, "utilization_rows": 11_520 * days,
                "utilization_bytes": 23_040 * days, "seconds": 1.0, "rows_per_s": 11_520}

    def run(days: int, usage: float, incidents: float) -> dict:
        return {"gpus": 8, "days": days, "engine": "duckdb", "rows": 11_520 * days,
                "load": 1.0, "usage": usage, "incidents": incidents, "cpu": 1.0,
                "rss": 1 << 28, "load_rss": 1 << 27, "totals": {}}

    args = Namespace(gpus=[8], days=[1, 7], engines=["duckdb"], seed=1, memory_limit="1GB",
                     worker_memory="1g", executor_memory="1g", driver_memory="1g",
                     shuffle_partitions=2)
    started = datetime(2026, 12, 2, tzinfo=UTC)
    worlds = {(8, 1): world(1), (8, 7): world(7)}
    text, ok = engine_scale.report(worlds, [run(1, 1.0, 1.0), run(7, 7.7, 10.0)], args, started)
    assert ok, text
    assert "| duckdb usage: 1 -> 7 days at 8 GPUs near-linear (growth <= 1.5) | 1.10 | PASS |" \
        in text
    text, ok = engine_scale.report(worlds, [run(1, 1.0, 1.0), run(7, 7.7, 14.0)], args, started)
    assert not ok
    assert "| duckdb incidents: 1 -> 7 days at 8 GPUs near-linear (growth <= 1.5) | 2.00 | FAIL |" \
        in text
