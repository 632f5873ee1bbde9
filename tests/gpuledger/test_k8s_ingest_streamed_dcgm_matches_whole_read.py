"""Reading dcgm-exporter a few GPUs at a time (issue #18: bounded memory) writes exactly the rows,
rejects and warnings of the whole-window read, on simulated worlds with the shapes that cross
groups: exporter label drift, realistic gaps and mixed host names, MIG / time-slicing, old
dcgm-exporter names, nodes without pod labels (attribution), and windows cut inside a day."""

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from connectors.gpu_sharing import DEFAULT_NAMES
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.dcgm_stream import dcgm_groups, merge_warnings
from gpuledger.ingest.kubernetes.ksm_stream import ksm_pod_groups
from models.runner import connect
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

DAY1, DAY2 = datetime(2026, 1, 5), datetime(2026, 1, 6)
# every table the Kubernetes ingest writes (ingest_runs holds wall-clock times: compared apart)
TABLES = ("k8s_pod_allocation_pieces", "k8s_pod_allocations", "k8s_pod_phases", "k8s_pod_gpus",
          "k8s_node_capacity_pieces", "k8s_node_capacity", "gpu_utilization", "gpu_busy_daily",
          "kueue_counters", "kueue_pending", "kueue_admission_wait",
          "kueue_admission_wait_buckets", "kueue_queue_resources", "k8s_ingest_warnings",
          "k8s_rejects", "rejects", "k8s_job_specs", "k8s_pending_pods", "node_names")
WALL_CLOCK = {"node_names": "first_seen_at"}  # when the name was recorded, not what was read

WORLDS = {
    "drift": {"seed": 31},
    "realistic-fqdn": {"seed": 32, "realistic": True, "fqdn_nodes": True},
    "shared-gpus": {"seed": 33, "shared_gpus": True},
    "old-names-exported": {"seed": 34, "dcgm_names": "old-namespace",
                           "dcgm_label_style": "exported", "dcgm_hostname_label": "hostname"},
    "no-pod-labels": {"seed": 35, "no_pod_labels_share": 0.5, "honor_labels": False},
}


@pytest.fixture(scope="module", params=sorted(WORLDS))
def source(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> OpenMetricsFileSource:
    out = tmp_path_factory.mktemp(f"world-{request.param}")
    simulate(SimConfig(days=1, nodes=NodeCounts(hpc=1, k8s=3, shared=2), step_seconds=120,
                       scontrol_every=0, **WORLDS[request.param]), out)
    return OpenMetricsFileSource(out / "prometheus" / "metrics.om")


def dump(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    def columns(t: str) -> str:
        return f"* EXCLUDE ({WALL_CLOCK[t]})" if t in WALL_CLOCK else "*"
    return {t: con.execute(f"SELECT {columns(t)} FROM {t} ORDER BY ALL").fetchall()
            for t in TABLES}


def ingest(path: Path, source, windows, gpus_per_group, pods_per_group=400):
    with connect(path) as con:
        loads = [k8s_ingest.ingest_kubernetes_window(con, source, a, b, cluster="gpulab",
                                                     gpus_per_group=gpus_per_group,
                                                     pods_per_group=pods_per_group,
                                                     nodes_per_group=pods_per_group)
                 for a, b in windows]
        runs = con.execute("SELECT partition_key, rows_loaded, rows_rejected, detail "
                           "FROM ingest_runs ORDER BY ALL").fetchall()
        return loads, dump(con), runs


def facts(load: k8s_ingest.KubernetesLoad) -> tuple:
    return (load.pod_intervals, load.pods, load.node_intervals, load.utilization_rows,
            load.busy_days, load.kueue_rows, sorted(load.warnings), load.rejected,
            load.rejected_lines)


@pytest.mark.parametrize("windows", [[(DAY1, DAY2)],
                                     [(DAY1, DAY1 + timedelta(hours=7, minutes=30)),
                                      (DAY1 + timedelta(hours=7, minutes=30), DAY2)]],
                         ids=["day", "cut-inside-the-day"])
def test_groups_of_one_and_three_gpus_write_the_rows_of_the_whole_read(source, tmp_path, windows):
    whole_loads, whole, whole_runs = ingest(tmp_path / "whole.duckdb", source, windows, None)
    assert whole["gpu_utilization"], "the world has DCGM samples"
    assert whole["gpu_busy_daily"]
    groups = dcgm_groups(source, DAY1, DAY2, 1)
    assert len(groups) > 3, "the world is read in several groups"
    assert len(ksm_pod_groups(source, DAY1, DAY2, DEFAULT_NAMES, 1)) > 3
    for size in (1, 3):  # GPUs per DCGM group, pods and nodes per KSM group
        loads, streamed, runs = ingest(tmp_path / f"by-{size}.duckdb", source, windows, size,
                                       size)
        for table in TABLES:
            assert streamed[table] == whole[table], f"{table} differs with {size} GPU(s)/group"
        assert [facts(x) for x in loads] == [facts(x) for x in whole_loads]
        assert runs == whole_runs


def test_a_gpu_and_its_node_are_never_split_across_groups(source):
    groups = dcgm_groups(source, DAY1, DAY2, 1)
    seen: dict[str, int] = {}
    for i, matchers in enumerate(groups):
        for m in matchers:
            frame = source.raw_samples(f"DCGM_FI_DEV_GPU_UTIL{{{m}}}", DAY1, DAY2)
            host = next((c for c in ("node", "kubernetes_node", "Hostname", "hostname")
                         if c in frame.columns), None)
            if host is None:
                continue
            for node in frame[host].drop_nulls().unique().to_list():
                assert seen.setdefault(node, i) == i, f"node {node} is read in two groups"


def test_merged_warnings_add_counts_and_recut_examples_and_keep_no_samples_only_if_all_lack():
    a = ["X: 3 samples at instants where Y also has one for the same GPU (1 GPU(s)); counted "
         "once, from the latter",
         "P missing for 4 samples on 2 GPU(s) (e.g. ['GPU-b', 'GPU-d']): F/100 used there",
         "neither P nor F has samples in [a, b)"]
    b = ["P missing for 1 samples on 1 GPU(s) (e.g. ['GPU-a']): F/100 used there",
         "X: 2 samples at instants where Y also has one for the same GPU (2 GPU(s)); counted "
         "once, from the latter"]
    merged = merge_warnings([a, b])
    assert sorted(merged) == sorted([
        "X: 5 samples at instants where Y also has one for the same GPU (3 GPU(s)); counted "
        "once, from the latter",
        "P missing for 5 samples on 3 GPU(s) (e.g. ['GPU-a', 'GPU-b', 'GPU-d']): F/100 used "
        "there"])
    nothing = ["neither P nor F has samples in [a, b)"]
    assert merge_warnings([nothing, nothing]) == nothing
