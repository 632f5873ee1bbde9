"""Readers while the pipeline writes (issue #7 item 2, issue #5 item 7).

A writer process alternates the identity map between two versions and rebuilds the ledger, each
step publishing the read-only snapshot. Meanwhile threads query the snapshot the way the
dashboards do (``read_snapshot``, one short connection per query) and other threads run
``gpuledger sql``. Every read must succeed and see a whole published state: GPU-seconds per cost
centre in ``allocations`` and in the week's ``chargeback`` lines both as state A or both as
state B, never a mix and never an error.
"""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot
from tests.helpers import copy_tiny_world

ROOT = Path(__file__).resolve().parents[2]
GPULEDGER = Path(sys.executable).with_name("gpuledger")

# One statement, so one snapshot: per cost centre, the ledger's and the invoice lines' seconds.
STATE_SQL = (
    "SELECT 'allocations' AS source, cost_centre, sum(gpu_seconds)::BIGINT AS seconds "
    "FROM allocations GROUP BY cost_centre UNION ALL "
    "SELECT 'chargeback', cost_centre, sum(gpu_seconds)::BIGINT FROM chargeback "
    "WHERE period_kind = 'week' GROUP BY cost_centre ORDER BY ALL"
)
# What a dashboard page asks besides: freshness, a filtered breakdown with bound parameters.
FRESHNESS_SQL = "SELECT source, max(finished_at) FROM ingest_runs GROUP BY source"
BREAKDOWN_SQL = ("SELECT team, person, sum(amount) FROM chargeback WHERE period_kind = ? "
                 "GROUP BY ALL ORDER BY ALL")

WRITER = """
import sys
from gpuledger.cli import main
db, map_a, map_b, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for _ in range(rounds):
    for identity in (map_b, map_a):
        assert main(["--db", db, "import-identity", identity]) == 0  # publishes
        assert main(["--db", db, "build"]) == 0  # publishes
"""
ROUNDS = 2
SNAPSHOT_READERS = 4
SQL_READERS = 2

State = tuple[tuple[str, str, int], ...]


def _state(db: Path) -> State:
    with read_snapshot(db) as con:
        return tuple(con.execute(STATE_SQL).fetchall())


def _state_from_csv(text: str) -> State:
    header, *rows = text.strip().splitlines()
    assert header == "source,cost_centre,seconds"
    return tuple((s, c, int(n)) for s, c, n in (r.split(",") for r in rows))


@pytest.mark.slow
def test_readers_see_whole_snapshots_while_a_writer_publishes(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    map_a = world / "identity_map.csv"
    map_b = tmp_path / "identity_map_b.csv"
    # without alice's own row her jobs fall to her account's cost centre: a different split
    lines = map_a.read_text(encoding="utf-8").splitlines()
    map_b.write_text("\n".join(x for x in lines if not x.startswith("slurm_user,alice,")) + "\n",
                     encoding="utf-8")
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert main(["--db", str(db), "import-identity", str(map_b)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    state_b = _state(db)
    assert main(["--db", str(db), "import-identity", str(map_a)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    state_a = _state(db)
    assert state_a != state_b
    for state in (state_a, state_b):  # each published state is whole: ledger = invoice lines
        assert [r[1:] for r in state if r[0] == "allocations"] == \
            [r[1:] for r in state if r[0] == "chargeback"]
    allowed = {state_a, state_b}

    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(map_a), str(map_b), str(ROUNDS)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors: list[str] = []
    seen: dict[str, list[State]] = {}
    lock = threading.Lock()

    def record(name: str, state: State) -> None:
        with lock:
            seen.setdefault(name, []).append(state)

    def snapshot_reader(name: str) -> None:
        while writer.poll() is None:
            try:
                state = _state(db)
                with read_snapshot(db) as con:  # a second short connection, like a rerun
                    assert con.execute(FRESHNESS_SQL).fetchall()
                    con.execute(BREAKDOWN_SQL, ["week"]).fetchall()
                record(name, state)
            except Exception as exc:  # every failure is reported, none stops the others
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
            time.sleep(0.05)

    def sql_reader(name: str) -> None:
        while writer.poll() is None:
            done = subprocess.run([str(GPULEDGER), "--db", str(db), "sql", STATE_SQL],
                                  cwd=ROOT, capture_output=True, text=True, timeout=120,
                                  check=False)
            if done.returncode != 0:
                errors.append(f"{name}: exit {done.returncode}: {done.stderr.strip()}")
                continue
            record(name, _state_from_csv(done.stdout))

    threads = [threading.Thread(target=snapshot_reader, args=(f"snapshot-{i}",))
               for i in range(SNAPSHOT_READERS)]
    threads += [threading.Thread(target=sql_reader, args=(f"sql-{i}",))
                for i in range(SQL_READERS)]
    for t in threads:
        t.start()
    try:
        _out, err = writer.communicate(timeout=600)
    finally:
        for t in threads:
            t.join(timeout=180)
    assert writer.returncode == 0, err[-2000:]
    assert errors == []
    reads = [s for states in seen.values() for s in states]
    torn = [s for s in reads if s not in allowed]
    assert torn == []
    # the readers really overlapped the writer: every reader read, and both states were seen
    assert set(seen) == {f"snapshot-{i}" for i in range(SNAPSHOT_READERS)} | \
        {f"sql-{i}" for i in range(SQL_READERS)}
    assert {s for name, states in seen.items() if name.startswith("snapshot") for s in states} \
        == allowed
    assert _state(db) == state_a  # the writer ends on map A
