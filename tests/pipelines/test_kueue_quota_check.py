"""The Dagster check of the kueue_quota asset: Kueue never admits more than nominal quota plus
borrowing limit, so queue-hours above it are returned (two replicas' gauges summed, or a stale
quota gauge). It passes on a simulated world and names the hour a corrupted build wrote."""

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.cli import main
from models import kueue_quota
from pipelines.defs.resources import LedgerResource
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import SAMPLE_SITE, load_definitions

DAY = "2026-01-06"
CHECK = "kueue_usage_within_borrowing_limit"
HOUR = f"{DAY} 10:00:00"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("kueue-quota-check")
    world, db = tmp / "world", tmp / "ledger.duckdb"
    simulate(SimConfig(seed=11, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=300), world)
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db


@pytest.fixture
def ledger(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ledger.duckdb"
    shutil.copyfile(built, copy)
    return copy


def _check(db: Path) -> dg.AssetCheckEvaluation:
    defs = load_definitions(SAMPLE_SITE)
    result = dg.materialize(
        [*defs.assets, *(defs.asset_checks or [])],
        resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=dg.AssetSelection.assets("kueue_quota"),
        partition_key=DAY, raise_on_error=False)
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}[CHECK]


def test_the_check_passes_on_what_kueue_admitted(ledger: Path):
    with duckdb.connect(str(ledger), read_only=True) as con:
        known = con.execute("SELECT count(*) FROM kueue_quota_hourly WHERE day = ? AND known "
                            "AND scope = 'queue'", [DAY]).fetchone()[0]
    assert known > 0
    evaluation = _check(ledger)
    assert evaluation.passed is True
    assert evaluation.metadata["queue_hours"].value == 0


def test_usage_above_nominal_plus_borrowing_limit_is_returned_with_its_hour(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
):
    original = kueue_quota.load_sql

    def load_sql(name: str) -> str:
        text = original(name)
        if name != "kueue_quota_hourly":
            return text
        # one hour of every queue: a borrowing limit of 1 GPU and usage 2 GPU-hours above nominal
        return (f"WITH good AS ({text}) SELECT * REPLACE ("
                f"CASE WHEN hour_start = TIMESTAMP '{HOUR}' AND scope = 'queue' AND known "
                "THEN 1.0 ELSE borrowing_limit_gpus END AS borrowing_limit_gpus, "
                f"CASE WHEN hour_start = TIMESTAMP '{HOUR}' AND scope = 'queue' AND known "
                "THEN nominal_gpu_hours + 2 * covered_seconds / 3600 ELSE usage_gpu_hours END "
                "AS usage_gpu_hours) FROM good")

    monkeypatch.setattr(kueue_quota, "load_sql", load_sql)
    evaluation = _check(ledger)
    assert evaluation.passed is False
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    with duckdb.connect(str(ledger), read_only=True) as con:
        queues = con.execute("SELECT count(*) FROM kueue_quota_hourly WHERE hour_start = ? "
                             "AND scope = 'queue' AND known", [HOUR]).fetchone()[0]
    assert queues > 0
    assert evaluation.metadata["queue_hours"].value == queues
    assert HOUR in evaluation.metadata["sample"].value
