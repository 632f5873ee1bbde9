"""Shared GPUs (MIG, time-slicing, shards; docs/shared-gpus.md) in the FOCUS file: the simulator's
--shared-gpus world, through `gpuledger load` and `build`. Rows carry the physical share charged
(or instance-hours for a MIG profile the rate card prices) and still add up to every invoice
line; the file passes the FOCUS 1.2 validator."""

import csv
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.focus import ROWS_OFF_INVOICE
from simulator import SimConfig, simulate
from tests.export.conftest import export
from tests.export.validator_run import validate


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("focus_shared") / "world"
    simulate(SimConfig(seed=9162, days=2, step_seconds=300, shared_gpus=True), out)
    db = out.parent / "ledger.duckdb"
    site = out / "gpuledger.toml"
    assert main(["--db", str(db), "--config", str(site), "load"]) == 0
    assert main(["--db", str(db), "--config", str(site), "build"]) == 0
    return db


def test_shared_gpu_rows_add_up_to_their_lines_and_pass_the_validator(shared_db: Path,
                                                                      tmp_path: Path):
    with duckdb.connect(str(shared_db), read_only=True) as con:
        weeks = [w for (w,) in con.execute(
            "SELECT DISTINCT period FROM chargeback ORDER BY 1").fetchall()]
        for week in weeks:
            path = export(con, week, tmp_path / f"{week}.csv").files[0]
            assert con.execute(ROWS_OFF_INVOICE, {"period": week}).fetchall() == []
            lines = dict(con.execute(
                "SELECT concat_ws('|', period, cost_centre, team, person, domain, gpu_model, "
                "coalesce(CAST(rate_valid_from AS VARCHAR), ''), "
                "coalesce(CAST(rate_per_gpu_hour AS VARCHAR), ''), currency), "
                "coalesce(amount, 0) FROM chargeback WHERE period = ?", [week]).fetchall())
            with path.open(newline="") as fh:
                rows = list(csv.DictReader(fh))
            cost: dict[str, Decimal] = defaultdict(Decimal)
            for r in rows:
                cost[r["x_InvoiceLineKey"]] += Decimal(r["BilledCost"])
            assert {k: v.quantize(Decimal("0.01"), ROUND_HALF_UP) for k, v in cost.items()} \
                == lines
    sharing = {r["x_Sharing"] for r in rows}
    assert {"mig", "whole"} <= sharing
    assert len(sharing) >= 3
    shared = [r for r in rows if r["x_Sharing"] != "whole"]
    # a shared piece charges less physical GPU-time than the units it holds
    assert all(Decimal(r["PricingQuantity"]) <= Decimal(r["x_SliceHours"]) + Decimal("1e-9")
               for r in shared if r["PricingUnit"] == "GPU-Hours")
    result = validate(path, tmp_path)
    assert result.failed == {}
