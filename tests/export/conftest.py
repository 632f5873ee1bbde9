"""Worlds for the FOCUS export tests: the sample world (sample_data/, the `make demo` data) loaded
and built by the CLI, and a copy of it whose week 2026-W02 is closed and then gets late data."""

import shutil
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.export.focus import FocusSite, export_focus, parse_focus_table
from models.build import build_chargeback
from models.close_week import close_week
from models.runner import ensure_schema
from tests.helpers import SAMPLE_SITE

W02 = date(2026, 1, 5)
AFTER = datetime(2026, 2, 2)  # every week of the sample world has ended
LATE_SECONDS = 1001  # a runaway job fixed in slurmdbd: it ran this much longer


def focus_site() -> FocusSite:
    """The sample site's [gpuledger.focus] defaults (no table: "gpuledger", the cluster)."""
    return parse_focus_table(None, ())


def export(con: duckdb.DuckDBPyConnection, period: str, out: Path, fmt: str = "csv"):
    return export_focus(con, period, focus=focus_site(), out={fmt: out})


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample world, loaded and built by the CLI (published, as `make demo` leaves it)."""
    db = tmp_path_factory.mktemp("focus-sample") / "ledger.duckdb"
    assert main(["--db", str(db), "--config", str(SAMPLE_SITE), "load"]) == 0
    assert main(["--db", str(db), "--config", str(SAMPLE_SITE), "build"]) == 0
    return db


@dataclass(frozen=True)
class LateWorld:
    db: Path
    folder: Path
    job: tuple  # (day, source_key, node) of the allocation piece late data lengthened
    week_before: Path  # 2026-W02's FOCUS file right after its close
    week_after: Path  # ... and after the late data was built


@pytest.fixture(scope="session")
def late_world(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> LateWorld:
    """2026-W02 closed, its FOCUS file written; then a Slurm run of 2026-01-06 ran 1,001 s
    longer (rebuilt by a later run: an adjustment carried by 2026-W03)."""
    folder = tmp_path_factory.mktemp("focus-late")
    db = folder / "ledger.duckdb"
    shutil.copy(sample_db, db)
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        close_week(con, "2026-W02", closed_by="finance", run_id="close-1", now=AFTER)
        export(con, "2026-W02", folder / "before.csv")
        day = W02 + timedelta(days=1)
        job = con.execute(
            "SELECT day, source_key, node FROM allocations WHERE domain = 'slurm' AND day = ? "
            "AND sharing IS NULL AND end_ts < ? ORDER BY gpu_seconds DESC, source_key LIMIT 1",
            [day, datetime.combine(day, datetime.max.time()) - timedelta(seconds=LATE_SECONDS)],
        ).fetchone()
        con.execute(
            "UPDATE allocations SET end_ts = end_ts + to_seconds($s), "
            "gpu_seconds = gpu_seconds + $s * gpus, "
            "physical_gpu_seconds = physical_gpu_seconds + $s * gpus "
            "WHERE day = $day AND source_key = $key AND node = $node",
            {"s": LATE_SECONDS, "day": job[0], "key": job[1], "node": job[2]})
        build_chargeback(con, W02, W02 + timedelta(days=6), run="late-run")
        export(con, "2026-W02", folder / "after.csv")
    return LateWorld(db, folder, job, folder / "before.csv", folder / "after.csv")
