"""``--shared-gpus``: the shared nodes' kube-state-metrics and dcgm-exporter series, written by
the metrics sweep (``MetricsSweep(sharing=…)``) into the same families.

* kube-state-metrics: ``kube_node_status_capacity``/``allocatable`` per MIG resource
  (``nvidia_com_mig_1g_10gb``) and, on time-slicing nodes, ``nvidia_com_gpu`` = GPUs × replicas;
  ``kube_node_labels`` with GPU Feature Discovery's labels (tests/fixtures/simulator/sharing/);
  the pods themselves go through the sweep's pod series (``PodRecord.gpu_resource``).
* dcgm-exporter: one ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` series per MIG instance (``GPU_I_PROFILE``,
  ``GPU_I_ID`` after ``modelName``, as in dcgm-exporter issue #512; no GPU_UTIL on MIG), with
  the holder's labels (an idle instance: none; two holders: one series each); a time-sliced or
  sharded GPU's series once per holder (the kubelet pod-resources API, or the HPC job mapping,
  names every holder of the device), all with the physical GPU's value.
"""

import heapq
from typing import TYPE_CHECKING

from simulator.k8s_model import JOB_TTL_SECONDS
from simulator.records import PodRecord
from simulator.sharing_plan import SharedHolder, SharingPlan, pod_uid
from simulator.sharing_world import SharedNode, SharingWorld
from simulator.utilization import busy_milli, gpu_util_percent
from simulator.world import GPU_MODEL_NAMES

if TYPE_CHECKING:
    from simulator.openmetrics import MetricsSweep

EXTRA_FAMILIES = (
    ("kube_node_status_allocatable", "gauge",
     "The allocatable for different resources of a node that are available for scheduling."),
    ("kube_node_labels", "gauge", "Kubernetes labels converted to Prometheus labels."),
)
PRODUCTS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}


def _ratio(milli: int) -> str:
    if milli <= 0:
        return "0"
    return "1" if milli >= 1000 else f"0.{milli:03d}"


def gfd_labels(n: SharedNode) -> dict[str, str]:
    """The node's GPU Feature Discovery / MIG manager labels (``nvidia.com/…``)."""
    node = n.node
    product = PRODUCTS[node.gpu_model]
    out = {"nvidia.com/gpu.count": str(node.gpu_count), "nvidia.com/gpu.present": "true"}
    if n.sharing == "mig":
        out.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.replicas": "0",
                    "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.capable": "true",
                    "nvidia.com/mig.config": "gpuledger-mixed",
                    "nvidia.com/mig.config.state": "success",
                    "nvidia.com/mig.strategy": "mixed"})
        for profile, count in n.profiles().items():
            out[f"nvidia.com/mig-{profile}.count"] = str(count)
            out[f"nvidia.com/mig-{profile}.product"] = f"{product}-MIG-{profile}"
    else:  # time-slicing without renameByDefault: the product gets -SHARED
        out.update({"nvidia.com/gpu.product": f"{product}-SHARED",
                    "nvidia.com/gpu.replicas": str(n.replicas),
                    "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    return out


def _ksm_label(key: str) -> str:
    """kube-state-metrics' label name: every character outside [a-zA-Z0-9_] becomes _."""
    return "label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def capacity(n: SharedNode) -> dict[str, int]:
    """KSM resource -> capacity (= allocatable) of a Kubernetes shared node."""
    if n.sharing == "mig":
        out: dict[str, int] = {}
        for inst in sorted(n.instances, key=lambda i: i.k8s_resource):
            out[inst.k8s_resource] = out.get(inst.k8s_resource, 0) + 1
        return out
    return {"nvidia_com_gpu": n.node.gpu_count * n.replicas}


def kept_after_end(step: int) -> int:
    """How long a finished shared pod stays before it is deleted: the batch Jobs' TTL, and at
    least two scrape intervals, so a kube-state-metrics scrape always shows it Succeeded with
    its ``kube_pod_completion_time`` (the exact end, docs/kubernetes.md "Pod boundaries")."""
    return max(JOB_TTL_SECONDS, 2 * step)


def pod_record(seed: int, h: SharedHolder, number: int, step: int) -> PodRecord:
    resource = h.instance.k8s_resource if h.instance is not None else "nvidia_com_gpu"
    kind, owner = (("ReplicaSet", h.name.rsplit("-", 1)[0]) if h.name.startswith("embed-")
                   else ("<none>", "<none>"))
    return PodRecord(
        namespace=h.namespace, name=h.name, uid=pod_uid(seed, h),
        container="server" if kind == "ReplicaSet" else "notebook", owner_kind=kind,
        owner_name=owner, service_account=h.service_account, labels=h.labels, gpus=h.units,
        node=h.node.node, created=h.submit, scheduled=h.submit + 10, running=h.start,
        finished=h.end, final_phase="Succeeded", deleted=h.end + kept_after_end(step),
        pod_number=number,
        gpu_resource=resource)


class SharingMetrics:
    def __init__(self, sharing: SharingWorld, plan: SharingPlan, w0: int, w1: int) -> None:
        self.sharing = sharing
        self.k8s = [n for n in sharing.nodes if n.node.in_kubernetes]
        self.heap = [(h.start, k, h) for k, h in enumerate(plan.holders)
                     if h.end > w0 and h.start < w1]
        heapq.heapify(self.heap)
        self.active: dict[str, list[SharedHolder]] = {n.name: [] for n in sharing.nodes}
        self._node_labels: dict[str, str] = {}

    def pods(self, seed: int, plan: SharingPlan, first_number: int,
             step: int) -> list[PodRecord]:
        return [pod_record(seed, h, first_number + k, step)
                for k, h in enumerate(x for x in plan.holders if x.domain == "kubernetes")]

    # ------------------------------------------------------------------ kube-state-metrics

    def ksm(self, sweep: "MetricsSweep", ts: int) -> None:
        target = sweep.ksm_target
        for n in self.k8s:
            host = sweep.shapes.host(n.node)
            for resource, value in capacity(n).items():
                labels = f'node="{host}",resource="{resource}",unit="integer",{target}'
                for family in ("kube_node_status_capacity", "kube_node_status_allocatable"):
                    sweep._emit(family, f"{family}{{{labels}}} {value} {ts}\n")
            sweep._emit("kube_node_spec_unschedulable",
                        f'kube_node_spec_unschedulable{{node="{host}",{target}}} 0 {ts}\n')
            labels = self._node_labels.get(n.name)
            if labels is None:
                pairs = sorted((_ksm_label(k), v) for k, v in gfd_labels(n).items())
                labels = ",".join(f'{k}="{v}"' for k, v in pairs)
                self._node_labels[n.name] = labels
            sweep._emit("kube_node_labels",
                        f'kube_node_labels{{node="{host}",{labels},{target}}} 1 {ts}\n')

    # ------------------------------------------------------------------ dcgm-exporter

    def dcgm(self, sweep: "MetricsSweep", ts: int) -> None:
        while self.heap and self.heap[0][0] <= ts:
            _, _, h = heapq.heappop(self.heap)
            self.active[h.node.name].append(h)
        shapes = sweep.shapes
        naming = shapes.naming
        for n in self.sharing.nodes:
            holders = self.active[n.name]
            holders[:] = [h for h in holders if h.end > ts]
            node = n.node
            exported = sweep._exported(node, ts)
            target = shapes.dcgm_target(node, exported)
            model = f',modelName="{GPU_MODEL_NAMES[node.gpu_model]}"' if naming.model_name else ""
            host = f'{shapes.hostname_label}="{shapes.host(node)}"'
            by_unit: dict[tuple[int, int], list[SharedHolder]] = {}
            for h in holders:
                gi = h.instance.gi_id if h.instance is not None else -1
                by_unit.setdefault((h.gpu, gi), []).append(h)
            units = ([(i.gpu, i.gi_id, i.profile) for i in n.instances] if n.sharing == "mig"
                     else [(g, -1, "") for g in range(node.gpu_count)])
            for gpu, gi, profile in units:
                uuid = node.gpu_uuids[gpu]
                base = f'gpu="{gpu}",{naming.uuid}="{uuid}",device="nvidia{gpu}"{model}'
                if profile:
                    base += f',GPU_I_PROFILE="{profile}",GPU_I_ID="{gi}"'
                base += f",{host}"
                owners = by_unit.get((gpu, gi), [])
                milli = min(1000, sum(busy_milli(h.profile, gpu, ts) for h in owners))
                series = [f"{base},{w},{target}" if w else f"{base},{target}"
                          for w in (shapes.dcgm_workload(node, h.dcgm, exported)
                                    for h in owners)] or [f"{base},{target}"]
                for labels in dict.fromkeys(series):
                    if naming.ratio is not None:
                        sweep._emit(naming.ratio,
                                    f"{naming.ratio}{{{labels}}} {_ratio(milli)} {ts}\n")
                    if not profile:  # GPU_UTIL is not reported on MIG instances
                        sweep._emit(naming.util, f"{naming.util}{{{labels}}} "
                                                 f"{gpu_util_percent(milli)} {ts}\n")
