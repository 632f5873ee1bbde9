"""Slurm's own GPU indices (`scontrol show job -d` snapshots) as GPU-level evidence of double
scheduling: hand-made ledgers without dcgm-exporter's hpc_job labels, figures computed here;
and `gpuledger import-scontrol` storing a snapshot once however often it is imported."""

import re
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from models.incidents import build_incidents
from models.runner import ensure_schema, read_snapshot

DAY = date(2026, 1, 5)
NODE = "n1"
UUIDS = [f"GPU-{i}" for i in range(8)]
_REF = re.compile(r"(\w+)\{([^}]*)\}")


def _at(h: int, m: int = 0, s: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m, s)


def _epoch(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1)).total_seconds())


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', ?, 'a100', 8, ?, ?)",
                  [(n, i, u if n == NODE else f"{u}-{n}") for n in (NODE, "n2")
                   for i, u in enumerate(UUIDS)])
    c.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.60, 'EUR'), "
              "('a100', 'kubernetes', '', NULL, NULL, 7.20, 'EUR')")
    yield c
    c.close()


def _slurm(con, job: int, gpus: int, start: datetime, end: datetime, *, submit: int = 0,
           bridge_pods: list[str] | None = None) -> str:
    """A Slurm run: slurm_runs, slurm_node_allocations and (unless slurm-bridge) allocations."""
    key = f"c:{job}:{submit}"
    con.execute("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw, start, \"end\", "
                "alloc_gpus, nodes, bridge_pods, source_file, line_no) "
                "VALUES (?, 'c', ?, ?, ?, ?, ?, [?], ?, 'dump', ?)",
                [key, str(job), job, start, end, gpus, NODE, bridge_pods or [], job])
    con.execute("INSERT INTO slurm_node_allocations (run_key, cluster, job_id, job_id_raw, "
                "node, gpus, start, \"end\") VALUES (?, 'c', ?, ?, ?, ?, ?, ?)",
                [key, str(job), job, NODE, gpus, start, end])
    if not bridge_pods:
        con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, "
                    "node, gpu_model, gpus, start_ts, end_ts, gpu_seconds, person, team, "
                    "cost_centre) VALUES (?, 'slurm', 'c', ?, ?, 'job', ?, 'a100', ?, ?, ?, "
                    "?, 'erin', 't-s', 'cc-s')",
                    [start.date(), key, str(job), NODE, gpus, start, end,
                     gpus * int((end - start).total_seconds())])
    return key


def _pod(con, uid: str, gpus: list[int], start: datetime, end: datetime) -> str:
    """A pod whose GPUs dcgm-exporter's pod labels named (allocations.gpu_uuids)."""
    uuids = [UUIDS[g] for g in gpus]
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "gpu_model, gpus, gpu_uuids, start_ts, end_ts, gpu_seconds, k8s_namespace, "
                "person, team, cost_centre) VALUES (?, 'kubernetes', 'c', ?, 'wl', ?, ?, "
                "'a100', ?, ?, ?, ?, ?, 'ns', 'alice', 't-k', 'cc-k')",
                [start.date(), uid, f"pod-{uid}", NODE, len(gpus), uuids, start, end,
                 len(gpus) * int((end - start).total_seconds())])
    con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                "start_ts, end_ts, scrape_interval_s) VALUES ('c', 'ns', ?, ?, ?, ?, ?, ?, 60)",
                [f"pod-{uid}", uid, NODE, len(gpus), start, end])
    return uid


def _job_block(job: int, start: datetime, seen: datetime, idx: str, count: int) -> str:
    """The job as `TZ=UTC SLURM_TIME_FORMAT=%s scontrol show job -d` prints it at ``seen``."""
    run = int((seen - start).total_seconds())
    return (f"JobId={job} JobName=train\n"
            "   JobState=RUNNING Reason=None Dependency=(null)\n"
            f"   RunTime={run // 3600:02d}:{run // 60 % 60:02d}:{run % 60:02d} "
            "TimeLimit=12:00:00 TimeMin=N/A\n"
            f"   StartTime={_epoch(start)} EndTime={_epoch(start) + 43200} Deadline=N/A\n"
            f"   NodeList={NODE}\n   JOB_GRES=gpu:a100:{count}\n"
            f"     Nodes={NODE} CPU_IDs=0-3 Mem=4000 GRES=gpu:a100:{count}(IDX:{idx})\n"
            "   MinCPUsNode=4 MinMemoryCPU=1000M MinTmpDiskNode=0\n\n")


def _snapshot(con, path: Path, *blocks: str) -> scontrol_ingest.ScontrolLoad:
    path.write_text("".join(blocks), encoding="utf-8")
    return scontrol_ingest.import_scontrol_file(con, path)


def _incidents(con) -> list[dict]:
    build_incidents(con, DAY, DAY)
    rel = con.sql("SELECT * FROM incidents ORDER BY start_ts, node")
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


def _assert_evidence_rows_exist(con, evidence: str) -> set[str]:
    refs = _REF.findall(evidence)
    for table, body in refs:
        pairs = [kv.split("=", 1) for kv in body.split(",")]
        where = " AND ".join(f"CAST({k} AS VARCHAR) = ?" for k, _ in pairs)
        found = con.execute(f"SELECT count(*) FROM {table} WHERE {where}",
                            [v for _, v in pairs]).fetchone()[0]
        assert found >= 1, (table, body)
    return {t for t, _ in refs}


def test_only_slurm_s_gpu_indices_reveal_the_overlap(con, tmp_path):
    job = _slurm(con, 201, 4, _at(8), _at(10))
    pod = _pod(con, "u1", [3], _at(9, 30), _at(11))  # on index 3, which Slurm gave the job
    _pod(con, "u2", [6], _at(9), _at(10, 30))  # same time, another GPU
    _pod(con, "u3", [2], _at(10), _at(11))  # the job's GPU, handed over cleanly
    assert _incidents(con) == []  # 4 + 1 + 1 GPUs on 8: no node-level evidence, no dcgm labels
    load = _snapshot(con, tmp_path / "scontrol-0900.txt",
                     _job_block(201, _at(8), _at(9), "2-5", 4))
    assert (load.gpu_rows, load.rejects) == (4, ())
    [row] = _incidents(con)
    overlap = (_at(10) - _at(9, 30)).total_seconds()
    assert (row["kind"], row["evidence_level"]) == ("double_scheduled", "gpu")
    assert (row["gpu_uuids"], row["gpus"]) == (["GPU-3"], 1)
    assert (row["start_ts"], row["end_ts"]) == (_at(9, 30), _at(10))
    assert row["gpu_seconds"] == 1 * overlap
    assert (row["slurm_job"], row["k8s_workload"]) == ("201", "ns/wl")
    assert (row["person"], row["other_person"]) == ("alice", "erin")  # the pod came later
    assert float(row["cost"]) == round(overlap * 7.20 / 3600, 2)
    assert row["share"] == pytest.approx(1 / 1)  # 1 GPU of the smaller allocation's 1
    tables = _assert_evidence_rows_exist(con, row["evidence"])
    assert tables == {"slurm_gpu_indices", "allocations"}
    assert f"source_key={job}," in row["evidence"]
    assert f"source_key={pod}," in row["evidence"]
    assert "slurm_gpu_indices{job_id_raw=201,node=n1,gpu_index=3,observed_at=2026-01-05 09:00:00}" \
        in row["evidence"]


def test_each_run_of_a_requeued_job_is_judged_by_its_own_indices(con, tmp_path):
    _slurm(con, 301, 2, _at(1), _at(2), submit=0)
    second = _slurm(con, 301, 2, _at(5), _at(7), submit=1)
    _snapshot(con, tmp_path / "a.txt", _job_block(301, _at(1), _at(1, 30), "0-1", 2))
    _snapshot(con, tmp_path / "b.txt", _job_block(301, _at(5), _at(5, 30), "4-5", 2))
    _pod(con, "early", [4], _at(1, 30), _at(2, 30))  # run 1's time, run 2's GPU
    _pod(con, "wrong", [0], _at(6), _at(6, 30))  # run 2's time, run 1's GPU
    _pod(con, "clash", [5], _at(6), _at(6, 30))  # run 2's time and GPU
    [row] = _incidents(con)
    assert row["gpu_uuids"] == ["GPU-5"]
    assert row["gpu_seconds"] == 30 * 60
    assert f"source_key={second}," in row["evidence"]
    assert "source_key=clash," in row["evidence"]


def test_an_overlap_within_one_scrape_interval_is_a_late_pod_end(con, tmp_path):
    _pod(con, "before", [2], _at(7), _at(8, 0, 50))  # seen ending 50 s late (scrape: 60 s)
    _slurm(con, 202, 1, _at(8), _at(9))
    _snapshot(con, tmp_path / "s.txt", _job_block(202, _at(8), _at(8, 10), "2", 1))
    assert _incidents(con) == []


def test_scontrol_and_dcgm_evidence_of_one_pair_are_one_row(con, tmp_path):
    _slurm(con, 401, 2, _at(3), _at(6))
    _pod(con, "u4", [0, 1], _at(4), _at(7))
    # dcgm-exporter sees both holders on GPU-0 only (its hpc_job mapping lags, say)
    rows = [("c", "GPU-0", NODE, 0, _at(4) + timedelta(minutes=m), 0.5, ns, pod, job)
            for m in range(120)
            for ns, pod, job in (("ns", "pod-u4", None), (None, None, "401"))]
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, "
                    "bucket_start, busy_fraction, samples, namespace, pod, hpc_job) "
                    "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)", rows)
    _snapshot(con, tmp_path / "s.txt", _job_block(401, _at(3), _at(3, 5), "0-1", 2))
    [row] = _incidents(con)
    assert row["evidence_level"] == "gpu"
    assert row["gpu_uuids"] == ["GPU-0", "GPU-1"]  # dcgm's one and Slurm's two: both GPUs
    assert row["gpu_seconds"] == 2 * 2 * 3600
    assert _assert_evidence_rows_exist(con, row["evidence"]) == {
        "gpu_utilization", "slurm_gpu_indices", "allocations"}


def test_scontrol_and_node_evidence_of_one_pair_are_one_row(con, tmp_path):
    _slurm(con, 501, 6, _at(1), _at(9))
    _pod(con, "u5", [2, 3, 4, 5], _at(8), _at(12))  # 6 + 4 on 8 GPUs: node over by 2
    _snapshot(con, tmp_path / "s.txt", _job_block(501, _at(1), _at(2), "0-5", 6))
    [row] = _incidents(con)
    assert row["evidence_level"] == "gpu"
    assert (row["gpus"], row["gpu_seconds"]) == (4, 4 * 3600)  # not the node's excess (2)
    tables = _assert_evidence_rows_exist(con, row["evidence"])
    assert tables == {"slurm_gpu_indices", "nodes", "allocations"}


def test_a_slurm_bridge_job_on_its_pod_s_gpus_is_no_conflict(con, tmp_path):
    _slurm(con, 601, 2, _at(2), _at(4), bridge_pods=["ns/pod-u6"])
    _pod(con, "u6", [0, 1], _at(2, 1), _at(4, 1))
    _snapshot(con, tmp_path / "s.txt", _job_block(601, _at(2), _at(3), "0-1", 2))
    assert _incidents(con) == []


# --------------------------------------------------------------------------------------------
# gpuledger import-scontrol


def test_import_scontrol_twice_changes_nothing_and_keeps_the_rejects(tmp_path, capsys):
    db = tmp_path / "ledger.duckdb"
    snap = tmp_path / "scontrol-20260105T0900.txt"
    snap.write_text(_job_block(701, _at(8), _at(9), "0-1,4", 3)
                    + "JobId=702 JobName=broken\n   JobState=RUNNING\n"
                    "   StartTime=1767600000 EndTime=1767603600\n"
                    "     Nodes=n1 CPU_IDs=0 Mem=1 GRES=gpu:a100:2(IDX:7-6)\n\n"
                    + _job_block(703, _at(7), _at(9), "5", 1), encoding="utf-8")
    bad_line = next(no for no, line in enumerate(snap.read_text().splitlines(), start=1)
                    if "IDX:7-6" in line)
    query = ("SELECT job_id, job_id_raw, node, gpu_index, observed_at FROM slurm_gpu_indices "
             "ORDER BY ALL")
    tables = {}
    for attempt in range(2):
        assert main(["--db", str(db), "import-scontrol", str(snap)]) == 0
        err = capsys.readouterr().err
        assert "3 jobs, 4 GPU index rows, 1 rejected" in err
        assert f"{snap}:{bad_line}: field GRES" in err
        with read_snapshot(db) as con:  # the published copy
            tables[attempt] = (con.execute(query).fetchall(),
                               con.execute("SELECT * FROM rejects ORDER BY ALL").fetchall())
    assert tables[0] == tables[1]
    rows, rejects = tables[0]
    got = sorted((r[1], r[3]) for r in rows)  # (job_id_raw, gpu_index)
    assert got == [(701, 0), (701, 1), (701, 4), (703, 5)]
    assert {r[4] for r in rows} == {_at(9)}  # observed_at: StartTime + RunTime
    [(source, source_file, line_no, field_name, _, raw)] = rejects
    assert (source, source_file, line_no, field_name) == ("scontrol", str(snap), bad_line,
                                                        "GRES")
    assert "IDX:7-6" in raw


def test_import_scontrol_with_a_stated_time_and_zone(tmp_path, capsys):
    db = tmp_path / "ledger.duckdb"
    snap = tmp_path / "local.txt"
    snap.write_text(_job_block(801, _at(8), _at(9), "3", 1).replace(
        f"StartTime={_epoch(_at(8))}", "StartTime=2026-01-05T09:00:00"), encoding="utf-8")
    assert main(["--db", str(db), "import-scontrol", str(snap), "--timezone", "Europe/Berlin",
                 "--observed-at", "2026-01-05T09:15:00Z"]) == 0
    capsys.readouterr()
    with read_snapshot(db) as con:
        assert con.execute("SELECT start, observed_at FROM slurm_gpu_indices").fetchall() == [
            (_at(8), _at(9, 15))]  # 09:00 in Berlin is 08:00 UTC


def test_load_world_picks_up_the_world_s_scontrol_snapshots(tmp_path, capsys):
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    world = tmp_path / "world"
    (world / "kueue").mkdir(parents=True)
    (world / "slurm").mkdir()
    for name in ("world.json", "nodes.csv", "identity_map.csv", "accounts.csv",
                 "rate_card.csv"):
        (world / name).write_bytes((sample / name).read_bytes())
    (world / "kueue" / "workloads.json").write_text('{"apiVersion": "v1", "items": []}')
    (world / "gpuledger.toml").write_text(  # the site file load-world reads (docs/site-file.md)
        '[gpuledger]\nfirst_day = "2026-01-05"\n[gpuledger.reference]\nnodes = "nodes.csv"\n'
        'identity_map = "identity_map.csv"\naccounts = "accounts.csv"\n'
        'rate_card = "rate_card.csv"\n[gpuledger.clusters.gpulab.slurm]\n'
        'scontrol_snapshots = "slurm"\n[gpuledger.clusters.gpulab.kueue]\n'
        'snapshot = "kueue/workloads.json"\n', encoding="utf-8")
    for minute in (0, 1):
        (world / "slurm" / f"scontrol-0{minute}.txt").write_text(
            _job_block(901, _at(8), _at(9, minute), "1,3", 2), encoding="utf-8")
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(world)]) == 0
    assert "2 GPU index rows, 0 rejected" in capsys.readouterr().err
    with read_snapshot(db) as con:
        got = con.execute("SELECT observed_at, gpu_index FROM slurm_gpu_indices "
                          "ORDER BY ALL").fetchall()
    assert got == [(_at(9, m), i) for m in (0, 1) for i in (1, 3)]
