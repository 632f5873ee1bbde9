from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb

from models.runner import ensure_schema
from pipelines.defs.resources import LedgerResource
from tests.helpers import SAMPLE_SITE, load_definitions

DAY = "2026-01-05"


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


def _ledger(db: Path) -> None:
    """One node-level double scheduling (Slurm 6 + pod 4 GPUs on an 8-GPU node for an hour) and
    one pod idle for 45 minutes on another node."""
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                        "gpu_uuid) VALUES ('c', ?, 'a100', 8, ?, ?)",
                        [(n, i, f"GPU-{n}-{i}") for n in ("n1", "n2") for i in range(8)])
        con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 3.60, 'EUR')")
        rows = [("slurm", "c:1:0", "1", "n1", 6, _at(1), _at(9), "erin", None),
                ("kubernetes", "u1", "wl1", "n1", 4, _at(8), _at(12), "alice", "ns"),
                ("kubernetes", "u2", "wl2", "n2", 1, _at(10), _at(11), "bob", "ns")]
        con.executemany("INSERT INTO allocations (day, domain, cluster, source_key, job_id, "
                        "name, node, gpu_model, gpus, start_ts, end_ts, person, team, "
                        "cost_centre, k8s_namespace) VALUES (DATE '2026-01-05', ?, 'c', ?, ?, "
                        "'pod-' || ?, ?, 'a100', ?, ?, ?, ?, 't', 'cc', ?)",
                        [(d, k, j, k, n, g, s, e, p, ns) for d, k, j, n, g, s, e, p, ns in rows])
        con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, bucket_start, "
                        "busy_fraction, samples, namespace, pod) VALUES ('c', 'GPU-n2-0', 'n2', "
                        "?, 0.01, 1, 'ns', 'pod-u2')",
                        [(_at(10) + timedelta(minutes=m),) for m in range(45)])


def _materialize(db: Path, **config: float) -> dg.ExecuteInProcessResult:
    defs = load_definitions(SAMPLE_SITE)  # the model assets read only the ledger
    return dg.materialize(
        [*defs.assets, *(defs.asset_checks or [])],
        resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=dg.AssetSelection.assets("incidents"),
        partition_key=DAY,
        run_config={"ops": {"incidents": {"config": config}}} if config else None,
    )


def _rows(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT * FROM incidents ORDER BY ALL").fetchall()


def test_incidents_asset_and_its_warn_checks(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    _ledger(db)
    result = _materialize(db)
    assert result.success
    [event] = result.get_asset_materialization_events()
    meta = event.event_specific_data.materialization.metadata
    assert (meta["double_scheduled"].value, meta["idle_allocation"].value) == (1, 1)
    assert meta["partial_gang"].value == 0
    assert meta["double_scheduled_gpu_hours"].value == 2.0  # (6 + 4 - 8) GPUs for an hour
    assert meta["idle_allocation_gpu_hours"].value == 0.75
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {name: c.passed for name, c in checks.items()} == {
        "no_double_scheduled_gpus": False, "no_partial_gangs": True, "no_idle_allocations": False,
        "shared_gpus_within_one_gpu": True, "every_gpu_second_accounted_once": True,
        "nodes_within_their_gpus": True, "no_unaccounted_use": True}
    conservation = checks.pop("every_gpu_second_accounted_once")
    assert conservation.severity == dg.AssetCheckSeverity.ERROR  # a broken ledger fails the run
    assert all(c.severity == dg.AssetCheckSeverity.WARN for c in checks.values())
    double = checks["no_double_scheduled_gpus"].metadata
    assert double["incidents"].value == 1
    assert double["cost"].value == 7.2  # 2 GPU-hours at 3.60
    assert "alice" in double["sample"].value
    assert "erin" in double["sample"].value
    before = _rows(db)
    assert _materialize(db).success
    assert _rows(db) == before


def test_the_idle_thresholds_are_run_config(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    _ledger(db)
    assert _materialize(db, idle_min_minutes=60.0).success
    assert [r[2] for r in _rows(db)] == ["double_scheduled"]


def test_busy_gpus_without_a_holder_are_an_unaccounted_use_finding_in_dagster(tmp_path: Path):
    from models.build import build_allocations, build_gpu_usage_hourly

    db = tmp_path / "ledger.duckdb"
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                        "gpu_uuid) VALUES ('c', 'n1', 'a100', 2, ?, ?)",
                        [(i, f"GPU-n1-{i}") for i in range(2)])
        # a pod the ledger never charged (its GPU came from a claim it did not read) keeps GPU 0
        # busy for an hour; dcgm-exporter names it
        con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, bucket_start, "
                        "busy_fraction, samples, namespace, pod) VALUES ('c', 'GPU-n1-0', 'n1', "
                        "?, 0.6, 1, 'ml', 'claimed-pod')",
                        [(_at(3) + timedelta(minutes=m),) for m in range(60)])
        day = _at(0).date()
        build_allocations(con, day, day)
        build_gpu_usage_hourly(con, day, day)
    result = _materialize(db)
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    found = checks["no_unaccounted_use"]
    assert not found.passed
    assert found.metadata["incidents"].value == 1
    assert found.metadata["gpu_hours"].value == 1.0
    assert "pod ml/claimed-pod" in found.metadata["sample"].value
    assert checks["every_gpu_second_accounted_once"].passed


def test_a_gpu_hour_that_breaks_conservation_fails_the_run_with_that_gpu(tmp_path: Path):
    from models.build import build_allocations, build_gpu_usage_hourly

    db = tmp_path / "ledger.duckdb"
    _ledger(db)
    with duckdb.connect(str(db)) as con:
        day = _at(0).date()
        build_allocations(con, day, day)
        build_gpu_usage_hourly(con, day, day)
        # a GPU-hour whose states add up to more than the GPU (as two overlapping readings of one
        # GPU would make it): the node rows still add up
        con.execute("UPDATE gpu_conservation_gpu_hourly SET idle_gpu_seconds = "
                    "idle_gpu_seconds + 5 WHERE gpu_uuid = 'GPU-n2-0' AND hour = ?", [_at(10)])
    result = _materialize(db)
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    broken = checks["every_gpu_second_accounted_once"]
    assert not broken.passed
    assert broken.metadata["gpu_hours"].value == 1
    assert broken.metadata["problems"].value == "gpu_states"
    assert "GPU-n2-0" in broken.metadata["sample"].value
    db.unlink()  # the session's own conservation sweep would find this ledger broken
