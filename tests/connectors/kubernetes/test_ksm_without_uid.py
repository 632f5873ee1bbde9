"""kube-state-metrics before v2.1.0: pod metrics without a uid label.

Series from kube-state-metrics v2.0.0's own expected expositions (pod_test.go): requests and
phase carry namespace and pod only, kube_pod_created gives the creation time (1.5e+09), the
init-container requests have no node label, kube_pod_info has node and uid. Such pods are keyed
``<namespace>/<pod>@<creation time>Z`` in the uid column, with a warning.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import pod_gpu_allocations, read_for_uids
from connectors.kubernetes.ksm_keys import parse_key
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_POD_V2_0,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)

HOUR = timedelta(hours=1)
V2_0 = lines(KSM_POD_V2_0)
GPU = {"resource": "nvidia_com_gpu"}
CON1 = one(V2_0, "kube_pod_container_resource_requests", container="pod1_con1", **GPU)
INIT = one(V2_0, "kube_pod_init_container_resource_requests", container="pod1_initcon1", **GPU)
CREATED = one(V2_0, "kube_pod_created", pod="pod1")
INFO = one(V2_0, "kube_pod_info", pod="pod1")  # node1, uid abc-123-xxx (only this one has it)
PHASE = pick(V2_0, "kube_pod_status_phase", pod="pod1")
KEY = "ns1/pod1@2017-07-14T02:40:00Z"  # kube_pod_created 1.5e+09
SCRAPES = [10 + 30 * i for i in range(100)]


def life(running=(300, 1500), created: Line = CREATED, gpu_lines=(CON1, INIT), info=()):
    def lines_at(now: float) -> list[Line]:
        phase = "Pending" if now < running[0] else "Running" if now < running[1] else "Succeeded"
        out = [ln.but(node="node1") if ln.get("node") is not None else ln for ln in gpu_lines]
        return [*out, created, *info, *phase_lines(PHASE, phase)]
    return lines_at


def source(tmp_path: Path, found) -> OpenMetricsFileSource:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))


def test_pods_without_uid_are_keyed_by_namespace_name_and_creation_time(tmp_path: Path):
    notes: list[str] = []
    out = pod_gpu_allocations(source(tmp_path, series(life(), SCRAPES)), T0, T0 + HOUR,
                              notes=notes)
    assert out.select("namespace", "pod", "uid", "node", "gpus", "start_ts", "end_ts").rows() \
        == [("ns1", "pod1", KEY, "node1", 1, T0 + timedelta(seconds=310),
             T0 + timedelta(seconds=1510))]
    assert parse_key(KEY) == ("ns1", "pod1")
    assert parse_key("abc-123-xxx") is None
    assert any(n.startswith("kube-state-metrics before v2.1.0") and "1 GPU pods" in n
               for n in notes)


@pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])
def test_synthetic_keys_are_read_by_namespace_and_pod_in_both_shapes(tmp_path: Path, honor):
    src = source(tmp_path, series(life(), SCRAPES, honor=honor))
    phase = read_for_uids(src, "kube_pod_status_phase", [KEY, "some-real-uid"], T0, T0 + HOUR,
                          'phase="Running"')
    assert set(phase["uid"]) == {KEY}
    assert set(phase["namespace"]) == {"ns1"}
    assert phase.height == len(SCRAPES)
    out = pod_gpu_allocations(src, T0, T0 + HOUR)
    assert out["uid"].to_list() == [KEY]


def test_a_pod_recreated_under_its_name_is_a_new_key(tmp_path: Path):
    # a StatefulSet pod deleted at 1500 and created again at 1800 (new kube_pod_created)
    again = CREATED.but(value=CREATED.value + 3600)
    first, second = life(running=(300, 1500)), life(running=(1900, 2700), created=again)
    found = series(lambda now: first(now) if now < 1500 else second(now),
                   [s for s in SCRAPES if not 1500 <= s < 1800])
    out = pod_gpu_allocations(source(tmp_path, found), T0, T0 + HOUR)
    assert out.select("uid", "start_ts", "end_ts").rows() == [
        (KEY, T0 + timedelta(seconds=310), T0 + timedelta(seconds=1510)),
        ("ns1/pod1@2017-07-14T03:40:00Z", T0 + timedelta(seconds=1900),
         T0 + timedelta(seconds=2710)),
    ]


def test_without_uid_and_without_kube_pod_created_samples_are_rejected(tmp_path: Path):
    def lines_at(now: float) -> list[Line]:
        return [ln for ln in life()(now) if ln.name != "kube_pod_created"]
    rejects: list[pl.DataFrame] = []
    out = pod_gpu_allocations(source(tmp_path, series(lines_at, SCRAPES)), T0, T0 + HOUR,
                              rejects=rejects)
    assert out.height == 0
    kept = pl.concat(rejects)
    assert set(kept["reason"]) == {
        "expected a uid label or a kube_pod_created sample of the pod (kube-state-metrics "
        "before v2.1.0), found neither"}
    # every GPU request and limit sample of the scrapes read (container and init container)
    assert kept.height == 2 * len(SCRAPES)


def test_no_key_at_all_is_rejected(tmp_path: Path):
    # a static scrape config (no pod/namespace target labels, which would fill the gap)
    nameless = CON1.but(node="node1", pod=None)
    rejects: list[pl.DataFrame] = []
    found = series(lambda now: [nameless, *life()(now)], SCRAPES,
                   target={"job": "kube-state-metrics", "instance": "10.0.0.5:8080"})
    out = pod_gpu_allocations(source(tmp_path, found), T0, T0 + HOUR, rejects=rejects)
    assert out["uid"].to_list() == [KEY]  # the named pod is unaffected
    kept = pl.concat(rejects)
    assert kept["reason"].unique().to_list() == [
        "expected a uid label or namespace and pod labels, found neither"]
    assert kept.height == len(SCRAPES)
    assert '"container": "pod1_con1"' in kept["series"][0]


def test_init_only_gpu_pod_of_ksm_2_0_takes_its_node_from_kube_pod_info(tmp_path: Path):
    # v2.0's init-container requests carry no node label; kube_pod_info does (and has a uid)
    found = series(life(gpu_lines=(INIT.but(value=2.0),), info=(INFO,)), SCRAPES)
    rejects: list[pl.DataFrame] = []
    out = pod_gpu_allocations(source(tmp_path, found), T0, T0 + HOUR, rejects=rejects)
    assert out.select("uid", "node", "gpus").rows() == [(KEY, "node1", 2)]
    assert rejects == []


def test_the_ingest_stores_synthetic_keys_and_their_terminal_phase(tmp_path: Path):
    src = source(tmp_path, series(life(), SCRAPES, honor=False))
    with connect(tmp_path / "l.duckdb") as con:
        load = k8s_ingest.ingest_kubernetes_window(con, src, T0, T0 + HOUR, cluster="c1")
        assert con.execute("SELECT uid, namespace, pod, gpus FROM k8s_pod_allocations"
                           ).fetchall() == [(KEY, "ns1", "pod1", 1)]
        # the terminal phase is read by namespace/pod too (exported_* here)
        assert con.execute("SELECT uid, phase FROM k8s_pod_phases").fetchall() == [
            (KEY, "Succeeded")]
        stored = con.execute("SELECT message FROM k8s_ingest_warnings WHERE component = 'ksm'"
                             ).fetchall()
    assert any(m.startswith("kube-state-metrics before v2.1.0") for m, in stored)
    assert load.pods == 1
