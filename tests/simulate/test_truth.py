"""The truth files agree with each other and with physics (no GPU over-committed except where an
incident says so)."""

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from tests.simulate.conftest import read_csv


def _ts(text: str) -> int:
    return int(datetime.fromisoformat(text + "+00:00").timestamp())


def _window(world_dir: Path) -> tuple[int, int]:
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    start = datetime.fromisoformat(doc["window"]["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(doc["window"]["end"].replace("Z", "+00:00"))
    return int(start.timestamp()), int(end.timestamp())


def test_identity_totals_match_clipped_allocations(world_dir: Path):
    w0, w1 = _window(world_dir)
    allocations = read_csv(world_dir / "truth" / "allocations.csv")
    daily = read_csv(world_dir / "truth" / "gpu_seconds_daily.csv")
    expected: dict[str, int] = defaultdict(int)
    for row in allocations:
        if row["charged"] != "true":
            continue
        start, end = max(_ts(row["start"]), w0), min(_ts(row["end"]), w1)
        expected[row["domain"]] += int(row["gpus"]) * max(0, end - start)
    found: dict[str, int] = defaultdict(int)
    for row in daily:
        found[row["domain"]] += int(row["gpu_seconds"])
        assert row["person"]
        assert row["team"]
        assert row["cost_centre"]
    assert dict(found) == dict(expected)
    assert found["slurm"] > 0
    assert found["kubernetes"] > 0


def test_identity_rule_outcomes(world_dir: Path):
    daily = read_csv(world_dir / "truth" / "gpu_seconds_daily.csv")
    people = {(r["day"], r["domain"], r["person"], r["team"]) for r in daily}
    # frank is unmapped and so is his account: fully unattributed
    assert any(p[2] == p[3] == "unattributed" for p in people)
    # alice and bob use both schedulers
    for person in ("alice", "bob"):
        assert {p[1] for p in people if p[2] == person} == {"slurm", "kubernetes"}
    # erin's mapping changes inside the window: ml before, physics after
    erin = {(p[0], p[3]) for p in people if p[2] == "erin"}
    assert ("2026-01-05", "ml") in erin
    assert ("2026-01-06", "physics") in erin
    # heidi is known only through the team-vision/trainer service account
    assert any(p[2] == "heidi" and p[3] == "vision" for p in people)


def _incident_spans(world_dir: Path) -> dict[str, list[tuple[int, int, set[str]]]]:
    spans: dict[str, list[tuple[int, int, set[str]]]] = defaultdict(list)
    for row in read_csv(world_dir / "truth" / "incidents.csv"):
        if row["kind"] == "double_scheduled":
            spans[row["node"]].append((_ts(row["start"]), _ts(row["end"]),
                                       set(row["gpu_uuids"].split(";"))))
    return spans


def test_no_gpu_over_committed_outside_double_scheduled_incidents(world_dir: Path):
    w0, w1 = _window(world_dir)
    capacity = {r["node"]: int(r["gpu_count"]) for r in read_csv(world_dir / "nodes.csv")}
    allowed = _incident_spans(world_dir)
    events: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    holders_per_gpu: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for row in read_csv(world_dir / "truth" / "allocations.csv"):
        if row["charged"] != "true":
            continue
        start, end = max(_ts(row["start"]), w0), min(_ts(row["end"]), w1)
        if end <= start:
            continue
        gpus = int(row["gpus"])
        events[row["node"]] += [(start, +gpus, row["source_key"]), (end, -gpus, row["source_key"])]
        for uuid in row["gpu_uuids"].split(";"):
            holders_per_gpu[uuid].append((start, end, row["source_key"]))
    for node, evs in events.items():
        in_use = 0
        for t, delta, key in sorted(evs, key=lambda e: (e[0], e[1])):  # ends before starts
            in_use += delta
            if in_use > capacity[node]:
                assert any(a <= t < b for a, b, _ in allowed[node]), (
                    f"{node} holds {in_use} > {capacity[node]} GPUs at {t} ({key})")
    for uuid, spans in holders_per_gpu.items():
        spans.sort()
        busy_until, holder = spans[0][1], spans[0][2]
        for start, end, key in spans[1:]:
            if start < busy_until:  # two holders on one GPU at once: only inside an incident
                assert any(uuid in gpus and a <= start < b
                           for spans_ in allowed.values() for a, b, gpus in spans_), (
                    f"{uuid} held by {holder} and {key} at {start}")
            if end > busy_until:
                busy_until, holder = end, key


def test_incidents_lie_inside_the_window_and_add_up(world_dir: Path):
    w0, w1 = _window(world_dir)
    incidents = read_csv(world_dir / "truth" / "incidents.csv")
    kinds = {r["kind"] for r in incidents}
    assert kinds == {"double_scheduled", "partial_gang", "idle_allocation"}
    for row in incidents:
        start, end = _ts(row["start"]), _ts(row["end"])
        assert w0 <= start < end <= w1, row
        gpus = len(row["gpu_uuids"].split(";"))
        if row["kind"] in ("double_scheduled", "idle_allocation"):
            assert int(row["gpu_seconds"]) == gpus * (end - start)
            assert end - start >= (1800 if row["kind"] == "idle_allocation" else 1)
        else:
            assert 0 < int(row["gpu_seconds"]) <= gpus * (end - start)
        if row["kind"] == "double_scheduled":
            assert row["slurm_job"]
            assert row["k8s_workload"]


def test_double_scheduled_overlap_matches_allocations(world_dir: Path):
    rows = read_csv(world_dir / "truth" / "allocations.csv")
    for inc in read_csv(world_dir / "truth" / "incidents.csv"):
        if inc["kind"] != "double_scheduled":
            continue
        slurm = [r for r in rows if r["domain"] == "slurm" and r["source_key"] == inc["slurm_job"]
                 and r["node"] == inc["node"]]
        ns = inc["k8s_workload"].split("/")[0]
        pods = [r for r in rows if r["domain"] == "kubernetes" and r["node"] == inc["node"]
                and r["source_key"].startswith(ns + "/")
                and r["name"] == inc["k8s_workload"].split("/")[1]]
        assert len(slurm) == 1
        assert len(pods) == 1
        start = max(_ts(slurm[0]["start"]), _ts(pods[0]["start"]))
        end = min(_ts(slurm[0]["end"]), _ts(pods[0]["end"]))
        common = set(slurm[0]["gpu_uuids"].split(";")) & set(pods[0]["gpu_uuids"].split(";"))
        assert (start, end) == (_ts(inc["start"]), _ts(inc["end"]))
        assert common == set(inc["gpu_uuids"].split(";"))


def test_bridge_jobs_are_charged_once_to_the_pod(world_dir: Path):
    rows = read_csv(world_dir / "truth" / "allocations.csv")
    reps = [r for r in rows if r["outcome"] == "bridge_representative"]
    assert reps
    pods = {(r["node"], r["start"], r["end"]): r for r in rows
            if r["domain"] == "kubernetes" and "bridge-eval" in r["source_key"]}
    for rep in reps:
        assert rep["domain"] == "slurm"
        assert rep["charged"] == "false"
        pod = pods[(rep["node"], rep["start"], rep["end"])]
        assert pod["charged"] == "true"
        assert pod["name"] == pod["source_key"].split("/")[1].rsplit("-", 2)[0]


def test_busy_seconds_are_per_gpu_and_day(world_dir: Path):
    uuids = {r["gpu_uuid"] for r in read_csv(world_dir / "nodes.csv")}
    rows = read_csv(world_dir / "truth" / "gpu_busy_seconds.csv")
    assert rows
    for row in rows:
        assert row["gpu_uuid"] in uuids
        assert row["day"] in ("2026-01-05", "2026-01-06")
        assert 0 < float(row["busy_seconds"]) <= 86_400
