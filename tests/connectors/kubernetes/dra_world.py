"""A small DRA cluster for the tests, from upstream shapes only.

Pods of NVIDIA dra-driver-nvidia-gpu's demo specs (tests/fixtures/kubernetes/dra/README.md), with
their ResourceClaims in ``CLAIMS`` (a ``kubectl get resourceclaims,pods -A -o json`` List), as
kube-state-metrics v2.20.0 shows them (``kube_pod_resourceclaim_info`` lines of
``kube-state-metrics-v2.20.0-pod_resourceclaim_info.prom``; phase, info, start and completion
time lines of ``kube-state-metrics-v2.20.0-pod_test.prom``) and dcgm-exporter with
``--kubernetes-enable-dra`` labels their GPUs (``dcgm-exporter-dra-labels.prom``). Scrapes every
30 s at 10 + 30 i seconds after ``fakes.T0``; each pod is admitted (``kube_pod_start_time``) at
its ``start``, Pending at the first scrape after it, Running from the next one, and ends at its
``end`` (``kube_pod_completion_time``), shown Succeeded at the next two scrapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from tests.connectors.kubernetes.dcgm_fixtures import exposition
from tests.connectors.kubernetes.fakes import T0_S, Series
from tests.connectors.kubernetes.ksm_expositions import (
    EXPOSITIONS,
    KSM_POD_V2_20,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)
from tests.helpers import FIXTURES

CLAIMS = FIXTURES / "kubernetes" / "dra" / "resourceclaims-20250106T120000Z.json"
STEP = 30.0
_UPSTREAM = lines(KSM_POD_V2_20)
_INFO = lines(EXPOSITIONS / "kube-state-metrics-v2.20.0-pod_resourceclaim_info.prom")
BY_NAME = _INFO[0]  # claim_name="gpu", resourceclaim_name="shared-gpu-claim"
FROM_TEMPLATE = _INFO[1]  # claim_name="gpu-tmpl", resourceclaim_template_name="gpu-template"
_PHASE = pick(_UPSTREAM, "kube_pod_status_phase", uid="uid1")
_POD_INFO = one(_UPSTREAM, "kube_pod_info", uid="abc-123-xxx")
_START = one(_UPSTREAM, "kube_pod_start_time")
_COMPLETION = one(_UPSTREAM, "kube_pod_completion_time")
_REQUEST = one(_UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1",
               resource="nvidia_com_gpu")
_DCGM = exposition("dcgm-exporter-dra-labels.prom")
DCGM_GPU, DCGM_MIG = _DCGM[0], _DCGM[1]


def uid(n: int) -> str:
    return f"0d7a1c2e-{n:04d}-4d3b-9a51-5f1e2c3d4e5f"


MIG_UID = "6c01cc40-3527-43a9-a241-89c9e7d18921"


@dataclass(frozen=True)
class Pod:
    namespace: str
    pod: str
    uid: str
    node: str
    start: float  # seconds after T0: admitted (kube_pod_start_time)
    end: float  # kube_pod_completion_time
    # (claim_name, resourceclaim_name, template) as kube_pod_resourceclaim_info shows them;
    # none: the extended-resource path (no spec.resourceClaims)
    claims: tuple[tuple[str, str, str], ...] = ()
    # dcgm-exporter's DRA series while it runs: (GPU UUID, claim, pool, device, MIG profile)
    gpus: tuple[tuple[str, str, str, str, str], ...] = ()
    busy: float = 0.5


def gpu_uuid(node: str, i: int) -> str:
    return f"GPU-{node}-000{i}-0000-0000-000000000000"


PODS = (
    # gpu-test1.yaml: a template claim each, GPUs 0 and 1 of node-a
    Pod("gpu-test1", "pod1", uid(1), "node-a", 5, 3595,
        (("gpu", "pod1-gpu-x2k9d", "single-gpu"),),
        ((gpu_uuid("node-a", 0), "pod1-gpu-x2k9d", "node-a", "gpu-0", ""),)),
    Pod("gpu-test1", "pod2", uid(2), "node-a", 5, 1795,
        (("gpu", "pod2-gpu-7hq4n", "single-gpu"),),
        ((gpu_uuid("node-a", 1), "pod2-gpu-7hq4n", "node-a", "gpu-1", ""),)),
    # gpu-test3.yaml: one claim by name, GPU 2, pod1 alone for an hour, then with pod2
    Pod("gpu-test3", "pod1", uid(3), "node-a", 5, 7195, (("shared-gpu", "single-gpu", ""),),
        ((gpu_uuid("node-a", 2), "single-gpu", "node-a", "gpu-2", ""),)),
    Pod("gpu-test3", "pod2", uid(4), "node-a", 3605, 7195,
        (("shared-gpu", "single-gpu", ""),),
        ((gpu_uuid("node-a", 2), "single-gpu", "node-a", "gpu-2", ""),)),
    # gpu-full.yaml: the extended-resource path, GPU 3 (no kube_pod_resourceclaim_info)
    Pod("extended-resource-gpu-full", "gpu-full-pod", uid(5), "node-a", 5, 1795, (),
        ((gpu_uuid("node-a", 3), "gpu-full-pod-extended-resources-x7k9m", "node-a", "gpu-3",
          ""),)),
    # mig-1g-12gb.yaml: a MIG device named before v25.12: its profile from dcgm-exporter
    Pod("extended-resource-mig-1g12gb", "mig-1g12gb-pod", MIG_UID, "kind-dra-1-worker", 5,
        3595, (),
        (("GPU-a4f34abc-7715-3560-dcea-7238b9611a45", "mig-1g12gb-pod-extended-resources-8r9k5",
          "kind-dra-1-worker", "gpu-1-mig-19-4-1", "1g.12gb"),)),
    # gpu-test-mps.yaml: one pod with two containers on an MPS-configured claim: a whole GPU
    Pod("gpu-test-mps", "test-pod", uid(7), "node-b", 5, 3595,
        (("shared-gpu", "test-pod-shared-gpu-q8x2z", "shared-gpu"),),
        ((gpu_uuid("node-b", 0), "test-pod-shared-gpu-q8x2z", "node-b", "gpu-0", ""),)),
)


def scrapes(until: float = 7200.0) -> list[float]:
    return [10 + STEP * i for i in range(int((until - 10) // STEP) + 1)]


def _phase(pod: Pod, t: float) -> str | None:
    if t < pod.start or t >= pod.end + 2 * STEP:
        return None
    if t < pod.start + STEP:
        return "Pending"
    return "Running" if t < pod.end else "Succeeded"


@dataclass
class World:
    pods: tuple[Pod, ...] = PODS
    ksm_claims: bool = True  # kube-state-metrics >= 2.20 (kube_pod_resourceclaim_info)
    dcgm_dra: bool = True  # dcgm-exporter with --kubernetes-enable-dra
    extra_dcgm: list[Line] = field(default_factory=list)  # more GPU lines, always exported
    # pods whose container shows an nvidia.com/gpu request too (the extended-resource path of
    # extended-resources/gpu-full.yaml: the DeviceClass maps nvidia.com/gpu to gpu.nvidia.com)
    ksm_requests: tuple[str, ...] = ()

    def ksm_at(self, t: float) -> list[Line]:
        out = []
        for p in self.pods:
            phase = _phase(p, t)
            if phase is None:
                continue
            who = {"namespace": p.namespace, "pod": p.pod, "uid": p.uid}
            out += [ln.but(**who) for ln in phase_lines(_PHASE, phase)]
            out.append(_POD_INFO.but(**who, node=p.node, created_by_kind="", created_by_name=""))
            out.append(_START.but(value=T0_S + p.start, **who))
            if t >= p.end:
                out.append(_COMPLETION.but(value=T0_S + p.end, **who))
            if p.pod in self.ksm_requests:
                out.append(_REQUEST.but(**who, node=p.node, container="cuda-container"))
            if self.ksm_claims:
                for name, claim, template in p.claims:
                    line = FROM_TEMPLATE if template else BY_NAME
                    out.append(line.but(**who, claim_name=name, resourceclaim_name=claim,
                                        resourceclaim_template_name=template))
        return out

    def dcgm_at(self, t: float) -> list[Line]:
        out = []
        for p in self.pods:
            running = _phase(p, t) == "Running"
            for uuid, claim, pool, device, profile in p.gpus:
                base = DCGM_MIG if profile else DCGM_GPU
                labels = {"UUID": uuid, "hostname": p.node}
                if running and self.dcgm_dra:
                    labels |= {"namespace": p.namespace, "pod": p.pod, "container": "ctr",
                               "dra_claim_name": claim, "dra_claim_namespace": p.namespace,
                               "dra_pool_name": pool, "dra_device_name": device}
                    if profile:
                        labels |= {"dra_mig_profile": profile, "dra_mig_device_uuid": "MIG-1"}
                else:
                    labels |= {k: None for k in ("namespace", "pod", "container") if
                               k in base[1]} | {k: None for k in base[1] if k.startswith("dra_")}
                out.append(dcgm_line(base, labels, p.busy if running else 0.0))
        out += list(self.extra_dcgm)
        return out

    def series(self, until: float = 7400.0) -> list[Series]:
        times = scrapes(until)
        return [*series(self.ksm_at, times), *series(self.dcgm_at, times, target={})]


def dcgm_line(base: tuple[str, dict[str, str], float], labels: dict[str, str | None],
               value: float) -> Line:
    merged = {**base[1]}
    for k, v in labels.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    return Line(base[0], tuple(merged.items()), value)


HOUR = timedelta(hours=1)
