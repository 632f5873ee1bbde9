"""``import-pod-groups``: the scheduler's gang objects into ``k8s_pod_groups`` as observations.
Each uid keeps its latest state, also after a later snapshot no longer lists it (a Job's
PodGroup is deleted with the Job); an older file stored late only widens ``first_seen``; the
same file twice changes nothing; bad items land in ``rejects``."""

import copy
import json
from datetime import datetime
from pathlib import Path

import duckdb

from gpuledger.cli import main
from gpuledger.ingest.kubernetes.pod_groups import import_pod_groups
from models.runner import ensure_schema
from tests.helpers import FIXTURES, copy_tiny_world

SCHEDULING = FIXTURES / "kubernetes" / "scheduling"


def _state(con) -> list[tuple]:
    return con.execute("SELECT name, pod_group, min_count, first_seen, last_seen "
                       "FROM k8s_pod_groups ORDER BY name, pod_group").fetchall()


def test_the_command_loads_a_snapshot_and_its_rejects(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "import-pod-groups", "--cluster", "lab",
                 str(SCHEDULING / "bad-items-one-defect-each.json")]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT cluster, name, pod_group, min_count, job_name "
                           "FROM k8s_pod_groups").fetchall() == [
            ("lab", "training-job-workload", "workers", 4, "training-job")]
        assert con.execute("SELECT count(*) FROM rejects WHERE source = 'k8s_pod_groups'"
                           ).fetchone() == (5,)
        assert con.execute("SELECT rows_loaded, rows_rejected FROM ingest_runs "
                           "WHERE source = 'k8s_pod_groups'").fetchall() == [(1, 5)]


def _write(folder: Path, stamp: str, items: list[dict]) -> Path:
    path = folder / f"pod-groups-{stamp}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_observations_keep_deleted_groups_and_ignore_older_states(tmp_path: Path):
    beta = json.loads((SCHEDULING / "workload-api-v1beta1-kep5547.json").read_text())["items"]
    workload, group = beta
    scaled = copy.deepcopy(group)  # minCount is mutable from 1.37 (elastic scaling)
    scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] = 6
    folder = tmp_path / "snapshots"
    folder.mkdir()
    first = _write(folder, "20260105T100000Z", [workload, group])
    later = _write(folder, "20260105T110000Z", [workload, scaled])
    gone = _write(folder, "20260105T120000Z", [])  # the Job finished: both deleted
    t10, t11 = datetime(2026, 1, 5, 10), datetime(2026, 1, 5, 11)
    con = duckdb.connect()
    ensure_schema(con)
    import_pod_groups(con, later, cluster="c")
    import_pod_groups(con, first, cluster="c")  # older: first_seen only
    import_pod_groups(con, gone, cluster="c")
    want = [("trainer-4-x7k2p", "trainer", 4, t10, t11),
            ("trainer-4-x7k2p-trainer-q9z4w", "trainer", 6, t10, t11)]
    assert _state(con) == want
    import_pod_groups(con, later, cluster="c")  # again: nothing changes
    assert _state(con) == want
    # a folder is read in the order taken: the same end state in a fresh ledger
    fresh = duckdb.connect()
    ensure_schema(fresh)
    result = import_pod_groups(fresh, folder, cluster="c")
    assert result.rows == 4
    assert _state(fresh) == want


def test_load_reads_the_sites_pod_groups_file(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    (world / "kueue" / "groups.json").write_text(
        (SCHEDULING / "coscheduling-podgroup.json").read_text())
    site = world / "gpuledger.toml"
    site.write_text(site.read_text() + 'pod_groups = "kueue/groups.json"\n')
    db = tmp_path / "ledger.duckdb"
    assert main(["--config", str(site), "--db", str(db), "load"]) == 0
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT cluster, name, min_count, pod_label FROM k8s_pod_groups"
                           ).fetchall() == [("gpuledger", "pg1", 3, "pg1")]
