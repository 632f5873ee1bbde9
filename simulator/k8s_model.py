"""Kubernetes workloads as plans (every attempt with its pods and times) and what they produce:
pod records for kube-state-metrics, GPU holders, Kueue metric events and the Workload object.

A pod holds its GPUs while it is Running (``[running, finished)``): that interval is charged and
is when dcgm-exporter labels the GPU with the pod.
"""

from dataclasses import dataclass, field

from simulator.identity import PodOwner
from simulator.records import GpuContainer, Holder, KueueEvent, PodRecord, Profile
from simulator.world import Namespace, Node

PENDING_ACTIVE_SECONDS = 30  # a pending workload turns "inadmissible" after its first try
JOB_TTL_SECONDS = 600  # ttlSecondsAfterFinished of the batch Jobs
QUEUE_LABEL = "kueue_x_k8s_io_queue_name"


@dataclass(frozen=True)
class PodPlan:
    name: str
    uid: str
    node: Node | None  # None: never scheduled
    gpu_indices: tuple[int, ...]
    created: int
    scheduled: int | None
    running: int | None
    finished: int | None  # None: runs past the window
    final_phase: str  # Succeeded | Failed | "" (deleted while pending, or still running)
    deleted: int | None
    profile: Profile
    pod_number: int


@dataclass(frozen=True)
class AttemptPlan:
    """One admission of a workload."""

    admitted: int
    pods: tuple[PodPlan, ...]
    ready: int | None  # all pods running (PodsReady=True); None: never
    ended: int | None  # finished or evicted; None: past the window
    evict_reason: str = ""  # "" | Preempted | PodsReadyTimeout
    evict_message: str = ""
    requeue_at: int | None = None  # backoff done, pending again
    outcome: str = "succeeded"  # succeeded | failed | evicted_preempted | ...


@dataclass(frozen=True)
class WorkloadPlan:
    namespace: Namespace
    name: str  # the Workload object's name
    uid: str
    owner_kind: str  # Job | Pod (pod integration) | "" (not Kueue-managed: slurm-bridge)
    owner_name: str
    owner_uid: str
    pod_owner_kind: str  # Job | ReplicaSet
    pod_owner_name: str
    created: int
    count: int  # pods per pod set
    gpus_per_pod: int
    cpus_per_pod: int
    mem_gb_per_pod: int
    flavor: str
    container: str
    image: str
    owner_label: str  # "" for none
    attempts: tuple[AttemptPlan, ...]
    min_count: int | None = None
    deleted: int | None = None  # the Workload (its Job) was deleted; None: exists at the end
    managed_by_kueue: bool = True
    view: str = "kubernetes"
    extra_labels: tuple[tuple[str, str], ...] = field(default=())
    gpu_containers: tuple[GpuContainer, ...] = ()  # () = ``container`` requests every GPU
    ksm_pod_labels: tuple[tuple[str, str], ...] | None = None  # None = ``pod_labels``
    # partial admission (podSets[].minCount): the pods Kueue admitted, and the Job's
    # parallelism it set (None: ``count``)
    admitted_count: int | None = None

    @property
    def cluster_queue(self) -> str:
        return self.namespace.cluster_queue if self.managed_by_kueue else ""

    @property
    def local_queue(self) -> str:
        return self.namespace.local_queue if self.managed_by_kueue else ""

    @property
    def pod_labels(self) -> tuple[tuple[str, str], ...]:
        labels = list(self.extra_labels)
        if self.managed_by_kueue:
            labels.append((QUEUE_LABEL, self.local_queue))
        if self.owner_label:
            labels.append(("owner", self.owner_label))
        return tuple(sorted(labels))

    @property
    def pod_owner(self) -> PodOwner:
        return PodOwner(self.namespace.name, self.namespace.service_account, self.pod_labels,
                        self.local_queue, self.cluster_queue)

    @property
    def key(self) -> str:
        return f"{self.namespace.name}/{self.name}"


def pod_records(plan: WorkloadPlan) -> list[PodRecord]:
    out = []
    for attempt in plan.attempts:
        for pod in attempt.pods:
            out.append(PodRecord(
                namespace=plan.namespace.name, name=pod.name, uid=pod.uid,
                container=plan.container, owner_kind=plan.pod_owner_kind,
                owner_name=plan.pod_owner_name,
                service_account=plan.namespace.service_account,
                labels=plan.pod_labels if plan.ksm_pod_labels is None else plan.ksm_pod_labels,
                gpus=plan.gpus_per_pod, node=pod.node, created=pod.created,
                scheduled=pod.scheduled, running=pod.running, finished=pod.finished,
                final_phase=pod.final_phase, deleted=pod.deleted, pod_number=pod.pod_number,
                containers=plan.gpu_containers,
            ))
    return out


def holders(plan: WorkloadPlan, window_end: int) -> list[Holder]:
    out = []
    owner = plan.pod_owner
    for attempt in plan.attempts:
        for pod in attempt.pods:
            if pod.node is None or pod.running is None:
                continue
            end = pod.finished if pod.finished is not None else window_end + 86_400
            if end <= pod.running:
                continue
            outcome = attempt.outcome if end <= window_end else "running"
            # a sidecar's GPUs are the pod's last ones: dcgm-exporter names the sidecar there
            sidecar = [c for c in plan.gpu_containers if c.kind == "sidecar"]
            per_gpu = tuple((i, c.name) for c in sidecar
                            for i in pod.gpu_indices[len(pod.gpu_indices) - c.gpus:])
            out.append(Holder(
                domain="kubernetes", source_key=f"{plan.namespace.name}/{pod.name}",
                name=plan.name, node=pod.node, gpu_indices=pod.gpu_indices, start=pod.running,
                end=end, owner=owner, outcome=outcome, charged=True, profile=pod.profile,
                view=plan.view,
                dcgm=(("container", plan.container), ("namespace", plan.namespace.name),
                      ("pod", pod.name)),
                dcgm_containers=per_gpu,
            ))
    return out


def kueue_events(plan: WorkloadPlan) -> list[KueueEvent]:
    """Pending/admit/evict/finish changes of the controller's gauges and counters."""
    if not plan.managed_by_kueue:
        return []
    cq = plan.cluster_queue
    gpus = plan.count * plan.gpus_per_pod
    events: list[KueueEvent] = []
    waiting_since = plan.created
    for attempt in plan.attempts:
        events.extend(_pending(cq, waiting_since, attempt.admitted))
        events.append(KueueEvent(attempt.admitted, "admit", cq, plan.flavor, gpus,
                                 wait=float(attempt.admitted - waiting_since)))
        if attempt.ended is None:
            return events
        if attempt.evict_reason:
            events.append(KueueEvent(attempt.ended, "evict", cq, plan.flavor, gpus,
                                     reason=attempt.evict_reason))
            waiting_since = attempt.ended
        else:
            events.append(KueueEvent(attempt.ended, "finish", cq, plan.flavor, gpus))
            return events
    # never admitted (again): pending until the user deletes the Job, or past the end
    events.extend(_pending(cq, waiting_since, plan.deleted))
    return events


def _pending(cq: str, since: int, until: int | None) -> list[KueueEvent]:
    turn = since + PENDING_ACTIVE_SECONDS
    if until is not None and until <= turn:
        if until <= since:
            return []
        return [KueueEvent(since, "pending", cq, status_to="active"),
                KueueEvent(until, "pending", cq, status_from="active")]
    out = [KueueEvent(since, "pending", cq, status_to="active"),
           KueueEvent(turn, "pending", cq, status_from="active", status_to="inadmissible")]
    if until is not None:
        out.append(KueueEvent(until, "pending", cq, status_from="inadmissible"))
    return out
