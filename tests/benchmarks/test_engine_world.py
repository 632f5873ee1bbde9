"""The generated estate of benchmarks/engine_world.py: layout, columns, determinism, coherence."""

from datetime import date
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from benchmarks import engine_world
from benchmarks.engine_world import WorldSpec
from models.schema import GPU_UTILIZATION

SMALL = WorldSpec(gpus=32, days=2, start=date(2026, 1, 5), seed=7, gap_every=3)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("world") / "lake"
    return root, engine_world.generate(SMALL, root)


def _rows(root: Path) -> list[tuple]:
    return duckdb.sql(
        f"SELECT * FROM read_parquet('{engine_world.utilization_glob(root)}', "
        "hive_partitioning = true) ORDER BY ALL").fetchall()


def test_samples_are_written_one_file_per_cluster_and_day(world):
    root, meta = world
    files = sorted(p.relative_to(root).as_posix()
                   for p in (root / "gpu_utilization").rglob("*.parquet"))
    assert files == ["gpu_utilization/cluster=bench/day=2026-01-05/part-0.parquet",
                     "gpu_utilization/cluster=bench/day=2026-01-06/part-0.parquet"]
    assert [d["day"] for d in meta["days"]] == ["2026-01-05", "2026-01-06"]
    assert not root.with_name("lake.tmp").exists()


def test_files_hold_every_utilization_column_but_the_partition_column(world):
    root, _ = world
    path = engine_world.partition_file(root, "gpu_utilization", "bench", date(2026, 1, 5))
    names = pq.read_schema(path).names
    assert names == [c for c in GPU_UTILIZATION.column_names if c != "cluster"]
    con = duckdb.connect()
    con.execute(GPU_UTILIZATION.ddl())
    con.execute("INSERT INTO gpu_utilization BY NAME SELECT * EXCLUDE (day) FROM "
                "read_parquet(?, hive_partitioning = true)", [engine_world.utilization_glob(root)])
    assert con.execute("SELECT DISTINCT cluster FROM gpu_utilization").fetchall() == [("bench",)]


def test_the_same_spec_gives_the_same_rows_and_another_seed_others(world, tmp_path):
    root, _ = world
    again = tmp_path / "again"
    engine_world.generate(SMALL, again)
    assert _rows(again) == _rows(root)
    other = tmp_path / "other"
    engine_world.generate(WorldSpec(32, 2, SMALL.start, seed=8, gap_every=3), other)
    assert _rows(other) != _rows(root)


def test_a_gap_is_missing_rows_of_a_whole_node_never_zeros(world):
    root, meta = world
    per_node_day = duckdb.sql(
        f"SELECT node, day, count(*) FROM read_parquet('{engine_world.utilization_glob(root)}',"
        " hive_partitioning = true) GROUP BY ALL").fetchall()
    counts = {n for *_, n in per_node_day}
    assert counts == {8 * 1440, 8 * (1440 - engine_world.GAP_MINUTES)}
    assert meta["utilization_rows"] < SMALL.gpus * 1440 * SMALL.days


def test_a_gpu_has_at_most_one_holder_and_every_holder_an_allocation(world):
    root, _ = world
    glob = engine_world.utilization_glob(root)
    alloc = engine_world.table_file(root, "allocations")
    runs = engine_world.table_file(root, "slurm_runs")
    con = duckdb.connect()
    con.execute(f"CREATE VIEW u AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true)")
    con.execute(f"CREATE VIEW a AS SELECT * FROM read_parquet('{alloc}')")
    con.execute(f"CREATE VIEW r AS SELECT * FROM read_parquet('{runs}')")
    assert con.execute("SELECT count(*) FROM (SELECT gpu_uuid, bucket_start FROM u "
                       "GROUP BY ALL HAVING count(*) > 1)").fetchone()[0] == 0
    orphans = con.execute("""
        SELECT count(*) FROM u
        WHERE (pod_uid IS NOT NULL OR hpc_job IS NOT NULL) AND NOT EXISTS (
            SELECT 1 FROM a LEFT JOIN r ON r.run_key = a.source_key
            WHERE a.node = u.node AND u.bucket_start >= a.start_ts AND u.bucket_start < a.end_ts
              AND (a.source_key = u.pod_uid OR CAST(r.job_id_raw AS VARCHAR) = u.hpc_job))
    """).fetchone()[0]
    assert orphans == 0
    domains = dict(con.execute("SELECT domain, count(*) FROM a GROUP BY domain").fetchall())
    assert set(domains) == {"slurm", "kubernetes"}


def test_allocations_are_cut_at_midnight_and_at_the_window_end(world):
    root, _ = world
    alloc = engine_world.table_file(root, "allocations")
    bad = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{alloc}') WHERE CAST(start_ts AS DATE) <> day "
        "OR end_ts > CAST(day AS TIMESTAMP) + INTERVAL 1 DAY OR end_ts > TIMESTAMP "
        "'2026-01-07' OR gpu_seconds <> gpus * date_diff('second', start_ts, end_ts)"
    ).fetchone()[0]
    assert bad == 0


def test_busy_daily_sums_what_the_samples_say(world):
    root, _ = world
    glob = engine_world.utilization_glob(root)
    busy = engine_world.table_file(root, "gpu_busy_daily")
    samples, daily = duckdb.sql(
        f"SELECT (SELECT sum(busy_fraction * samples * 30) FROM read_parquet('{glob}')), "
        f"(SELECT sum(busy_seconds) FROM read_parquet('{busy}'))").fetchone()
    assert daily == pytest.approx(samples, rel=1e-12)


def test_the_lanes_are_busy_idle_and_some_allocations_idle_all_along(tmp_path):
    meta = engine_world.generate(WorldSpec(gpus=400, days=1, idle_job_every=10), tmp_path / "w")
    glob = engine_world.utilization_glob(tmp_path / "w")
    held, busy, idle = duckdb.sql(
        f"SELECT count(*) FILTER (WHERE attribution IS NOT NULL), "
        "count(*) FILTER (WHERE busy_fraction >= 0.3), "
        "count(*) FILTER (WHERE attribution IS NOT NULL AND busy_fraction < 0.05) "
        f"FROM read_parquet('{glob}')").fetchone()
    assert 0.5 < held / meta["utilization_rows"] < 0.8
    assert busy > idle > 0


@pytest.mark.parametrize(("spec", "message"), [
    (WorldSpec(gpus=12, days=1), "expected a positive multiple of 8 GPUs, found 12"),
    (WorldSpec(gpus=8, days=0), "expected one day or more, found 0"),
    (WorldSpec(gpus=8, days=1, slot_minutes=300), "expected slots of 420 minutes or more"),
])
def test_a_bad_spec_is_refused_before_anything_is_written(spec, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        engine_world.generate(spec, tmp_path / "w")
    assert not (tmp_path / "w").exists()
