"""Daily rollups (gpu_usage_daily, node_usage_daily) of a small simulated world with GPU metrics,
built by `gpuledger build`.

Each rollup must equal its hourly source summed per day (recomputed here with its own GROUP BY),
and the node rollup's allocated and capacity GPU-seconds must equal figures taken from other
tables altogether: the ledger's allocations per day, and the inventory's GPUs x 86,400 s. A
rebuild of one day changes nothing, in that day or any other.
"""

from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from gpuledger.cli import main
from models.build import build_gpu_usage_hourly, data_days
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

NODE_SUMS = ("capacity_gpu_seconds", "allocated_gpu_seconds", "slurm_gpu_seconds",
             "kubernetes_gpu_seconds", "unallocated_gpu_seconds", "measured_gpu_seconds",
             "busy_gpu_seconds")
NODE_KEYS = ("day", "cluster", "node", "pool", "gpu_model")
GPU_SUMS = ("allocated_gpu_seconds", "measured_gpu_seconds", "busy_gpu_seconds",
            "idle_gpu_seconds")
GPU_KEYS = ("day", "domain", "cluster", "pool", "gpu_model", "person", "team", "cost_centre")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("usage-daily")
    world, db = tmp / "world", tmp / "ledger.duckdb"
    # two days, both schedulers and a shared pool, dcgm samples every 5 minutes
    simulate(SimConfig(seed=5, days=2, nodes=NodeCounts(hpc=2, k8s=2, shared=1),
                       step_seconds=300), world)
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db


def frame(db: Path, sql: str, params: list | None = None) -> pl.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).pl()


def summed(db: Path, table: str, keys: tuple[str, ...], sums: tuple[str, ...]) -> pl.DataFrame:
    cols = ", ".join(keys)
    totals = ", ".join(f"sum({c}) AS {c}" for c in sums)
    return frame(db, f"SELECT {cols}, {totals} FROM {table} GROUP BY ALL ORDER BY ALL")


def rollup(db: Path, table: str, keys: tuple[str, ...], sums: tuple[str, ...]) -> pl.DataFrame:
    return frame(db, f"SELECT {', '.join(keys + sums)} FROM {table} ORDER BY ALL")


def test_node_usage_daily_is_node_usage_hourly_summed_per_day(ledger: Path):
    daily = rollup(ledger, "node_usage_daily", NODE_KEYS, NODE_SUMS)
    assert daily.height > 0
    expected = summed(ledger, "node_usage_hourly", NODE_KEYS, NODE_SUMS)
    assert_frame_equal(daily, expected, check_dtypes=False)
    assert daily["busy_gpu_seconds"].cast(pl.Float64).sum() > 0


def test_gpu_usage_daily_is_gpu_usage_hourly_summed_per_day(ledger: Path):
    daily = rollup(ledger, "gpu_usage_daily", GPU_KEYS, GPU_SUMS)
    assert daily.height > 0
    expected = summed(ledger, "gpu_usage_hourly", GPU_KEYS, GPU_SUMS)
    assert_frame_equal(daily, expected, check_dtypes=False)


def test_node_usage_daily_equals_the_ledger_and_the_inventory(ledger: Path):
    per_day = frame(ledger, "SELECT day, sum(allocated_gpu_seconds)::BIGINT AS allocated, "
                    "count(DISTINCT node) AS nodes, sum(capacity_gpu_seconds)::BIGINT AS capacity "
                    "FROM node_usage_daily GROUP BY day ORDER BY day")
    allocations = frame(ledger, "SELECT day, sum(gpu_seconds)::BIGINT AS allocated "
                        "FROM allocations GROUP BY day ORDER BY day")
    inventory_gpus = frame(ledger, "SELECT count(*) AS gpus FROM nodes").item()
    joined = allocations.join(per_day, on="day", how="left", suffix="_daily")
    assert joined["allocated_daily"].to_list() == joined["allocated"].to_list()
    # every inventory GPU is capacity all day long, allocated or not
    assert set(per_day["capacity"].to_list()) == {inventory_gpus * 86_400}


def test_rebuilding_one_day_changes_nothing(ledger: Path, tmp_path: Path):
    copy = tmp_path / "rebuilt.duckdb"
    copy.write_bytes(ledger.read_bytes())
    before = {t: rollup(copy, t, k, s) for t, k, s in
              (("node_usage_daily", NODE_KEYS, NODE_SUMS), ("gpu_usage_daily", GPU_KEYS, GPU_SUMS))}
    with duckdb.connect(str(copy)) as con:
        first, last = data_days(con)
        build_gpu_usage_hourly(con, last, last)
        build_gpu_usage_hourly(con, first, first)
    for table, old in before.items():
        keys, sums = (NODE_KEYS, NODE_SUMS) if table == "node_usage_daily" else (GPU_KEYS,
                                                                                 GPU_SUMS)
        assert_frame_equal(rollup(copy, table, keys, sums), old)
