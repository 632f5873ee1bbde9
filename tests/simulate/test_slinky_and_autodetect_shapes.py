"""The simulator's Slurm estates of issue #27 item 8, as files: ``--slinky-nodes``/``--slinky-mode``
(Slurm nodes inside Kubernetes, SlinkyProject/slurm-operator) and ``--autodetect-gpu-types``
(Slurm GRES types as AutoDetect=nvml names them). Each world is compared with the same seed
without the option: the job stream is the same, only the shapes the option names change.

Upstream sources of the Slinky shapes (SlinkyProject/slurm-operator f2ed3fc5, 2026-08-20; the
simulator's simulator/slinky.py names each use):
  internal/builder/labels/labels.go — WorkerApp "slurmd", WorkerComp "worker", WithWorkerLabels
    (app.kubernetes.io/name, instance = the NodeSet, component, slinky.slurm.net/cluster);
  api/v1beta1/well_known.go — nodeset.slinky.slurm.net/pod-hostname "(used as Slurm node name)",
    pod-name, pod-index, scaling-mode ("StatefulSet" | "DaemonSet", nodeset_types.go);
  internal/controller/nodeset/utils/utils.go — GetOrdinalPodName (<nodeset>-<ordinal>),
    initIdentity (hostname = template hostname + ordinal), GetSlurmNodeName,
    GetDaemonSetPodHostname (the node name cut at its first dot), NewNodeSetDaemonSetPod
    (GenerateName <nodeset>-);
  helm/slurm templates/nodeset (NodeSet slurm-worker-<key>, hostname "<key>-");
  docs/usage/topology.md — NodeName=slinky-0
    Comment={"namespace":"slurm","podName":"slurm-worker-slinky-0","node":"node3"};
  helm/slurm/_vendor/nvidia/dcgm — the DCGM job mapping (prolog writes $SLURM_JOB_ID per GPU of
    SLURM_JOB_GPUS for dcgm-exporter).
AutoDetect names: tests/fixtures/slurm/autodetect/README.md (Slurm gpu_nvml.c).
"""

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from connectors.slurm.hostlist import expand_hostlist
from connectors.slurm.scontrol_nodes import parse_scontrol_nodes, slinky_node_pods
from simulator import NodeCounts, SimConfig, simulate
from simulator.cli_args import add_arguments, config_from_args, main

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
BASE = {"seed": 3, "days": 2, "step_seconds": 600, "nodes": NodeCounts(hpc=3, k8s=1, shared=1)}
VARIANTS: dict[str, dict[str, object]] = {
    "base": {},
    "sts": {"slinky_nodes": 2},
    "ds": {"slinky_nodes": 2, "slinky_mode": "daemonset"},
    "auto": {"autodetect_gpu_types": True},
    "shared": {"shared_gpus": True, "days": 1},
    "shared_auto": {"shared_gpus": True, "days": 1, "autodetect_gpu_types": True},
}
AUTODETECT = {"a100": "nvidia_a100-sxm4-80gb", "h100": "nvidia_h100_80gb_hbm3"}
SLINKY_LABELS = {"app_kubernetes_io_name": "slurmd", "app_kubernetes_io_component": "worker",
                 "app_kubernetes_io_instance": "slurm-worker-slinky",
                 "slinky_slurm_net_cluster": "slurm"}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            out = tmp_path_factory.mktemp(name) / "world"
            simulate(SimConfig(**{**BASE, **VARIANTS[name]}), out)  # type: ignore[arg-type]
            made[name] = out
        return made[name]

    return get


def _samples(world: Path):
    with (world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            match = SAMPLE.match(line)
            if match is not None:
                name, body, value, ts = match.groups()
                yield name, dict(LABEL.findall(body)), value, int(ts)


def _text(world: Path, name: str) -> str:
    return (world / name).read_text(encoding="utf-8")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _slinky(world: Path) -> list[dict]:
    return json.loads(_text(world, "world.json"))["slinky"]["nodes"]


# ------------------------------------------------------------------------------ Slinky


@pytest.mark.parametrize("variant", ["sts", "ds"])
def test_slinky_nodes_keep_the_job_stream_and_its_truth(worlds, variant):
    base, world = worlds("base"), worlds(variant)
    for name in ("truth/gpu_seconds_daily.csv", "truth/gpu_seconds_priced.csv",
                 "truth/incidents.csv", "truth/gpu_busy_seconds.csv", "kueue/workloads.json",
                 "sreport/cluster-utilization.txt", "identity_map.csv", "rate_card.csv"):
        assert _digest(base / name) == _digest(world / name), name
    # allocations.csv: the slurmd pods' charged-nothing rows, then the same rows as without
    ours = _text(world, "truth/allocations.csv").splitlines()
    theirs = _text(base, "truth/allocations.csv").splitlines()
    agents = [r for r in ours if r.startswith("kubernetes,slurm/slurm-worker-slinky-")]
    assert len(agents) == 2
    assert all(r.endswith(",slurm_agent,false") for r in agents)
    assert [r for r in ours if r not in agents] == theirs
    # sacct: the same rows, the Slinky nodes under their Slurm node names
    to_host = {n["slurm_node"]: n["node"] for n in _slinky(world)}
    rows = [line.split("\x1f") for line in _text(world, "sacct/sacct-unitsep-epoch.txt")
            .splitlines()]
    header = rows[0]
    at = header.index("NodeList")
    slurm_names = set()
    for row in rows[1:]:
        if row[at] != "None assigned":
            names = expand_hostlist(row[at])
            slurm_names.update(names)
            row[at] = ",".join(to_host.get(n, n) for n in names)
    base_rows = [line.split("\x1f") for line in _text(base, "sacct/sacct-unitsep-epoch.txt")
                 .splitlines()]
    for row in base_rows[1:]:
        if row[at] != "None assigned":
            row[at] = ",".join(expand_hostlist(row[at]))
    assert rows == base_rows
    expected = {"slinky-0", "slinky-1"} if variant == "sts" else {"gpu-hpc-02", "gpu-hpc-03"}
    assert expected <= slurm_names
    if variant == "ds":  # the Slurm node is the Kubernetes node's name: sacct is unchanged
        assert _digest(base / "sacct/sacct-P.txt") == _digest(world / "sacct/sacct-P.txt")


@pytest.mark.parametrize("variant", ["sts", "ds"])
def test_slurmd_pods_hold_every_gpu_as_kube_state_metrics_exports_them(worlds, variant):
    world = worlds(variant)
    w = json.loads(_text(world, "world.json"))
    nodes = {n["node"]: n for n in _slinky(world)}
    assert sorted(nodes) == ["gpu-hpc-02", "gpu-hpc-03"]  # the last two hpc nodes
    mode = "StatefulSet" if variant == "sts" else "DaemonSet"
    for k, name in enumerate(sorted(nodes)):
        n = nodes[name]
        pod = n["pod"].removeprefix("slurm/")
        if variant == "sts":
            assert (pod, n["slurm_node"]) == (f"slurm-worker-slinky-{k}", f"slinky-{k}")
        else:
            assert re.fullmatch(r"slurm-worker-slinky-[bcdfghjklmnpqrstvwxz2456789]{5}", pod)
            assert n["slurm_node"] == name
        labels = {**SLINKY_LABELS, "nodeset_slinky_slurm_net_pod_hostname": n["slurm_node"],
                  "nodeset_slinky_slurm_net_pod_name": pod,
                  "nodeset_slinky_slurm_net_scaling_mode": mode}
        if variant == "sts":
            labels["nodeset_slinky_slurm_net_pod_index"] = str(k)
        assert n["labels"] == labels
    seen: dict[tuple[str, str], Counter] = {}
    capacity: dict[str, set[str]] = {}
    ksm_scrapes = 2 * 86_400 // 600
    for name, labels, value, _ts in _samples(world):
        if name == "kube_node_status_capacity":
            capacity.setdefault(labels["node"], set()).add(value)
        if not name.startswith("kube_pod_") or labels.get("namespace") != "slurm":
            continue
        key = (labels["pod"], name)
        seen.setdefault(key, Counter())[
            json.dumps({k: v for k, v in labels.items() if k not in ("job", "instance")},
                       sort_keys=True) + f" {value}"] += 1
    for name, n in nodes.items():
        pod, gpus = n["pod"].removeprefix("slurm/"), n["gpus"]
        assert capacity[name] == {str(gpus)}
        owner = seen[(pod, "kube_pod_owner")]
        assert [json.loads(k.rsplit(" ", 1)[0])["owner_kind"] for k in owner] == ["NodeSet"]
        [labels] = [json.loads(k.rsplit(" ", 1)[0]) for k in seen[(pod, "kube_pod_labels")]]
        assert {k.removeprefix("label_"): v for k, v in labels.items()
                if k.startswith("label_")} == n["labels"]
        [(request, count)] = seen[(pod, "kube_pod_container_resource_requests")].items()
        request_labels = json.loads(request.rsplit(" ", 1)[0])
        assert (request_labels["node"], request_labels["resource"], request_labels["container"],
                request.rsplit(" ", 1)[1], count) == (name, "nvidia_com_gpu", "slurmd",
                                                      str(gpus), ksm_scrapes)
        running = [k for k in seen[(pod, "kube_pod_status_phase")] if k.endswith(" 1")]
        assert [json.loads(k.rsplit(" ", 1)[0])["phase"] for k in running] == ["Running"]
        [start] = seen[(pod, "kube_pod_start_time")]
        assert int(start.rsplit(" ", 1)[1]) == SimConfig(**BASE).window_start
    assert len({pod for pod, _ in seen}) == 2  # one slurmd pod per Slinky node, no other
    assert w["nodes"]["slurm"]["nodes"] == 3  # still Slurm nodes


@pytest.mark.parametrize("variant", ["sts", "ds"])
def test_dcgm_names_the_slurmd_pod_and_the_job_holding_each_gpu(worlds, variant):
    """slurm-operator's DCGM job mapping: a GPU a job holds carries the slurmd pod's labels and
    hpc_job; an idle one the slurmd pod's only. Values and hpc_job are the base world's."""
    base, world = worlds("base"), worlds(variant)
    pods = {n["node"]: n["pod"].removeprefix("slurm/") for n in _slinky(world)}

    def dcgm(w: Path) -> Counter:
        out: Counter = Counter()
        for name, labels, value, ts in _samples(w):
            if name.startswith("DCGM_") and labels["Hostname"] in pods:
                out[(name, labels["UUID"], ts, labels.get("hpc_job"), value,
                     labels.get("pod"), labels.get("namespace"), labels.get("container"),
                     labels["job"])] += 1
        return out

    ours, theirs = dcgm(world), dcgm(base)
    assert ours, "the Slinky nodes are scraped"
    node_of = {}
    for name, labels, _, _ in _samples(world):
        if name.startswith("DCGM_") and labels["Hostname"] in pods:
            node_of[labels["UUID"]] = labels["Hostname"]
    expected = Counter({(*k[:5], pods[node_of[k[1]]], "slurm", "slurmd",
                         "nvidia-dcgm-exporter"): v for k, v in theirs.items()})
    assert ours == expected
    assert any(k[3] is not None for k in ours)
    assert any(k[3] is None for k in ours)


def test_scontrol_names_slurm_nodes_and_their_slurmd_pods(worlds):
    world = worlds("sts")
    nodes = {n["slurm_node"]: n for n in _slinky(world)}
    text = _text(world, "slurm/show-node.txt")
    pods = slinky_node_pods(text)
    assert {r["node"]: (r["pod_namespace"], r["pod_name"], r["k8s_node"])
            for r in pods.iter_rows(named=True)} == {
        s: ("slurm", n["pod"].removeprefix("slurm/"), n["kubernetes_node"])
        for s, n in nodes.items()}
    inventory, rejects = parse_scontrol_nodes(text)
    assert rejects == []
    assert set(inventory["node"]) == {"gpu-hpc-01", "slinky-0", "slinky-1", "gpu-shr-01"}
    # the job snapshots name the Slurm nodes, never the Kubernetes hosts behind them
    names = set()
    for path in sorted((world / "slurm").glob("scontrol-*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for key in ("NodeList=", "Nodes=", "BatchHost="):
                if line.strip().startswith(key):
                    names.update(expand_hostlist(line.strip().split()[0].split("=", 1)[1]))
    assert {"slinky-0", "slinky-1"} <= names
    assert not names & {"gpu-hpc-02", "gpu-hpc-03"}


# ------------------------------------------------------------------------------ AutoDetect


def _unautodetect(text: str) -> str:
    for model, name in AUTODETECT.items():
        text = text.replace(f"gres/gpu:{name}=", f"gres/gpu:{model}=")
        text = text.replace(f"gpu:{name}:", f"gpu:{model}:")
        text = text.replace(f"gres/gpu:{name}_", "gres/gpu:").replace(f"gpu:{name}_", "gpu:")
    return text


@pytest.mark.parametrize(("variant", "control"), [("auto", "base"),
                                                  ("shared_auto", "shared")])
def test_autodetect_types_are_the_only_change_in_the_slurm_files(worlds, variant, control):
    world, base = worlds(variant), worlds(control)
    names = ["sacct/sacct-P.txt", "sacct/sacct-unitsep-epoch.txt",
             *(str(p.relative_to(base)) for p in sorted((base / "slurm").glob("*.txt")))]
    for name in names:
        ours, theirs = _text(world, name), _text(base, name)
        assert _unautodetect(ours) == theirs, name
    sacct = _text(world, "sacct/sacct-unitsep-epoch.txt")
    assert "gres/gpu:nvidia_a100-sxm4-80gb=" in sacct
    assert "gres/gpu:a100=" not in sacct
    assert "gres/gpu:h100=" not in sacct
    if variant == "shared_auto":
        assert "gres/gpu:nvidia_h100_80gb_hbm3_1g.10gb=" in sacct
        assert "gres/gpu:1g.10gb=" not in sacct
        show = _text(world, "slurm/show-node.txt")
        assert "Gres=gpu:nvidia_h100_80gb_hbm3_1g.10gb:" in show
    for name in ("truth/gpu_seconds_daily.csv", "truth/allocations.csv", "kueue/workloads.json",
                 "prometheus/metrics.om"):
        assert _digest(world / name) == _digest(base / name), name


@pytest.mark.parametrize(("variant", "control"), [("auto", "base"),
                                                  ("shared_auto", "shared")])
def test_autodetect_types_are_priced_by_the_rate_card_and_the_truth(worlds, variant, control):
    world, base = worlds(variant), worlds(control)
    card = _text(world, "rate_card.csv").splitlines()
    theirs = _text(base, "rate_card.csv").splitlines()
    assert card[:len(theirs)] == theirs  # the short names stay (shards: the node's model)
    added = card[len(theirs):]
    slurm_rows = [r for r in theirs[1:] if r.split(",")[1] == "slurm"]
    assert added == [r.replace("a100,", f"{AUTODETECT['a100']},", 1)
                     .replace("h100,", f"{AUTODETECT['h100']},", 1) for r in slurm_rows]
    # truth prices a typed Slurm run under its type (a MIG type: its prefix), the rest as before
    def totals(w: Path) -> tuple[Counter, dict[str, set[str]]]:
        seconds: Counter = Counter()
        models: dict[str, set[str]] = {}
        for row in _text(w, "truth/gpu_seconds_priced.csv").splitlines()[1:]:
            day, domain, person, team, cc, model, qos, value = row.split(",")
            seconds[(day, domain, person, team, cc, qos)] += int(value)
            models.setdefault(domain, set()).add(model)
        return seconds, models

    (ours, our_models), (theirs, their_models) = totals(world), totals(base)
    assert ours == theirs
    assert our_models["kubernetes"] == their_models["kubernetes"]
    # shards carry no type: the node's model, a100
    assert our_models["slurm"] == set(AUTODETECT.values()) | (
        {"a100"} if variant == "shared_auto" else set())


# ------------------------------------------------------------------------------ CLI


def test_the_options_on_the_command_line_and_in_world_json(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", "x", "--nodes", "hpc=4", "--slinky-nodes", "0.5",
                              "--slinky-mode", "daemonset", "--autodetect-gpu-types"])
    cfg = config_from_args(args)
    assert (cfg.slinky_share, cfg.slinky_nodes, cfg.slinky_mode, cfg.autodetect_gpu_types) == (
        0.5, 0, "daemonset", True)
    assert config_from_args(parser.parse_args(["--out", "x", "--slinky-nodes", "2"])
                            ).slinky_nodes == 2
    assert main(["--out", str(tmp_path / "bad"), "--nodes", "hpc=3", "--slinky-nodes", "4",
                 "--quiet"]) == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", "x", "--slinky-mode", "replicaset"])
    # the recorded command reproduces the world byte for byte
    first = tmp_path / "first"
    assert main(["--seed", "3", "--days", "1", "--step", "600", "--nodes",
                 "hpc=3,k8s=1,shared=1", "--slinky-nodes", "0.5", "--slinky-mode", "daemonset",
                 "--autodetect-gpu-types", "--out", str(first), "--quiet"]) == 0
    command = json.loads((first / "world.json").read_text())["command"]
    assert "--slinky-nodes 0.5 --slinky-mode daemonset --autodetect-gpu-types" in command
    again = tmp_path / "again"
    argv = [str(again) if a == "DIR" else a for a in command.split()[3:]]
    assert main([*argv, "--quiet"]) == 0
    digests = {str(p.relative_to(first)): _digest(p) for p in first.rglob("*") if p.is_file()}
    assert digests == {str(p.relative_to(again)): _digest(p) for p in again.rglob("*")
                       if p.is_file()}
