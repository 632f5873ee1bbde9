"""The daily run rebuilds a day as one unit: ledger, usage, invoice lines and incidents agree in
every published snapshot; a run that fails midway is never published (issue #13, item 3)."""

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.cli import main
from models.runner import LedgerIncomplete, snapshot_path
from pipelines.defs.resources import LedgerResource
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER as INVARIANT
from tests.helpers import SAMPLE_SITE, load_definitions

DAY = "2026-01-06"
MODEL_STEPS = ("allocations", "gpu_usage_hourly", "open_invoice_lines", "incidents")


@pytest.fixture
def loaded(tmp_path: Path) -> Path:
    world = tmp_path / "world"
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=60), world)
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    return db


def run(db: Path, *keys: str) -> dg.ExecuteInProcessResult:
    defs = load_definitions(SAMPLE_SITE)  # the model assets read only the ledger
    return dg.materialize(
        [*defs.assets, *(defs.asset_checks or [])],
        resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=dg.AssetSelection.assets(*keys),
        partition_key=DAY,
        raise_on_error=False,
    )


def publish(db: Path) -> None:
    ledger = LedgerResource(database=str(db))
    with ledger.ledger() as con:
        ledger.publish(con)


def published(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(snapshot_path(db)), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_after_the_daily_model_steps_invoices_equal_the_ledger(loaded: Path):
    assert run(loaded, *MODEL_STEPS).success
    publish(loaded)
    assert published(loaded, "SELECT count(*) FROM allocations WHERE day = DATE '2026-01-06'"
                     )[0][0] > 0
    assert published(loaded, INVARIANT) == []


def test_a_run_that_stops_before_the_incidents_is_not_published(loaded: Path):
    assert run(loaded, *MODEL_STEPS).success
    publish(loaded)
    before = snapshot_path(loaded).read_bytes()
    assert run(loaded, "allocations", "gpu_usage_hourly").success  # stops there
    with pytest.raises(LedgerIncomplete, match=r"build of 2026-01-06 \.\. 2026-01-06"):
        publish(loaded)
    assert snapshot_path(loaded).read_bytes() == before
    assert run(loaded, *MODEL_STEPS).success  # the next daily run repairs the day
    publish(loaded)
    assert published(loaded, INVARIANT) == []
