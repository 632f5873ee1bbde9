"""Pod shapes of real clusters: GPUs requested by init containers and sidecars, and the Kueue
queue labels of Kueue >= 0.17 (``python -m simulator --init-container-gpus``, ``--kueue-labels``).

The scheduler's effective request of a pod is ``max(max(init containers), sum(containers) +
sum(sidecars))`` (Kubernetes docs, "Resource sharing within containers"; KEP-753 for sidecars,
init containers with ``restartPolicy: Always``). Every layout here has the effective request the
pod was placed with, so the charged GPUs (truth) stay those of the placement:

* ``init``: only an init container requests the GPUs (``gpu-init``, all of them); the main
  container requests none, so kube-state-metrics has no GPU series of ``kube_pod_container_*``
  for the pod at all;
* ``sidecar`` (pods of 2+ GPUs): the main container requests all but one, a sidecar
  (``reward-model``, restartable init container) one, and a plain init container
  (``gpu-check``, listed before the sidecar, so no sidecar runs beside it and the formula is the
  scheduler's exact one) one: summing everything or ignoring the sidecar both give a wrong count.

dcgm-exporter names the container that holds each GPU: the sidecar's GPU carries the sidecar's
name; the ``init`` layout's GPUs keep the main container's name (the workload that uses them).
"""

from dataclasses import dataclass, replace

from simulator.k8s_model import QUEUE_LABEL, WorkloadPlan
from simulator.records import GpuContainer, PodRecord
from simulator.rng import digest_hex
from simulator.scrape_shapes import ScrapeShapes

LOCAL_QUEUE_LABEL = "kueue_x_k8s_io_local_queue_name"  # kueue.x-k8s.io/local-queue-name
CLUSTER_QUEUE_LABEL = "kueue_x_k8s_io_cluster_queue_name"  # kueue.x-k8s.io/cluster-queue-name
CHECK_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
SIDECAR_IMAGE = "nvcr.io/nvidia/tritonserver:24.05-py3"
INIT_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("kube_pod_init_container_info", "gauge", "Information about an init container in a pod."),
    ("kube_pod_init_container_resource_requests", "gauge",
     "The number of requested request resource by an init container."),
)


def effective_gpus(containers: tuple[GpuContainer, ...]) -> int:
    init = [c.gpus for c in containers if c.kind == "init"]
    running = sum(c.gpus for c in containers if c.kind in ("container", "sidecar"))
    return max([running, *init])


def _fraction(*parts: object) -> float:
    return int(digest_hex(*parts)[:12], 16) / float(16**12)


@dataclass(frozen=True)
class PodShapes:
    seed: int = 0
    init_share: float = 0.0
    kueue_labels: str = "legacy"

    def layout(self, plan: WorkloadPlan) -> tuple[GpuContainer, ...]:
        """The GPU containers of the plan's pod template; () = the one main container."""
        gpus = plan.gpus_per_pod
        if self.init_share <= 0 or gpus < 1:
            return ()
        # per pod template (a Job's pods, a ReplicaSet's replicas), not from the random streams
        template = plan.pod_owner_name if plan.pod_owner_name != "<none>" else plan.owner_name
        if _fraction(self.seed, "init-gpus", plan.namespace.name, template) >= self.init_share:
            return ()
        sidecar = gpus >= 2 and _fraction(self.seed, "sidecar", plan.namespace.name,
                                          template) < 0.5
        if not sidecar:
            out = (GpuContainer("gpu-init", "init", gpus, CHECK_IMAGE),)
        else:
            out = (GpuContainer(plan.container, "container", gpus - 1, plan.image),
                   GpuContainer("gpu-check", "init", 1, CHECK_IMAGE),
                   GpuContainer("reward-model", "sidecar", 1, SIDECAR_IMAGE))
        if effective_gpus(out) != gpus:  # the placement is the truth: never charge otherwise
            msg = f"expected a layout with an effective request of {gpus} GPUs, found {out}"
            raise AssertionError(msg)
        return out

    def ksm_labels(self, plan: WorkloadPlan) -> tuple[tuple[str, str], ...] | None:
        """The pod's labels as kube-state-metrics exports them; None = ``plan.pod_labels``.

        Kueue >= 0.17 labels the pods of admitted workloads with their LocalQueue and
        ClusterQueue (kueue pkg/controller/jobframework/reconciler.go assignQueueLabels, #9348);
        ``queue-name`` is set by the user on the Job, so only pods of the pod integration (the
        pod itself is the job) still carry it.
        """
        if self.kueue_labels == "legacy" or not plan.managed_by_kueue:
            return None
        labels = dict(plan.pod_labels)
        if plan.owner_kind != "Pod":
            labels.pop(QUEUE_LABEL, None)
        labels[LOCAL_QUEUE_LABEL] = plan.local_queue
        labels[CLUSTER_QUEUE_LABEL] = plan.cluster_queue
        return tuple(sorted(labels.items()))

    def apply(self, plan: WorkloadPlan) -> WorkloadPlan:
        layout = self.layout(plan)
        labels = self.ksm_labels(plan)
        if not layout and labels is None:
            return plan
        return replace(plan, gpu_containers=layout, ksm_pod_labels=labels)


def container_id(seed: int, pod_uid: str, container: str) -> str:
    return f"containerd://{digest_hex(seed, 'container-id', pod_uid, container)}"


def image_id(image: str) -> str:
    repository = image.rsplit(":", 1)[0]
    return f"{repository}@sha256:{digest_hex(0, 'image', image)}"


def init_container_lines(shapes: ScrapeShapes, p: PodRecord, base: str, node: str,
                         target: str, ts: int, scheduled: bool,
                         seed: int) -> list[tuple[str, str]]:
    """kube-state-metrics' GPU request series of a pod with a ``layout`` (and the init
    containers' ``kube_pod_init_container_info``, which exists once the kubelet reports their
    status: from the pod's binding on). KSM internal/store/pod.go; an empty restart_policy is
    not stored by Prometheus."""
    out = []
    for c in p.containers:
        family = ("kube_pod_container_resource_requests" if c.kind == "container"
                  else "kube_pod_init_container_resource_requests")
        out.append((family, f'{family}{{{base},{shapes.container(c.name)},node="{node}",'
                            f'resource="nvidia_com_gpu",unit="integer",{target}}} {c.gpus} {ts}\n'))
        if c.kind == "container" or not scheduled:
            continue
        policy = f',restart_policy="{c.restart_policy}"' if c.restart_policy else ""
        out.append(("kube_pod_init_container_info",
                    f"kube_pod_init_container_info{{{base},{shapes.container(c.name)},"
                    f'image_spec="{c.image}",image="{c.image}",image_id="{image_id(c.image)}",'
                    f'container_id="{container_id(seed, p.uid, c.name)}"{policy},{target}}} 1 '
                    f"{ts}\n"))
    return out
