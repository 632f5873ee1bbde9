"""Incidents that cross midnight are rebuilt whole when the next day lands (models/incidents.py
carry_first_day): built day by day (D-1, then D once D's data is in) they equal a build of both
days at once. Hand-made ledgers; figures computed here."""

from datetime import date, datetime, time, timedelta

import duckdb
import pytest

from models.incidents import build_incidents
from models.runner import ensure_schema

D0, D1 = date(2026, 1, 5), date(2026, 1, 6)  # 22:00 on D0 .. 03:00 on D1
MIDNIGHT = datetime.combine(D1, time())
UUIDS = [f"GPU-{i}" for i in range(8)]


def _at(day: date, h: int, m: int = 0) -> datetime:
    return datetime.combine(day, time(h, m))


def _ledger() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    ensure_schema(con)
    con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                    "VALUES ('c', 'n1', 'a100', 8, ?, ?)", list(enumerate(UUIDS)))
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.60, 'EUR'), "
                "('a100', 'kubernetes', '', NULL, NULL, 7.20, 'EUR')")
    return con


def _cut(start: datetime, end: datetime, first: date, last: date):
    """The per-UTC-day pieces of ``[start, end)`` on the days ``first`` .. ``last``."""
    day = first
    while day <= last:
        lo = max(start, datetime.combine(day, time()))
        hi = min(end, datetime.combine(day + timedelta(days=1), time()))
        if lo < hi:
            yield day, lo, hi
        day += timedelta(days=1)


def _pod(con, uid: str, gpus: int, start: datetime, end: datetime, days: tuple[date, date]):
    """A pod as the ledger knows it after the days ``days``: its interval ends where the data
    ends (``end``), cut per day."""
    con.execute("DELETE FROM k8s_pod_allocations WHERE uid = ?", [uid])
    con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                "start_ts, end_ts, scrape_interval_s) VALUES ('c', 'ns', ?, ?, 'n1', ?, ?, ?, 60)",
                [f"pod-{uid}", uid, gpus, start, end])
    con.execute("DELETE FROM allocations WHERE source_key = ?", [uid])
    for day, lo, hi in _cut(start, end, *days):
        con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, "
                    "node, gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, person, "
                    "team, cost_centre) VALUES (?, 'kubernetes', 'c', ?, 'wl', ?, 'n1', 'a100', "
                    "?, ?, ?, ?, 'ns', 'alice', 't-k', 'cc-k')",
                    [day, uid, f"pod-{uid}", gpus, lo, hi,
                     gpus * int((hi - lo).total_seconds())])


def _slurm(con, job: int, gpus: int, start: datetime, end: datetime, days: tuple[date, date]):
    key = f"c:{job}:0"
    for table in ("slurm_runs", "slurm_node_allocations", "allocations"):
        column = "source_key" if table == "allocations" else "run_key"
        con.execute(f"DELETE FROM {table} WHERE {column} = ?", [key])
    con.execute("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw, start, \"end\", "
                "alloc_gpus, nodes, source_file, line_no) VALUES (?, 'c', ?, ?, ?, ?, ?, ['n1'], "
                "'dump', 1)", [key, str(job), job, start, end, gpus])
    con.execute("INSERT INTO slurm_node_allocations (run_key, cluster, job_id, job_id_raw, node, "
                "gpus, start, \"end\") VALUES (?, 'c', ?, ?, 'n1', ?, ?, ?)",
                [key, str(job), job, gpus, start, end])
    for day, lo, hi in _cut(start, end, *days):
        con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, "
                    "node, gpu_model, gpus, start_ts, end_ts, gpu_seconds, person, team, "
                    "cost_centre) VALUES (?, 'slurm', 'c', ?, ?, 'job', 'n1', 'a100', ?, ?, ?, ?, "
                    "'erin', 't-s', 'cc-s')",
                    [day, key, str(job), gpus, lo, hi, gpus * int((hi - lo).total_seconds())])


def _minutes(con, gpus: list[int], start: datetime, end: datetime, busy: float, pod: str):
    rows, t = [], start
    while t < end:
        rows += [("c", UUIDS[g], "n1", g, t, busy, "ns", pod) for g in gpus]
        t += timedelta(minutes=1)
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, "
                    "bucket_start, busy_fraction, samples, namespace, pod) "
                    "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)", rows)


def _idle_world(con, upto: datetime) -> None:
    """A 2-GPU pod 21:00 D0 .. 04:00 D1, idle (busy 0) 22:00 .. 03:00; data up to ``upto``."""
    start, end = _at(D0, 21), _at(D1, 4)
    _pod(con, "u1", 2, start, min(end, upto), (D0, D1))
    con.execute("DELETE FROM gpu_utilization")
    for lo, hi, busy in ((start, _at(D0, 22), 0.9), (_at(D0, 22), _at(D1, 3), 0.0),
                         (_at(D1, 3), end, 0.9)):
        if lo < upto:
            _minutes(con, [0, 1], lo, min(hi, upto), busy, "pod-u1")


def _double_world(con, upto: datetime) -> None:
    """A 6-GPU Slurm job 20:00 D0 .. 03:00 D1 and a 4-GPU pod 22:00 D0 .. 05:00 D1 on one 8-GPU
    node: 2 GPUs over capacity 22:00 .. 03:00; data up to ``upto`` (the job still running)."""
    _slurm(con, 101, 6, _at(D0, 20), min(_at(D1, 3), upto), (D0, D1))
    _pod(con, "u2", 4, _at(D0, 22), min(_at(D1, 5), upto), (D0, D1))


def _incidents(con) -> list[tuple]:
    return con.execute("SELECT * EXCLUDE (evidence) FROM incidents ORDER BY ALL").fetchall()


def _evidence(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT evidence FROM incidents ORDER BY ALL").fetchall()]


@pytest.mark.parametrize(("world", "kind", "gpus", "cost"), [
    (_idle_world, "idle_allocation", 2, 2 * 5 * 7.20),
    (_double_world, "double_scheduled", 2, 2 * 5 * 7.20),  # the later one (the pod) is charged
])
def test_built_day_by_day_equals_both_days_at_once(world, kind, gpus, cost):
    whole = _ledger()
    world(whole, _at(D1, 12))
    build_incidents(whole, D0, D1)

    daily = _ledger()
    world(daily, MIDNIGHT)  # D0's build: D1's data has not landed yet
    build_incidents(daily, D0, D0)
    [cut] = daily.execute("SELECT kind, end_ts, gpu_seconds FROM incidents").fetchall()
    assert cut == (kind, MIDNIGHT, gpus * 2 * 3600)  # 22:00 .. midnight only, for now
    world(daily, _at(D1, 12))  # D1 lands (the job's end and the pod's rest with it)
    build_incidents(daily, D1, D1)

    assert _incidents(daily) == _incidents(whole)
    assert _evidence(daily) == _evidence(whole)
    [row] = daily.execute("SELECT kind, day, start_ts, end_ts, gpu_seconds, cost "
                          "FROM incidents").fetchall()
    # one row under its start day, whole: 22:00 .. 03:00, nothing counted twice
    assert row[:5] == (kind, D0, _at(D0, 22), _at(D1, 3), gpus * 5 * 3600)
    assert float(row[5]) == pytest.approx(cost)


def test_rebuilding_the_next_day_again_changes_nothing():
    con = _ledger()
    _idle_world(con, MIDNIGHT)
    build_incidents(con, D0, D0)
    _idle_world(con, _at(D1, 12))
    build_incidents(con, D1, D1)
    before = con.execute("SELECT * FROM incidents ORDER BY ALL").fetchall()
    build_incidents(con, D1, D1)
    build_incidents(con, D0, D1)
    assert con.execute("SELECT * FROM incidents ORDER BY ALL").fetchall() == before


def test_an_incident_open_for_days_is_rebuilt_from_its_start_day():
    # idle 22:00 D0 .. 03:00 D2, built D0, then D1, then D2, each when its data lands
    d2 = D1 + timedelta(days=1)
    con = _ledger()

    def world(upto: datetime) -> None:
        start, end = _at(D0, 21), _at(d2, 4)
        _pod(con, "u3", 1, start, min(end, upto), (D0, d2))
        con.execute("DELETE FROM gpu_utilization")
        for lo, hi, busy in ((start, _at(D0, 22), 0.9), (_at(D0, 22), _at(d2, 3), 0.0),
                             (_at(d2, 3), end, 0.9)):
            if lo < upto:
                _minutes(con, [0], lo, min(hi, upto), busy, "pod-u3")

    for day in (D0, D1, d2):
        world(datetime.combine(day + timedelta(days=1), time()))
        build_incidents(con, day, day)
    assert con.execute("SELECT day, start_ts, end_ts, gpu_seconds FROM incidents").fetchall() == [
        (D0, _at(D0, 22), _at(d2, 3), 29 * 3600)]
