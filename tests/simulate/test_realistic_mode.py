"""``--realistic`` (issue #15 item 1): messy worlds whose truth still follows the documented rules
(docs/detectors.md), and a default mode that did not move (tests/simulate/test_sample_data.py
regenerates sample_data/ byte for byte)."""

import csv
import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuledger.site import load_site
from simulator import SimConfig, simulate
from simulator.cli_args import main as simulate_main
from simulator.config import NodeCounts

REALISTIC = SimConfig(seed=5, days=2, step_seconds=60, realistic=True,
                      kueue_snapshot_every=3600, no_pod_labels_share=0.25)
# the benchmark size (docs/simulator-shapes.md); planted counts need no metrics file
BENCHMARK = SimConfig(seed=5, days=7, nodes=NodeCounts(hpc=8, k8s=12, shared=6),
                      step_seconds=60, metrics=False, realistic=True,
                      no_pod_labels_share=0.25)
RATIO = "DCGM_FI_PROF_GR_ENGINE_ACTIVE{"
IDLE_BELOW, IDLE_MIN = 0.05, 1800  # docs/detectors.md defaults


def _epoch(text: str) -> int:
    text = text.rstrip("Z")
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def _labels(line: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', line[line.index("{"):line.rindex("}")]))


@pytest.fixture(scope="module")
def real_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("realistic") / "world"
    simulate(REALISTIC, out)
    return out


@pytest.fixture(scope="module")
def doc(real_world: Path) -> dict:
    return json.loads((real_world / "world.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def dcgm(real_world: Path) -> dict[tuple[str, str], dict[int, float]]:
    """(GPU UUID, holder) -> {timestamp: busy ratio}; holder '' for no workload labels."""
    out: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    with (real_world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith(RATIO):
                continue
            labels = _labels(line)
            holder = labels.get("hpc_job") or labels.get("exported_pod") or labels.get("pod", "")
            if holder.startswith("nvidia-dcgm-exporter-"):
                holder = ""
            value, ts = line.rsplit(" ", 2)[1:]
            out[(labels["UUID"], holder)][int(ts)] = float(value)
    return out


def _truth(world: Path) -> list[dict[str, str]]:
    with (world / "truth" / "incidents.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_benchmark_size_plants_20_incidents_and_10_decoys_per_kind(tmp_path: Path):
    simulate(BENCHMARK, tmp_path / "bench")
    kinds = defaultdict(int)
    for row in _truth(tmp_path / "bench"):
        kinds[row["kind"]] += 1
    doc = json.loads((tmp_path / "bench" / "world.json").read_text(encoding="utf-8"))
    decoys = doc["realistic"]["decoys_by_kind"]
    for kind in ("double_scheduled", "partial_gang", "idle_allocation"):
        assert kinds[kind] >= 20, (kind, dict(kinds))
        assert decoys.get(kind, 0) >= 10, (kind, decoys)
    assert all(d.get("why_not_an_incident") and d.get("imitates") for d in doc["decoys"])
    assert not doc["planted_skipped"]


def test_same_seed_gives_the_same_bytes_another_seed_does_not(tmp_path: Path):
    small = SimConfig(seed=9, days=1, step_seconds=300, realistic=True,
                      kueue_snapshot_every=7200)
    a, b = tmp_path / "a", tmp_path / "b"
    simulate(small, a)
    simulate(small, b)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for name in files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    other = SimConfig(seed=10, days=1, step_seconds=300, realistic=True, metrics=False)
    simulate(other, tmp_path / "c")
    assert ((tmp_path / "c" / "truth" / "incidents.csv").read_bytes()
            != (a / "truth" / "incidents.csv").read_bytes())


def test_the_command_in_world_json_names_realistic(doc: dict):
    assert "--realistic" in doc["command"]
    assert "--no-pod-labels-on 0.25" in doc["command"]


def test_idle_truth_is_the_rule_applied_to_the_written_samples(real_world: Path, dcgm: dict):
    """Every < 5 % run of >= 30 min of a labelled holder is a truth incident and back: the
    realistic profiles (warm-ups, checkpoints, low phases) never make one by accident."""
    found = set()
    for (uuid, holder), samples in dcgm.items():
        if not holder:
            continue
        run: list[int] = []
        for ts in [*sorted(samples), None]:
            idle = ts is not None and samples[ts] < IDLE_BELOW
            if idle and run and ts - run[-1] == REALISTIC.step_seconds:
                run.append(ts)
                continue
            if run and run[-1] + REALISTIC.step_seconds - run[0] >= IDLE_MIN:
                found.add((uuid, run[0], run[-1] + REALISTIC.step_seconds))
            run = [ts] if idle else []
    truth = set()
    for row in _truth(real_world):
        if row["kind"] == "idle_allocation":
            for uuid in row["gpu_uuids"].split(";"):
                truth.add((uuid, _epoch(row["start"]), _epoch(row["end"])))
    assert truth, "expected planted idle incidents"
    assert found == truth
    details = " ".join(r["detail"] for r in _truth(real_world))
    assert "1 of 2 nodes" in details  # the multi-node job with one idle node


def test_realistic_profiles_have_low_phases_and_checkpoint_pauses(dcgm: dict):
    low = pauses = 0
    for (_, holder), samples in dcgm.items():
        if holder:
            low += sum(1 for v in samples.values() if 0.05 <= v < 0.15)
            pauses += sum(1 for v in samples.values() if v <= 0.01)
    assert low > 1000, low
    assert pauses > 100, pauses


def test_dcgm_series_have_gaps_where_world_json_says(real_world: Path, doc: dict,
                                                     dcgm: dict):
    with (real_world / "nodes.csv").open(newline="", encoding="utf-8") as fh:
        uuids = defaultdict(set)
        for row in csv.DictReader(fh):
            uuids[row["node"]].add(row["gpu_uuid"])
    gaps = doc["irregularities"]["exporter_outages"]
    assert len(gaps) >= 2 * REALISTIC.days
    for gap in gaps:
        a, b = _epoch(gap["start"]), _epoch(gap["end"])
        for (uuid, _), samples in dcgm.items():
            if uuid in uuids[gap["node"]]:
                assert not any(a <= ts < b for ts in samples), gap


def test_host_names_mixed_fqdn_and_short(real_world: Path, doc: dict):
    hosts, nodes = set(), set()
    with (real_world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(RATIO):
                hosts.add(_labels(line)["Hostname"])
            elif line.startswith("kube_node_status_capacity{"):
                nodes.add(_labels(line)["node"])
    fqdn = {h for h in hosts if "." in h}
    assert fqdn
    assert hosts - fqdn
    assert {n for n in nodes if "." in n}
    assert {n for n in nodes if "." not in n}
    assert {h.split(".")[0] for h in fqdn} == set(doc["realistic"]["fqdn_nodes"])


def test_ksm_job_series_job_label_pending_pods_and_clock_skew(real_world: Path, doc: dict):
    parallelism, completions, pending_without_node, job_labels = {}, {}, set(), 0
    starts: dict[str, int] = {}
    with (real_world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("kube_job_spec_parallelism{"):
                lab = _labels(line)
                parallelism[(lab["namespace"], lab["job_name"])] = int(line.split()[-2])
            elif line.startswith("kube_job_spec_completions{"):
                lab = _labels(line)
                completions[(lab["namespace"], lab["job_name"])] = int(line.split()[-2])
            elif line.startswith("kube_pod_labels{"):
                job_labels += "label_batch_kubernetes_io_job_name" in line
            elif line.startswith("kube_pod_info{") and 'node=""' in line:
                pending_without_node.add(_labels(line)["pod"])
            elif line.startswith("kube_pod_start_time{"):
                lab = _labels(line)
                starts[f'{lab["namespace"]}/{lab["pod"]}'] = int(line.split()[-2])
    assert job_labels
    assert pending_without_node
    partial = [d for d in doc["decoys"] if d.get("kind") == "partial_admission_min_count"]
    assert partial
    for d in partial:
        job = d["workload"].split("/", 1)[1].removeprefix("job-").rsplit("-", 1)[0]
        key = (d["workload"].split("/")[0], job)
        assert (parallelism[key], completions[key]) == (d["admitted"], d["pods_wanted"])
    with (real_world / "truth" / "allocations.csv").open(newline="", encoding="utf-8") as fh:
        skews = {starts[r["source_key"]] - _epoch(r["start"]) for r in csv.DictReader(fh)
                 if r["domain"] == "kubernetes" and r["source_key"] in starts
                 and _epoch(r["start"]) >= _epoch(doc["window"]["start"])}
    assert skews == {doc["realistic"]["ksm_clock_skew_seconds"]}


def test_workloads_leave_the_snapshots_10_minutes_after_their_job_ends(real_world: Path):
    snaps = sorted((real_world / "kueue" / "snapshots").glob("workloads-*.json"))
    assert len(snaps) == REALISTIC.days * 24 - 1
    seen: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    finished: dict[str, int] = {}
    for path in snaps:
        at = _epoch(datetime.strptime(path.stem.split("-", 1)[1], "%Y%m%dT%H%M%SZ")
                    .isoformat())
        items = json.loads(path.read_text(encoding="utf-8"))["items"]
        present = set()
        for item in items:
            key = f'{item["metadata"]["namespace"]}/{item["metadata"]["name"]}'
            present.add(key)
            for c in item["status"]["conditions"]:
                if c["type"] == "Finished" and c["status"] == "True":
                    finished[key] = _epoch(c["lastTransitionTime"])
        for key in finished:
            seen[key].append((at, key in present))
    final = {f'{i["metadata"]["namespace"]}/{i["metadata"]["name"]}' for i in json.loads(
        (real_world / "kueue" / "workloads.json").read_text(encoding="utf-8"))["items"]}
    deleted = 0
    for key, rows in seen.items():
        gone = finished[key] - 2 + 600  # Finished is set 2 s after the Job ended
        assert all(here == (at < gone) for at, here in rows), key
        if any(not here for _, here in rows):
            deleted += 1
            assert key not in final
    assert deleted >= 5


def test_site_file_loads_and_gpuledger_load_reads_a_realistic_world(tmp_path: Path):
    from gpuledger.cli import main as gpuledger_main

    out = tmp_path / "world"
    assert simulate_main(["--seed", "6", "--days", "2", "--step", "300", "--realistic",
                          "--out", str(out), "--quiet"]) == 0
    site = load_site(out / "gpuledger.toml")
    assert site.clusters
    assert gpuledger_main(["--config", str(out / "gpuledger.toml"), "load"]) == 0


def test_default_worlds_have_none_of_it(world_dir: Path):
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    assert "realistic" not in doc
    assert "--realistic" not in doc["command"]
    assert not (world_dir / "kueue" / "snapshots").exists()
    text = (world_dir / "prometheus" / "metrics.om").read_text(encoding="utf-8")
    assert "kube_job_spec_parallelism" not in text
    assert "label_batch_kubernetes_io_job_name" not in text
