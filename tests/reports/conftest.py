"""Ledgers for the report tests: a small simulated world, and hand-made invoice lines with the
awkward cases (markup in names, slug collisions, two currencies, a line without a rate)."""

from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.runner import ensure_schema, publish_snapshot
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

SIM_WEEKS = ("2026-W02", "2026-W03")  # the simulated days 2026-01-08 .. 2026-01-12 touch both

NASTY_CENTRE = '<script>alert("x")</script> & co'
_W02 = ("week", "2026-W02", date(2026, 1, 5))
# cost_centre, team, person, domain, gpu_model, rate, currency, seconds, amount, measured, busy
SYNTHETIC_LINES = [
    (*_W02, NASTY_CENTRE, "R&D", "o'brien", "slurm", "a100", "2.75", "EUR", 7200, "5.50",
     "2.0", "1.5"),
    (*_W02, "CC A", "t1", "ann", "kubernetes", "h100", "4.40", "EUR", 3600, "4.40", "1", "0.25"),
    (*_W02, "cc-a", "t2", "bob", "slurm", "h100", "5.00", "USD", 1800, "2.50", None, None),
    (*_W02, "unattributed", "unattributed", "unattributed", "kubernetes", "a100", "2.90", "EUR",
     18, "0.01", "0", "0"),
    (*_W02, "CC A", "t1", "unattributed", "slurm", "l40", None, "", 900, None, "0.25", "0"),
    # other periods: never in the W02 report
    ("week", "2026-W03", date(2026, 1, 12), "CC A", "t1", "ann", "slurm", "a100", "2.75", "EUR",
     3600, "2.75", None, None),
    ("day", "2026-01-06", date(2026, 1, 6), "CC A", "t1", "ann", "kubernetes", "h100", "4.40",
     "EUR", 3600, "4.40", None, None),
    ("month", "2026-01", date(2026, 1, 1), "CC A", "t1", "ann", "kubernetes", "h100", "4.40",
     "EUR", 3600, "4.40", None, None),
]


def _lines_table(con: duckdb.DuckDBPyConnection) -> str:
    """Where invoice lines are stored: ``chargeback_periods`` (``chargeback`` is then its view
    of the week lines) or, in older ledgers, ``chargeback`` itself."""
    kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables "
                             "WHERE table_schema = 'main'").fetchall())
    return "chargeback_periods" if "chargeback_periods" in kinds else "chargeback"


def insert_lines(con: duckdb.DuckDBPyConnection, lines: list[tuple]) -> None:
    target = _lines_table(con)
    columns = {r[0] for r in con.execute(f"DESCRIBE {target}").fetchall()}
    for (kind, period, start, centre, team, person, domain, model, rate, currency, seconds,
         amount, measured, busy) in lines:
        row: dict[str, object] = {
            "period_kind": kind, "period": period, "period_start": start,
            "cost_centre": centre, "team": team, "person": person, "domain": domain,
            "gpu_model": model, "rate_valid_from": None,
            "rate_per_gpu_hour": None if rate is None else Decimal(rate), "currency": currency,
            "gpu_seconds": seconds, "gpu_hours": round(Decimal(seconds) / 3600, 6),
            "allocations": 1, "amount": None if amount is None else Decimal(amount),
        }
        if measured is not None:
            row |= {"measured_gpu_hours": Decimal(measured), "busy_gpu_hours": Decimal(busy),
                    "idle_gpu_hours": Decimal(measured) - Decimal(busy)}
        row = {k: v for k, v in row.items() if k in columns}
        con.execute(f"INSERT INTO {target} ({', '.join(row)}) VALUES "
                    f"({', '.join('?' * len(row))})", list(row.values()))


@pytest.fixture
def synthetic_db(tmp_path: Path) -> Path:
    """A ledger holding only SYNTHETIC_LINES (published), without an incidents table."""
    db = tmp_path / "synthetic.duckdb"
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        con.execute("DROP TABLE IF EXISTS incidents")
        insert_lines(con, SYNTHETIC_LINES)
        publish_snapshot(con, db)
    return db


@pytest.fixture(scope="session")
def sim_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small simulated world (5 days over two ISO weeks, both schedulers, dcgm busy time,
    incidents), loaded and built by the CLI."""
    root = tmp_path_factory.mktemp("report-world")
    world = root / "world"
    simulate(SimConfig(seed=5, days=5, start=date(2026, 1, 8),
                       nodes=NodeCounts(hpc=3, k8s=2, shared=1), step_seconds=600), world)
    db = root / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "build", "--start", "2026-01-08", "--end", "2026-01-13"]) == 0
    return db
