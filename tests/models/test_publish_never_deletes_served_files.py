"""A lake file the served snapshot names is never deleted (issue #28 item 5, the probe's first
finding): a file replaced by a publish that failed (full disk) or was killed at its serving copy
stays while the previous snapshot is served, whatever later publishes fail; the grace of a
replaced file starts at the swap that stopped serving it, not when it was replaced; version and
staging files a killed writer left are swept once that writer is gone, a live writer's never.

The lake's clock (``models.lake_publish._now``) is moved forward instead of waiting the grace."""

import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from models import lake_publish
from models.lake import lake_root
from models.runner import PublishFailed, connect, publish_snapshot, read_snapshot, replace_rows
from models.schema import GPU_UTILIZATION
from tests.models.lake_helpers import utilization

ROOT = Path(__file__).resolve().parents[2]
DAYS = (date(2026, 1, 5), date(2026, 1, 6))
CLUSTERS = ("east", "west")
LATER = lake_publish.RETIRED_GRACE + timedelta(minutes=1)
WHERE = "cluster = ? AND CAST(bucket_start AS DATE) = ?"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(tzinfo=None)  # the lake's clock: naive UTC

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta = LATER) -> None:
        self.now += by


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(lake_publish, "_now", c)
    return c


@pytest.fixture
def ledger(tmp_path: Path, clock: Clock) -> Path:
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        for cluster in CLUSTERS:
            for day in DAYS:
                replace_rows(con, GPU_UTILIZATION, utilization(cluster, day, 0.5), where="FALSE")
        publish_snapshot(con, db)
    return db


def _served(db: Path) -> list[tuple]:
    """What a reader of the published snapshot sees (every partition file is opened)."""
    with read_snapshot(db) as con:
        return _busy(con)


def _busy(con) -> list[tuple]:
    return con.execute("SELECT cluster, CAST(bucket_start AS DATE), count(*), sum(busy_fraction) "
                       "FROM gpu_utilization GROUP BY ALL ORDER BY ALL").fetchall()


def _replace(con, cluster: str, day: date, busy: float) -> None:
    replace_rows(con, GPU_UTILIZATION, utilization(cluster, day, busy), where=WHERE,
                 params=(cluster, day))


def _failing_copy(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_failed_publishes_never_delete_what_the_served_snapshot_names(
        ledger: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch):
    before = _served(ledger)
    with connect(ledger) as con:
        with monkeypatch.context() as m:
            m.setattr("models.lake_serving.copy_serving", _failing_copy)
            _replace(con, "east", DAYS[0], 0.25)
            with pytest.raises(PublishFailed):
                publish_snapshot(con, ledger)
            assert _served(ledger) == before
            for busy in (0.75, 1.0):  # more failed publishes, each longer than the grace later
                clock.advance()
                _replace(con, "east", DAYS[0], busy)
                with pytest.raises(PublishFailed):
                    publish_snapshot(con, ledger)
                assert _served(ledger) == before  # was: FileNotFoundError …/_versions/…parquet
        clock.advance()
        publish_snapshot(con, ledger)
    assert ("east", DAYS[0], 60, pytest.approx(60.0)) in _served(ledger)


def test_the_grace_starts_at_the_swap_that_stopped_serving_a_file(
        ledger: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch):
    """A reader that opened the snapshot just before a swap keeps its files for the grace
    after that swap, however long the publish took between replacing them and swapping."""
    from models import lake_serving

    copy = lake_serving.copy_serving
    readers = []

    def slow_copy(*args, **kwargs):
        readers.append(read_snapshot(ledger))  # opens the snapshot still served
        readers.append(readers[-1].__enter__())
        clock.advance()  # the files it names were replaced longer than the grace ago
        return copy(*args, **kwargs)

    before = _served(ledger)
    with connect(ledger) as con:
        _replace(con, "west", DAYS[1], 0.125)
        monkeypatch.setattr(lake_serving, "copy_serving", slow_copy)
        publish_snapshot(con, ledger)
        monkeypatch.setattr(lake_serving, "copy_serving", copy)
        _replace(con, "east", DAYS[1], 0.375)
        publish_snapshot(con, ledger)  # right after the swap: the reader's grace has not run
    try:
        assert _busy(readers[1]) == before
    finally:
        readers[0].__exit__(None, None, None)
    clock.advance()
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    versions = sorted(p.relative_to(lake_root(ledger)).as_posix()
                      for p in (lake_root(ledger) / "_versions").rglob("*.parquet"))
    catalog = lake_publish.read_catalog(lake_root(ledger))
    assert versions == sorted(p.file for p in catalog.values())  # the retired ones are gone


KILLED = """
import os, sys
from datetime import date
from pathlib import Path

from models.runner import connect, publish_snapshot, replace_rows
from models.schema import GPU_UTILIZATION
from tests.models.lake_helpers import utilization

db, where = Path(sys.argv[1]), sys.argv[2]

def die(*args, **kwargs):
    os._exit(9)  # as kill -9: no cleanup runs

if where == "partition write":  # between writing a version file and writing the catalog
    os.link = die
else:  # at the serving copy, after the lake was synced
    import models.lake_serving
    models.lake_serving.copy_serving = die
with connect(db) as con:
    day = date(2026, 1, 5)
    replace_rows(con, GPU_UTILIZATION, utilization("west", day, 0.875),
                 where="cluster = ? AND CAST(bucket_start AS DATE) = ?", params=("west", day))
    publish_snapshot(con, db)
"""


@pytest.mark.parametrize("where", ["serving copy", "partition write"])
def test_a_publish_killed_leaves_readers_reading_and_nothing_behind(
        ledger: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch, where: str):
    before = _served(ledger)
    versions = lake_root(ledger) / "_versions"
    done = subprocess.run([sys.executable, "-c", KILLED, str(ledger), where], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 9, done.stderr
    assert _served(ledger) == before
    named = {p.file for p in lake_publish.read_catalog(lake_root(ledger)).values()}
    left = {p.relative_to(lake_root(ledger)).as_posix() for p in versions.rglob("*.parquet")}
    if where == "partition write":
        assert len(left - named) == 1  # the killed writer's file, named by nothing
    clock.advance()
    with connect(ledger) as con, monkeypatch.context() as m:  # the next publish fails too
        m.setattr("models.lake_serving.copy_serving", _failing_copy)
        with pytest.raises(PublishFailed):
            publish_snapshot(con, ledger)
    assert _served(ledger) == before
    for _ in range(2):  # a publish with nothing to do, then one longer than the grace later
        with connect(ledger) as con:
            publish_snapshot(con, ledger)
        assert ("west", DAYS[0], 60, pytest.approx(52.5)) in _served(ledger)
        clock.advance()
    named = {p.file for p in lake_publish.read_catalog(lake_root(ledger)).values()}
    assert {p.relative_to(lake_root(ledger)).as_posix() for p in versions.rglob("*.parquet")
            } == named
    assert not any((lake_root(ledger) / "_staging").iterdir())


def test_orphans_are_swept_once_their_writer_is_gone_and_a_live_writers_never(
        ledger: Path, clock: Clock):
    root = lake_root(ledger)
    folder = root / "_versions" / "gpu_utilization" / "cluster=east" / f"day={DAYS[0]}"
    live = os.getppid()  # a process that is alive and not this one
    orphans = {
        "dead": folder / "999999999.0123abcd.parquet",  # a pid that does not exist
        "old": folder / ("0123456789abcdef" * 2 + ".parquet"),  # an older release's name
    }
    kept = {
        "live": folder / f"{live}.0123abcd.parquet",
        "recent": folder / ("fedcba9876543210" * 2 + ".parquet"),
    }
    staging = root / "_staging"
    dead_dir = staging / "999999999.0123abcd.old"  # a lake table set aside, then a kill
    (dead_dir / "cluster=x").mkdir(parents=True)
    (dead_dir / "cluster=x" / "part-0.parquet").write_bytes(b"x")
    live_staging = staging / f"{live}.0123abcd.parquet"
    for path in [*orphans.values(), *kept.values(), live_staging]:
        path.write_bytes(b"not named by anything")
    hours = (datetime.now(UTC) - timedelta(hours=7)).timestamp()
    os.utime(orphans["old"], (hours, hours))
    before = _served(ledger)
    for _ in range(2):
        with connect(ledger) as con:
            publish_snapshot(con, ledger)
        assert _served(ledger) == before
        clock.advance()
    assert not [k for k, p in orphans.items() if p.exists()]
    assert not dead_dir.exists()
    assert all(p.exists() for p in kept.values())
    assert live_staging.exists()


def test_an_older_releases_retired_list_deletes_nothing_the_snapshot_serves(
        ledger: Path, clock: Clock):
    """``_retired.parquet`` as an older release wrote it (file, retired_at), naming a file the
    served snapshot names (its retiring publish failed): kept, and dropped from the list."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = lake_root(ledger)
    served = sorted(p.file for p in lake_publish.read_catalog(root).values())[0]
    pq.write_table(pa.table({"file": [served], "retired_at": [clock.now - timedelta(days=1)]}),
                   root / "_retired.parquet")
    before = _served(ledger)
    with connect(ledger) as con:
        publish_snapshot(con, ledger)
    assert (root / served).is_file()
    assert _served(ledger) == before
    assert pq.read_table(root / "_retired.parquet").num_rows == 0
