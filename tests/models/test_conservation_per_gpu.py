"""Conservation per physical GPU and hour (gpu_conservation_gpu_hourly, docs/accounting.md
"Conservation", "Per GPU"): each GPU's 3,600 seconds of the hour are charged, in conflict,
infrastructure, unaccounted, idle or not observed, as dcgm-exporter's readings of that GPU place
the holders; the GPUs' unaccounted seconds add up to the node's."""

from datetime import datetime

import pytest

from tests.models.test_conservation_and_slinky import (
    DAY,
    HOUR,
    _at,
    _breaks,
    _build,
    _day,
    _job,
    _minutes,
    _node,
    _pod,
    con,
)

__all__ = ["con"]  # the fixture


def _gpus(con, hour: datetime) -> dict[str, dict[str, float]]:
    rows = con.execute(
        "SELECT gpu_uuid, capacity_gpu_seconds, observed_gpu_seconds, charged_gpu_seconds, "
        "conflict_gpu_seconds, infrastructure_gpu_seconds, unaccounted_gpu_seconds, "
        "idle_gpu_seconds, not_observed_gpu_seconds, holders FROM gpu_conservation_gpu_hourly "
        "WHERE hour = ? ORDER BY gpu_uuid", [hour]).fetchall()
    names = ("capacity", "observed", "charged", "conflict", "infrastructure", "unaccounted",
             "idle", "not_observed")
    out = {}
    for uuid, *values, holders in rows:
        out[uuid] = {n: float(v) for n, v in zip(names, values, strict=True)}
        out[uuid]["holders"] = holders
    return out


def test_each_gpu_of_a_node_is_placed_by_its_own_readings(con):
    _node(con, "n1", gpus=4)
    # a pod on GPU 0 from 01:00 to 04:00 with its readings; GPU 1 busy with no holder and no
    # labels; GPU 2 read idle; GPU 3 never read. Hour 02:00 has no holder's start or end (an
    # unlabelled reading may reach a scrape past one: the node rule's edge slack)
    _pod(con, "p1", 1, _at(1), _at(4), node="n1", pod="train", namespace="ml")
    _minutes(con, "n1", range(1), _at(0), _at(1), 0.0)
    _minutes(con, "n1", range(1), _at(1), _at(4), 0.8, pod="train", namespace="ml")
    _minutes(con, "n1", range(1, 2), _at(0), _at(4), 0.7)
    _minutes(con, "n1", range(2, 3), _at(0), _at(4), 0.0)
    _build(con)
    assert _breaks(con) == []
    two = _gpus(con, _at(2))
    assert set(two) == {f"GPU-n1-{i}" for i in range(4)}  # every GPU of the inventory
    assert two["GPU-n1-0"]["charged"] == HOUR
    assert two["GPU-n1-0"]["holders"] == ["kubernetes|p1"]
    assert two["GPU-n1-1"]["unaccounted"] == HOUR  # busy, nobody holds it: that GPU
    assert two["GPU-n1-2"]["idle"] == HOUR
    assert two["GPU-n1-3"]["not_observed"] == HOUR
    for gpu in two.values():
        assert gpu["capacity"] == HOUR
        assert sum(gpu[s] for s in ("charged", "conflict", "infrastructure", "unaccounted",
                                    "idle", "not_observed")) == HOUR
    # the node's unaccounted figure is its GPUs' sum
    node = con.execute("SELECT unaccounted_gpu_seconds FROM gpu_conservation_hourly "
                       "WHERE hour = ?", [_at(2)]).fetchone()[0]
    assert float(node) == HOUR
    # an hour before the pod: GPU 0 read idle; in the pod's first hour GPU 1's unaccounted
    # seconds are the node's, less one reading that might be the pod's start
    assert _gpus(con, _at(0))["GPU-n1-0"]["idle"] == HOUR
    one = _gpus(con, _at(1))
    assert one["GPU-n1-1"]["unaccounted"] == HOUR - 60
    assert one["GPU-n1-1"]["idle"] == 60


def test_a_gpu_two_schedulers_hold_is_conflict_on_that_gpu(con):
    _node(con, "n1", gpus=2)
    _pod(con, "p1", 1, _at(1), _at(2), node="n1", pod="train", namespace="ml")
    _job(con, 7, 1, _at(1), _at(2), node="n1")
    # dcgm-exporter names both the pod and the job on GPU 0 (pod and hpc mappers on one sample)
    _minutes(con, "n1", range(1), _at(1), _at(2), 0.9, pod="train", namespace="ml", job=7)
    _minutes(con, "n1", range(1, 2), _at(1), _at(2), 0.0)
    _build(con)
    gpus = _gpus(con, _at(1))
    assert gpus["GPU-n1-0"]["conflict"] == HOUR
    assert gpus["GPU-n1-0"]["charged"] == 0
    assert gpus["GPU-n1-0"]["holders"] == ["kubernetes|p1", "slurm|c:7:0"]
    assert gpus["GPU-n1-1"]["idle"] == HOUR
    day = _day(con)
    assert day["conflict"] == 1  # the node sees it too, from the same readings
    assert [b[2] for b in _breaks(con)] == []


def test_a_mig_instance_counts_its_slices_of_the_gpu(con):
    _node(con, "n1", gpus=1)
    # a 3g.40gb instance (3 of 7 slices) read busy for an hour with no holder, and the 4g one
    # read idle: 3/7 of the GPU-hour unaccounted, 4/7 idle
    rows = []
    for m in range(60):
        t = datetime(2026, 1, 5, 1, m)
        rows += [("c", "GPU-n1-0", "3", "3g.40gb", "n1", 0, t, 0.6),
                 ("c", "GPU-n1-0", "4", "4g.40gb", "n1", 0, t, 0.0)]
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, gpu_instance, "
                    "gpu_instance_profile, node, gpu_index, bucket_start, busy_fraction, "
                    "samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)", rows)
    con.execute("INSERT INTO gpu_busy_daily (cluster, gpu_uuid, gpu_instance, node, day, "
                "device_kind, mig_slices) VALUES ('c', 'GPU-n1-0', '3', 'n1', ?, "
                "'mig_instance', 3), ('c', 'GPU-n1-0', '4', 'n1', ?, 'mig_instance', 4), "
                "('c', 'GPU-n1-0', NULL, 'n1', ?, 'mig_parent', 7)", [DAY, DAY, DAY])
    _build(con)
    gpu = _gpus(con, _at(1))["GPU-n1-0"]
    assert gpu["observed"] == pytest.approx(HOUR, abs=1e-3)
    assert gpu["unaccounted"] == pytest.approx(HOUR * 3 / 7, abs=1e-3)
    assert gpu["idle"] == pytest.approx(HOUR * 4 / 7, abs=1e-3)
    # the node counts the instance's slices too, not a whole GPU-hour
    assert _day(con)["unaccounted"] == pytest.approx(3 / 7, abs=1e-6)
    assert _breaks(con) == []
