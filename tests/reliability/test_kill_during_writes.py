"""`kill -9` at random points of an import, a build and a publish: the published snapshot is
always a whole one (invoice GPU-seconds = ledger GPU-seconds per week and cost centre), the
writer opens again, and the next build repairs and publishes (issue #13, item 9)."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.runner import snapshot_path
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER

ROOT = Path(__file__).resolve().parents[2]
KILLS_PER_COMMAND = 6
SEED = 20261201  # the kill points are random but the same on every run


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    world = tmp_path_factory.mktemp("kill-world")
    simulate(SimConfig(seed=33, days=2, nodes=NodeCounts(hpc=2, k8s=2, shared=1),
                       step_seconds=60), world)
    db = tmp_path_factory.mktemp("kill-ledger") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    with duckdb.connect(str(db)) as con:
        first = con.execute("SELECT min(start)::DATE FROM slurm_runs").fetchone()[0]
    # only the first day is built and published: the commands under test change the ledger
    # (a kill between two tables of a build must then show, if anything published it)
    assert main(["--db", str(db), "build", "--start", f"{first}",
                 "--end", f"{first + timedelta(days=1)}"]) == 0
    return db, world


def gpuledger(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuledger.cli", "--db", str(db), *args], cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def started(proc: subprocess.Popen, marker: str) -> float:
    """Wait for the line that starts the command's writing phase; its time (monotonic)."""
    for line in proc.stderr:
        if marker in line:
            return time.monotonic()
    msg = f"expected a line with {marker!r} on stderr, found the end of the output"
    raise AssertionError(msg)


def fresh_copy(base_db: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in (base_db, snapshot_path(base_db)):
        shutil.copyfile(f, dest / f.name)
    return dest / base_db.name


def check_snapshot(db: Path) -> None:
    con = duckdb.connect(str(snapshot_path(db)), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM allocations").fetchone()[0] > 0
        assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []
    finally:
        con.close()


# command -> (arguments, the stderr line after which it writes)
COMMANDS = {
    "load-world": (lambda world: ("load-world", str(world)), "loading nodes"),
    "build": (lambda world: ("build",), "building"),
    "import-identity (publish)": (
        lambda world: ("import-identity", str(world / "identity_map.csv")), "identity_map:"),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_kill_anywhere_leaves_a_whole_snapshot_and_a_repairable_ledger(
        base, tmp_path: Path, command: str):
    base_db, world = base
    make_args, marker = COMMANDS[command]
    args = make_args(world)
    timing = gpuledger(fresh_copy(base_db, tmp_path / "timing"), *args)
    t0 = started(timing, marker)
    timing.communicate(timeout=300)
    assert timing.returncode == 0
    active = time.monotonic() - t0
    rng = random.Random(f"{SEED}-{command}")
    # one random point in each sixth of the writing phase: every part of it is hit
    delays = [(i + rng.random()) * active / KILLS_PER_COMMAND for i in range(KILLS_PER_COMMAND)]
    for n, delay in enumerate(delays):
        db = fresh_copy(base_db, tmp_path / f"kill-{n}")
        proc = gpuledger(db, *args)
        began = started(proc, marker)
        time.sleep(max(0.0, delay - (time.monotonic() - began)))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        check_snapshot(db)  # the old one or the new one, never a mixture
        # any later publish (the example) refuses a half-built ledger or publishes a
        # whole one
        main(["--db", str(db), "import-identity", str(world / "identity_map.csv")])
        check_snapshot(db)
        assert main(["--db", str(db), "build"]) == 0, f"no repair after a kill at {delay:.2f} s"
        check_snapshot(db)
