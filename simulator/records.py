"""Records passed from the schedulers to the writers. All frozen; times are epoch seconds."""

from dataclasses import dataclass

from simulator.identity import Owner
from simulator.world import Node


@dataclass(frozen=True)
class Profile:
    """How busy a holder keeps its GPUs (see ``utilization``)."""

    kind: str  # train | hpc | io | infer | idle | warmup | gang_wait
    seed: int
    busy_from: int | None = None  # warmup / gang_wait: when real work starts (None: never)


@dataclass(frozen=True)
class GpuContainer:
    """A container of a pod template that requests GPUs (``pod_shapes``)."""

    name: str
    kind: str  # container | init | sidecar (restartable init container)
    gpus: int
    image: str

    @property
    def restart_policy(self) -> str:
        return "Always" if self.kind == "sidecar" else ""


@dataclass(frozen=True)
class Holder:
    """Something holding GPUs on one node for ``[start, end)``: one row of truth/allocations.csv.

    ``view`` is the scheduler that placed it (``slurm`` or ``kubernetes``); slurm-bridge pods are
    placed by Slurm. ``dcgm`` are the workload labels dcgm-exporter adds; empty for the
    slurm-bridge representative job (its pod is the one dcgm-exporter sees).
    """

    domain: str
    source_key: str
    name: str
    node: Node
    gpu_indices: tuple[int, ...]
    start: int
    end: int  # may lie after the window's end (still running)
    owner: Owner
    outcome: str
    charged: bool
    profile: Profile
    view: str
    dcgm: tuple[tuple[str, str], ...]
    account: str = ""  # Slurm account and user, for sreport
    user: str = ""
    qos: str = ""  # Slurm QOS (rate cards may price by it); empty for pods
    dcgm_containers: tuple[tuple[int, str], ...] = ()  # GPU index -> container, if not dcgm's
    units: int = 0  # --shared-gpus: MIG instances, replicas or shards held (0: whole GPUs)
    gpu_model: str = ""  # the model the rate card prices it by ("": the node's)
    # --dra-pods (simulator/dra.py): the ResourceClaim (namespace, name) the pod holds its GPUs
    # through, and the node's GPUs of a claim it shares with another pod (named by dcgm-exporter
    # on those too, not held: truth keeps each pod's own GPUs)
    dra_claim: tuple[str, str] | None = None
    dcgm_also: tuple[int, ...] = ()

    @property
    def gpus(self) -> int:
        return self.units or len(self.gpu_indices)

    @property
    def gpu_uuids(self) -> tuple[str, ...]:
        return tuple(self.node.gpu_uuids[i] for i in self.gpu_indices)


@dataclass(frozen=True)
class PodRecord:
    """A pod as kube-state-metrics sees it over its life."""

    namespace: str
    name: str
    uid: str
    container: str
    owner_kind: str
    owner_name: str
    service_account: str
    labels: tuple[tuple[str, str], ...]
    gpus: int
    node: Node | None  # None: never scheduled
    created: int
    scheduled: int | None
    running: int | None
    finished: int | None  # None: still running (or pending) at the window's end
    final_phase: str  # Succeeded | Failed | "" (not finished)
    deleted: int | None  # None: still exists at the window's end
    pod_number: int  # for its IP address
    containers: tuple[GpuContainer, ...] = ()  # GPU containers; () = one, ``container``
    gpu_resource: str = "nvidia_com_gpu"  # the KSM resource requested (--shared-gpus: MIG;
    #                                       "": none, a DRA pod)
    # --dra-pods: kube_pod_resourceclaim_info per spec.resourceClaims entry (claim_name,
    # resourceclaim_name, resourceclaim_template_name)
    claims: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class KueueEvent:
    """A change of the Kueue controller's metrics state."""

    time: int
    kind: str  # pending | admit | evict | finish
    cluster_queue: str
    flavor: str = ""
    gpus: int = 0
    status_from: str = ""  # pending: active | inadmissible | ""
    status_to: str = ""
    wait: float = 0.0  # admit: seconds since created/requeued
    reason: str = ""  # evict: Preempted | PodsReadyTimeout


@dataclass(frozen=True)
class Incident:
    kind: str  # double_scheduled | partial_gang | idle_allocation
    node: str
    gpu_uuids: tuple[str, ...]
    start: int
    end: int
    gpu_seconds: int
    slurm_job: str
    k8s_workload: str
    detail: str
