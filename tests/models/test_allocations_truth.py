"""The ledger against the simulator's ground truth: GPU-seconds per (identity, day, domain)."""

import json
from pathlib import Path

import polars as pl
import pytest

from gpuledger.cli import main
from models import load_sql
from models.runner import read_snapshot
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

ROOT = Path(__file__).resolve().parents[2]
KEY = ["day", "domain", "person", "team", "cost_centre"]


def _ours(db: Path) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.sql(
            "SELECT day, domain, person, team, cost_centre, sum(gpu_seconds)::BIGINT AS ours "
            "FROM allocations GROUP BY ALL"
        ).pl()


def _compare(world: Path, db: Path, domain: str) -> pl.DataFrame:
    truth = pl.read_csv(world / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True)
    truth = truth.filter(pl.col("domain") == domain)
    ours = _ours(db).filter(pl.col("domain") == domain)
    joined = truth.join(ours, on=KEY, how="full", coalesce=True)
    return joined.filter(pl.col("gpu_seconds").fill_null(0) != pl.col("ours").fill_null(0))


@pytest.fixture(scope="module")
def fresh_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("seed11")
    simulate(SimConfig(seed=11, days=3, nodes=NodeCounts(hpc=4, k8s=2, shared=2),
                       metrics=False), out)
    return out


@pytest.mark.parametrize("world_name", ["sample", "seed11"])
def test_slurm_gpu_seconds_per_identity_and_day_equal_truth(
    world_name: str, fresh_world: Path, tmp_path: Path
):
    world = ROOT / "sample_data" if world_name == "sample" else fresh_world
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    window = json.loads((world / "world.json").read_text())["window"]
    assert main(["--db", str(db), "build", "--start", window["start"],
                 "--end", window["end"]]) == 0
    differences = _compare(world, db, "slurm")
    assert differences.is_empty(), differences
    with read_snapshot(db) as con:  # the world's sreport agrees with our runs to the second
        (start, end), = con.execute("SELECT DISTINCT report_start, report_end "
                                    "FROM sreport_account_usage").fetchall()
        rec = con.sql(load_sql("slurm_sreport_reconciliation"),
                      params={"window_start": start, "window_end": end}).pl()
    assert rec.height > 3
    assert rec.filter(pl.col("difference") != 0).is_empty(), rec
    assert _ours(db).filter(pl.col("domain") == "slurm")["ours"].sum() > 0


def test_plain_dump_in_local_time_gives_the_same_runs(fresh_world: Path, tmp_path: Path):
    tz = json.loads((fresh_world / "world.json").read_text())["sacct_timezone"]
    epoch_db, plain_db = tmp_path / "epoch.duckdb", tmp_path / "plain.duckdb"
    sacct = fresh_world / "sacct"
    assert main(["--db", str(epoch_db), "import-sacct", str(sacct / "sacct-unitsep-epoch.txt"),
                 "--as-of", "2026-01-08T00:00:00"]) == 0
    assert main(["--db", str(plain_db), "import-sacct", str(sacct / "sacct-P.txt"),
                 "--timezone", tz, "--as-of", "2026-01-08T00:00:00"]) == 0
    query = ("SELECT * EXCLUDE (source_file, line_no) FROM slurm_runs ORDER BY run_key")
    with read_snapshot(epoch_db) as a, read_snapshot(plain_db) as b:
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        names = [r[0] for r in b.execute("SELECT job_name FROM slurm_runs WHERE job_name "
                                         "LIKE '%|%'").fetchall()]
        rejects = b.execute("SELECT count(*) FROM rejects").fetchone()[0]
    assert names, "the world plants job names with '|'"
    assert rejects == 0
