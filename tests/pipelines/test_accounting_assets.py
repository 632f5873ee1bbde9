"""The Dagster asset gpu_usage_hourly and its checks on a small simulated world.

The world is loaded with the CLI and its ledger built as `gpuledger build` does; the asset then
rebuilds one day partition.
The checks pass on what the model writes and fail, returning the offending hours, when the model
is made to write a wrong row; a double_scheduled incident excuses an over-allocated node-hour.
"""

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.cli import main
from models import build
from models.build import build_allocations, build_gpu_usage_hourly, data_days
from pipelines.defs.resources import LedgerResource
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import SAMPLE_SITE, load_definitions

DAY = "2026-01-06"  # the simulated world's second day
ASSET = dg.AssetKey("gpu_usage_hourly")
CHECKS = ("hourly_allocated_totals_agree", "hourly_busy_within_measured_within_allocated",
          "hourly_node_capacity_not_exceeded")
TABLES = ("allocation_usage_hourly", "gpu_usage_hourly", "node_usage_hourly")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    world = tmp_path_factory.mktemp("accounting-world")
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=60), world)
    db = tmp_path_factory.mktemp("accounting-ledger") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    with duckdb.connect(str(db)) as con:  # the ledger `gpuledger build` makes
        first, last = data_days(con)
        build_allocations(con, first, last)
        build_gpu_usage_hourly(con, first, last)
    return db


@pytest.fixture
def ledger(built: Path, tmp_path: Path) -> Path:
    """A copy of the built ledger each test may spoil."""
    copy = tmp_path / "ledger.duckdb"
    shutil.copyfile(built, copy)
    return copy


def _run(db: Path, selection: dg.AssetSelection) -> dg.ExecuteInProcessResult:
    defs = load_definitions(SAMPLE_SITE)  # the model assets read only the ledger
    return dg.materialize(
        [*defs.assets, *(defs.asset_checks or [])],
        resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=selection,
        partition_key=DAY,
        raise_on_error=False,
    )


def _corrupt(monkeypatch: pytest.MonkeyPatch, model: str, wrap: str) -> None:
    """Make the build write a deliberately wrong ``model``: ``wrap`` is a SELECT over ``model``
    (as the relation ``good``). The checks keep reading the tables with the right SQL."""
    original = build.load_sql

    def load_sql(name: str) -> str:
        text = original(name)
        return f"WITH good AS ({text}) {wrap}" if name == model else text

    monkeypatch.setattr(build, "load_sql", load_sql)


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _hourly_checks(db: Path) -> dict[str, dg.AssetCheckEvaluation]:
    """Materialize gpu_usage_hourly for DAY again: its checks' evaluations by name."""
    return _evaluations(_run(db, dg.AssetSelection.assets(ASSET)))


def _dump(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def test_the_asset_rebuilds_its_day_and_its_checks_pass(ledger: Path):
    before = _dump(ledger)
    result = _run(ledger, dg.AssetSelection.assets(ASSET))
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = event.event_specific_data.materialization.metadata
    with duckdb.connect(str(ledger), read_only=True) as con:
        allocated = con.execute("SELECT sum(gpu_seconds) FROM allocations WHERE day = ?",
                                [DAY]).fetchone()[0]
        nodes = con.execute("SELECT count(DISTINCT node) FROM nodes").fetchone()[0]
    assert allocated > 0
    assert meta["allocated_gpu_hours"].value == round(allocated / 3600, 3)
    assert meta["node_hour_rows"].value == 24 * nodes
    assert 0 < meta["busy_gpu_hours"].value < meta["measured_gpu_hours"].value
    assert meta["measured_gpu_hours"].value <= meta["allocated_gpu_hours"].value
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == dict.fromkeys(CHECKS, True)
    assert _dump(ledger) == before  # the same day built the same way again


def test_totals_check_fails_on_a_corrupted_row_and_names_its_hour(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
):
    _corrupt(monkeypatch, "gpu_usage_hourly",
             "SELECT * REPLACE (allocated_gpu_seconds + CASE WHEN hour = TIMESTAMP "
             f"'{DAY} 13:00:00' THEN 7 ELSE 0 END AS allocated_gpu_seconds) FROM good")
    evaluation = _hourly_checks(ledger)
    totals = evaluation["hourly_allocated_totals_agree"]
    assert totals.passed is False
    assert totals.severity == dg.AssetCheckSeverity.ERROR
    assert totals.metadata["offending_hours"].value == 1
    assert f"{DAY} 13:00:00" in totals.metadata["sample"].value
    assert evaluation["hourly_node_capacity_not_exceeded"].passed
    monkeypatch.undo()
    # a re-run with the right model repairs it
    assert _hourly_checks(ledger)["hourly_allocated_totals_agree"].passed


def test_measured_check_fails_when_busy_exceeds_measured(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
):
    _corrupt(monkeypatch, "gpu_usage_hourly",
             "SELECT * REPLACE (CASE WHEN hour = TIMESTAMP "
             f"'{DAY} 09:00:00' THEN measured_gpu_seconds + 1 ELSE busy_gpu_seconds END "
             "AS busy_gpu_seconds) FROM good")
    check = _hourly_checks(ledger)["hourly_busy_within_measured_within_allocated"]
    assert check.passed is False
    with duckdb.connect(str(ledger), read_only=True) as con:
        rows = con.execute("SELECT count(*) FROM gpu_usage_hourly WHERE hour = ?",
                           [f"{DAY} 09:00:00"]).fetchone()[0]
    assert check.metadata["offending_rows"].value == rows > 0


def test_capacity_check_lists_over_allocated_node_hours_unless_an_incident_covers_them(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
):
    with duckdb.connect(str(ledger), read_only=True) as con:
        node, capacity = con.execute(
            "SELECT node, max(gpu_count) * 3600 FROM nodes GROUP BY node ORDER BY node LIMIT 1"
        ).fetchone()
    hour = f"{DAY} 05:00:00"
    _corrupt(monkeypatch, "node_usage_hourly",
             "SELECT * REPLACE (CASE WHEN hour = TIMESTAMP "
             f"'{hour}' AND node = '{node}' THEN 2 * capacity_gpu_seconds "
             "ELSE allocated_gpu_seconds END AS allocated_gpu_seconds) FROM good")
    check = _hourly_checks(ledger)["hourly_node_capacity_not_exceeded"]
    assert check.passed is False
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["offending_node_hours"].value == 1
    assert check.metadata["excess_gpu_hours"].value == round(capacity / 3600, 3)
    assert f"{hour} | {node}" in check.metadata["sample"].value
    # the detectors flagged a double-scheduled overlap there: the node-hour is excused
    with duckdb.connect(str(ledger)) as con:
        con.execute("INSERT INTO incidents BY NAME SELECT 'double_scheduled' AS kind, "
                    "? AS node, ?::TIMESTAMP + INTERVAL 10 MINUTE AS start_ts, "
                    "?::TIMESTAMP + INTERVAL 20 MINUTE AS end_ts", [node, hour, hour])
    check = _hourly_checks(ledger)["hourly_node_capacity_not_exceeded"]
    assert check.passed, check.metadata["sample"].value
