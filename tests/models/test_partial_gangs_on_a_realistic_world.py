"""On a realistic world (``--realistic``: Workloads deleted 10 minutes after their Job ends, time-
named Workload snapshots) through the documented CLI path, ``gpuledger load`` then ``gpuledger
build``: every planted partial gang of truth/incidents.csv is found and no partial-gang decoy of
world.json is flagged -- with the Workload history, and again from pods alone with every Workload
object removed from the ledger.

Match rule: same Kubernetes workload (namespace/Workload name; from pods alone the Job's name,
which Kueue's Workload name ``job-<Job>-<5 hex>`` carries) and overlapping time."""

import csv
import json
import re
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.incidents import build_incidents
from simulator import SimConfig, simulate

# the CLI's --realistic takes hourly Workload snapshots (--kueue-snapshot-every 60)
WORLD = SimConfig(seed=5, days=2, step_seconds=60, realistic=True, kueue_snapshot_every=3600)
KUEUE_NAME = re.compile(r"^(?P<ns>[^/]+)/job-(?P<job>.+)-[0-9a-f]{5}$")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("realistic-gangs") / "world"
    simulate(WORLD, out)
    config = out / "gpuledger.toml"
    assert 'snapshot = "kueue/snapshots"' in config.read_text(encoding="utf-8")
    assert main(["--config", str(config), "load"]) == 0
    assert main(["--config", str(config), "build"]) == 0
    return out


def _planted(world: Path) -> list[dict]:
    with (world / "truth" / "incidents.csv").open(encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["kind"] == "partial_gang"]


def _decoys(world: Path) -> list[dict]:
    doc = json.loads((world / "world.json").read_text(encoding="utf-8"))
    return [d for d in doc["decoys"] if d["imitates"] == "partial_gang"]


def _found(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.sql("SELECT k8s_workload, start_ts, end_ts FROM incidents "
                   "WHERE kind = 'partial_gang'").fetchall()


def _check(world: Path, found: list[tuple], name) -> None:
    planted, decoys = _planted(world), _decoys(world)
    assert len(planted) >= 3
    assert {d["kind"] for d in decoys} == {
        "quick_gang", "partial_admission_min_count"}
    missed = []
    for p in planted:
        start, end = datetime.fromisoformat(p["start"]), datetime.fromisoformat(p["end"])
        if not any(w == name(p["k8s_workload"]) and s < end and e > start for w, s, e in found):
            missed.append(p["k8s_workload"])
    assert missed == []
    flagged = {name(d["workload"]) for d in decoys} & {w for w, _, _ in found}
    assert flagged == set()


def test_every_planted_partial_gang_is_found_and_no_decoy_with_the_history(world: Path):
    with duckdb.connect(str(world / "data" / "gpuledger.duckdb"), read_only=True) as con:
        # the Workloads of finished gangs were deleted: only the history kept them
        names = {f"{ns}/{n}" for ns, n in con.sql(
            "SELECT namespace, name FROM kueue_workloads").fetchall()}
        assert {p["k8s_workload"] for p in _planted(world)} <= names
        found = _found(con)
    _check(world, found, lambda key: key)


def test_every_planted_partial_gang_is_found_from_pods_alone(world: Path, tmp_path: Path):
    copy = tmp_path / "pods-alone.duckdb"
    copy.write_bytes((world / "data" / "gpuledger.duckdb").read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM kueue_workloads")
        build_incidents(con, date(2026, 1, 5), date(2026, 1, 6))
        found = _found(con)

    def job_of(key: str) -> str:
        m = KUEUE_NAME.match(key)
        assert m, key
        return f"{m['ns']}/{m['job']}"

    _check(world, found, job_of)
