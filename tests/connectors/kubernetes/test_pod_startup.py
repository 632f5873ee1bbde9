"""A bound pod holds its GPUs from its admission (``kube_pod_start_time``), Pending start-up
included (issue 27, item 2).

What kube-state-metrics exports for a Pending pod (internal/store/pod.go, v2.x):

* ``kube_pod_container_resource_requests`` / ``_limits`` come from ``p.Spec.Containers`` for every
  pod object whatever its phase, with ``node`` = ``p.Spec.NodeName``: empty until the scheduler
  binds the pod (Prometheus drops the empty label), the node once bound -- Pending or not;
* ``kube_pod_start_time`` only once ``p.Status.StartTime`` is set: the kubelet's first
  acknowledgement of the pod (kubernetes/kubernetes#10066; the API: "before the Kubelet pulled
  the container image(s)"), when it admitted the pod and its device manager allocated the GPUs;
* ``kube_pod_status_phase``: five series, 1 for the current phase, no node label.

Line shapes from kube-state-metrics v2.20.0's pod_test.go (tests/fixtures/expositions), moved to
pod1/uid1 on node1 with 2 GPUs. Scrapes every 30 s at :10 and :40.
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
# a GPU request as KSM writes it for a bound pod; `node=None` is the unbound pod's line
REQUEST = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1",
              resource="nvidia_com_gpu").but(node="node1", value=2.0)
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
START = one(UPSTREAM, "kube_pod_start_time").but(**POD1)
DONE = one(UPSTREAM, "kube_pod_completion_time").but(**POD1)
START_TIME, DONE_TIME, GRID = "kube_pod_start_time", "kube_pod_completion_time", "scrape_grid"
SHAPES = pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def scrapes(a: float = 0, b: float = 3600) -> list[float]:
    return [s for s in (10 + 30 * i for i in range(int(b // 30) + 1)) if a <= s < b]


def pod(*, bound: float | None = 290, start_time: float | None = 295,
        running: float | None = 500, done: float | None = 1790, gone: float = 2400,
        uid: str = "uid1", node: str = "node1"):
    """pod1 (2 GPUs): created at 0, Pending without a node until `bound` (None: never bound),
    admitted at `start_time` (kube_pod_start_time from then on), Pending (pulling its image)
    until `running` (None: never Running), Running until `done`, Succeeded until `gone`."""
    who = {"uid": uid}

    def lines_at(now: float) -> list[Line]:
        if now >= gone:
            return []
        on_node = bound is not None and now >= bound
        if done is not None and now >= done:
            phase = "Succeeded"
        elif running is not None and now >= running:
            phase = "Running"
        else:
            phase = "Pending"
        out = [REQUEST.but(node=node if on_node else None, **who),
               *(ln.but(**who) for ln in phase_lines(PHASE, phase))]
        if start_time is not None and now >= start_time:
            out.append(START.but(value=float(at(start_time)), **who))
        if done is not None and now >= done:
            out.append(DONE.but(value=float(at(done)), **who))
        return out
    return lines_at


def read(tmp_path: Path, lines_at, start=T0, end=T0 + HOUR, honor=True,
         notes: list[str] | None = None) -> pl.DataFrame:
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om",
                                        series(lines_at, scrapes(), honor=honor)))
    return pod_gpu_allocations(src, start, end, notes=notes)


def rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("uid", "start_ts", "end_ts", "start_source", "end_source",
                        "first_running_ts").rows()


@SHAPES
def test_a_pod_pulling_its_image_for_7_scrapes_is_charged_from_its_admission(
        tmp_path: Path, honor: bool):
    # bound at 290, admitted at 295; the scrapes at 310 .. 490 (7) see it Pending on node1,
    # the one at 520 Running: charged from 295, its start-up 295 .. 520 visible
    notes: list[str] = []
    out = read(tmp_path, pod(), honor=honor, notes=notes)
    assert rows(out) == [("uid1", t(295), t(1790), START_TIME, DONE_TIME, t(520))]
    assert out["gpu_seconds"].to_list() == [2 * (1790 - 295)]
    assert out["samples"].to_list() == [43]  # Running samples 520 .. 1780
    assert not any("scrape grid" in n for n in notes)


def test_a_pod_pending_without_a_node_holds_nothing(tmp_path: Path):
    # never bound (waiting for quota or a node), deleted at 1200
    assert read(tmp_path, pod(bound=None, start_time=None, running=None, done=None,
                              gone=1200)).height == 0


def test_a_bound_pod_without_a_start_time_starts_at_its_first_running_scrape(tmp_path: Path):
    # kube_pod_start_time not scraped (a metric denylist): the Pending scrapes on node1 cannot
    # tell admission from binding, so the grid of Running samples stands, as before issue 27
    out = read(tmp_path, pod(start_time=None))
    assert rows(out) == [("uid1", t(520), t(1790), GRID, DONE_TIME, t(520))]


def test_a_bound_pod_that_never_runs_holds_its_gpus_until_it_is_gone(tmp_path: Path):
    # ImagePullBackOff: admitted at 295, Pending on node1 until deleted at 2400 (last scrape
    # 2380); no container ever terminated, so no completion time: the grid end
    out = read(tmp_path, pod(running=None, done=None))
    assert rows(out) == [("uid1", t(295), t(2410), START_TIME, GRID, None)]
    assert out["samples"].to_list() == [0]  # no Running sample
    assert out["gpu_seconds"].to_list() == [2 * (2410 - 295)]


def test_scrapes_bound_before_the_admission_are_not_held(tmp_path: Path):
    # bound at 10, admitted only at 295 (the kubelet was slow to see it): the scrapes 10 .. 280
    # show it Pending on node1 before its start time -- not yet admitted, no GPU allocated
    out = read(tmp_path, pod(bound=0))
    assert rows(out) == [("uid1", t(295), t(1790), START_TIME, DONE_TIME, t(520))]


def test_a_start_inside_anothers_grid_end_stays_on_the_grid_of_its_held_scrapes(
        tmp_path: Path):
    # a rolling update: A's last Running scrape is 880 and it is deleted without a completion
    # time (grid end 910); B is admitted at 905 -- inside A's grid end, maybe on the GPUs A
    # freed -- and pulls its image until 1000. B starts on the grid: its first scrape on node1
    # (910, Pending), where A's grid end stops; its start-up still shows
    a = pod(bound=0, start_time=None, running=0, done=None, gone=890, uid="uid-a")
    b = pod(bound=900, start_time=905, running=1000, uid="uid-b")
    notes: list[str] = []
    out = read(tmp_path, lambda now: [*a(now), *b(now)], notes=notes)
    assert rows(out) == [("uid-a", t(10), t(910), GRID, GRID, t(10)),
                         ("uid-b", t(910), t(1790), GRID, DONE_TIME, t(1000))]
    assert ("kube_pod_start_time: 1 pod starts kept on the scrape grid: the time is inside the "
            "scrape-grid end of another pod on the node") in notes


def test_a_window_that_saw_the_pod_running_from_its_start_names_no_first_running_scrape(
        tmp_path: Path):
    # the window from 1000 reads from 700 on: the pod is Running there since 520, which the
    # window before names
    late = read(tmp_path, pod(), start=t(1000))
    assert rows(late) == [("uid1", t(1000), t(1790), "window", DONE_TIME, None)]


def test_the_start_up_survives_the_merge_of_windows_in_any_order(tmp_path: Path):
    # admitted 20 min before midnight and pulling its image for 25 min: the first day's window
    # (read to 00:01 with 30 s scrapes) sees it only Pending; the second names its first
    # Running scrape. The merged row keeps the first piece's start and the earliest first
    # Running scrape
    midnight = (datetime(2025, 1, 7) - T0).total_seconds()
    day1, day2, day3 = datetime(2025, 1, 6), datetime(2025, 1, 7), datetime(2025, 1, 8)
    life = pod(bound=midnight - 1205, start_time=midnight - 1200, running=midnight + 300,
               done=midnight + 1800, gone=midnight + 2400)
    times = [s for s in (10 + 30 * i for i in range(int(midnight // 30) + 100))
             if s >= midnight - 1300]
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series(life, times)))
    for order in ([(day1, day2), (day2, day3)], [(day2, day3), (day1, day2)]):
        with connect(tmp_path / f"l{order[0][0]:%d}.duckdb") as con:
            for a, b in order:
                k8s_ingest.ingest_kubernetes_window(con, src, a, b, cluster="c1",
                                                    scrape_interval=timedelta(seconds=30))
            pieces = con.execute(
                "SELECT start_source, end_source, first_running_ts FROM "
                "k8s_pod_allocation_pieces ORDER BY start_ts").fetchall()
            assert pieces == [(START_TIME, "window", None),
                              ("window", DONE_TIME, t(midnight + 310))]
            merged = con.execute(
                "SELECT start_ts, end_ts, start_source, end_source, first_running_ts, "
                "gpu_seconds FROM k8s_pod_allocations").fetchall()
            assert merged == [(t(midnight - 1200), t(midnight + 1800), START_TIME, DONE_TIME,
                               t(midnight + 310), 2.0 * 3000)]
            # the ledger row says so: its start-up from admission to the first Running scrape
            create_staging_view(con)
            [[evidence]] = con.execute("SELECT evidence FROM stg_allocations").fetchall()
            assert evidence.endswith("; start-up 1510 s to the first Running scrape")
