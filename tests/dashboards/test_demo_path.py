"""What `make demo` does, on the committed sample world: materialize every Dagster asset, then
the dashboard shows the sample world's numbers (equal to the ledger and to the world's truth)."""

import json
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from gpuledger.partitions import window_days
from models.runner import read_snapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
APP = str(ROOT / "dashboards" / "app.py")


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("dagster_home")
    db = tmp_path_factory.mktemp("data") / "gpuledger.duckdb"
    patch = pytest.MonkeyPatch()
    patch.setenv("DAGSTER_HOME", str(home))
    patch.setenv("GPULEDGER_DB", str(db))
    patch.setenv("GPULEDGER_SAMPLE_DATA", str(SAMPLE))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    from pipelines.materialize import materialize_all

    world = json.loads((SAMPLE / "world.json").read_text(encoding="utf-8"))
    keys = [d.isoformat() for d in window_days(world)]
    assert materialize_all(keys)
    yield db
    patch.undo()


def test_every_asset_materialized_into_the_published_ledger(demo_ledger: Path):
    with read_snapshot(demo_ledger) as con:
        days = con.execute("SELECT count(DISTINCT day) FROM allocations").fetchone()[0]
        runs = con.execute("SELECT count(*) FROM slurm_runs").fetchone()[0]
        gpus = con.execute("SELECT count(*) FROM nodes").fetchone()[0]
        weekly = con.execute(
            "SELECT count(*), sum(amount) FROM chargeback WHERE period_kind = 'week'"
        ).fetchone()
        domains = dict(con.execute(
            "SELECT domain, sum(gpu_seconds) FROM allocations GROUP BY domain").fetchall())
    assert days == 7
    assert runs > 500
    assert gpus == 88
    assert weekly[0] > 0
    assert weekly[1] > 0
    truth = pl.read_csv(SAMPLE / "truth" / "gpu_seconds_daily.csv")
    k8s_truth = truth.filter(pl.col("domain") == "kubernetes")["gpu_seconds"].sum()
    # Kubernetes time is measured on 600 s samples: within 1 % of the truth in this world
    assert abs(domains["kubernetes"] - k8s_truth) / k8s_truth < 0.01


def test_dashboard_shows_the_sample_worlds_numbers(demo_ledger: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPULEDGER_DB", str(demo_ledger))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    truth = pl.read_csv(SAMPLE / "truth" / "gpu_seconds_daily.csv")
    slurm_hours = truth.filter(pl.col("domain") == "slurm")["gpu_seconds"].sum() / 3600
    assert shown["Slurm GPU-hours"] == f"{slurm_hours:,.1f}"
    assert shown["GPUs"] == "88"
