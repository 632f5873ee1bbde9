"""kube-state-metrics' Job series and the Job label of its pods, written with ``--realistic``
(issue #15 item 2: gangs found from pods alone).

Names and labels are kube-state-metrics' own (docs/job-metrics.md of kubernetes/kube-state-
metrics: ``kube_job_spec_parallelism`` and ``kube_job_spec_completions`` with ``namespace`` and
``job_name``). The Job controller labels each pod ``batch.kubernetes.io/job-name`` (Kubernetes
"Job" concept page, labels set by the Job controller since 1.27); kube_pod_labels shows it as
``label_batch_kubernetes_io_job_name`` once the site allows it (``--metric-labels-allowlist=
pods=[batch.kubernetes.io/job-name,...]``).
"""

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from simulator.k8s_model import WorkloadPlan

JOB_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("kube_job_spec_parallelism", "gauge",
     "The maximum desired number of pods the job should run at any given time."),
    ("kube_job_spec_completions", "gauge",
     "The desired number of successfully finished pods the job should be run with."),
)
JOB_NAME_LABEL = "label_batch_kubernetes_io_job_name"


@dataclass(frozen=True)
class JobObject:
    namespace: str
    name: str
    parallelism: int
    completions: int
    created: int
    deleted: int | None  # None: exists at the window's end


def job_object(plan: WorkloadPlan) -> JobObject | None:
    """The batch Job behind a workload's pods (None: its pods have no Job)."""
    if plan.pod_owner_kind != "Job":
        return None
    admitted = plan.count if plan.admitted_count is None else plan.admitted_count
    return JobObject(plan.namespace.name, plan.pod_owner_name, admitted, plan.count,
                     plan.created, plan.deleted)


def with_job_label(labels: tuple[tuple[str, str], ...], owner_kind: str,
                   owner_name: str) -> tuple[tuple[str, str], ...]:
    """A Job's pod's labels as kube_pod_labels shows them (sorted, like the others)."""
    if owner_kind != "Job":
        return labels
    return tuple(sorted((*labels, ("batch_kubernetes_io_job_name", owner_name))))


class KsmJobs:
    """The Jobs alive at each kube-state-metrics scrape."""

    def __init__(self, namespace_label: str) -> None:
        self.ns_label = namespace_label  # exported_namespace without honorLabels
        self.heap: list[tuple[int, int, JobObject]] = []
        self.alive: list[JobObject] = []
        self.seq = 0

    def add(self, job: JobObject) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (job.created, self.seq, job))

    def scrape(self, ts: int, target: str, emit: Callable[[str, str], None]) -> None:
        while self.heap and self.heap[0][0] <= ts:
            self.alive.append(heapq.heappop(self.heap)[2])
        self.alive[:] = [j for j in self.alive if j.deleted is None or j.deleted > ts]
        for j in self.alive:
            labels = f'{self.ns_label}="{j.namespace}",job_name="{j.name}",{target}'
            emit("kube_job_spec_parallelism",
                 f"kube_job_spec_parallelism{{{labels}}} {j.parallelism} {ts}\n")
            emit("kube_job_spec_completions",
                 f"kube_job_spec_completions{{{labels}}} {j.completions} {ts}\n")
