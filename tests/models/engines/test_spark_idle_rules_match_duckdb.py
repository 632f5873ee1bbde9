"""Same inputs, same figures (issue #18) for the idle policies: with the window rule on and
policies per Slurm partition and Kubernetes namespace, ``build_incidents`` on the DuckDB engine
and on the Spark engine (``det_idle``, ``det_double_gpu`` and ``det_low_eff`` on the cluster of
``spark_master``) writes the same ``incidents`` rows, every column (floats to 1e-9 relative: a
mean summed in another order).

Worlds: a hand-made ledger where each rule and policy decides one case (windows whose mean is
exactly the threshold among them) and where earlier incidents split idle periods in pieces (a
double-scheduling in the middle of an idle Slurm job, a partial gang at the start of an idle
pod), and the realistic simulated world (seed 3, 2 days) under site-like policies.
"""

import math
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest

from models import build
from models.engines import DUCKDB_ENGINE, Engine
from models.engines.spark import SparkEngine
from models.incidents import IdlePolicy, IdleRules, build_incidents
from models.runner import connect, ensure_schema
from simulator import SimConfig
from tests.models.engines.worlds import loaded_world
from tests.models.idle_ledger import insert_minutes, insert_pod, insert_slurm_job

pytestmark = pytest.mark.spark

DAY = date(2026, 1, 5)
# the hand-made ledger's policies: the window rule for one namespace and one partition, a longer
# zero rule for another namespace; the default keeps the zero rule only
POLICIES = IdleRules(IdlePolicy(), (
    IdlePolicy(namespace="research", window_minutes=120, window_threshold=0.10),
    IdlePolicy(cluster="c", partition="debug", zero_minutes=20, window_minutes=30,
               window_threshold=0.20),
    IdlePolicy(namespace="notebooks", zero_minutes=60),
))
# the window rule everywhere
WINDOW_EVERYWHERE = IdleRules(IdlePolicy(window_minutes=60, window_threshold=0.10))
# the realistic world's namespaces (research, inference, sandbox, team-*) and partitions (gpu,
# shared, cpu)
SITE = IdleRules(IdlePolicy(window_minutes=60, window_threshold=0.15), (
    IdlePolicy(namespace="research", zero_minutes=20, window_minutes=120,
               window_threshold=0.10),
    IdlePolicy(partition="gpu", window_minutes=45, window_threshold=0.20),
    IdlePolicy(namespace="sandbox", zero_minutes=60, window_minutes=0),
))


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


def _hand_made(con: duckdb.DuckDBPyConnection) -> None:
    ensure_schema(con)
    con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                    "VALUES ('c', ?, 'a100', 8, ?, ?)",
                    [(n, i, f"GPU-{n}-{i}") for n in ("n1", "n2", "n3") for i in range(8)])
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.60, 'EUR'), "
                "('a100', 'kubernetes', '', NULL, NULL, 7.20, 'EUR')")
    # a Slurm job idle 08:00-12:00 whose GPUs a pod also holds 09:00-10:00 (double-scheduled):
    # its idle period is cut in two pieces, the second one starting at a claim's end
    insert_slurm_job(con, 201, 2, _at(8), _at(12))
    insert_minutes(con, [0, 1], _at(8), _at(12), 0.0, job=201)
    insert_pod(con, "d1", 2, _at(9), _at(10))
    insert_minutes(con, [0, 1], _at(9), _at(10), 0.0, pod="pod-d1")
    # a gang whose early pod waits 40 minutes for the last one, its GPU idle until 11:30: the
    # partial gang holds 10:00-10:40, the idle piece is what is left
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pods_wanted, admitted_at, "
                "pods_ready_at) VALUES ('uid-late', 'ns', 'late', 3, ?, ?)",
                [_at(10), _at(10, 40)])
    insert_pod(con, "l0", 1, _at(10), _at(12), workload="late", node="n2")
    insert_pod(con, "l1", 1, _at(10), _at(12), workload="late", node="n3")
    insert_pod(con, "l2", 1, _at(10, 40), _at(12), workload="late", node="n3")
    insert_minutes(con, [7], _at(10), _at(11, 30), 0.01, pod="pod-l0", node="n2")
    insert_minutes(con, [7], _at(11, 30), _at(12), 0.8, pod="pod-l0", node="n2")
    insert_minutes(con, [6], _at(10), _at(12), 0.8, pod="pod-l1", node="n3")
    insert_minutes(con, [7], _at(10, 40), _at(12), 0.8, pod="pod-l2", node="n3")
    # research pods at 7 % for three hours (never below 5 %: the zero rule stays quiet), one
    # with an hour of its samples missing, one with a busy spell; two GPUs of one of them
    insert_pod(con, "w1", 2, _at(8), _at(11), node="n2", namespace="research")
    insert_minutes(con, [0, 1], _at(8), _at(11), 0.07, pod="pod-w1", node="n2",
                   namespace="research")
    insert_pod(con, "w2", 1, _at(8), _at(11), node="n2", namespace="research")
    insert_minutes(con, [2], _at(8), _at(11), 0.07, pod="pod-w2", node="n2", namespace="research",
                   skip=(_at(9), _at(10)))
    insert_pod(con, "w3", 1, _at(13), _at(18), node="n2", namespace="research")
    insert_minutes(con, [3], _at(13), _at(18),
                   lambda m: 0.6 if 130 <= m < 170 else 0.03 + m % 5 / 100,
                   pod="pod-w3", node="n2", namespace="research")
    # a debug job idle 25 minutes (its policy: 20) then at 13 %, under 20 % for 30-min windows
    insert_slurm_job(con, 301, 1, _at(13), _at(15), node="n3", partition="debug")
    insert_minutes(con, [0], _at(13), _at(13, 25), 0.0, job=301, node="n3")
    insert_minutes(con, [0], _at(13, 25), _at(15), 0.13, job=301, node="n3")
    # a research pod cycling 5, 15, 10, 7 and 13 %: a window of whole cycles averages exactly
    # 10 %, not below it (sums in floating point would put some just below); the first windows
    # of 90 % or more of a window are below it
    insert_pod(con, "t1", 1, _at(19), _at(23), namespace="research")
    insert_minutes(con, [5], _at(19), _at(23), lambda m: (0.05, 0.15, 0.10, 0.07, 0.13)[m % 5],
                   pod="pod-t1", namespace="research")
    # a notebook idle 45 minutes (its policy: 60) and an idle pod with an exporter outage
    insert_pod(con, "p1", 1, _at(8), _at(9), node="n3", namespace="notebooks")
    insert_minutes(con, [1], _at(8), _at(8, 45), 0.0, pod="pod-p1", node="n3",
                   namespace="notebooks")
    insert_pod(con, "g1", 1, _at(15), _at(19), node="n1")
    insert_minutes(con, [4], _at(15), _at(19), 0.0, pod="pod-g1", skip=(_at(16), _at(16, 45)))


def _incidents(con: duckdb.DuckDBPyConnection, db: str) -> tuple[list[str], list[str], list]:
    described = con.execute(f"DESCRIBE {db}.incidents").fetchall()
    names, types = [r[0] for r in described], [r[1] for r in described]
    rows = con.execute(f"SELECT * FROM {db}.incidents").fetchall()
    exact = [i for i, t in enumerate(types) if t != "DOUBLE"]
    rows.sort(key=lambda row: tuple(repr(row[i]) for i in exact))
    return names, types, rows


def _assert_same_incidents(duck_db: Path, spark_db: Path) -> list[dict]:
    """Both ledgers' incidents, every column; the DuckDB engine's as dicts."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{duck_db}' AS duck (READ_ONLY)")
    con.execute(f"ATTACH '{spark_db}' AS ours (READ_ONLY)")
    names, types, duck = _incidents(con, "duck")
    assert _incidents(con, "ours")[:2] == (names, types)
    ours = _incidents(con, "ours")[2]
    assert len(ours) == len(duck), ([r[:9] for r in duck], [r[:9] for r in ours])
    for a, b in zip(duck, ours, strict=True):
        for name, kind, x, y in zip(names, types, a, b, strict=True):
            if kind == "DOUBLE" and x is not None and y is not None:
                assert math.isclose(x, y, rel_tol=1e-9, abs_tol=0.0), (name, a, b)
            else:
                assert x == y, (name, a, b)
    return [dict(zip(names, row, strict=True)) for row in duck]


def _build_both(folder: Path, spark, prepare: Callable[[Path], None], first: date, last: date,
                rules: IdleRules) -> list[dict]:
    """The ledger ``prepare`` writes, its incidents built on each engine and compared."""
    built = {}
    for name, engine in (("duckdb", DUCKDB_ENGINE),
                         ("spark", SparkEngine(spark, folder / "scratch"))):
        db = folder / f"{name}.duckdb"
        prepare(db)
        with connect(db) as con:
            built[name] = _run(con, first, last, rules, engine)
    assert built["spark"] == built["duckdb"]
    return _assert_same_incidents(folder / "duckdb.duckdb", folder / "spark.duckdb")


def _run(con: duckdb.DuckDBPyConnection, first: date, last: date, rules: IdleRules,
         engine: Engine) -> dict[str, int]:
    return build_incidents(con, first, last, idle_rules=rules, engine=engine).by_kind


def _hand_made_ledger(db: Path) -> None:
    with connect(db) as con:
        _hand_made(con)


def _idle(rows: list[dict]) -> dict[str, list[tuple]]:
    """The idle incidents per Slurm job or pod workload: (node, start, end, GPU-seconds)."""
    found: dict[str, list[tuple]] = {}
    for r in rows:
        if r["kind"] == "idle_allocation":
            found.setdefault(r["slurm_job"] or r["k8s_workload"], []).append(
                (r["node"], r["start_ts"], r["end_ts"], r["gpu_seconds"]))
    return {k: sorted(v) for k, v in found.items()}


def test_policies_per_namespace_and_partition_and_split_pieces_match(spark, tmp_path: Path
                                                                     ) -> None:
    rows = _build_both(tmp_path, spark, _hand_made_ledger, DAY, DAY, POLICIES)
    idle = _idle(rows)
    assert idle == {
        # the double-scheduling's hour is cut out: two pieces of one idle period
        "201": [("n1", _at(8), _at(9), 2 * 3600), ("n1", _at(10), _at(12), 2 * 2 * 3600)],
        # the partial gang's 40 minutes are cut out of 10:00-11:30
        "ns/late": [("n2", _at(10, 40), _at(11, 30), 50 * 60)],
        # the window rule of research: 120-min windows under 10 %, only where sampled (not
        # w2); w3's busy spell 15:10-15:50 lifts the windows holding 11 minutes of it or more
        "research/wl": [("n1", _at(19), _at(20, 59), 119 * 60),
                        ("n2", _at(8), _at(11), 2 * 3 * 3600),
                        ("n2", _at(13), _at(15, 20), 140 * 60),
                        ("n2", _at(15, 40), _at(18), 140 * 60)],
        # debug's zero rule after 20 minutes, then its window rule (13 % < 20 %)
        "301": [("n3", _at(13), _at(15), 2 * 3600)],
        # the exporter outage is never idle
        "ns/wl": [("n1", _at(15), _at(16), 3600), ("n1", _at(16, 45), _at(19), 135 * 60)],
    }  # the notebook's 45 minutes are below its 60
    kinds = {r["kind"] for r in rows}
    assert {"double_scheduled", "partial_gang", "idle_allocation"} <= kinds
    details = [r["detail"] for r in rows if r["kind"] == "idle_allocation"]
    assert any("under 10.0% mean busy over 120.0-min windows" in d for d in details)
    # a split piece names its own first and last idle sample
    evidence = [r["evidence"] for r in rows
                if r["kind"] == "idle_allocation" and r["slurm_job"] == "201"]
    assert any("bucket_start=2026-01-05 10:00:00" in e and "last 2026-01-05 11:59:00" in e
               for e in evidence), evidence


def test_the_window_rule_everywhere_matches(spark, tmp_path: Path) -> None:
    rows = _build_both(tmp_path, spark, _hand_made_ledger, DAY, DAY, WINDOW_EVERYWHERE)
    details = [r["detail"] for r in rows if r["kind"] == "idle_allocation"]
    assert any("mean busy over 60.0-min windows" in d for d in details), details
    idle = _idle(rows)
    assert len(idle["201"]) == 2  # still cut in two pieces
    # t1: only the windows of 54 to 59 samples, 19:00-19:58, are below 10 %
    assert [i for i in idle["research/wl"] if i[0] == "n1"] == [
        ("n1", _at(19), _at(19, 59), 59 * 60)]


def test_a_realistic_world_under_site_policies_matches(spark, tmp_path: Path) -> None:
    loaded, first, last = loaded_world(SimConfig(seed=3, days=2, realistic=True), tmp_path)

    def prepare(db: Path) -> None:
        db.write_bytes(loaded.read_bytes())
        with connect(db) as con:
            build.build_allocations(con, first, last)

    rows = _build_both(tmp_path, spark, prepare, first, last, SITE)
    idle = [r for r in rows if r["kind"] == "idle_allocation"]
    by_window = [r for r in idle if "mean busy over" in r["detail"]]
    assert by_window, "expected the window rule to fire in the realistic world, found no incident"
    assert len(by_window) < len(idle)  # the zero rule too
    assert {"research/" in (r["k8s_workload"] or "") for r in idle} == {True, False}
