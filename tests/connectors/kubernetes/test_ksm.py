"""Pod GPU allocation intervals and node capacity from kube-state-metrics samples."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations, read_for_uids
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import NODE_GPU_CAPACITY_SCHEMA, POD_GPU_ALLOCATION_SCHEMA
from tests.connectors.kubernetes.fakes import T0, Series, at, om_file
from tests.helpers import FIXTURES

KSM = {"job": "kube-state-metrics", "instance": "10.0.0.5:8080"}
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
HOUR = timedelta(hours=1)


def scrapes(span: tuple[float, float], step: float = 30, offset: float = 10,
            gaps: tuple[tuple[float, float], ...] = ()) -> list[float]:
    """Relative scrape times offset, offset+step, ... inside [span) and outside every gap."""
    out, t = [], offset
    while t < span[1]:
        if t >= span[0] and not any(a <= t < b for a, b in gaps):
            out.append(t)
        t += step
    return out


def pod(
    ns: str, name: str, uid: str, *,
    gpus: dict[str, int],
    running: tuple[float, float],
    exists: tuple[float, float],
    bound_at: float,
    node: str = "gpu-1",
    step: float = 30,
    gaps: tuple[tuple[float, float], ...] = (),
    limits_only: tuple[str, ...] = (),
    succeeded_after: bool = True,
) -> list[Series]:
    """KSM series of one pod: requests per container, five phase series."""
    base = {"namespace": ns, "pod": name, "uid": uid}
    out: list[Series] = []
    times = scrapes(exists, step=step, gaps=gaps)
    for container, n in gpus.items():
        for bound in (False, True):
            pts = [(at(t), n) for t in times if (t >= bound_at) == bound]
            if not pts:
                continue
            labels = {**base, "container": container, "node": node if bound else "",
                      "resource": "nvidia_com_gpu", "unit": "integer", **KSM}
            metric = ("kube_pod_container_resource_limits" if container in limits_only
                      else "kube_pod_container_resource_requests")
            out.append((metric, labels, pts))
    for phase in PHASES:
        pts = []
        for t in times:
            if t < running[0]:
                current = "Pending"
            elif t < running[1]:
                current = "Running"
            else:
                current = "Succeeded" if succeeded_after else "Failed"
            pts.append((at(t), 1 if phase == current else 0))
        out.append(("kube_pod_status_phase", {**base, "phase": phase, **KSM}, pts))
    return out


def source(tmp_path: Path, series: list[Series]) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series))


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rows(frame: pl.DataFrame) -> list[tuple]:
    return [(r["pod"], r["gpus"], r["start_ts"], r["end_ts"], r["samples"])
            for r in frame.iter_rows(named=True)]


def test_pending_then_running_then_succeeded(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"main": 2}, exists=(0, 3600), bound_at=100,
                 running=(300, 1800))
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    assert out.schema == pl.Schema(POD_GPU_ALLOCATION_SCHEMA)
    # Running samples at 310 .. 1780 (every 30 s): [first, last + 30)
    assert rows(out) == [("p", 2, t(310), t(1810), 50)]
    assert out["gpu_seconds"].to_list() == [2 * 1500.0]
    assert out["scrape_interval_s"].to_list() == [30.0]


def test_running_but_not_bound_does_not_count(tmp_path: Path):
    # phase says Running before the node label appears (KSM lag): not held until bound
    series = pod("ns", "p", "u1", gpus={"main": 1}, exists=(0, 3600), bound_at=600,
                 running=(300, 1200))
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    assert rows(out) == [("p", 1, t(610), t(1210), 20)]


def test_gap_longer_than_two_intervals_splits_one_missed_scrape_does_not(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"main": 1}, exists=(0, 3600), bound_at=0,
                 running=(0, 3600), gaps=((600, 630), (1800, 1900)))
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    # 610 missing (60 s spacing = 2 x 30 s: same interval); 1810..1870 missing (120 s): split
    assert [(r[2], r[3]) for r in rows(out)] == [(t(10), t(1810)), (t(1900), t(3600))]


def test_containers_are_summed_and_limits_fill_missing_requests(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"a": 2, "b": 1, "c": 1}, limits_only=("c",),
                 exists=(0, 600), bound_at=0, running=(0, 600))
    series.append(("kube_pod_container_resource_limits",
                   {"namespace": "ns", "pod": "p", "uid": "u1", "container": "a", "node": "gpu-1",
                    "resource": "nvidia_com_gpu", "unit": "integer", **KSM},
                   [(at(x), 2) for x in scrapes((0, 600))]))  # limit == request: not added
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    assert out["gpus"].to_list() == [4]


def test_init_container_request_counts_when_larger(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"a": 1}, exists=(0, 600), bound_at=0, running=(0, 600))
    series.append(("kube_pod_init_container_resource_requests",
                   {"namespace": "ns", "pod": "p", "uid": "u1", "container": "warm",
                    "node": "gpu-1", "resource": "nvidia_com_gpu", "unit": "integer", **KSM},
                   [(at(x), 4) for x in scrapes((0, 600))]))
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    assert out["gpus"].to_list() == [4]


def test_restart_with_a_new_uid_is_a_separate_row(tmp_path: Path):
    series = [
        *pod("ns", "job-0", "uid-a", gpus={"m": 1}, exists=(0, 900), bound_at=0,
             running=(0, 600), succeeded_after=False),
        *pod("ns", "job-0", "uid-b", gpus={"m": 1}, exists=(900, 3600), bound_at=900,
             running=(960, 2400)),
    ]
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR)
    assert out.select("uid", "start_ts", "end_ts").rows() == [
        ("uid-a", t(10), t(610)),
        ("uid-b", t(970), t(2410)),
    ]


def test_windows_add_up_and_clip(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"m": 2}, exists=(0, 3600), bound_at=0,
                 running=(100, 3000))
    src = source(tmp_path, series)
    whole = pod_gpu_allocations(src, T0, T0 + HOUR)
    cut = t(1234)
    first = pod_gpu_allocations(src, T0, cut)
    second = pod_gpu_allocations(src, cut, T0 + HOUR)
    assert first["end_ts"].to_list() == [cut]
    assert second["start_ts"].to_list() == [cut]  # look-back: not the first sample after cut
    assert first["gpu_seconds"].sum() + second["gpu_seconds"].sum() == whole["gpu_seconds"].sum()
    assert first["samples"].sum() + second["samples"].sum() == whole["samples"].sum()


def test_scrape_interval_is_inferred_per_pod_or_given(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"m": 1}, exists=(0, 3600), bound_at=0,
                 running=(0, 1200), step=60)
    src = source(tmp_path, series)
    inferred = pod_gpu_allocations(src, T0, T0 + HOUR)
    assert rows(inferred) == [("p", 1, t(10), t(1210), 20)]
    given = pod_gpu_allocations(src, T0, T0 + HOUR, scrape_interval=timedelta(seconds=15))
    # with 15 s every 60 s spacing is a gap: one interval per sample, 15 s each
    assert given.height == 20
    assert given["gpu_seconds"].sum() == 20 * 15


def test_attributes_labels_queue_service_account_owner(tmp_path: Path):
    base = {"namespace": "team-a", "pod": "p", "uid": "u1", **KSM}
    times = [(at(x), 1) for x in scrapes((0, 600))]
    series = [
        *pod("team-a", "p", "u1", gpus={"m": 1}, exists=(0, 600), bound_at=0, running=(0, 600)),
        ("kube_pod_labels", {**base, "label_owner": "alice",
                             "label_kueue_x_k8s_io_queue_name": "lq-a", "label_app": ""}, times),
        ("kube_pod_service_account", {**base, "service_account": "trainer"}, times),
        ("kube_pod_owner", {**base, "owner_kind": "Job", "owner_name": "job-1",
                            "owner_is_controller": "true"}, times),
        ("kube_pod_owner", {**base, "owner_kind": "Workload", "owner_name": "wl",
                            "owner_is_controller": "false"}, times),
    ]
    notes: list[str] = []
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR, notes=notes)
    row = out.row(0, named=True)
    assert json.loads(row["labels"]) == {"kueue_x_k8s_io_queue_name": "lq-a", "owner": "alice"}
    assert row["queue_name"] == "lq-a"
    assert row["service_account"] == "trainer"
    assert (row["owner_kind"], row["owner_name"]) == ("Job", "job-1")
    assert notes == []


def test_missing_optional_metrics_are_reported_not_fatal(tmp_path: Path):
    series = pod("ns", "p", "u1", gpus={"m": 1}, exists=(0, 600), bound_at=0, running=(0, 600))
    notes: list[str] = []
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR, notes=notes)
    assert out.height == 1
    assert out["labels"].to_list() == [None]
    assert any("kube_pod_labels absent" in n for n in notes)
    assert any("kube_pod_service_account absent" in n for n in notes)


def test_no_gpu_pods_gives_an_empty_frame(tmp_path: Path):
    series = [("kube_pod_info", {"namespace": "ns", "pod": "p", "uid": "u"}, [(at(0), 1)])]
    notes: list[str] = []
    out = pod_gpu_allocations(source(tmp_path, series), T0, T0 + HOUR, notes=notes)
    assert out.height == 0
    assert out.schema == pl.Schema(POD_GPU_ALLOCATION_SCHEMA)
    assert notes


def test_node_capacity_and_cordon(tmp_path: Path):
    times = scrapes((0, 3600))
    node = {"node": "gpu-shr-1", **KSM}
    series = [
        ("kube_node_status_capacity", {**node, "resource": "nvidia_com_gpu", "unit": "integer"},
         [(at(x), 8) for x in times]),
        ("kube_node_status_capacity", {**node, "resource": "cpu", "unit": "core"},
         [(at(x), 64) for x in times]),
        ("kube_node_status_allocatable",
         {**node, "resource": "nvidia_com_gpu", "unit": "integer"},
         [(at(x), 8) for x in times]),
        ("kube_node_spec_unschedulable", node, [(at(x), 1 if x >= 1800 else 0) for x in times]),
    ]
    out = node_gpu_capacity(source(tmp_path, series), T0, T0 + HOUR)
    assert out.schema == pl.Schema(NODE_GPU_CAPACITY_SCHEMA)
    assert out.select("start_ts", "end_ts", "capacity_gpus", "allocatable_gpus",
                      "unschedulable").rows() == [
        (t(10), t(1810), 8, 8, False),
        (t(1810), t(3600), 8, 8, True),
    ]


# --------------------------------------------------------------------------- committed fixture


def truth() -> list[dict[str, str]]:
    with (FIXTURES / "openmetrics" / "small-cluster.allocations.csv").open() as fh:
        return [r for r in csv.DictReader(fh) if r["domain"] == "kubernetes"]


def iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.fixture(scope="module")
def fixture_allocations() -> pl.DataFrame:
    src = OpenMetricsFileSource(FIXTURES / "openmetrics" / "small-cluster.om.gz")
    return pod_gpu_allocations(src, T0, T0 + 4 * HOUR)


def test_fixture_twin_matches_truth_within_one_scrape_per_end(fixture_allocations):
    expected: dict[str, tuple[datetime, datetime, int]] = {}
    for r in truth():
        start, end = iso(r["start"]), iso(r["end"])
        prev = expected.get(r["key"])
        expected[r["key"]] = (start, end, (prev[2] if prev else 0) + 1)
    assert fixture_allocations.height == len(expected)
    for row in fixture_allocations.iter_rows(named=True):
        start, end, gpus = expected[f"{row['namespace']}/{row['pod']}"]
        assert row["gpus"] == gpus
        assert abs((row["start_ts"] - start).total_seconds()) < 30
        assert abs((row["end_ts"] - end).total_seconds()) < 30
        true_seconds = gpus * (end - start).total_seconds()
        assert abs(row["gpu_seconds"] - true_seconds) <= gpus * 2 * 30
        assert row["node"] == "gpu-k8s-01"


class Recording:
    """A MetricsSource wrapper that records the selectors asked for."""

    def __init__(self, inner: OpenMetricsFileSource) -> None:
        self.inner = inner
        self.selectors: list[str] = []

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        self.selectors.append(selector)
        return self.inner.raw_samples(selector, start, end)

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.inner.series(match, start, end)


def test_per_pod_metrics_are_read_for_gpu_pods_only_in_batches(tmp_path: Path):
    uids = [f"uid-{i:03d}" for i in range(250)] + ["a.b", "weird\"uid"]
    series: list[Series] = [
        ("kube_pod_info", {"namespace": "ns", "pod": f"p{i}", "uid": u}, [(at(0), 1)])
        for i, u in enumerate([*uids, "aXb"])
    ]
    src = Recording(source(tmp_path, series))
    frame = read_for_uids(src, "kube_pod_info", uids, T0, T0 + HOUR)
    assert sorted(frame["uid"].to_list()) == sorted(uids)  # "aXb" not matched by "a.b"
    assert len(src.selectors) == 3


def test_non_gpu_pods_are_not_read(tmp_path: Path):
    series = [
        *pod("ns", "gpu-pod", "u-gpu", gpus={"m": 1}, exists=(0, 600), bound_at=0,
             running=(0, 600)),
        ("kube_pod_status_phase", {"namespace": "ns", "pod": "web", "uid": "u-web",
                                   "phase": "Running", **KSM}, [(at(x), 1) for x in range(10)]),
    ]
    src = Recording(source(tmp_path, series))
    out = pod_gpu_allocations(src, T0, T0 + HOUR)
    assert out["uid"].to_list() == ["u-gpu"]
    phase_reads = [s for s in src.selectors if s.startswith("kube_pod_status_phase")]
    # Pending too: a bound pod holds its GPUs from its start time (ksm_boundaries.py)
    assert phase_reads == ['kube_pod_status_phase{uid=~"u-gpu",phase=~"Running|Pending"}']
