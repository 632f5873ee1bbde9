"""MIG pods through the Kubernetes ingest (gpuledger/ingest/kubernetes/run.py): one row per pod and
GPU-like
resource, merged across windows apart; dcgm-exporter's per-instance series (GPU_I_ID,
GPU_I_PROFILE and the pod labels) attribute to the pod holding the instance.

Series: tests/fixtures/kubernetes/sharing (KSM shapes) and
tests/fixtures/expositions/dcgm-exporter-issue-512-mig-h100.prom (dcgm-exporter#512: one H100's
1g.10gb instances 7 and 9 labelled with two kserve pods, instance 8 free).
"""

from datetime import timedelta

from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import phase_lines, series
from tests.connectors.kubernetes.sharing_shapes import (
    END,
    MIG_MIXED,
    PHASE,
    RUN,
    SCRAPES,
    node_lines,
    pod_life,
    pod_lines,
)

HOUR = timedelta(hours=1)
MIG = pod_lines(MIG_MIXED)


def test_a_pod_with_a_gpu_and_a_mig_instance_keeps_two_rows_across_windows(tmp_path):
    whole = [ln.but(resource="nvidia_com_gpu") for ln in MIG]
    # a second GPU of the node whole (capacity 0 would make the whole-GPU request a reject)
    nodes = [ln.but(value=1.0) if ln.get("resource") == "nvidia_com_gpu" else ln
             for ln in node_lines(MIG_MIXED)]
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series(
        pod_life(lambda _t: nodes, [*MIG, *whole]), SCRAPES)))
    cut = T0 + timedelta(seconds=900)
    with connect(tmp_path / "l.duckdb") as con:
        for a, b in ((cut, T0 + HOUR), (T0, cut)):  # any order
            k8s_ingest.ingest_kubernetes_window(con, src, a, b, cluster="c")
        pieces = con.execute("SELECT count(*) FROM k8s_pod_allocation_pieces").fetchone()
        rows = con.execute(
            "SELECT gpu_resource, sharing, slice_profile, gpus, start_ts, end_ts, gpu_seconds "
            "FROM k8s_pod_allocations ORDER BY gpu_resource").fetchall()
    run, end = T0 + timedelta(seconds=RUN), T0 + timedelta(seconds=END)
    assert pieces == (4,)
    assert rows == [("nvidia_com_gpu", None, None, 1, run, end, END - RUN),
                    ("nvidia_com_mig_1g_12gb", "mig", "1g.12gb", 1, run, end, END - RUN)]


def _ksm_pods(names: list[tuple[str, str]], instances: float, whole_gpus: float):
    """Each (pod, uid) of dcgm-exporter#512 holding `instances` 1g.10gb instances on its node,
    whose nvidia_com_gpu capacity is `whole_gpus` (its other GPUs, not MIG)."""
    def lines_at(now):
        phase = "Pending" if now < 300 else "Running" if now < 1500 else "Succeeded"
        out = []
        for pod, uid in names:
            who = {"namespace": "model-playground-stg", "pod": pod, "uid": uid}
            out += [ln.but(node="gsrh100-074", resource="nvidia_com_mig_1g_10gb",
                           value=instances, **who) for ln in MIG]
            out += [ln.but(**who) for ln in phase_lines(PHASE, phase)]
        out.append(next(ln for ln in node_lines(MIG_MIXED)
                        if ln.get("resource") == "nvidia_com_gpu").but(node="gsrh100-074",
                                                                       value=whole_gpus))
        return out
    return series(lines_at, SCRAPES)


def _ingest(tmp_path, pods, instances=1.0, whole_gpus=0.0):
    dcgm = over_time(exposition("dcgm-exporter-issue-512-mig-h100.prom"), 0, 3570, 30,
                     value=0.5)
    ksm = _ksm_pods(pods, instances, whole_gpus)
    src = OpenMetricsFileSource(om_file(tmp_path / "m.om", [*ksm, *dcgm]))
    with connect(tmp_path / "l.duckdb") as con:
        k8s_ingest.ingest_kubernetes_window(con, src, T0, T0 + HOUR, cluster="c")
        pod_gpus = con.execute("SELECT pod, node, gpu_uuid FROM k8s_pod_gpus ORDER BY pod"
                               ).fetchall()
        by_instance = con.execute(
            "SELECT gpu_instance, gpu_instance_profile, list(DISTINCT pod), "
            "list(DISTINCT attribution) FROM gpu_utilization WHERE bucket_start >= ? "
            "AND bucket_start < ? GROUP BY ALL ORDER BY gpu_instance",
            [T0 + timedelta(minutes=6), T0 + timedelta(minutes=24)]).fetchall()
    return pod_gpus, by_instance


EMBED = "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
TTS = "tts-predictor-00011-deployment-5554f75554-8j8pl"
UUID = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"


def test_mig_instances_attribute_to_the_pods_holding_them(tmp_path):
    pod_gpus, by_instance = _ingest(tmp_path, [(EMBED, "uid-embed"), (TTS, "uid-tts")])
    # the physical GPU of each pod's instance (allocations.gpu_uuids is built from these)
    assert pod_gpus == [(EMBED, "gsrh100-074", UUID), (TTS, "gsrh100-074", UUID)]
    assert by_instance == [("7", "1g.10gb", [EMBED], ["exporter_labels"]),
                           ("8", "1g.10gb", [None], [None]),
                           ("9", "1g.10gb", [TTS], ["exporter_labels"])]


def test_a_free_instance_is_never_given_to_the_only_mig_pod_on_the_node(tmp_path):
    """3 instances held, 3 whole GPUs besides: counted together they would look like the
    one pod holding every GPU of the node (dcgm_attribution's sole-pod rule)."""
    _, by_instance = _ingest(tmp_path, [(TTS, "uid-tts")], instances=3.0, whole_gpus=3.0)
    assert by_instance[1] == ("8", "1g.10gb", [None], [None])
