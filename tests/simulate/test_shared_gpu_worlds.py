"""``--shared-gpus`` (issue #16 item 6): MIG, time-slicing and shard nodes in both schedulers,
written in the upstream shapes, with truth in physical fractions (docs/shared-gpus.md) and
the whole-GPU part of the world unchanged."""

import json
import re
from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import pytest

from simulator import SimConfig, simulate
from simulator.cli_args import main
from tests.simulate.conftest import read_csv

# Monday-Tuesday: two weekdays, so two planted conflicts; 15-minute scrapes keep it small
CONFIG = SimConfig(seed=11, days=2, step_seconds=900, shared_gpus=True)
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+) (\d+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')
MS = Decimal("0.001")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shared") / "world"
    simulate(CONFIG, out)
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "world"
    simulate(replace(CONFIG, shared_gpus=False), out)
    return out


@pytest.fixture(scope="module")
def samples(shared: Path) -> list[tuple[str, dict[str, str], str, int]]:
    out = []
    with (shared / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            m = _LINE.match(line)
            if m:
                out.append((m[1], dict(_LABEL.findall(m[2])), m[3], int(m[4])))
    return out


@pytest.fixture(scope="module")
def doc(shared: Path) -> dict:
    return json.loads((shared / "world.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows(shared: Path) -> list[dict[str, str]]:
    return read_csv(shared / "truth" / "shared_allocations.csv")


def _nodes(doc: dict) -> dict[str, dict]:
    return {n["name"]: n for n in doc["shared_gpus"]["nodes"]}


def _epoch(text: str) -> int:
    from datetime import UTC, datetime
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


# ---------------------------------------------------------------- kube-state-metrics

def test_mig_pods_request_their_profile_as_ksm_names_it(samples, rows) -> None:
    requests = [lb for name, lb, _, _ in samples
                if name == "kube_pod_container_resource_requests"
                and lb["resource"].startswith("nvidia_com_mig_")]
    assert requests
    assert all(lb["unit"] == "integer" for lb in requests)
    # "": pending, before the scheduler bound the pod
    assert {lb["node"] for lb in requests} == {"", "gpu-mig-k8s-01", "gpu-mig-shr-01"}
    pods = {f'{lb["namespace"]}/{lb["pod"]}': lb["resource"] for lb in requests}
    mig_rows = [r for r in rows if r["domain"] == "kubernetes" and r["sharing"] == "mig"]
    for r in mig_rows:
        if r["source_key"] in pods:
            assert pods[r["source_key"]] == "nvidia_com_mig_" + r["slice_profile"].replace(
                ".", "_")
    scrapes = {t for name, _, _, t in samples if name == "kube_pod_info"}
    seen = {r["source_key"] for r in mig_rows  # pods alive at a scrape (created 30 s early)
            if any(_epoch(r["start"]) - 30 <= t < _epoch(r["end"]) for t in scrapes)}
    assert seen <= set(pods)
    assert len(seen) > 100


POD_FAMILIES = ("kube_pod_info", "kube_pod_labels", "kube_pod_service_account",
                "kube_pod_owner", "kube_pod_status_phase",
                "kube_pod_container_resource_requests", "kube_pod_start_time",
                "kube_pod_completion_time")


def test_every_shared_pod_shows_its_exact_ends_in_kube_state_metrics(samples, doc,
                                                                      rows) -> None:
    """Each shared pod in the truth is Running at a scrape of the window, with the pod series a
    whole-GPU Job's pod has; ``kube_pod_start_time`` is its start within one scrape interval
    before its first Running sample, and one that ended in the window shows
    ``kube_pod_completion_time`` = its end within one interval after its last Running sample:
    the exact ends docs/kubernetes.md "Pod boundaries" accepts, so the ledger can charge the
    truth's seconds (a pod deleted right after it ended, or never seen Running, cannot)."""
    step = doc["scrape"]["step_seconds"]
    w1 = _epoch(doc["window"]["end"].removesuffix("Z"))
    families: dict[str, set[str]] = defaultdict(set)
    running: dict[str, list[int]] = defaultdict(list)
    times: dict[tuple[str, str], set[int]] = defaultdict(set)
    jobs: set[str] = set()  # the whole-GPU batch Jobs' pods, for the shape
    for name, lb, value, ts in samples:
        if not name.startswith("kube_pod_") or "pod" not in lb:
            continue
        key = f'{lb["namespace"]}/{lb["pod"]}'
        families[key].add(name)
        if name == "kube_pod_owner" and lb["owner_kind"] == "Job":
            jobs.add(key)
        if name == "kube_pod_status_phase" and lb["phase"] == "Running" and value == "1":
            running[key].append(ts)
        elif name in ("kube_pod_start_time", "kube_pod_completion_time"):
            times[(name, key)].add(int(value))
    pods = [r for r in rows if r["domain"] == "kubernetes"]
    assert len(pods) > 200
    job_pod = next(k for k in sorted(jobs) if "kube_pod_completion_time" in families[k])
    assert set(POD_FAMILIES) == families[job_pod]
    ended = 0
    for r in pods:
        key, start, end = r["source_key"], _epoch(r["start"]), _epoch(r["end"])
        assert running[key], key  # seen holding its GPU
        first, last = min(running[key]), max(running[key])
        assert times[("kube_pod_start_time", key)] == {start}, key
        assert first - step < start <= first, key
        if end < w1:
            ended += 1
            assert families[key] == set(POD_FAMILIES), key
            assert times[("kube_pod_completion_time", key)] == {end}, key
            assert last < end <= last + step, key
        else:
            assert ("kube_pod_completion_time", key) not in times, key
    assert ended > 200


def test_node_capacity_allocatable_and_gpu_feature_discovery_labels(samples, doc) -> None:
    nodes = _nodes(doc)
    cap: dict[tuple[str, str, str], str] = {}
    labels: dict[str, dict[str, str]] = {}
    for name, lb, value, _ in samples:
        if name in ("kube_node_status_capacity", "kube_node_status_allocatable"):
            cap[(name, lb["node"], lb["resource"])] = value
        elif name == "kube_node_labels":
            labels[lb["node"]] = lb
    for node, spec in nodes.items():
        if "kubernetes_capacity" not in spec:
            assert node not in labels
            continue
        for resource, value in spec["kubernetes_capacity"].items():
            for family in ("kube_node_status_capacity", "kube_node_status_allocatable"):
                assert cap[(family, node, resource)] == str(value)
        lb = labels[node]
        for key in ("label_nvidia_com_gpu_product", "label_nvidia_com_gpu_replicas",
                    "label_nvidia_com_gpu_count", "label_nvidia_com_gpu_sharing_strategy"):
            assert key in lb, (node, key)
        assert lb["label_nvidia_com_gpu_count"] == str(spec["gpus"])
        if spec["sharing"] == "mig":
            assert lb["label_nvidia_com_mig_strategy"] == "mixed"
            assert lb["label_nvidia_com_mig_config"]
            assert lb["label_nvidia_com_mig_1g_10gb_count"] == str(
                sum(i["slice_profile"] == "1g.10gb" for i in spec["instances"]))
        else:
            assert lb["label_nvidia_com_gpu_sharing_strategy"] == "time-slicing"
            replicas = spec["replicas_per_gpu"]
            assert lb["label_nvidia_com_gpu_replicas"] == str(replicas)
            assert cap[("kube_node_status_capacity", node, "nvidia_com_gpu")] == str(
                spec["gpus"] * replicas)


# ---------------------------------------------------------------- dcgm-exporter

def _active(rows: list[dict[str, str]], ts: int) -> list[dict[str, str]]:
    return [r for r in rows if _epoch(r["start"]) <= ts < _epoch(r["end"])]


def test_dcgm_writes_one_engine_active_series_per_mig_instance(samples, doc, rows) -> None:
    nodes = _nodes(doc)
    mig_uuids = {u for n in nodes.values() if n["sharing"] == "mig" for u in n["gpu_uuids"]}
    assert not [lb for name, lb, _, _ in samples
                if name == "DCGM_FI_DEV_GPU_UTIL" and lb["UUID"] in mig_uuids]
    by_ts: dict[int, list[dict[str, str]]] = defaultdict(list)
    for name, lb, _, ts in samples:
        if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and lb["UUID"] in mig_uuids:
            by_ts[ts].append(lb)
    ts = sorted(by_ts)[len(by_ts) // 2]
    series = by_ts[ts]
    for node, spec in nodes.items():
        if spec["sharing"] != "mig":
            continue
        want = {(spec["gpu_uuids"][i["gpu"]], str(i["gpu_instance"]), i["slice_profile"])
                for i in spec["instances"]}
        got = {(lb["UUID"], lb["GPU_I_ID"], lb["GPU_I_PROFILE"]) for lb in series
               if lb["Hostname"] == node}
        assert got == want
    for r in _active(rows, ts):
        if r["sharing"] != "mig":
            continue
        on = [lb for lb in series if lb["UUID"] == r["gpu_uuid"]
              and lb["GPU_I_ID"] == r["gpu_instance"]]
        if r["domain"] == "kubernetes":
            assert f'{r["source_key"]}' in {f'{lb.get("namespace")}/{lb.get("pod")}' for lb in on}
        else:
            assert r["source_key"] in {lb.get("hpc_job") for lb in on}


def test_time_sliced_and_sharded_gpus_have_one_series_per_holder(samples, doc, rows) -> None:
    nodes = _nodes(doc)
    pooled = {u for n in nodes.values() if n["sharing"] != "mig" for u in n["gpu_uuids"]}
    by_ts: dict[int, list[dict[str, str]]] = defaultdict(list)
    for name, lb, _, ts in samples:
        if name == "DCGM_FI_DEV_GPU_UTIL" and lb["UUID"] in pooled:
            by_ts[ts].append(lb)
    checked = 0
    for ts in sorted(by_ts)[::7]:
        holders: dict[str, set[str]] = defaultdict(set)
        for r in _active(rows, ts):
            if r["gpu_uuid"] in pooled:
                holders[r["gpu_uuid"]].add(r["source_key"])
        for uuid in pooled:
            named = {f'{lb["namespace"]}/{lb["pod"]}' if "pod" in lb else lb.get("hpc_job", "")
                     for lb in by_ts[ts] if lb["UUID"] == uuid}
            assert named == (holders[uuid] or {""}), (ts, uuid)
            checked += len(holders[uuid])
    assert checked > 50


# ---------------------------------------------------------------- Slurm

def test_sacct_alloc_tres_names_mig_types_and_shards(shared: Path, rows) -> None:
    lines = (shared / "sacct" / "sacct-unitsep-epoch.txt").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\x1f")
    jobs = {r["source_key"]: r for r in rows if r["domain"] == "slurm"}
    seen = 0
    for line in lines[1:]:
        row = dict(zip(header, line.split("\x1f"), strict=True))
        r = jobs.get(row["JobID"])
        if r is None:
            continue
        seen += 1
        tres = dict(kv.split("=", 1) for kv in row["AllocTRES"].split(","))
        if r["sharing"] == "mig":
            assert tres[f'gres/gpu:{r["slice_profile"]}'] == r["slices"] == tres["gres/gpu"]
        else:
            assert tres["gres/shard"] == r["slices"]
            assert "gres/gpu" not in tres
    assert seen == len(jobs) > 0


def test_scontrol_show_job_places_mig_instances_by_idx(shared: Path, doc, rows) -> None:
    nodes = _nodes(doc)
    idx = {(n, spec["gpu_uuids"][i["gpu"]], str(i["gpu_instance"])): i["slurm_idx"]
           for n, spec in nodes.items() if spec["sharing"] == "mig" for i in spec["instances"]}
    jobs = {r["source_key"]: r for r in rows if r["domain"] == "slurm"}
    found = {"mig": 0, "shard": 0}
    for path in sorted((shared / "slurm").glob("scontrol-*.txt")):
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            m = re.search(r"JobId=(\d+)", block)
            if not m or m[1] not in jobs:
                continue
            r = jobs[m[1]]
            gres = re.search(r"^\s+Nodes=\S+ CPU_IDs=\S+ Mem=\d+ GRES=(\S+)$", block, re.M)
            assert gres, block
            if r["sharing"] == "mig":
                want = idx[(r["node"], r["gpu_uuid"], r["gpu_instance"])]
                assert gres[1] == f'gpu:{r["slice_profile"]}:1(IDX:{want})'
            else:
                assert gres[1] == f'shard(CNT:{r["slices"]})'
            found[r["sharing"]] += 1
    assert found["mig"] > 0
    assert found["shard"] > 0


def test_scontrol_show_node_lists_mig_types_and_shards(shared: Path, doc) -> None:
    lines = {re.search(r"NodeName=(\S+)", x)[1]: x  # type: ignore[index]
             for x in (shared / "slurm" / "show-node.txt").read_text().splitlines()}
    for name, spec in _nodes(doc).items():
        if not spec["slurm_partition"]:
            assert name not in lines
            continue
        gres = re.search(r" Gres=(\S+) ", lines[name])[1]  # type: ignore[index]
        if spec["sharing"] == "mig":
            counts: dict[str, int] = {}
            for i in spec["instances"]:
                counts[i["slice_profile"]] = counts.get(i["slice_profile"], 0) + 1
            assert sorted(gres.split(",")) == sorted(f"gpu:{p}:{n}" for p, n in counts.items())
        else:
            assert gres == f'gpu:{spec["gpu_model"]}:{spec["gpus"]},shard:' \
                           f'{spec["gpus"] * spec["shards_per_gpu"]}'


# ---------------------------------------------------------------- truth in fractions

def test_mig_holders_are_charged_their_compute_slices(rows) -> None:
    mig = [r for r in rows if r["sharing"] == "mig"]
    assert {r["slice_profile"] for r in mig} >= {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb",
                                                  "4g.40gb", "7g.80gb"}
    for r in mig:
        seconds = _epoch(r["end"]) - _epoch(r["start"])
        slices = int(r["slice_profile"].split("g.")[0])
        exact = Fraction(int(r["slices"]) * slices, 7) * seconds
        assert Decimal(r["physical_gpu_seconds"]) == (Decimal(exact.numerator) / Decimal(
            exact.denominator)).quantize(MS)


def test_pooled_gpus_split_each_second_among_the_holders_present(rows) -> None:
    """Time-slicing and shards: the shares on a GPU add up to one second per second in which
    anyone holds it, and never more (the invariant, with equality)."""
    by_gpu: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if r["sharing"] in ("time_slicing", "shard"):
            by_gpu[r["gpu_uuid"]].append(r)
    assert len(by_gpu) == 16
    shared_seconds = 0
    for members in by_gpu.values():
        spans = sorted((_epoch(r["start"]), _epoch(r["end"])) for r in members)
        covered, last = 0, None
        for a, b in spans:
            if last is None or a > last:
                covered += b - a
                last = b
            elif b > last:
                covered += b - last
                last = b
        total = sum(Decimal(r["physical_gpu_seconds"]) for r in members)
        assert abs(total - covered) <= MS * len(members)
        for r in members:
            assert Decimal(r["physical_gpu_seconds"]) <= _epoch(r["end"]) - _epoch(r["start"])
        shared_seconds += sum(1 for r in members
                              if Decimal(r["physical_gpu_seconds"])
                              < _epoch(r["end"]) - _epoch(r["start"]) - 1)
    assert shared_seconds > 20  # holders really shared GPUs, not only took turns


def test_pooled_shares_follow_the_units_each_holder_holds(rows) -> None:
    """A holder of 4 shards next to one of 2 gets 2/3 of each second, not half."""
    by_gpu: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if r["sharing"] in ("time_slicing", "shard"):
            by_gpu[r["gpu_uuid"]].append(r)
    uneven = 0
    for members in by_gpu.values():
        spans = [(_epoch(r["start"]), _epoch(r["end"]), int(r["slices"])) for r in members]
        cuts = sorted({t for a, b, _ in spans for t in (a, b)})
        want = [Fraction(0)] * len(members)
        for lo, hi in pairwise(cuts):
            present = [k for k, (a, b, _) in enumerate(spans) if a <= lo and b >= hi]
            total = sum(spans[k][2] for k in present)
            uneven += len({spans[k][2] for k in present}) > 1
            for k in present:
                want[k] += Fraction(spans[k][2], total) * (hi - lo)
        for r, exact in zip(members, want, strict=True):
            assert Decimal(r["physical_gpu_seconds"]) == (
                Decimal(exact.numerator) / Decimal(exact.denominator)).quantize(MS)
    assert uneven > 0


def test_every_gpu_holds_the_invariant_except_the_planted_conflicts(shared: Path, rows) -> None:
    conflicts = [i for i in read_csv(shared / "truth" / "incidents.csv")
                 if i["node"].startswith("gpu-mig-")]
    events: dict[str, list[tuple[int, Fraction, str]]] = defaultdict(list)
    units: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r["sharing"] != "mig":
            continue
        share = Fraction(int(r["slices"]) * int(r["slice_profile"].split("g.")[0]), 7)
        a, b = _epoch(r["start"]), _epoch(r["end"])
        events[r["gpu_uuid"]] += [(a, share, "+"), (b, -share, "-")]
        units[(r["gpu_uuid"], r["gpu_instance"])].append((a, b))
    in_conflict = {(i["gpu_uuids"], _epoch(i["start"]), _epoch(i["end"])) for i in conflicts}
    for (uuid, _), spans in units.items():
        spans.sort()
        for (a0, b0), (a1, b1) in pairwise(spans):
            if a1 < b0:  # two holders on one instance: only a planted conflict
                assert (uuid, max(a0, a1), min(b0, b1)) in in_conflict
    for uuid, evs in events.items():
        level = Fraction(0)
        for t, delta, _ in sorted(evs, key=lambda e: (e[0], e[1])):
            level += delta
            if level > 1:
                assert any(u == uuid and a <= t < b for u, a, b in in_conflict)


def test_a_pod_and_a_slurm_job_on_one_mig_instance_are_double_scheduled(shared: Path, doc,
                                                                         rows) -> None:
    incidents = [i for i in read_csv(shared / "truth" / "incidents.csv")
                 if i["node"] == "gpu-mig-shr-01"]
    assert len(incidents) == 2 == len(doc["shared_gpus"]["conflicts"])  # one per weekday
    for inc, planted in zip(incidents, doc["shared_gpus"]["conflicts"], strict=True):
        assert inc["kind"] == "double_scheduled"
        assert inc["gpu_uuids"] == planted["gpu_uuid"]
        assert f'GPU_I_ID={planted["gpu_instance"]}' in inc["detail"]
        assert (inc["slurm_job"], inc["k8s_workload"]) == (planted["slurm_job"], planted["pod"])
        both = [r for r in rows if r["source_key"] in (inc["slurm_job"], inc["k8s_workload"])]
        assert {r["domain"] for r in both} == {"slurm", "kubernetes"}
        assert {(r["gpu_uuid"], r["gpu_instance"]) for r in both} == {
            (planted["gpu_uuid"], str(planted["gpu_instance"]))}
    # elsewhere on that node both schedulers share GPUs on different instances, no incident
    mixed = defaultdict(set)
    for r in rows:
        if r["node"] == "gpu-mig-shr-01":
            mixed[r["gpu_uuid"]].add(r["domain"])
    assert all(d == {"slurm", "kubernetes"} for d in mixed.values())


def test_physical_daily_is_whole_gpus_plus_the_shared_fractions(shared: Path, rows) -> None:
    units = read_csv(shared / "truth" / "gpu_seconds_daily.csv")
    physical = read_csv(shared / "truth" / "physical_gpu_seconds_daily.csv")
    for domain in ("slurm", "kubernetes"):
        unit_total = sum(int(r["gpu_seconds"]) for r in units if r["domain"] == domain)
        mine = [r for r in rows if r["domain"] == domain]
        shared_units = sum(int(r["slices"]) * (_epoch(r["end"]) - _epoch(r["start"]))
                           for r in mine)
        shared_physical = sum(Decimal(r["physical_gpu_seconds"]) for r in mine)
        got = sum(Decimal(r["physical_gpu_seconds"]) for r in physical if r["domain"] == domain)
        want = unit_total - shared_units + shared_physical
        assert abs(got - want) <= MS * (len(mine) + len(physical)), domain
        assert shared_physical < shared_units


# ---------------------------------------------------------------- the rest stays as it was

def test_the_whole_gpu_world_is_unchanged(shared: Path, plain: Path, rows) -> None:
    shared_jobs = {r["source_key"] for r in rows if r["domain"] == "slurm"}
    for name in ("sacct-unitsep-epoch.txt", "sacct-P.txt"):
        got = [x for x in (shared / "sacct" / name).read_text().splitlines()
               if re.split(r"[|\x1f.]", x, maxsplit=1)[0] not in shared_jobs]
        assert got == (plain / "sacct" / name).read_text().splitlines()
    shared_nodes = {r["node"] for r in rows}
    plain_alloc = read_csv(plain / "truth" / "allocations.csv")
    got_alloc = [r for r in read_csv(shared / "truth" / "allocations.csv")
                 if r["node"] not in shared_nodes]
    assert got_alloc == plain_alloc
    plain_nodes = (plain / "nodes.csv").read_text().splitlines()
    assert (shared / "nodes.csv").read_text().splitlines()[:len(plain_nodes)] == plain_nodes
    for name in ("kueue/workloads.json", "truth/gpu_busy_seconds.csv", "identity_map.csv"):
        assert (shared / name).read_bytes() == (plain / name).read_bytes()
    pods = {r["source_key"].split("/", 1)[1] for r in rows if r["domain"] == "kubernetes"}
    marker = re.compile(r'(?:pod|node|Hostname)="([^"]+)"')
    # and the shared pods that ended shortly before the window (still listed, Succeeded)
    with (shared / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        pods |= {m[1] for line in fh if line.startswith("kube_pod_info{")
                 and (m := re.search(r'pod="([^"]+)".*node="([^"]+)"', line))
                 and m[2] in shared_nodes}

    def whole(path: Path) -> dict[str, list[str]]:
        """Each series' samples in file order (flushes may group series differently)."""
        out: dict[str, list[str]] = defaultdict(list)
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("#") and ("kube_node_labels" in line
                                             or "kube_node_status_allocatable" in line):
                    continue
                if not set(marker.findall(line)) & (pods | shared_nodes):
                    out[line.rsplit(" ", 2)[0] if not line.startswith("#") else line].append(
                        line)
        return out

    assert whole(shared / "prometheus" / "metrics.om") == whole(plain / "prometheus" /
                                                                "metrics.om")
    for path in (plain / "slurm").glob("scontrol-*.txt"):
        text = (shared / "slurm" / path.name).read_text()
        if path.read_text().strip() != "No jobs in the system":
            assert text.startswith(path.read_text())
    assert not (plain / "truth" / "shared_allocations.csv").exists()
    assert not (plain / "truth" / "physical_gpu_seconds_daily.csv").exists()
    assert "shared_gpus" not in json.loads((plain / "world.json").read_text())


def test_shared_gpu_worlds_are_deterministic_and_combine_with_realistic(tmp_path: Path,
                                                                          shared: Path) -> None:
    again = tmp_path / "again"
    simulate(CONFIG, again)
    for name in ("truth/shared_allocations.csv", "truth/physical_gpu_seconds_daily.csv",
                 "truth/incidents.csv", "slurm/show-node.txt", "sacct/sacct-P.txt",
                 "prometheus/metrics.om", "world.json"):
        assert (again / name).read_bytes() == (shared / name).read_bytes(), name
    out = tmp_path / "realistic"
    assert main(["--seed", "11", "--days", "1", "--step", "900", "--out", str(out),
                 "--shared-gpus", "--realistic", "--quiet"]) == 0
    doc = json.loads((out / "world.json").read_text())
    assert "--shared-gpus" in doc["command"]
    assert "--realistic" in doc["command"]
    assert doc["shared_gpus"]["conflicts"]
    assert doc["realistic"]
    assert read_csv(out / "truth" / "physical_gpu_seconds_daily.csv")
