"""Exact pod boundaries from kube_pod_start_time / kube_pod_completion_time, the grid otherwise.

Series shapes from kube-state-metrics v2.20.0's pod_test.go (Want blocks at lines 1092 and
1254: ``kube_pod_start_time{namespace,pod,uid} <unix s>``, ``kube_pod_completion_time``), moved to
pod1/uid1 and given times of the test's pod. Scrapes every 30 s at :10 and :40.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import pod_gpu_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.build import create_staging_view
from models.runner import connect
from tests.connectors.kubernetes.fakes import T0, at, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_POD_V2_20,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)

HOUR = timedelta(hours=1)
UPSTREAM = lines(KSM_POD_V2_20)
POD1 = {"namespace": "ns1", "pod": "pod1", "uid": "uid1"}
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1",
           resource="nvidia_com_gpu").but(node="node1", value=2.0)
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
START = one(UPSTREAM, "kube_pod_start_time").but(**POD1)
DONE = one(UPSTREAM, "kube_pod_completion_time").but(**POD1)
GRID = "scrape_grid"
EXACT = ("kube_pod_start_time", "kube_pod_completion_time")


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def scrapes(a: float = 0, b: float = 3600, extra: tuple[float, ...] = (),
            gaps: tuple[tuple[float, float], ...] = ()) -> list[float]:
    base = [10 + 30 * i for i in range(int(b // 30) + 1)]
    keep = [s for s in base if a <= s < b and not any(x <= s < y for x, y in gaps)]
    return sorted({*keep, *extra})


def pod(running=(300, 1790), start_time: float | None = 295, done: float | None = 1790,
        uid: str = "uid1", pending_from: float = 0, gone: float = 2400):
    """pod1 (2 GPUs on node1): Pending from `pending_from`, Running in `running`, Succeeded
    until `gone`; kube_pod_start_time from the kubelet's admission, kube_pod_completion_time
    once the containers ended (as KSM exports them)."""
    who = {"uid": uid}

    def lines_at(now: float) -> list[Line]:
        if not pending_from <= now < gone:
            return []
        phase = "Pending" if now < running[0] else "Running" if now < running[1] else "Succeeded"
        out = [CON1.but(**who), *(ln.but(**who) for ln in phase_lines(PHASE, phase))]
        if start_time is not None and now >= start_time:
            out.append(START.but(value=float(at(start_time)), **who))
        if done is not None and now >= done:
            out.append(DONE.but(value=float(at(done)), **who))
        return out
    return lines_at


def read(tmp_path: Path, lines_at, times=None, start=T0, end=T0 + HOUR, honor=True,
         notes: list[str] | None = None, **kwargs) -> pl.DataFrame:
    tmp_path.mkdir(parents=True, exist_ok=True)
    found = series(lines_at, scrapes() if times is None else times, honor=honor)
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))
    return pod_gpu_allocations(src, start, end, notes=notes, **kwargs)


def bounds(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("uid", "start_ts", "end_ts", "start_source", "end_source").rows()


@pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])
def test_exact_start_and_completion_replace_the_grid(tmp_path: Path, honor: bool):
    notes: list[str] = []
    out = read(tmp_path, pod(), honor=honor, notes=notes)
    assert bounds(out) == [("uid1", t(295), t(1790), *EXACT)]
    assert out["gpu_seconds"].to_list() == [2 * (1790 - 295)]
    assert out["samples"].to_list() == [50]  # Running samples 310 .. 1780
    assert not any("kube_pod_" in n and "scrape grid" in n for n in notes)


def test_without_the_time_metrics_the_grid_is_used_silently(tmp_path: Path):
    notes: list[str] = []
    out = read(tmp_path, pod(start_time=None, done=None), notes=notes)
    assert bounds(out) == [("uid1", t(310), t(1810), GRID, GRID)]
    assert not any("scrape grid" in n for n in notes)


def unbound_at(lines_at, when: float):
    """`lines_at` with the node label gone from pod1's GPU request at `when`."""
    return lambda now: [ln.but(node=None) if now == when and ln.name == CON1.name else ln
                        for ln in lines_at(now)]


@pytest.mark.parametrize(("start_time", "times", "lines_at", "why"), [
    (320, None, None, "after the first Running sample"),
    # no scrape between 190 and 310: the start time lies 70 s (> 2 x 30 s) before the first
    # scrape that shows the pod on its node after it (Running at 310)
    (240, scrapes(gaps=((200, 300),)), None,
     "more than 2 scrape intervals before the first scrape that shows the pod on its node"),
    # an extra scrape at 299 saw the pod Pending without its node after its start time
    (290, scrapes(extra=(299,)), lambda lines_at: unbound_at(lines_at, 299),
     "before a scrape that shows the pod neither Running nor Pending on a node"),
], ids=["late", "too_early", "unbound_after"])
def test_an_inconsistent_start_time_falls_back_to_the_grid_and_says_why(
        tmp_path: Path, start_time, times, lines_at, why):
    notes: list[str] = []
    life = pod(start_time=start_time)
    out = read(tmp_path, life if lines_at is None else lines_at(life), times=times, notes=notes)
    assert bounds(out) == [("uid1", t(310), t(1790), GRID, EXACT[1])]
    assert f"kube_pod_start_time: 1 pod starts kept on the scrape grid: the time is {why}" \
        in notes


@pytest.mark.parametrize(("done", "why"), [
    (1000, "at or before the last Running sample (a container ended while the pod ran on)"),
    (1900, "more than 2 scrape intervals after the last Running sample"),
], ids=["container_ended_early", "too_late"])
def test_an_inconsistent_completion_time_falls_back_to_the_grid_and_says_why(
        tmp_path: Path, done, why):
    notes: list[str] = []
    out = read(tmp_path, pod(done=done), notes=notes)
    assert bounds(out) == [("uid1", t(295), t(1810), EXACT[0], GRID)]
    assert f"kube_pod_completion_time: 1 pod ends kept on the scrape grid: the time is {why}" \
        in notes


def test_a_scrape_seeing_the_pod_pending_on_its_node_after_its_start_time_holds_it(
        tmp_path: Path):
    # was refused as "pending" before issue 27: the kubelet admitted the pod at 290 and
    # allocated its GPUs; the scrape at 299 sees it bound and Pending (pulling its image)
    out = read(tmp_path, pod(start_time=290), times=scrapes(extra=(299,)))
    assert bounds(out) == [("uid1", t(290), t(1790), *EXACT)]
    assert out["first_running_ts"].to_list() == [t(310)]
    assert out["samples"].to_list() == [50]  # Running samples only


def test_one_missed_scrape_next_to_an_exact_time_is_tolerated_as_in_runs(tmp_path: Path):
    # the scrapes at 280 and 1810 are missing: the start time (265) is 45 s before the first
    # Running sample, the completion time (1800) 20 s after the last; no scrape contradicts them
    out = read(tmp_path, pod(start_time=265, done=1800, running=(300, 1800)),
               times=scrapes(gaps=((270, 290), (1800, 1820))))
    assert bounds(out) == [("uid1", t(265), t(1800), *EXACT)]


def test_a_restarted_pod_is_its_own_pod_with_its_own_times(tmp_path: Path):
    first = pod(running=(300, 890), start_time=295, done=890, uid="uid-a", gone=950)
    second = pod(running=(1000, 1790), start_time=985, done=1790, uid="uid-b",
                 pending_from=950)
    out = read(tmp_path, lambda now: [*first(now), *second(now)])
    assert bounds(out) == [("uid-a", t(295), t(890), *EXACT), ("uid-b", t(985), t(1790), *EXACT)]


def test_rows_clipped_to_the_window_say_so(tmp_path: Path):
    early = read(tmp_path / "a", pod(), end=t(1000))
    late = read(tmp_path / "b", pod(), start=t(1000))
    assert bounds(early) == [("uid1", t(295), t(1000), EXACT[0], "window")]
    assert bounds(late) == [("uid1", t(1000), t(1790), "window", EXACT[1])]


def test_a_start_just_before_the_window_end_is_seen_through_the_look_ahead(tmp_path: Path):
    # admitted at 295, first Running sample at 310: a window ending at 305 holds 10 s of it
    cut = t(305)
    first = read(tmp_path / "a", pod(), end=cut)
    second = read(tmp_path / "b", pod(), start=cut)
    whole = read(tmp_path / "c", pod())
    assert bounds(first) == [("uid1", t(295), cut, EXACT[0], "window")]
    assert first["samples"].to_list() == [0]
    assert bounds(second) == [("uid1", cut, t(1790), "window", EXACT[1])]
    assert first["gpu_seconds"].sum() + second["gpu_seconds"].sum() == \
        whole["gpu_seconds"].sum()


def test_exact_ends_survive_the_merge_across_midnight_and_reach_the_evidence(tmp_path: Path):
    midnight = (datetime(2025, 1, 7) - T0).total_seconds()
    day1, day2, day3 = datetime(2025, 1, 6), datetime(2025, 1, 7), datetime(2025, 1, 8)
    lines_at = pod(running=(midnight - 900, midnight + 905), start_time=midnight - 915,
                   done=midnight + 905, pending_from=midnight - 1200, gone=midnight + 1500)
    times = [s for s in (10 + 30 * i for i in range(int(midnight // 30) + 100))
             if s >= midnight - 1300]
    found = series(lines_at, times)
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))
    for order in ([(day1, day2), (day2, day3)], [(day2, day3), (day1, day2)]):
        with connect(tmp_path / f"l{order[0][0]:%d}.duckdb") as con:
            for a, b in order:
                k8s_ingest.ingest_kubernetes_window(con, src, a, b, cluster="c1")
            merged = con.execute(
                "SELECT uid, start_ts, end_ts, start_source, end_source, gpu_seconds "
                "FROM k8s_pod_allocations").fetchall()
            assert merged == [("uid1", t(midnight - 915), t(midnight + 905), *EXACT,
                               2.0 * (915 + 905))]
            pieces = con.execute("SELECT start_source, end_source FROM "
                                 "k8s_pod_allocation_pieces ORDER BY start_ts").fetchall()
            assert pieces == [(EXACT[0], "window"), ("window", EXACT[1])]
            create_staging_view(con)  # stg_allocations and the slurm_agent_pods it reads
            evidence = con.sql("SELECT evidence FROM stg_allocations").pl()["evidence"]
            assert evidence.to_list() == [
                "kube-state-metrics ns1/pod1 uid uid1: 60 Running samples every 30.0 s; start "
                "from kube_pod_start_time, end from kube_pod_completion_time; start-up 25 s to "
                "the first Running scrape"]  # admitted at -915, first Running scrape at -890


def test_a_start_inside_anothers_grid_end_on_the_node_stays_on_the_grid(tmp_path: Path):
    # a rolling update: A is deleted after 880 without showing a completion time (end on the
    # grid: 910); B is admitted at 905 on the same node -- inside A's grid end, maybe on the
    # GPUs A freed: B's start stays on the grid, so the node never holds both at once
    a = pod(running=(0, 890), start_time=None, done=None, uid="uid-a", gone=890)
    b = pod(running=(905, 1790), start_time=905, done=1790, uid="uid-b", pending_from=895)
    notes: list[str] = []
    out = read(tmp_path / "a", lambda now: [*a(now), *b(now)], notes=notes)
    assert bounds(out) == [("uid-a", t(10), t(910), GRID, GRID),
                           ("uid-b", t(910), t(1790), GRID, EXACT[1])]
    assert ("kube_pod_start_time: 1 pod starts kept on the scrape grid: the time is inside the "
            "scrape-grid end of another pod on the node") in notes
    # where A's completion time was seen, both ends are exact and touch
    a_done = pod(running=(0, 890), start_time=None, done=890, uid="uid-a", gone=950)
    out = read(tmp_path / "b", lambda now: [*a_done(now), *b(now)])
    assert bounds(out) == [("uid-a", t(10), t(890), GRID, EXACT[1]),
                           ("uid-b", t(905), t(1790), *EXACT)]
