"""Workload history: a sequence of snapshots in which finished Workloads disappear keeps every
state of every Workload (kueue_workload_history, deleted_seen_at), kueue_workloads keeps the
last state of the deleted ones, a snapshot stored again changes nothing, and a partial gang is
still found after its Workload is gone."""

import gzip
import json
import os
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest

from gpuledger.ingest import service
from gpuledger.ingest.kubernetes import workload_history
from models.incidents import build_incidents
from models.runner import connect, ensure_schema
from tests.connectors.kubernetes.kueue_api_server import (
    changed,
    finished,
    upstream_workload,
)

DOCS = "docs-v1beta2-created-admitted-pending.json"
T0, T1, T2 = datetime(2026, 1, 5, 10, 5), datetime(2026, 1, 5, 12, 5), datetime(2026, 1, 5, 13)
TABLES = ("kueue_workload_history", "kueue_workloads", "kueue_workloads_raw")


def _sequence() -> list[list[dict]]:
    """sample-job is created, then admitted; my-workload is admitted, finishes and is deleted
    with its Job; the PodsReady-timeout Workload of kueue#2291 is deleted without a change."""
    created = upstream_workload(DOCS, "sample-job")
    admitted_status = upstream_workload(DOCS, "my-workload")["status"]
    admitted = upstream_workload(DOCS, "my-workload")
    readmitted = upstream_workload("issue-2291-podsready-timeout-readmitted.json",
                                   "job-sample-job-992ea")
    return [
        [created, admitted, readmitted],
        [changed(created, 2, **admitted_status), finished(admitted, 2, "2026-01-05T12:00:00Z"),
         readmitted],
        [changed(created, 2, **admitted_status)],
    ]


def _write(folder: Path, at: datetime, items: list[dict], *, gz: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": items}
    path = folder / f"workloads-{at:%Y%m%dT%H%M%S}Z.json{'.gz' if gz else ''}"
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump(doc, fh)
    else:
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def test_every_state_is_kept_and_deleted_workloads_keep_their_last_state(tmp_path: Path):
    files = [_write(tmp_path / "snaps", at, items)
             for at, items in zip((T0, T1, T2), _sequence(), strict=True)]
    with connect(tmp_path / "l.duckdb") as con:
        for path in files:
            service.import_workloads(con, path, cluster="gpulab")
        rows = con.execute(
            "SELECT name, resource_version, first_seen, last_seen, deleted_seen_at "
            "FROM kueue_workload_history ORDER BY name, first_seen").fetchall()
        assert rows == [
            ("job-sample-job-992ea", "1", T0, T1, T2),
            ("my-workload", "1", T0, T0, T2),
            ("my-workload", "2", T1, T1, T2),
            ("sample-job", "1", T0, T0, None),
            ("sample-job", "2", T1, T2, None),
        ]
        # what the detectors read: every Workload ever seen, at its latest state
        current = con.execute("SELECT name, admitted, finished, finished_reason, source_file "
                              "FROM kueue_workloads ORDER BY name").fetchall()
        assert current == [
            ("job-sample-job-992ea", True, False, None, str(files[0])),
            ("my-workload", True, True, "Succeeded", str(files[1])),
            ("sample-job", True, False, None, str(files[1])),
        ]  # source_file: the file each state was first stored from
        raw = con.execute("SELECT name, object_json->>'$.metadata.resourceVersion' "
                          "FROM kueue_workloads_raw ORDER BY name").fetchall()
        assert raw == [("job-sample-job-992ea", "1"), ("my-workload", "2"), ("sample-job", "2")]


def test_storing_a_snapshot_again_changes_nothing(tmp_path: Path):
    files = [_write(tmp_path / "snaps", at, items, gz=True)
             for at, items in zip((T0, T1, T2), _sequence(), strict=True)]
    with connect(tmp_path / "l.duckdb") as con:
        for path in files:
            service.import_workloads(con, path)
        before = _tables(con)
        for path in files:  # every file again, in order
            service.import_workloads(con, path)
        assert _tables(con) == before
        service.import_workloads(con, files[1])  # one again, out of order
        assert _tables(con) == before


def test_an_older_snapshot_arriving_late_leaves_the_latest_state(tmp_path: Path):
    seq = _sequence()
    late, last = _write(tmp_path / "s", T1, seq[1]), _write(tmp_path / "s", T2, seq[2])
    with connect(tmp_path / "l.duckdb") as con:
        service.import_workloads(con, last)
        service.import_workloads(con, late)
        assert con.execute(
            "SELECT name, object_json->>'$.metadata.resourceVersion', source_file "
            "FROM kueue_workloads_raw ORDER BY name").fetchall() == [
            ("job-sample-job-992ea", "1", str(late)), ("my-workload", "2", str(late)),
            ("sample-job", "2", str(last))]  # stored first from there
        assert con.execute("SELECT name, first_seen, last_seen FROM kueue_workload_history "
                           "WHERE name = 'sample-job'").fetchall() == [("sample-job", T1, T2)]


def test_a_namespaced_list_sees_deletions_in_its_namespace_only(tmp_path: Path):
    seq = _sequence()
    with connect(tmp_path / "l.duckdb") as con:
        workload_history.import_snapshot(con, _write(tmp_path / "s", T0, seq[0]), cluster="c")
        only_team_a = [i for i in seq[2] if i["metadata"]["namespace"] == "team-a"]
        workload_history.import_snapshot(con, _write(tmp_path / "s", T2, only_team_a),
                                         cluster="c", namespace="team-a")
        gone = con.execute("SELECT DISTINCT name FROM kueue_workload_history "
                           "WHERE deleted_seen_at IS NOT NULL").fetchall()
        assert gone == []  # my-workload and the kueue#2291 one are in other namespaces
        # another cluster's snapshot never deletes this cluster's Workloads
        workload_history.import_snapshot(con, _write(tmp_path / "o", T2, []), cluster="other")
        assert con.execute("SELECT count(*) FROM kueue_workload_history "
                           "WHERE deleted_seen_at IS NOT NULL").fetchone() == (0,)


def test_a_rejected_item_is_not_taken_for_a_deleted_workload(tmp_path: Path):
    seq = _sequence()
    broken = [dict(i) for i in seq[2]]
    broken[0] = {**broken[0], "status": None}  # rejected: status present and null
    with connect(tmp_path / "l.duckdb") as con:
        service.import_workloads(con, _write(tmp_path / "s", T0, seq[0]))
        result = service.import_workloads(con, _write(tmp_path / "s", T2, broken))
        assert (result.rows, len(result.rejects)) == (0, 1)
        assert con.execute("SELECT DISTINCT name FROM kueue_workload_history WHERE "
                           "deleted_seen_at IS NOT NULL ORDER BY 1").fetchall() == [
            ("job-sample-job-992ea",), ("my-workload",)]


# --------------------------------------------------------------------------- partial gangs

DAY = date(2026, 1, 5)


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


def _ledger_with_a_late_gang() -> duckdb.DuckDBPyConnection:
    """my-workload's three pods (2 GPUs each): two run 20 minutes before the third starts."""
    con = duckdb.connect()
    ensure_schema(con)
    con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                    "gpu_uuid) VALUES ('c', 'n2', 'a100', 8, ?, ?)",
                    [(i, f"GPU-{i}") for i in range(8)])
    con.execute("INSERT INTO rate_card VALUES ('a100', 'kubernetes', '', NULL, NULL, 7.20, "
                "'EUR')")
    for i, start in enumerate((_at(10), _at(10), _at(10, 20))):
        uid = f"pod-uid-{i}"
        con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, "
                    "node, gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, "
                    "person, team, cost_centre) VALUES (?, 'kubernetes', 'c', ?, 'my-workload', "
                    "?, 'n2', 'a100', 2, ?, ?, ?, 'my-namespace', 'alice', 't', 'cc')",
                    [DAY, uid, f"my-workload-{i}", start, _at(12),
                     2 * int((_at(12) - start).total_seconds())])
        con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                    "start_ts, end_ts, scrape_interval_s) VALUES ('c', 'my-namespace', ?, ?, "
                    "'n2', 2, ?, ?, 60)", [f"my-workload-{i}", uid, start, _at(12)])
    return con


def _gangs(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    build_incidents(con, DAY, DAY)
    return con.execute("SELECT k8s_workload, gpu_seconds, start_ts, end_ts FROM incidents "
                       "WHERE kind = 'partial_gang'").fetchall()


def test_a_partial_gang_is_found_after_its_workload_is_gone(tmp_path: Path):
    seq = _sequence()
    files = [_write(tmp_path / "s", at, items)
             for at, items in zip((T0, T1, T2), seq, strict=True)]
    assert "my-workload" not in {i["metadata"]["name"] for i in seq[2]}  # gone at the end
    con = _ledger_with_a_late_gang()
    try:
        # only the day's last snapshot, as one kubectl snapshot a day gave: the gang is missed
        service.import_workloads(con, files[2])
        assert _gangs(con) == []
        # every snapshot the sensor took: the Workload is known although it was deleted
        for path in files:
            service.import_workloads(con, path)
        assert _gangs(con) == [("my-namespace/my-workload", 2 * 2 * 20 * 60, _at(10),
                                _at(10, 20))]
    finally:
        con.close()


def test_the_spool_is_stored_in_time_order_and_archived(tmp_path: Path):
    spool = workload_history.spool_folder(tmp_path / "data" / "l.duckdb", "gpulab")
    assert spool == tmp_path / "data" / "spool" / "kueue" / "gpulab"
    seq = _sequence()
    for at, items in reversed(list(zip((T0, T1, T2), seq, strict=True))):
        _write(spool, at, items, gz=True)
    db = tmp_path / "data" / "l.duckdb"
    stored = workload_history.ingest_spool(lambda: connect(db), spool, cluster="gpulab")
    assert [o.observed_at for _, o in stored] == [T0, T1, T2]
    assert [(o.listed, o.new_states, o.deleted) for _, o in stored] == [
        (3, 3, 0), (3, 2, 0), (1, 0, 2)]
    assert sorted(p.name for p in spool.iterdir()) == ["done"]
    assert len(list((spool / "done").iterdir())) == 3
    with connect(db) as con:
        files = {f for (f,) in con.execute("SELECT DISTINCT source_file FROM "
                                           "kueue_workload_history").fetchall()}
        assert files == {str(p) for p in (spool / "done").iterdir()} - {
            str(spool / "done" / "workloads-20260105T130000Z.json.gz")}
        assert workload_history.ingest_spool(lambda: connect(db), spool, cluster="gpulab") == []


def test_a_file_without_a_time_is_observed_at_its_modification_time(tmp_path: Path):
    path = tmp_path / "latest.json"
    path.write_text(json.dumps({"items": _sequence()[0]}))
    stamp = datetime(2026, 1, 5, 9, tzinfo=UTC).timestamp()
    os.utime(path, (stamp, stamp))
    assert workload_history.observed_time(path) == datetime(2026, 1, 5, 9)


@pytest.mark.slow  # simulates a two-day world and builds it twice
def test_a_simulated_partial_gang_is_found_after_its_workload_was_deleted(tmp_path: Path):
    import csv

    from gpuledger.cli import main
    from simulator import SimConfig, simulate
    from simulator.config import NodeCounts

    world = tmp_path / "world"
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=300), world)
    with (world / "truth" / "incidents.csv").open(encoding="utf-8") as fh:
        [planted] = [r for r in csv.DictReader(fh) if r["kind"] == "partial_gang"]
    doc = json.loads((world / "kueue" / "workloads.json").read_text(encoding="utf-8"))
    gang = planted["k8s_workload"]
    later = [i for i in doc["items"]
             if f"{i['metadata']['namespace']}/{i['metadata']['name']}" != gang]
    assert len(later) == len(doc["items"]) - 1
    first = _write(tmp_path / "s", datetime(2026, 1, 6, 12), doc["items"])
    last = _write(tmp_path / "s", datetime(2026, 1, 7, 0, 30), later)

    def found(db: Path, *snapshots: Path) -> list[tuple]:
        base = ["--db", str(db)]
        assert main([*base, "ingest", "kubernetes", "--openmetrics",
                     str(world / "prometheus" / "metrics.om"), "--start", "2026-01-05",
                     "--end", "2026-01-07"]) == 0
        for snap in snapshots:
            assert main([*base, "import-workloads", str(snap)]) == 0
        assert main([*base, "build"]) == 0
        serving = db.with_name(db.stem + ".serving.duckdb")
        with duckdb.connect(str(serving), read_only=True) as con:
            return con.execute("SELECT k8s_workload FROM incidents "
                               "WHERE kind = 'partial_gang'").fetchall()

    assert found(tmp_path / "last-only.duckdb", last) == []  # the daily snapshot misses it
    assert found(tmp_path / "history.duckdb", first, last) == [(gang,)]
