"""One ledger whatever order the days arrive in (issue #28): the sample world built by the CLI at
once, by Dagster day by day as `make demo` does, by Dagster in reverse day order, and by the CLI
one day at a time in reverse, gives the same accounting tables, row for row."""

from datetime import date, timedelta
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.site import load_site
from gpuledger.site.days import accounted_days
from models.runner import read_snapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
SITE = SAMPLE / "gpuledger.toml"

# Every table and view a figure of the ledger lives in (not the loads' own bookkeeping: which
# runs, files and windows brought the data differs by design between a CLI load and daily pulls).
ACCOUNTING = (
    "allocations", "allocation_usage_hourly", "gpu_usage_hourly", "node_usage_hourly",
    "gpu_usage_daily", "node_usage_daily", "gpu_conservation_hourly",
    "gpu_conservation_gpu_hourly", "data_quality_days", "incidents", "bridge_pairs",
    "shared_gpu_daily", "kueue_quota_hourly", "kueue_quota_weekly", "invoice_lines",
    "chargeback",
)


def _rows(db: Path, table: str) -> list[str]:
    """The table's rows, sorted, without the columns saying when a row was written."""
    with read_snapshot(db) as con:
        columns = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall() if not c.endswith("_at")]
        listed = ", ".join(f'"{c}"' for c in columns)
        return sorted(repr(r) for r in con.execute(f"SELECT {listed} FROM {table}").fetchall())


def _differences(a: Path, b: Path) -> dict[str, tuple[int, int, list[str]]]:
    out = {}
    for table in ACCOUNTING:
        rows_a, rows_b = _rows(a, table), _rows(b, table)
        if rows_a != rows_b:
            only_a = sorted(set(rows_a) - set(rows_b))
            only_b = sorted(set(rows_b) - set(rows_a))
            out[table] = (len(rows_a), len(rows_b), [*only_a[:2], *only_b[:2]])
    return out


def _loaded(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The sample world's site loaded into a ledger of its own (`gpuledger load`)."""
    db = tmp_path_factory.mktemp(name) / "ledger.duckdb"
    assert main(["--config", str(SITE), "--db", str(db), "load"]) == 0
    return db


@pytest.fixture(scope="module")
def cli_at_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gpuledger load` then one `gpuledger build` of the site: every day at once."""
    db = _loaded(tmp_path_factory, "cli_at_once")
    assert main(["--config", str(SITE), "--db", str(db), "build"]) == 0
    return db


@pytest.fixture(scope="module")
def cli_reversed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample world loaded at once, then built one day at a time, the last day first."""
    db = _loaded(tmp_path_factory, "cli_reversed")
    for day in reversed(accounted_days(load_site(SITE))):
        assert main(["--config", str(SITE), "--db", str(db), "build", "--start",
                     day.isoformat(), "--end", (day + timedelta(days=1)).isoformat()]) == 0
    return db


def test_the_ledger_has_rows_in_every_table_compared(cli_at_once: Path):
    """The comparison below is not of empty tables."""
    empty = [t for t in ACCOUNTING if t not in ("bridge_pairs",) and not _rows(cli_at_once, t)]
    assert empty == []


def test_dagster_day_by_day_equals_the_cli_at_once(cli_at_once: Path, demo_ledger: Path):
    assert _differences(cli_at_once, demo_ledger) == {}


def test_dagster_in_reverse_equals_the_cli_at_once(cli_at_once: Path,
                                                   demo_ledger_reversed: Path):
    assert _differences(cli_at_once, demo_ledger_reversed) == {}


def test_cli_one_day_at_a_time_in_reverse_equals_the_cli_at_once(cli_at_once: Path,
                                                                 cli_reversed: Path):
    assert _differences(cli_at_once, cli_reversed) == {}


def test_the_demo_is_provisional_only_for_what_its_data_lacks(demo_ledger: Path):
    """After `make demo` no day waits on sreport: the week's window was compared with the whole
    week (0 %), not with the days built so far (18-87 % before). What remains is what the
    sample world plants: jobs and pods without an owner, and a scrape gap."""
    with read_snapshot(demo_ledger) as con:
        rows = con.execute("SELECT day, sreport_difference, coalesce(reasons, '') "
                           "FROM data_quality_days ORDER BY day").fetchall()
    assert len(rows) == 7
    for day, difference, reasons in rows:
        assert difference == 0.0, day
        assert "sreport" not in reasons, (day, reasons)
        measures = {r.split(":")[0] for r in reasons.split("; ") if r}
        assert measures <= {"owners", "scrape gap"}, (day, reasons)


def test_a_day_built_before_its_weeks_other_days_says_so(tmp_path: Path, cli_at_once: Path):
    """One day of the week built alone: the sreport week is not compared with a sixth of the
    ledger (which gave 18-87 % "differences"); the day says it waits for the others, and the
    verdict is made again when they land."""
    db = tmp_path / "ledger.duckdb"
    assert main(["--config", str(SITE), "--db", str(db), "load"]) == 0
    first = accounted_days(load_site(SITE))[0]
    assert main(["--config", str(SITE), "--db", str(db), "build", "--start", first.isoformat(),
                 "--end", (first + timedelta(days=1)).isoformat()]) == 0
    with read_snapshot(db) as con:
        [(difference, reasons)] = con.execute(
            "SELECT sreport_difference, reasons FROM data_quality_days").fetchall()
    assert difference is None
    assert ("sreport: the window 2026-01-05 00:00 .. 2026-01-12 00:00 is compared once all its "
            "days are built; 6 of its 7 days are not built yet") in reasons
    # the next day lands: the first day is judged again with it (one of the days beside it)
    second = first + timedelta(days=1)
    assert main(["--config", str(SITE), "--db", str(db), "build", "--start", second.isoformat(),
                 "--end", (second + timedelta(days=1)).isoformat()]) == 0
    with read_snapshot(db) as con:
        waiting = dict(con.execute("SELECT day, reasons FROM data_quality_days").fetchall())
        built = [d for (d,) in con.execute("SELECT day FROM built_days ORDER BY day").fetchall()]
    assert built == [first, second]
    assert all("5 of its 7 days are not built yet" in waiting[d] for d in (first, second))


def test_a_build_widens_to_the_days_built_beside_it(tmp_path: Path):
    """The rule itself: the day before and the day after, when built, and no further."""
    from models.build import days_to_build, finish_build
    from models.runner import connect

    with connect(tmp_path / "ledger.duckdb") as con:
        d = date(2026, 1, 7)
        assert days_to_build(con, d, d) == (d, d)
        finish_build(con, d - timedelta(days=3), d - timedelta(days=1))
        assert days_to_build(con, d, d) == (d - timedelta(days=1), d)
        finish_build(con, d + timedelta(days=1), d + timedelta(days=1))
        assert days_to_build(con, d, d) == (d - timedelta(days=1), d + timedelta(days=1))
        assert days_to_build(con, d - timedelta(days=2), d + timedelta(days=2)) == (
            d - timedelta(days=3), d + timedelta(days=2))
