"""The simulator's real-cluster shape options (issue #12): each one changes exactly the shape it
names. Every option world is compared with the same seed without the option: the OpenMetrics
series, mapped back through the option's rule, are the same samples (same pods, times, values);
every other file is byte-identical, except where the option changes it by design."""

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from simulator import NodeCounts, SimConfig, simulate
from simulator.cli_args import REAL_SHAPES, add_arguments, config_from_args, main
from simulator.config import NODE_DOMAIN
from simulator.pod_shapes import CLUSTER_QUEUE_LABEL, LOCAL_QUEUE_LABEL
from simulator.scrape_shapes import KSM_POD, KUEUE_POD

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
BASE = {"seed": 7, "days": 2, "step_seconds": 600, "nodes": NodeCounts(hpc=2, k8s=2, shared=1)}
WORKLOAD = ("container", "namespace", "pod")
TARGET_EXTRA = (*WORKLOAD, "service", "endpoint")
QUEUE = "label_kueue_x_k8s_io_queue_name"
DCGM_CURRENT = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
#: the variants of one seed: option name -> SimConfig fields besides BASE
VARIANTS: dict[str, dict[str, object]] = {
    "base": {},
    "no_honor": {"honor_labels": False},
    "fqdn": {"fqdn_nodes": True},
    "init": {"init_container_gpus": 0.6},
    "kueue017": {"kueue_labels": "0.17"},
    "pod_style": {"dcgm_label_style": "pod"},
    "old_names": {"dcgm_label_style": "pod", "dcgm_names": "old-namespace"},
    "v1": {"dcgm_label_style": "pod", "dcgm_names": "1.x"},
    "hostname": {"dcgm_label_style": "pod", "dcgm_hostname_label": "hostname"},
    "unlabelled": {"dcgm_label_style": "pod", "no_pod_labels_nodes": ("gpu-k8s-01", "gpu-shr-01")},
    "unlabelled_share": {"dcgm_label_style": "pod", "no_pod_labels_share": 0.5},
}

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, str, int]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            out = tmp_path_factory.mktemp(name) / "world"
            simulate(SimConfig(**BASE, **VARIANTS[name]), out)  # type: ignore[arg-type]
            made[name] = out
        return made[name]

    return get


_parsed: dict[Path, list[Sample]] = {}


def samples(world: Path) -> list[Sample]:
    """Every sample line of the world's OpenMetrics file (labels in written order)."""
    if world not in _parsed:
        out = []
        with (world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
            for line in fh:
                match = SAMPLE.match(line)
                if match is None:
                    assert line.startswith("#"), line
                    continue
                name, body, value, ts = match.groups()
                out.append((name, tuple(LABEL.findall(body)), value, int(ts)))
        _parsed[world] = out
    return _parsed[world]


def families(world: Path) -> list[str]:
    text = (world / "prometheus" / "metrics.om").read_text(encoding="utf-8")
    return [line.split(" ")[2] for line in text.splitlines() if line.startswith("# TYPE ")]


def as_set(rows) -> Counter:
    return Counter((name, tuple(sorted(labels)), value, ts) for name, labels, value, ts in rows)


def digests(world: Path) -> dict[str, str]:
    return {str(p.relative_to(world)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(world.rglob("*")) if p.is_file()}


def assert_other_files_identical(base: Path, other: Path, *changed: str) -> None:
    """Every file but the OpenMetrics file, world.json and the named ones is byte-identical."""
    a, b = digests(base), digests(other)
    assert sorted(set(a) - set(changed)) == sorted(set(b) - set(changed))
    skip = {"prometheus/metrics.om", "world.json", *changed}
    differ = [name for name in a if name not in skip and a[name] != b[name]]
    assert differ == []
    for name in ("truth/allocations.csv", "truth/gpu_seconds_daily.csv", "sacct/sacct-P.txt"):
        assert name not in changed
        assert a[name] == b[name]


def is_ksm(name: str) -> bool:
    return name.startswith("kube_")


def is_dcgm(name: str) -> bool:
    return name.upper().startswith("DCGM_")


# ------------------------------------------------------------------------------ honorLabels


def _unexport(labels: Labels) -> Labels:
    """A ServiceMonitor scrape without honorLabels, undone: the target's own pod labels go,
    exported_* become the workload's plain labels again."""
    kept = [(k, v) for k, v in labels if k not in TARGET_EXTRA]
    return tuple((k.removeprefix("exported_"), v) for k, v in kept)


def _base_unexport(labels: Labels) -> Labels:
    """The default world's DCGM label drift (exported_* on the Kubernetes nodes from mid-window)
    undone the same way; series without exported_* keep their plain workload labels."""
    d = dict(labels)
    if any(k.startswith("exported_") for k in d) or d.get("pod", "").startswith(
            "nvidia-dcgm-exporter-"):
        return _unexport(labels)
    return labels


def test_no_honor_labels_moves_workload_labels_to_exported_and_names_the_exporters(worlds):
    base, other = worlds("base"), worlds("no_honor")
    ksm = dict(LABEL.findall(KSM_POD))
    kueue = dict(LABEL.findall(KUEUE_POD))
    seen = Counter()
    for name, labels, _, _ in samples(other):
        d = dict(labels)
        if is_ksm(name):
            assert {k: d.get(k) for k in ksm} == ksm, (name, d)
            if name.startswith("kube_pod_"):
                assert {"exported_namespace", "exported_pod", "uid"} <= set(d), (name, d)
                seen["ksm_pod"] += 1
            else:  # node series have no workload labels of their own
                assert not any(k.startswith("exported_") for k in d), (name, d)
                seen["ksm_node"] += 1
            if name == "kube_pod_container_resource_requests":
                assert d["exported_container"]
                assert d["container"] == "kube-state-metrics"
        elif name.startswith("kueue_"):
            assert {k: d.get(k) for k in kueue} == kueue, (name, d)
            assert not any(k.startswith("exported_") for k in d), (name, d)
            seen["kueue"] += 1
        else:
            assert is_dcgm(name), name
            if d["job"] == "dcgm-exporter-hpc":  # Slurm-only nodes: a static scrape config
                assert not set(TARGET_EXTRA) & set(d), d
                seen["dcgm_static"] += 1
                continue
            assert d["namespace"] == "gpu-operator", d
            assert d["pod"].startswith("nvidia-dcgm-exporter-"), d
            assert (d["container"], d["service"], d["endpoint"]) == (
                "nvidia-dcgm-exporter", "nvidia-dcgm-exporter", "gpu-metrics"), d
            holder = "exported_pod" in d or "hpc_job" in d
            seen["dcgm_holder" if holder else "dcgm_idle"] += 1
            if not holder:  # idle GPUs carry only the exporter's labels
                assert not any(k.startswith("exported_") for k in d), d
    assert len(seen) == 6, seen
    assert as_set((n, _unexport(la), v, t) for n, la, v, t in samples(other)) == as_set(
        (n, _base_unexport(la), v, t) for n, la, v, t in samples(base))
    assert families(other) == families(base)
    assert_other_files_identical(base, other)
    irregular = json.loads((other / "world.json").read_text())["irregularities"]
    assert irregular["dcgm_label_drift"] is None
    assert irregular["dcgm_exported_labels_everywhere"] is True


# ------------------------------------------------------------------------------ FQDN nodes


def test_fqdn_nodes_changes_only_kubernetes_and_dcgm_node_names(worlds):
    base, other = worlds("base"), worlds("fqdn")
    suffix = "." + NODE_DOMAIN
    names = Counter()

    def short(labels: Labels) -> Labels:
        out = []
        for k, v in labels:
            if k in ("node", "Hostname", "instance") and suffix in v:
                v = v.replace(suffix, "")
            out.append((k, v))
        return tuple(out)

    for name, labels, _, _ in samples(other):
        d = dict(labels)
        if d.get("node"):
            assert d["node"].endswith(suffix), (name, d)
            names["node"] += 1
        if is_dcgm(name):
            assert d["Hostname"].endswith(suffix), d
            names["Hostname"] += 1
    assert names["node"]
    assert names["Hostname"]
    assert as_set((n, short(la), v, t) for n, la, v, t in samples(other)) == as_set(samples(base))
    # Slurm (sacct NodeList, scontrol), nodes.csv and the truth keep the short names
    assert_other_files_identical(base, other)
    assert suffix not in (other / "nodes.csv").read_text()
    assert suffix not in (other / "truth" / "allocations.csv").read_text()


# ------------------------------------------------------------------------------ init containers


def _requests(world: Path) -> dict[str, dict[str, object]]:
    """pod uid -> its GPU containers as kube-state-metrics shows them."""
    pods: dict[str, dict[str, object]] = {}
    for name, labels, value, _ in samples(world):
        d = dict(labels)
        if name not in ("kube_pod_container_resource_requests",
                        "kube_pod_init_container_resource_requests",
                        "kube_pod_init_container_info"):
            continue
        pod = pods.setdefault(d["uid"], {"containers": {}, "init": {}, "policy": {}})
        if name == "kube_pod_container_resource_requests":
            pod["containers"][d["container"]] = int(value)
        elif name == "kube_pod_init_container_resource_requests":
            pod["init"][d["container"]] = int(value)
        else:
            pod["policy"][d["container"]] = d.get("restart_policy", "")
    return pods


def _effective(pod: dict[str, dict]) -> int:
    """max(max(init containers), sum(containers) + sum(sidecars)) -- the scheduler's request."""
    sidecars = {c: n for c, n in pod["init"].items() if pod["policy"].get(c) == "Always"}
    plain = [n for c, n in pod["init"].items() if c not in sidecars]
    return max([sum(pod["containers"].values()) + sum(sidecars.values()), *plain])


def test_init_container_gpus_keep_the_effective_request_of_every_pod(worlds):
    base, other = worlds("base"), worlds("init")
    before, after = _requests(base), _requests(other)
    assert sorted(before) == sorted(after)  # the same pods
    bound = {dict(la)["uid"] for n, la, _, _ in samples(other)
             if n == "kube_pod_info" and dict(la).get("node")}
    kinds = Counter()
    for uid, pod in after.items():
        kind = ("plain" if not pod["init"] else "sidecar" if pod["containers"]
                else "init_only")
        kinds[kind] += 1
        if kind == "init_only":  # no kube_pod_container_* GPU series at all
            assert list(pod["init"]) == ["gpu-init"]
        if kind == "sidecar":
            assert pod["init"] == {"gpu-check": 1, "reward-model": 1}
        if pod["init"] and not pod["policy"]:
            # restart_policy is on kube_pod_init_container_info only, which exists once the
            # kubelet reports the init containers: never for a pod not bound in the window
            assert uid not in bound, (uid, pod)
            continue
        assert _effective(pod) == sum(before[uid]["containers"].values()), (uid, pod)
        if kind == "sidecar":
            # a reader that sums everything, or ignores the sidecar, is wrong on every one
            assert sum(pod["containers"].values()) + 2 != _effective(pod)
            assert max(sum(pod["containers"].values()), 1) != _effective(pod)
        assert set(pod["policy"]) == set(pod["init"])
        assert {c for c, p in pod["policy"].items() if p == "Always"} == (
            {"reward-model"} if kind == "sidecar" else set())
    assert kinds["init_only"], kinds
    assert kinds["sidecar"], kinds
    assert kinds["plain"], kinds

    # the rest of the file is the same, but dcgm-exporter names the sidecar on its GPU
    sidecar_uids = {u for u, p in after.items() if "reward-model" in p["init"]}
    untouched = {"kube_pod_container_resource_requests",
                 "kube_pod_init_container_resource_requests", "kube_pod_init_container_info"}

    def rest(world: Path, drop_container: bool):
        for name, labels, value, ts in samples(world):
            if name in untouched:
                continue
            if drop_container and is_dcgm(name):
                labels = tuple((k, v) for k, v in labels
                               if k not in ("container", "exported_container"))
            yield name, labels, value, ts

    assert as_set(rest(other, True)) == as_set(rest(base, True))
    dcgm_sidecar = {dict(la).get("exported_pod") or dict(la).get("pod")
                    for n, la, _, _ in samples(other) if is_dcgm(n)
                    and "reward-model" in (dict(la).get("container"),
                                           dict(la).get("exported_container"))}
    pod_names = {dict(la)["uid"]: dict(la)["pod"] for n, la, _, _ in samples(other)
                 if n == "kube_pod_info"}
    assert dcgm_sidecar
    assert dcgm_sidecar <= {pod_names[u] for u in sidecar_uids}
    # truth charges the effective request: the placement's GPUs, so the truth is unchanged
    assert_other_files_identical(base, other, "kueue/workloads.json")
    meta = json.loads((other / "world.json").read_text())["real_shapes"]
    assert meta["init_container_gpus"]["pods"] == {"gpu_init_only": kinds["init_only"],
                                                  "gpu_sidecar": kinds["sidecar"]}


def test_init_container_gpus_are_in_the_workload_pod_templates(worlds):
    items = json.loads((worlds("init") / "kueue" / "workloads.json").read_text())["items"]
    layouts = Counter()
    for item in items:
        pod_set = item["spec"]["podSets"][0]
        spec = pod_set["template"]["spec"]

        def gpus(c: dict) -> int:
            return int(c["resources"].get("requests", {}).get("nvidia.com/gpu", 0))

        running = sum(gpus(c) for c in spec["containers"])
        init = spec.get("initContainers", [])
        sidecars = sum(gpus(c) for c in init if c.get("restartPolicy") == "Always")
        plain = [gpus(c) for c in init if c.get("restartPolicy") != "Always"]
        effective = max([running + sidecars, *plain])
        admission = item["status"].get("admission")
        if admission is not None:
            usage = admission["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"]
            assert effective * pod_set["count"] == int(usage), item["metadata"]["name"]
        layouts["init" if init else "plain"] += 1
    assert layouts["init"], layouts
    assert layouts["plain"], layouts


# ------------------------------------------------------------------------------ Kueue labels


def test_default_writes_the_legacy_queue_name_label(worlds):
    seen = Counter()
    for name, labels, _, _ in samples(worlds("base")):
        if name == "kube_pod_labels":
            keys = {k for k, _ in labels}
            assert not keys & {f"label_{LOCAL_QUEUE_LABEL}", f"label_{CLUSTER_QUEUE_LABEL}"}
            seen[QUEUE in keys] += 1
    assert seen[True]
    assert seen[False]


def test_kueue_017_labels_pods_with_local_and_cluster_queue(worlds):
    base, other = worlds("base"), worlds("kueue017")
    local_queues = json.loads((other / "world.json").read_text())["kueue"]["local_queues"]
    owners = {dict(la)["uid"]: dict(la)["owner_kind"] for n, la, _, _ in samples(other)
              if n == "kube_pod_owner"}
    legacy = {dict(la)["uid"]: dict(la).get(QUEUE) for n, la, _, _ in samples(base)
              if n == "kube_pod_labels"}
    seen = Counter()

    def back(labels: Labels) -> Labels:
        """0.17 -> legacy: the queue-name label instead of the two new ones."""
        d = dict(labels)
        local = d.pop(f"label_{LOCAL_QUEUE_LABEL}", None)
        d.pop(f"label_{CLUSTER_QUEUE_LABEL}", None)
        if local is not None:
            d[QUEUE] = local
        return tuple(d.items())

    for name, labels, _, _ in samples(other):
        if name != "kube_pod_labels":
            continue
        d = dict(labels)
        local = d.get(f"label_{LOCAL_QUEUE_LABEL}")
        assert local == legacy[d["uid"]], d  # the same pods are Kueue-managed
        if local is None:
            assert QUEUE not in d
            assert f"label_{CLUSTER_QUEUE_LABEL}" not in d
            seen["unmanaged"] += 1
            continue
        assert d[f"label_{CLUSTER_QUEUE_LABEL}"] == local_queues[f"{d['namespace']}/{local}"]
        # queue-name is the user's label on the Job; a pod of the pod integration keeps it
        if owners[d["uid"]] == "Job":
            assert QUEUE not in d, d
            seen["job_pod"] += 1
        else:
            assert d[QUEUE] == local, d
            seen["pod_integration"] += 1
    assert len(seen) == 3, seen
    assert as_set((n, back(la) if n == "kube_pod_labels" else la, v, t)
                  for n, la, v, t in samples(other)) == as_set(samples(base))
    assert_other_files_identical(base, other)


# ------------------------------------------------------------------------------ dcgm names


def _rename(labels: Labels, renames: dict[str, str]) -> Labels:
    return tuple((renames.get(k, k), v) for k, v in labels)


def test_dcgm_old_namespace_names(worlds):
    base, other = worlds("pod_style"), worlds("old_names")
    assert families(other)[:2] == ["dcgm_fi_dev_gpu_util", "dcgm_fi_prof_gr_engine_active"]
    assert families(other)[2:] == families(base)[2:]
    renames = {"uuid": "UUID", "pod_name": "pod", "pod_namespace": "namespace",
               "container_name": "container"}
    names = {"dcgm_fi_dev_gpu_util": DCGM_CURRENT[0], "dcgm_fi_prof_gr_engine_active":
             DCGM_CURRENT[1]}
    holders = 0
    for name, labels, _, _ in samples(other):
        if is_dcgm(name):
            assert name in names, name
            keys = {k for k, _ in labels}
            assert "uuid" in keys
            assert "UUID" not in keys
            assert not keys & set(WORKLOAD)  # pod_name, pod_namespace, container_name instead
            holders += "pod_name" in keys
    assert holders
    mapped = ((names.get(n, n), _rename(la, renames) if is_dcgm(n) else la, v, t)
              for n, la, v, t in samples(other))
    assert as_set(mapped) == as_set(samples(base))
    assert_other_files_identical(base, other)


def test_dcgm_1x_writes_only_gpu_utilization_without_model_name(worlds):
    base, other = worlds("pod_style"), worlds("v1")
    assert families(other)[0] == "dcgm_gpu_utilization"
    assert families(other)[1:] == families(base)[2:]  # no profiling metric in 1.x
    for name, labels, _, _ in samples(other):
        if is_dcgm(name):
            assert name == "dcgm_gpu_utilization"
            assert {"UUID", "gpu", "device", "Hostname"} <= {k for k, _ in labels}
            assert "modelName" not in {k for k, _ in labels}
    expected = ((DCGM_CURRENT[0] if n == "dcgm_gpu_utilization" else n, la, v, t)
                for n, la, v, t in samples(other))
    current = ((n, tuple((k, v) for k, v in la if k != "modelName") if is_dcgm(n) else la, v, t)
               for n, la, v, t in samples(base) if n != DCGM_CURRENT[1])
    assert as_set(expected) == as_set(current)  # the same GPU_UTIL values
    assert_other_files_identical(base, other)


def test_dcgm_hostname_label_lower_case(worlds):
    base, other = worlds("pod_style"), worlds("hostname")
    for name, labels, _, _ in samples(other):
        if is_dcgm(name):
            keys = [k for k, _ in labels]
            assert "hostname" in keys
            assert "Hostname" not in keys
    mapped = ((n, _rename(la, {"hostname": "Hostname"}) if is_dcgm(n) else la, v, t)
              for n, la, v, t in samples(other))
    assert as_set(mapped) == as_set(samples(base))
    assert_other_files_identical(base, other)


# ------------------------------------------------------------------------------ no pod labels


def _strip_pod_labels(rows, nodes: set[str]):
    """The series of exporters on `nodes` without the pod-resources mapping: no workload labels,
    so one series per GPU, or one per Slurm job that the HPC mapping names on it."""
    out, per_gpu = [], {}
    for name, labels, value, ts in rows:
        if not (is_dcgm(name) and dict(labels)["Hostname"] in nodes):
            out.append((name, labels, value, ts))
            continue
        labels = tuple((k, v) for k, v in labels if k.removeprefix("exported_") not in WORKLOAD)
        series = per_gpu.setdefault((name, dict(labels)["UUID"], ts), {})
        series[labels] = value
    for (name, _, ts), series in per_gpu.items():
        named = [la for la in series if "hpc_job" in dict(la)]
        out.extend((name, la, series[la], ts) for la in (named or list(series)))
    return out


@pytest.mark.parametrize("variant", ["unlabelled", "unlabelled_share"])
def test_exporters_without_pod_labels_on_chosen_nodes(worlds, variant):
    base, other = worlds("pod_style"), worlds(variant)
    nodes = set(json.loads((other / "world.json").read_text())["real_shapes"][
        "dcgm_without_pod_labels"])
    if variant == "unlabelled":
        assert nodes == {"gpu-k8s-01", "gpu-shr-01"}
    else:
        assert len(nodes) == 2  # half of the three Kubernetes nodes, rounded
    on_them = Counter()
    for name, labels, _, _ in samples(other):
        d = dict(labels)
        if is_dcgm(name) and d["Hostname"] in nodes:
            assert not set(d) & {*WORKLOAD, "exported_pod", "exported_namespace",
                                 "exported_container"}, d
            on_them["hpc_job" in d] += 1
    assert on_them[False]
    if "gpu-shr-01" in nodes:  # Slurm jobs keep hpc_job (a mapping directory, not the kubelet)
        assert on_them[True]
    assert as_set(samples(other)) == as_set(_strip_pod_labels(samples(base), nodes))
    # the double-schedulings on gpu-shr-01 (6 of its 8 GPUs) lose their only evidence: the
    # truth moves them, whole, to undetectable_incidents.csv
    base_rows = (base / "truth" / "incidents.csv").read_text().splitlines()
    kept = (other / "truth" / "incidents.csv").read_text().splitlines()
    hidden = [",".join(r.split(",")[:-1]) for r in
              (other / "truth" / "undetectable_incidents.csv").read_text().splitlines()[1:]]
    assert hidden
    assert all(",gpu-shr-01," in r for r in hidden)
    assert sorted(kept[1:] + hidden) == sorted(base_rows[1:])
    assert_other_files_identical(base, other, "truth/incidents.csv",
                                 "truth/undetectable_incidents.csv")
    pods_elsewhere = {dict(la)["pod"] for n, la, _, _ in samples(other)
                      if is_dcgm(n) and "pod" in dict(la)}
    assert pods_elsewhere  # the other nodes still name their pods


# ------------------------------------------------------------------------------ CLI


def _args(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--out", "x", *argv])


def test_real_shapes_turns_everything_on_and_explicit_options_win():
    config = config_from_args(_args(["--real-shapes"]))
    assert {k: getattr(config, k) for k in REAL_SHAPES} == REAL_SHAPES
    assert config.shape_options() == REAL_SHAPES
    config = config_from_args(_args(["--real-shapes", "--dcgm-names", "1.x",
                                     "--no-pod-labels-on", "gpu-k8s-02"]))
    assert config.dcgm_names == "1.x"
    assert config.no_pod_labels_nodes == ("gpu-k8s-02",)
    assert config.no_pod_labels_share == 0.0
    assert config.fqdn_nodes
    assert not config.honor_labels
    assert SimConfig().shape_options() == {}
    assert config_from_args(_args([])) == SimConfig()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no-pod-labels-on", "gpu-hpc-01"], "expected --no-pod-labels-on to name Kubernetes "
                                               "nodes (gpu-k8s-01"),
        (["--no-honor-labels", "--dcgm-label-style", "pod"], "expected --dcgm-label-style "
                                                             "exported or drift"),
    ],
)
def test_contradicting_shape_options_exit_2(argv, message, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]):
    assert main(["--out", str(tmp_path / "w"), "--quiet", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()  # nothing written


@pytest.mark.parametrize("argv", [["--init-container-gpus", "1.5"], ["--kueue-labels", "0.16"],
                                  ["--no-pod-labels-on", "2"]])
def test_bad_shape_values_are_usage_errors(argv, tmp_path: Path):
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "w"), *argv])
    assert exc.value.code == 2


def test_a_real_shapes_world_is_reproduced_by_its_recorded_command(tmp_path: Path):
    first = tmp_path / "first"
    argv = ["--seed", "4", "--days", "1", "--step", "600", "--nodes", "hpc=1,k8s=2,shared=1",
            "--real-shapes", "--quiet"]
    assert main([*argv, "--out", str(first)]) == 0
    command = json.loads((first / "world.json").read_text())["command"].split()
    assert "--real-shapes" not in command
    assert "--no-honor-labels" in command
    again = tmp_path / "again"
    out = command.index("--out")
    command[out + 1] = str(again)
    assert main([*command[3:], "--quiet"]) == 0
    assert digests(first) == digests(again)
    assert "prometheus/metrics.om" in digests(first)
