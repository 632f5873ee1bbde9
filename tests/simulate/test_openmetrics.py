"""The OpenMetrics file is what promtool's backfill accepts, and it carries the planted
irregularities that world.json announces."""

import itertools
import json
import re
import shutil
import subprocess
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.simulate.conftest import read_csv

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+) (\d+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _ts(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "") + "+00:00").timestamp())


@pytest.fixture(scope="module")
def om(world_dir: Path) -> dict[str, object]:
    """Parse the whole file once: families in order and series -> [(ts, value)]."""
    lines = (world_dir / "prometheus" / "metrics.om").read_text(encoding="utf-8").splitlines()
    families: list[tuple[str, str]] = []
    series: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    current: tuple[str, str] | None = None
    closed: set[str] = set()
    for n, line in enumerate(lines, start=1):
        if line == "# EOF":
            assert n == len(lines), "# EOF must be the last line"
            break
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in closed, f"family {name} declared twice (line {n})"
            if current is not None:
                closed.add(current[0])
            current = (name, kind)
            families.append(current)
            continue
        match = SAMPLE.match(line)
        assert match, f"line {n} is not a sample: {line[:120]}"
        assert current is not None, f"line {n}: sample before any TYPE line"
        name, labels, value, ts = match.groups()
        family, kind = current
        allowed = {"gauge": {family}, "counter": {family + "_total"},
                   "histogram": {family + "_bucket", family + "_count", family + "_sum"}}[kind]
        assert name in allowed, f"line {n}: {name} inside family {family} ({kind})"
        float(value)
        series[(name, labels or "")].append((int(ts), float(value)))
    else:
        pytest.fail("the file does not end with # EOF")
    return {"families": families, "series": series}


def _labels(text: str) -> dict[str, str]:
    return dict(LABEL.findall(text))


def test_every_series_is_time_ordered_in_seconds(om, world_dir: Path):
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    w0, w1 = _ts(doc["window"]["start"]), _ts(doc["window"]["end"])
    series = om["series"]
    assert len(series) > 100
    for key, points in series.items():
        times = [t for t, _ in points]
        assert times == sorted(times), key[0]
        assert len(set(times)) == len(times), key[0]
        assert w0 <= times[0], key[0]
        assert times[-1] < w1, key[0]  # seconds, not milliseconds


def test_families_and_metric_names(om):
    names = {name for name, _ in om["families"]}
    for expected in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                     "kube_pod_container_resource_requests", "kube_pod_status_phase",
                     "kube_pod_info", "kube_pod_labels", "kube_pod_service_account",
                     "kube_pod_owner", "kube_pod_start_time", "kube_pod_completion_time",
                     "kube_node_status_capacity", "kube_node_spec_unschedulable",
                     "kueue_pending_workloads", "kueue_admitted_workloads",
                     "kueue_evicted_workloads", "kueue_admission_wait_time_seconds",
                     "kueue_admitted_active_workloads", "kueue_cluster_queue_resource_usage",
                     "kueue_cluster_queue_nominal_quota"):
        assert expected in names
    kinds = dict(om["families"])
    assert kinds["kueue_admitted_workloads"] == "counter"
    assert kinds["kueue_admission_wait_time_seconds"] == "histogram"
    series = om["series"]
    les = {_labels(lab)["le"] for name, lab in series if name.endswith("_bucket")}
    assert les == {"1.0", "2.5", "5.0", "10.0", "20.0", "40.0", "80.0", "160.0", "320.0",
                   "640.0", "1280.0", "2560.0", "5120.0", "10240.0", "+Inf"}
    reasons = {_labels(lab).get("reason") for name, lab in series
               if name == "kueue_evicted_workloads_total"}
    assert {"Preempted", "PodsReadyTimeout"} <= reasons


def test_dcgm_and_kube_state_metrics_labels(om):
    series = om["series"]
    util = [_labels(lab) for name, lab in series if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert any("hpc_job" in lab for lab in util)
    assert any("pod" in lab and "namespace" in lab and "container" in lab and
               "exported_pod" not in lab for lab in util)
    for lab in util:
        assert {"gpu", "UUID", "device", "modelName", "Hostname"} <= set(lab)
    ratios = [v for (name, _), pts in series.items() if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
              for _, v in pts]
    assert min(ratios) >= 0
    assert max(ratios) <= 1
    requests = [_labels(lab) for name, lab in series
                if name == "kube_pod_container_resource_requests"]
    assert all(r["resource"] == "nvidia_com_gpu" and r["unit"] == "integer" for r in requests)
    assert any(r["node"] == "" for r in requests)  # pending pods are not on a node yet
    phases = defaultdict(set)
    for name, lab in series:
        if name == "kube_pod_status_phase":
            labels = _labels(lab)
            phases[labels["uid"]].add(labels["phase"])
    assert all(p == {"Pending", "Running", "Succeeded", "Failed", "Unknown"}
               for p in phases.values())
    pod_labels = [_labels(lab) for name, lab in series if name == "kube_pod_labels"]
    assert any("label_owner" in lab for lab in pod_labels)
    assert any("label_kueue_x_k8s_io_queue_name" in lab for lab in pod_labels)
    quota = [_labels(lab) for name, lab in series if name == "kueue_cluster_queue_nominal_quota"]
    assert all(q["resource"] == "nvidia.com/gpu" for q in quota)


def test_planted_irregularities_are_in_the_samples(om, world_dir: Path):
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    irr = doc["irregularities"]
    series = om["series"]
    outage = irr["exporter_outages"][0]
    a, b = _ts(outage["start"]), _ts(outage["end"])
    node_samples = [t for (name, lab), pts in series.items()
                    if name == "DCGM_FI_DEV_GPU_UTIL" and f'Hostname="{outage["node"]}"' in lab
                    for t, _ in pts]
    assert node_samples
    assert not [t for t in node_samples if a <= t < b]
    assert [t for t in node_samples if t >= b]
    restart = irr["kueue_restart"]
    r0, r1 = _ts(restart["start"]), _ts(restart["end"])
    kueue_times = {t for (name, _), pts in series.items() if name.startswith("kueue_")
                   for t, _ in pts}
    assert not [t for t in kueue_times if r0 <= t < r1]
    admitted = [pts for (name, _), pts in series.items()
                if name == "kueue_admitted_workloads_total"]
    resets = 0
    for pts in admitted:
        for (_, before), (t, after) in itertools.pairwise(pts):
            if after < before:
                assert t >= r1
                resets += 1
    assert resets >= 1
    drift = irr["dcgm_label_drift"]
    since = _ts(drift["from"])
    exported = [min(t for t, _ in pts) for (name, lab), pts in series.items()
                if name == "DCGM_FI_DEV_GPU_UTIL" and "exported_pod=" in lab]
    assert exported
    assert min(exported) >= since
    late = irr["late_cordons"]
    assert late
    unsched = series[("kube_node_spec_unschedulable",
                      next(lab for name, lab in series if name == "kube_node_spec_unschedulable"
                           and f'node="{late[0]["node"]}"' in lab))]
    planned, actual = _ts(late[0]["planned"]), _ts(late[0]["actual"])
    assert all(v == 0 for t, v in unsched if planned <= t < actual)
    assert any(v == 1 for t, v in unsched if t >= actual)


def test_busy_truth_matches_the_samples(om, world_dir: Path):
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    step = doc["scrape"]["step_seconds"]
    outage = doc["irregularities"]["exporter_outages"][0]
    totals: dict[tuple[str, str], float] = defaultdict(float)
    seen: dict[tuple[str, int], float] = {}
    for (name, lab), pts in om["series"].items():
        if name != "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            continue
        uuid = _labels(lab)["UUID"]
        for t, v in pts:
            seen[(uuid, t)] = v  # a double-scheduled GPU has two series with one value
    for (uuid, t), v in seen.items():
        totals[(uuid, datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d"))] += v * step
    outage_node = outage["node"]
    nodes = {row["gpu_uuid"]: row["node"] for row in read_csv(world_dir / "nodes.csv")}
    for row in read_csv(world_dir / "truth" / "gpu_busy_seconds.csv"):
        key = (row["gpu_uuid"], row["day"])
        if nodes[row["gpu_uuid"]] == outage_node:
            assert totals.get(key, 0.0) <= float(row["busy_seconds"]) + 1e-6
            continue
        assert totals[key] == pytest.approx(float(row["busy_seconds"]), abs=1e-3), key


@pytest.mark.prometheus
def test_promtool_backfills_the_file(world_dir: Path, tmp_path: Path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian: apt-get install prometheus)")
    result = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=168h",
         str(world_dir / "prometheus" / "metrics.om"), str(tmp_path / "tsdb")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert list((tmp_path / "tsdb").iterdir())
