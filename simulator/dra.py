"""``--dra-pods SHARE``, ``--dcgm-dra-labels/--no-dcgm-dra-labels``, ``--dra-snapshot-every``:
pods that hold their GPUs through Dynamic Resource Allocation (issue #27 item 8;
docs/simulator-shapes.md "DRA"; what the ledger reads: docs/kubernetes.md "DRA").

A share of the Kubernetes GPU workloads (chosen per pod template: a Job, a ReplicaSet, a
slurm-bridge pod; from the seed) get their GPUs from NVIDIA's dra-driver-nvidia-gpu (driver and
device class ``gpu.nvidia.com``) instead of the ``nvidia.com/gpu`` device plugin. Scheduling,
times and the truth are unchanged: a pod holds the same GPUs for the same seconds, only the
outputs that show it differ, each as its source writes it:

* **kube-state-metrics** (tests/fixtures/expositions/kube-state-metrics-v2.20.0-pod_resourceclaim_
  info.prom, ``internal/store/pod_test.go`` @ v2.20.0): no ``kube_pod_container_resource_requests``
  GPU series for the pod, one ``kube_pod_resourceclaim_info{claim_name, resourceclaim_name,
  resourceclaim_template_name}`` per ``spec.resourceClaims`` entry instead (after the pod's
  ``namespace``, ``pod``, ``uid`` as every pod series). A slurm-bridge pod on the DRA path
  requests ``deviceclass.resource.kubernetes.io/gpu.nvidia.com``, a resource name
  kube-state-metrics drops (it contains ``kubernetes.io/``) and no claim entry: nothing at all.
* **ResourceClaims** (tests/fixtures/kubernetes/dra/, dra-driver-nvidia-gpu demo specs and the
  API reference, resource.k8s.io/v1): every ``--dra-snapshot-every`` minutes a
  ``kubectl get resourceclaims,resourceslices,pods -A -o json`` List
  ``dra/resourceclaims-<UTC>Z.json`` (the site file's ``[gpuledger.clusters.<c>.dra]
  snapshot``) with the claims that exist then, the driver's ResourceSlice of every node a claim
  is allocated on (which GPU UUID each ``gpu-<index>`` is) and the DRA pods (pods without
  claims are left out: the reader skips them):

  - a pod's own claim from the ResourceClaimTemplate ``single-gpu`` / ``gpus-<n>``
    (``gpu-test1.yaml``): ``<pod>-gpu-<5 characters>``, annotation
    ``resource.kubernetes.io/pod-claim-name: gpu``, owner the pod, made when the pod is and
    deleted when the pod is done (the resourceclaim controller), named in the pod's
    ``status.resourceClaimStatuses``;
  - a claim by name shared by an inference Deployment's replicas where they all run on one
    node (``gpu-test3.yaml``): ``<deployment>-gpus``, the pods in ``status.reservedFor`` while
    they are scheduled and not done, every device of every replica in its results (each pod
    sees them all; the ledger splits them among the pods present, docs/accounting.md), made
    with the first replica, deleted with the last;
  - slurm-bridge's extended-resource claim (``extended-resources/gpu-full.yaml``):
    ``<pod>-extended-resources-<5 characters>``, annotation
    ``resource.kubernetes.io/extended-resource-claim: "true"``, request
    ``container-0-request-0``, made at binding, named in the pod's
    ``status.extendedResourceClaimStatus``.

  Allocation results: driver ``gpu.nvidia.com``, pool the node's Kubernetes name, device
  ``gpu-<minor>`` (dra-driver-nvidia-gpu ``deviceinfo.go``; the simulator's GPU index), while a
  pod holding the claim is scheduled and not done; ``status.allocation.nodeSelector`` the node.
* **dcgm-exporter** (tests/fixtures/expositions/dcgm-exporter-dra-labels.prom, kubernetes.go's
  ``KubernetesEnableDRA`` branch): with ``--kubernetes-enable-dra`` (the default) a DRA GPU's
  series carries the pod's ``container``/``namespace``/``pod`` then ``dra_claim_name``,
  ``dra_claim_namespace``, ``dra_driver_name``, ``dra_pool_name``, ``dra_device_name`` (a
  shared claim's GPU: one series per pod); without it (``--no-dcgm-dra-labels``) the exporter's
  device-plugin mapping does not know DRA devices (the kubelet lists them apart, as dynamic
  resources) and the GPU's series carries no pod labels at all.
* **Slurm** (slurm-bridge's DRA path, ../shared/reference/real-cluster-shapes.md): the
  representative job's GRES type is the device class, ``gres/gpu:gpu.nvidia.com=N``.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from simulator.config import SimConfig
from simulator.k8s_model import PodPlan, WorkloadPlan
from simulator.outputs import open_output
from simulator.records import Holder, PodRecord
from simulator.rng import digest_hex, k8s_uid, pod_suffix
from simulator.timefmt import iso_z
from simulator.world import Node

DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"
REQUEST = "gpu"  # the pod's spec.resourceClaims entry and the claim's request (gpu-test1.yaml)
EXTENDED_REQUEST = "container-0-request-0"
EXTENDED_RESOURCE = f"deviceclass.resource.kubernetes.io/{DEVICE_CLASS}"
SNAPSHOT_DIR = "dra"
SNAPSHOT_GLOB = "dra/resourceclaims-*.json*"
CLAIM_INFO = "kube_pod_resourceclaim_info"
CLAIM_INFO_FAMILY = (
    CLAIM_INFO, "gauge",
    "Information about a DRA ResourceClaim referenced by a pod, one series per "
    "pod.spec.resourceClaims entry; claim_name is the pod-local reference and "
    "resourceclaim_name is the resolved ResourceClaim object name.")


def _hashed(seed: int, *parts: str) -> float:
    return int(digest_hex(seed, *parts)[:8], 16) / 2**32


def chosen(cfg: SimConfig, namespace: str, template: str) -> bool:
    """Whether the pods of a pod template (a Job, a ReplicaSet) get their GPUs through DRA."""
    return cfg.dra and _hashed(cfg.seed, "dra", namespace, template) < cfg.dra_pods


def device(index: int) -> str:
    return f"gpu-{index}"


def dcgm_labels(claim: tuple[str, str], pool: str, index: int) -> str:
    """dcgm-exporter's ``dra_*`` labels of one GPU (const.go; the fixture's order)."""
    return (f'dra_claim_name="{claim[1]}",dra_claim_namespace="{claim[0]}",'
            f'dra_driver_name="{DRIVER}",dra_pool_name="{pool}",'
            f'dra_device_name="{device(index)}"')


@dataclass(frozen=True)
class ClaimPod:
    name: str
    uid: str
    created: int
    scheduled: int | None
    running: int | None
    finished: int | None
    final_phase: str
    deleted: int | None

    def holds(self, t: int) -> bool:
        """Scheduled and not done at ``t``: the claim is reserved for it."""
        return (self.scheduled is not None and self.scheduled <= t
                and (self.finished is None or t < self.finished)
                and (self.deleted is None or t < self.deleted))

    def phase(self, t: int) -> str:
        if self.finished is not None and t >= self.finished:
            return self.final_phase or "Failed"
        return "Running" if self.running is not None and t >= self.running else "Pending"


@dataclass(frozen=True)
class Claim:
    kind: str  # template | named | extended
    namespace: str
    name: str
    uid: str
    created: int
    deleted: int | None
    pool: str  # the node's Kubernetes name ("": never scheduled)
    devices: tuple[int, ...]
    count: int
    pods: tuple[ClaimPod, ...]
    template: str = ""

    def alive(self, t: int) -> bool:
        return self.created <= t and (self.deleted is None or t < self.deleted)

    def item(self, t: int) -> dict:
        """The ResourceClaim object at ``t`` (resource.k8s.io/v1)."""
        request = EXTENDED_REQUEST if self.kind == "extended" else REQUEST
        meta: dict = {"creationTimestamp": iso_z(self.created), "name": self.name,
                      "namespace": self.namespace, "uid": self.uid}
        if self.kind == "template":
            meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": REQUEST}
        elif self.kind == "extended":
            meta["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
        if self.kind != "named":
            owner = self.pods[0]
            meta["ownerReferences"] = [{"apiVersion": "v1", "blockOwnerDeletion": True,
                                        "controller": True, "kind": "Pod",
                                        "name": owner.name, "uid": owner.uid}]
        holding = [p for p in self.pods if p.holds(t)]
        changes = [self.created, *(p.scheduled for p in holding if p.scheduled is not None)]
        meta["resourceVersion"] = str(max(changes))
        out = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": dict(sorted(meta.items())),
               "spec": {"devices": {"requests": [{"exactly": {
                   "allocationMode": "ExactCount", "count": self.count,
                   "deviceClassName": DEVICE_CLASS}, "name": request}]}}}
        if holding:
            first = min(p.scheduled for p in holding if p.scheduled is not None)
            out["status"] = {
                "allocation": {
                    "allocationTimestamp": iso_z(first),
                    "devices": {"results": [{"device": device(i), "driver": DRIVER,
                                             "pool": self.pool, "request": request}
                                            for i in self.devices]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{
                        "key": "metadata.name", "operator": "In", "values": [self.pool]}]}]},
                },
                "reservedFor": [{"name": p.name, "resource": "pods", "uid": p.uid}
                                for p in holding],
            }
        return out


@dataclass(frozen=True)
class DraPod:
    """A DRA pod as ``kubectl get pods -o json`` lists it (the fields the reader uses)."""

    pod: ClaimPod
    claim: Claim
    namespace: str
    node: str
    container: str
    image: str
    service_account: str
    gpus: int

    def alive(self, t: int) -> bool:
        return self.pod.created <= t and (self.pod.deleted is None or t < self.pod.deleted)

    def item(self, t: int) -> dict:
        p, c = self.pod, self.claim
        container: dict = {"image": self.image, "name": self.container}
        spec: dict = {"containers": [container], "serviceAccountName": self.service_account}
        status: dict = {"phase": p.phase(t)}
        if c.kind == "extended":
            amount = {EXTENDED_RESOURCE: str(self.gpus)}
            container["resources"] = {"limits": amount, "requests": amount}
            if p.scheduled is not None and t >= p.scheduled:
                status["extendedResourceClaimStatus"] = {
                    "requestMappings": [{"containerName": self.container,
                                         "requestName": EXTENDED_REQUEST,
                                         "resourceName": EXTENDED_RESOURCE}],
                    "resourceClaimName": c.name}
        else:
            container["resources"] = {"claims": [{"name": REQUEST}]}
            ref = ({"resourceClaimTemplateName": c.template} if c.kind == "template"
                   else {"resourceClaimName": c.name})
            spec["resourceClaims"] = [{"name": REQUEST, **ref}]
            if c.kind == "template":
                status["resourceClaimStatuses"] = [{"name": REQUEST,
                                                    "resourceClaimName": c.name}]
        if p.scheduled is not None and t >= p.scheduled and self.node:
            spec["nodeName"] = self.node
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"creationTimestamp": iso_z(p.created), "name": p.name,
                             "namespace": self.namespace, "uid": p.uid},
                "spec": dict(sorted(spec.items())), "status": status}


@dataclass(frozen=True)
class Picked:
    """How one DRA pod holds its GPUs: its claim and a shared claim's other GPUs."""

    claim: Claim
    also: tuple[int, ...] = ()


def _template(gpus: int) -> str:
    return "single-gpu" if gpus == 1 else f"gpus-{gpus}"


class DraRun:
    """Chooses the DRA workloads as they are generated, changes their pod records and GPU
    holders, keeps their claims and writes the snapshots at the end."""

    def __init__(self, cfg: SimConfig, host: Callable[[Node], str]) -> None:
        self.cfg = cfg
        self.host = host
        self.claims: list[Claim] = []
        self.pods: list[DraPod] = []
        self.counts = {"pods": 0, "template_claims": 0, "shared_claims": 0,
                       "extended_claims": 0, "snapshots": 0}

    def take_all(self, plans: list[WorkloadPlan]) -> dict[str, dict[str, Picked]]:
        """plan uid -> pod name -> how it holds its GPUs, for the DRA workloads of one batch.
        A pod template's pods (a Job's, or a ReplicaSet's replicas, one plan each) are chosen
        together; a ReplicaSet's replicas that all run on one node share a claim by name
        (gpu-test3.yaml)."""
        groups: dict[tuple[str, str, str], list[WorkloadPlan]] = {}
        for plan in plans:
            ns = plan.namespace.name
            if chosen(self.cfg, ns, plan.pod_owner_name) and not plan.gpu_containers:
                groups.setdefault((ns, plan.pod_owner_kind, plan.pod_owner_name), []).append(plan)
        out: dict[str, dict[str, Picked]] = {}
        for group in groups.values():
            picked = self._take(group)
            for plan in group:
                out[plan.uid] = {p.name: picked[p.name] for a in plan.attempts for p in a.pods}
        return out

    def _take(self, group: list[WorkloadPlan]) -> dict[str, Picked]:
        first = group[0]
        ns = first.namespace.name
        bridge = first.view == "slurm" and not first.managed_by_kueue
        pods = [p for plan in group for a in plan.attempts for p in a.pods]
        out: dict[str, Picked] = {}
        nodes = {p.node.name if p.node is not None else "" for p in pods}
        shared = (first.pod_owner_kind == "ReplicaSet" and len(pods) > 1 and len(nodes) == 1
                  and "" not in nodes)
        if shared:
            node = pods[0].node
            assert node is not None
            devices = tuple(sorted({i for p in pods for i in p.gpu_indices}))
            ends = [p.deleted for p in pods]
            name = first.pod_owner_name.rsplit("-", 1)[0] if first.pod_owner_kind == \
                "ReplicaSet" else first.pod_owner_name  # the Deployment's, else the Job's
            claim = Claim(
                "named", ns, f"{name}-gpus", k8s_uid(self.cfg.seed, "claim", ns, name),
                min(pl.created for pl in group),
                None if None in ends else max(e for e in ends if e is not None),
                self.host(node), devices, len(devices), tuple(map(self._pod, pods)))
            self._keep(claim, "shared_claims")
            for p in pods:
                out[p.name] = Picked(claim, tuple(i for i in devices if i not in p.gpu_indices))
        else:
            for p in pods:
                cp = self._pod(p)
                node = self.host(p.node) if p.node is not None else ""
                indices = p.gpu_indices if p.node is not None else ()
                done = p.finished if p.finished is not None else p.deleted
                if bridge:
                    name = f"{p.name}-extended-resources-{pod_suffix(self.cfg.seed, 'ext', p.uid)}"
                    claim = Claim("extended", ns, name, k8s_uid(self.cfg.seed, "claim", p.uid),
                                  p.scheduled if p.scheduled is not None else p.created, done,
                                  node, indices, first.gpus_per_pod, (cp,))
                    self._keep(claim, "extended_claims")
                else:
                    name = f"{p.name}-{REQUEST}-{pod_suffix(self.cfg.seed, 'claim', p.uid)}"
                    claim = Claim("template", ns, name, k8s_uid(self.cfg.seed, "claim", p.uid),
                                  p.created, done, node, indices, first.gpus_per_pod, (cp,),
                                  _template(first.gpus_per_pod))
                    self._keep(claim, "template_claims")
                out[p.name] = Picked(claim)
        for p in pods:
            self.counts["pods"] += 1
            node = self.host(p.node) if p.node is not None else ""
            self.pods.append(DraPod(self._pod(p), out[p.name].claim, ns, node, first.container,
                                    first.image, first.namespace.service_account,
                                    first.gpus_per_pod))
        return out

    @staticmethod
    def _pod(p: PodPlan) -> ClaimPod:
        return ClaimPod(p.name, p.uid, p.created, p.scheduled, p.running, p.finished,
                        p.final_phase, p.deleted)

    def _keep(self, claim: Claim, count: str) -> None:
        self.claims.append(claim)
        self.counts[count] += 1

    @staticmethod
    def pod_record(picked: dict[str, Picked], p: PodRecord) -> PodRecord:
        """No GPU request; a claim entry unless the pod takes the extended-resource path."""
        got = picked.get(p.name)
        if got is None:
            return p
        c = got.claim
        claims = () if c.kind == "extended" else ((REQUEST, c.name, c.template),)
        return replace(p, gpu_resource="", claims=claims)

    @staticmethod
    def holder(picked: dict[str, Picked], h: Holder) -> Holder:
        got = picked.get(h.source_key.split("/", 1)[1])
        if got is None or h.domain != "kubernetes":
            return h
        return replace(h, dra_claim=(got.claim.namespace, got.claim.name), dcgm_also=got.also)

    # ------------------------------------------------------------------ snapshots

    def slice_items(self, nodes: tuple[Node, ...]) -> list[dict]:
        """The driver's ResourceSlice of every node a claim was allocated on (resource.k8s.io/
        v1; NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo: device
        ``gpu-<minor>``, attributes ``type`` gpu and ``uuid``; the minor is the GPU's index
        here)."""
        pools = {c.pool for c in self.claims if c.pool}
        items = []
        for node in sorted(nodes, key=lambda n: n.name):
            pool = self.host(node)
            if pool not in pools:
                continue
            items.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{pool}-{DRIVER}-{digest_hex(self.cfg.seed, pool)[:5]}"},
                "spec": {
                    "devices": [{"attributes": {
                        "productName": {"string": f"NVIDIA {node.gpu_model.upper()}"},
                        "type": {"string": "gpu"}, "uuid": {"string": uuid}},
                        "name": device(i)} for i, uuid in enumerate(node.gpu_uuids)],
                    "driver": DRIVER, "nodeName": pool,
                    "pool": {"generation": 1, "name": pool, "resourceSliceCount": 1}},
            })
        return items

    def write(self, out_dir: Path, w0: int, w1: int, nodes: tuple[Node, ...] = ()) -> int:
        """The dra/ snapshots of ``[w0, w1)`` (with the nodes' ResourceSlices); returns how
        many were written."""
        slices = self.slice_items(nodes)
        every = self.cfg.dra_snapshot_every
        gz = ".gz" if self.cfg.gzip_all else ""
        folder = out_dir / SNAPSHOT_DIR
        claims = sorted(self.claims, key=lambda c: (c.created, c.namespace, c.name))
        pods = sorted(self.pods, key=lambda p: (p.pod.created, p.namespace, p.pod.name))
        ci = pi = 0
        live_claims: list[Claim] = []
        live_pods: list[DraPod] = []
        written = 0
        for t in range(w0, w1, every):
            while ci < len(claims) and claims[ci].created <= t:
                live_claims.append(claims[ci])
                ci += 1
            while pi < len(pods) and pods[pi].pod.created <= t:
                live_pods.append(pods[pi])
                pi += 1
            live_claims = [c for c in live_claims if c.deleted is None or t < c.deleted]
            live_pods = [p for p in live_pods if p.pod.deleted is None or t < p.pod.deleted]
            items = [c.item(t) for c in sorted(live_claims, key=lambda c: (c.namespace, c.name))]
            items += slices
            items += [p.item(t) for p in sorted(live_pods,
                                                key=lambda p: (p.namespace, p.pod.name))]
            doc = {"apiVersion": "v1", "items": items, "kind": "List",
                   "metadata": {"resourceVersion": ""}}
            stamp = iso_z(t).replace("-", "").replace(":", "")
            with open_output(folder / f"resourceclaims-{stamp}.json{gz}", self.cfg.gzip_all) as fh:
                fh.write(json.dumps(doc, indent=4) + "\n")
            written += 1
        self.counts["snapshots"] = written
        return written

    def world_block(self) -> dict[str, object]:
        """world.json ``dra``: the options, what was written, and the truth's meaning."""
        cfg = self.cfg
        return {
            "options": {"dra_pods": cfg.dra_pods, "dcgm_dra_labels": cfg.dcgm_dra_labels,
                        "dra_snapshot_every": cfg.dra_snapshot_every},
            "driver": DRIVER, "device_class": DEVICE_CLASS, "counts": dict(self.counts),
            "snapshots": f"{SNAPSHOT_DIR}/resourceclaims-<UTC>Z.json: kubectl get "
                         "resourceclaims,resourceslices,pods -A -o json (DRA pods only) every "
                         f"{cfg.dra_snapshot_every // 60} min",
            "claims": {
                "template": "<pod>-gpu-<suffix> from ResourceClaimTemplate single-gpu / gpus-N, "
                            "owner the pod, deleted when the pod is done",
                "named": "<deployment>-gpus shared by a Deployment's replicas on one node "
                         "(reservedFor them all; every replica's devices)",
                "extended": "<pod>-extended-resources-<suffix>: slurm-bridge pods requesting "
                            f"{EXTENDED_RESOURCE} (pod status.extendedResourceClaimStatus); the "
                            f"Slurm job shows gres/gpu:{DEVICE_CLASS}=N",
            },
            "kube_state_metrics": "no nvidia_com_gpu request for DRA pods; "
                                  "kube_pod_resourceclaim_info per claim entry (none for "
                                  "slurm-bridge's extended resource)",
            "dcgm": ("pod and dra_* labels (--kubernetes-enable-dra)" if cfg.dcgm_dra_labels
                     else "no pod labels on DRA GPUs (no --kubernetes-enable-dra)"),
            "truth": "unchanged: a DRA pod holds the same GPUs for the same seconds as on the "
                     "device-plugin path; a shared claim's pods each keep their own GPUs",
        }


def claim_info_lines(p: PodRecord, base: str, target: str, ts: int) -> list[str]:
    """A pod's ``kube_pod_resourceclaim_info`` samples (kube-state-metrics >= 2.20)."""
    return [f'{CLAIM_INFO}{{{base},claim_name="{name}",resourceclaim_name="{claim}",'
            f'resourceclaim_template_name="{template}",{target}}} 1 {ts}\n'
            for name, claim, template in p.claims]
