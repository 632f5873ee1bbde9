"""One GPU-second belongs to at most one incident (docs/detectors.md "Precedence"): hand-made
ledgers where a gang's or a double-scheduling's GPUs are idle too, an exporter gap inside an
idle allocation, the idle policies (zero, window, low efficiency); then the sample world and a
realistic world summed per GPU-second."""

import json
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.incidents import IdlePolicy, IdleRules, build_incidents
from models.runner import ensure_schema, read_snapshot
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.models.idle_ledger import insert_minutes, insert_pod, insert_slurm_job

ROOT = Path(__file__).resolve().parents[2]
DAY = date(2026, 1, 5)


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', ?, 'a100', 8, ?, ?)",
                  [(n, i, f"GPU-{n}-{i}") for n in ("n1", "n2") for i in range(8)])
    c.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.60, 'EUR'), "
              "('a100', 'kubernetes', '', NULL, NULL, 7.20, 'EUR')")
    yield c
    c.close()


def _incidents(con, **kwargs) -> list[dict]:
    build_incidents(con, DAY, DAY, **kwargs)
    rel = con.sql("SELECT * FROM incidents ORDER BY kind, start_ts, node")
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


OVERLAP_SQL = """
    WITH g AS (
        SELECT incident_id, kind, unnest(gpu_uuids) AS gpu, start_ts AS s, end_ts AS e
        FROM incidents WHERE gpu_seconds > 0 AND gpu_uuids IS NOT NULL
    )
    SELECT a.kind, b.kind, a.gpu,
           sum(date_diff('second', greatest(a.s, b.s), least(a.e, b.e))) AS seconds
    FROM g AS a
    INNER JOIN g AS b
        ON a.gpu = b.gpu AND a.incident_id < b.incident_id AND a.s < b.e AND b.s < a.e
    GROUP BY ALL
"""


def test_a_partial_gangs_idle_gpus_are_the_gangs_not_idle_too(con):
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pods_wanted, admitted_at, "
                "pods_ready_at) VALUES ('uid-late', 'ns', 'late', 3, ?, ?)", [_at(10), _at(10, 40)])
    # two pods wait 40 minutes for the third, their GPUs idle until 11:30
    insert_pod(con, "l0", 1, _at(10), _at(12), workload="late")
    insert_pod(con, "l1", 1, _at(10), _at(12), workload="late", node="n2")
    insert_pod(con, "l2", 1, _at(10, 40), _at(12), workload="late", node="n2")
    insert_minutes(con, [0], _at(10), _at(11, 30), 0.01, pod="pod-l0")
    insert_minutes(con, [0], _at(11, 30), _at(12), 0.8, pod="pod-l0")
    insert_minutes(con, [1], _at(10), _at(12), 0.8, pod="pod-l1", node="n2")
    insert_minutes(con, [2], _at(10, 40), _at(12), 0.8, pod="pod-l2", node="n2")
    rows = _incidents(con)
    gang = [r for r in rows if r["kind"] == "partial_gang"]
    idle = [r for r in rows if r["kind"] == "idle_allocation"]
    assert [(g["start_ts"], g["end_ts"], g["gpu_seconds"]) for g in gang] == [
        (_at(10), _at(10, 40), 2 * 40 * 60)]
    # the idle period 10:00-11:30 loses the gang's 40 minutes: 50 minutes are idle's
    assert [(i["node"], i["start_ts"], i["end_ts"], i["gpu_seconds"]) for i in idle] == [
        ("n1", _at(10, 40), _at(11, 30), 50 * 60)]
    assert "bucket_start=2026-01-05 10:40:00" in idle[0]["evidence"]
    assert con.execute(OVERLAP_SQL).fetchall() == []


def test_a_double_scheduled_gpu_is_not_idle_in_the_same_seconds(con):
    insert_slurm_job(con, 201, 2, _at(8), _at(10))
    insert_pod(con, "d1", 2, _at(9), _at(10))
    insert_minutes(con, [0, 1], _at(8), _at(10), 0.0, job=201)
    insert_minutes(con, [0, 1], _at(9), _at(10), 0.0, pod="pod-d1")
    rows = _incidents(con)
    assert [(r["kind"], r["start_ts"], r["end_ts"], r["gpu_seconds"]) for r in rows] == [
        ("double_scheduled", _at(9), _at(10), 2 * 3600),
        ("idle_allocation", _at(8), _at(9), 2 * 3600),  # the job's idle hour before the pod
    ]
    assert con.execute(OVERLAP_SQL).fetchall() == []


def test_a_partial_gangs_double_scheduled_gpus_are_the_double_schedulings(con):
    """A Slurm job takes both GPUs of one of a gang's early pods for 20 of the 40 minutes the
    gang waits: those 2 x 20 GPU-minutes are double_scheduled's, the gang keeps the rest."""
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pods_wanted, admitted_at, "
                "pods_ready_at) VALUES ('uid-g', 'ns', 'g', 3, ?, ?)", [_at(10), _at(10, 40)])
    insert_pod(con, "g0", 2, _at(10), _at(12), workload="g")
    insert_pod(con, "g1", 2, _at(10), _at(12), workload="g", node="n2")
    insert_pod(con, "g2", 2, _at(10, 40), _at(12), workload="g", node="n2")
    for uid, node, gpus, start in (("g0", "n1", [0, 1], _at(10)), ("g1", "n2", [0, 1], _at(10)),
                                   ("g2", "n2", [2, 3], _at(10, 40))):
        insert_minutes(con, gpus, start, _at(12), 0.8, pod=f"pod-{uid}", node=node)
    con.execute("UPDATE allocations SET gpu_uuids = ['GPU-n1-0', 'GPU-n1-1'] "
                "WHERE source_key = 'g0'")
    insert_slurm_job(con, 401, 2, _at(10, 10), _at(10, 30))
    insert_minutes(con, [0, 1], _at(10, 10), _at(10, 30), 0.8, job=401)
    rows = _incidents(con)
    by_kind = {r["kind"]: r for r in rows}
    assert sorted(by_kind) == ["double_scheduled", "partial_gang"]
    double, gang = by_kind["double_scheduled"], by_kind["partial_gang"]
    assert (double["start_ts"], double["end_ts"], double["gpu_seconds"]) == (
        _at(10, 10), _at(10, 30), 2 * 20 * 60)
    # 4 GPUs x 40 min held while partial, less the 2 x 20 the double-scheduling holds
    assert (gang["start_ts"], gang["end_ts"], gang["gpu_seconds"]) == (
        _at(10), _at(10, 40), 4 * 40 * 60 - 2 * 20 * 60)


def test_an_exporter_gap_inside_an_idle_allocation_is_never_idle(con):
    insert_pod(con, "g1", 1, _at(9), _at(13))
    insert_minutes(con, [0], _at(9), _at(13), 0.0, pod="pod-g1", skip=(_at(10), _at(10, 45)))
    for rules in (None, IdleRules(IdlePolicy(window_minutes=60, window_threshold=0.10))):
        rows = _incidents(con, idle_rules=rules)
        assert [(r["start_ts"], r["end_ts"], r["gpu_seconds"]) for r in rows] == [
            (_at(9), _at(10), 3600), (_at(10, 45), _at(13), 135 * 60)]


def test_the_window_rule_flags_long_low_phases_and_only_where_sampled(con):
    insert_pod(con, "w1", 1, _at(8), _at(11))
    insert_minutes(con, [0], _at(8), _at(11), 0.07, pod="pod-w1")
    insert_pod(con, "w2", 1, _at(8), _at(11), node="n2")  # low too, but half its samples missing
    insert_minutes(con, [0], _at(8), _at(11), 0.07, pod="pod-w2", node="n2", skip=(_at(9), _at(10)))
    window = IdleRules(IdlePolicy(window_minutes=120, window_threshold=0.10,
                                  efficiency_threshold=0))
    assert _incidents(con, idle_rules=IdleRules(IdlePolicy(efficiency_threshold=0))) == []
    [row] = _incidents(con, idle_rules=window)
    assert (row["node"], row["start_ts"], row["end_ts"]) == ("n1", _at(8), _at(11))
    assert "under 10.0% mean busy over 120.0-min windows" in row["detail"]


def test_low_efficiency_is_its_own_kind_without_wasted_gpu_seconds(con):
    insert_pod(con, "e1", 2, _at(8), _at(11))  # 7 % all along: slow, not idle
    insert_minutes(con, [0, 1], _at(8), _at(11), 0.07, pod="pod-e1")
    insert_pod(con, "e2", 1, _at(8), _at(11), node="n2")  # idle: an idle incident, nothing more
    insert_minutes(con, [0], _at(8), _at(11), 0.01, pod="pod-e2", node="n2")
    insert_pod(con, "e3", 1, _at(8), _at(11), node="n2")  # 7 %, but 60 % of it unseen
    insert_minutes(con, [1], _at(8), _at(9, 12), 0.07, pod="pod-e3", node="n2")
    rows = _incidents(con)
    assert [(r["kind"], r["node"]) for r in rows] == [
        ("idle_allocation", "n2"), ("low_efficiency", "n1")]
    low = rows[1]
    assert (low["gpu_seconds"], float(low["cost"]), low["start_ts"]) == (0, 0.0, _at(8))
    assert low["share"] == pytest.approx(0.07)
    assert "21600 GPU-s held" in low["detail"]
    assert _incidents(con, idle_rules=IdleRules(IdlePolicy(efficiency_threshold=0.05)))[
        -1]["kind"] == "idle_allocation"


def test_policies_match_a_namespace_or_a_partition_first_match_wins(con):
    insert_pod(con, "p1", 1, _at(8), _at(9), namespace="notebooks")
    insert_minutes(con, [0], _at(8), _at(8, 45), 0.0, pod="pod-p1", namespace="notebooks")
    insert_slurm_job(con, 301, 1, _at(8), _at(9), node="n2", partition="debug")
    insert_minutes(con, [0], _at(8), _at(8, 45), 0.0, job=301, node="n2")
    assert len(_incidents(con)) == 2  # 45 minutes at 0 %: both idle under the defaults
    rules = IdleRules(IdlePolicy(), (
        IdlePolicy(namespace="notebooks", zero_minutes=60),
        IdlePolicy(cluster="c", partition="debug", zero_minutes=120),
        IdlePolicy(cluster="c", zero_minutes=10)))  # later: never reached for those two
    assert _incidents(con, idle_rules=rules) == []
    rules = IdleRules(IdlePolicy(), (IdlePolicy(partition="gpu", zero_minutes=120),))
    assert [r["slurm_job"] for r in _incidents(con, idle_rules=rules)] == [None, "301"]


# --------------------------------------------------------------------------------------------
# whole worlds: no GPU-second in two incidents


def _build(world: Path, db: Path) -> None:
    window = json.loads((world / "world.json").read_text())["window"]
    assert main(["--db", str(db), "--config", str(world / "gpuledger.toml"), "load"]) == 0
    assert main(["--db", str(db), "--config", str(world / "gpuledger.toml"), "build",
                 "--start", window["start"], "--end", window["end"]]) == 0


@pytest.fixture(scope="module")
def realistic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    world = tmp_path_factory.mktemp("realistic")
    simulate(SimConfig(seed=23, days=2, nodes=NodeCounts(hpc=3, k8s=5, shared=3),
                       realistic=True), world)
    db = world.parent / "realistic.duckdb"
    _build(world, db)
    return db


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sample") / "ledger.duckdb"
    window = json.loads((ROOT / "sample_data" / "world.json").read_text())["window"]
    assert main(["--db", str(db), "load-world", str(ROOT / "sample_data")]) == 0
    assert main(["--db", str(db), "build", "--start", window["start"],
                 "--end", window["end"]]) == 0
    return db


@pytest.mark.parametrize("world", ["sample_db", "realistic_db"])
def test_no_gpu_second_is_in_two_incidents(world, request):
    db = request.getfixturevalue(world)
    with read_snapshot(db) as c:
        kinds = dict(c.execute("SELECT kind, count(*) FROM incidents GROUP BY kind").fetchall())
        assert kinds.get("idle_allocation", 0) > 0  # the check is not vacuous
        assert c.execute(OVERLAP_SQL).fetchall() == []
        # node-level rows name no GPUs: their pair's allocations hold no idle seconds then
        assert c.execute("""
            SELECT count(*) FROM incidents AS d JOIN incidents AS i
                ON d.kind = 'double_scheduled' AND d.gpu_uuids IS NULL
                AND i.kind = 'idle_allocation' AND i.node = d.node
                AND (i.slurm_job = d.slurm_job OR i.k8s_workload = d.k8s_workload)
                AND i.start_ts < d.end_ts AND d.start_ts < i.end_ts
        """).fetchone()[0] == 0


def test_remnants_shorter_than_the_idle_rule_are_no_incidents(con):
    """Issue #28: after a partial gang's GPU-time is taken off an idle run, the 2 minutes left
    on each side were idle incidents of their own although the rule asks for 30 minutes."""
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pods_wanted, admitted_at, "
                "pods_ready_at) VALUES ('uid-late', 'ns', 'late', 2, ?, ?)", [_at(10), _at(10, 40)])
    # l0 starts 2 minutes before the gang's admission is complete... and stays idle 2 minutes
    # after it: 09:58-10:42 idle, the gang partial 10:00-10:40
    insert_pod(con, "l0", 1, _at(9, 58), _at(12), workload="late")
    insert_pod(con, "l1", 1, _at(10, 40), _at(12), workload="late", node="n2")
    insert_minutes(con, [0], _at(9, 58), _at(10, 42), 0.01, pod="pod-l0")
    insert_minutes(con, [0], _at(10, 42), _at(12), 0.8, pod="pod-l0")
    insert_minutes(con, [1], _at(10, 40), _at(12), 0.8, pod="pod-l1", node="n2")
    rows = _incidents(con)
    assert [r["kind"] for r in rows] == ["partial_gang"]
    # a remnant that lasts the rule's 30 minutes is still one (the 50 minutes of the test above)
    rows = _incidents(con, idle_min_minutes=1)
    idle = [(r["start_ts"], r["end_ts"]) for r in rows if r["kind"] == "idle_allocation"]
    assert (_at(10, 40), _at(10, 42)) in idle
