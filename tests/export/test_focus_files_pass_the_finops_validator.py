"""The FOCUS files gpuledger writes pass the FinOps Foundation's focus-validator 2.2.1 for FOCUS
1.2 with no failed rule (tests/export/validator_run.py): the sample world's week as CSV and as
Parquet, a month holding a closed week's frozen rows and the Correction rows of late data, and a
week closed before allocation charges were frozen (line grain)."""

from pathlib import Path

import duckdb

from models.close_week import close_week
from models.runner import ensure_schema
from tests.export.conftest import AFTER, LateWorld, export
from tests.export.validator_run import validate


def _assert_valid(path: Path, tmp: Path) -> None:
    result = validate(path, tmp)
    assert result.tests > 500  # the 1.2 rule set ran
    assert result.failed == {}


def test_the_sample_worlds_week_passes_as_csv_and_as_parquet(sample_db: Path, tmp_path: Path):
    with duckdb.connect(str(sample_db), read_only=True) as con:
        csv = export(con, "2026-W02", tmp_path / "w02.csv").files[0]
        parquet = export(con, "2026-W02", tmp_path / "w02.parquet", "parquet").files[0]
    _assert_valid(csv, tmp_path)
    _assert_valid(parquet, tmp_path)


def test_a_month_with_a_closed_week_and_corrections_passes(late_world: LateWorld,
                                                           tmp_path: Path):
    with duckdb.connect(str(late_world.db), read_only=True) as con:
        result = export(con, "2026-01", tmp_path / "m.csv")
    assert result.rows.correction_rows > 0
    assert result.rows.usage_rows > 0
    _assert_valid(result.files[0], tmp_path)


def test_a_week_closed_before_charges_were_frozen_passes_at_line_grain(sample_db: Path,
                                                                       tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    db.write_bytes(sample_db.read_bytes())
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        close_week(con, "2026-W02", now=AFTER)
        con.execute("DELETE FROM frozen_allocation_charges")  # as a close of before this table
        result = export(con, "2026-W02", tmp_path / "w02.csv")
    assert result.rows.line_grain_rows > 0
    assert result.rows.usage_rows == 0
    _assert_valid(result.files[0], tmp_path)


def test_the_validator_run_reports_a_broken_file(sample_db: Path, tmp_path: Path):
    """The harness sees failures (the validator itself exits 0 either way)."""
    with duckdb.connect(str(sample_db), read_only=True) as con:
        good = export(con, "2026-W02", tmp_path / "w02.csv").files[0]
    broken = tmp_path / "broken.csv"
    broken.write_text(good.read_text().replace(",Compute,", ",GPU,"))
    failed = validate(broken, tmp_path).failed
    assert "ServiceCategory-C-003-M" in failed
