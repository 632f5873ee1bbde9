"""A site with no rate card (a real Slurm site on its first day, say) still gets its FOCUS file:
every row is unpriced (cost 0, x_Unpriced) and, with no currency to take, BillingCurrency is
ISO 4217's "no currency" XXX, with a warning a person sees, and the file passes the validator.
Unpriced rows beside priced rows of two currencies stay an error that says what to set."""

import csv
import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from models.build import build_chargeback
from tests.export.conftest import export
from tests.export.validator_run import validate

FIRST, LAST = date(2026, 1, 5), date(2026, 1, 11)


def _copy(sample_db: Path, tmp_path: Path) -> Path:
    db = tmp_path / "ledger.duckdb"
    shutil.copyfile(sample_db, db)
    return db


def test_nothing_priced_gives_xxx_a_warning_and_a_valid_file(sample_db: Path, tmp_path: Path):
    db = _copy(sample_db, tmp_path)
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM rate_card")
        build_chargeback(con, FIRST, LAST)
        result = export(con, "2026-W02", tmp_path / "w02.csv")
    assert result.rows.rows > 100
    assert result.rows.unpriced_rows == result.rows.usage_rows > 0
    assert any("BillingCurrency XXX" in w for w in result.rows.warnings)
    with result.files[0].open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["BillingCurrency"] for r in rows} == {"XXX"}
    assert {float(r["BilledCost"]) for r in rows} == {0.0}
    outcome = validate(result.files[0], tmp_path)
    assert outcome.tests > 500
    assert outcome.failed == {}


def test_unpriced_rows_beside_two_currencies_ask_for_the_setting(sample_db: Path,
                                                                 tmp_path: Path):
    db = _copy(sample_db, tmp_path)
    with duckdb.connect(str(db)) as con:
        # the h100 line in USD, and one GPU model left unpriced
        con.execute("UPDATE rate_card SET currency = 'USD' WHERE gpu_model = 'h100'")
        con.execute("DELETE FROM rate_card WHERE gpu_model = 'a100' AND domain = 'kubernetes'")
        models = con.execute("SELECT count(DISTINCT currency) FROM rate_card").fetchone()[0]
        assert models == 2
        build_chargeback(con, FIRST, LAST)
        with pytest.raises(ValueError, match=r"set \[gpuledger.focus\] currency"):
            export(con, "2026-W02", tmp_path / "w02.csv")
