"""The OpenMetrics file's metric families, in the order they are written (kube-state-metrics
and Kueue HELP texts as the exporters print them)."""

from simulator.dra import CLAIM_INFO_FAMILY
from simulator.ksm_jobs import JOB_FAMILIES
from simulator.pod_shapes import INIT_FAMILIES
from simulator.scrape_shapes import ScrapeShapes

KSM_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("kube_node_status_capacity", "gauge", "The capacity for different resources of a node."),
    ("kube_node_spec_unschedulable", "gauge",
     "Whether a node can schedule new pods."),
    ("kube_pod_info", "gauge", "Information about pod."),
    ("kube_pod_labels", "gauge", "Kubernetes labels converted to Prometheus labels."),
    ("kube_pod_service_account", "gauge", "The service account for a pod."),
    ("kube_pod_owner", "gauge", "Information about the Pod's owner."),
    ("kube_pod_status_phase", "gauge", "The pods current phase."),
    ("kube_pod_container_resource_requests", "gauge",
     "The number of requested request resource by a container. It is recommended to use the "
     "kube_pod_resource_requests metric exposed by kube-scheduler instead, as it is more "
     "precise."),
    ("kube_pod_start_time", "gauge", "Start time in unix timestamp for a pod."),
    ("kube_pod_completion_time", "gauge", "Completion time in unix timestamp for a pod."),
)
KUEUE_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("kueue_pending_workloads", "gauge",
     "The number of pending workloads, per 'cluster_queue' and 'status'."),
    ("kueue_admitted_workloads", "counter",
     "The total number of admitted workloads per 'cluster_queue'"),
    ("kueue_evicted_workloads", "counter",
     "The number of evicted workloads per 'cluster_queue'"),
    ("kueue_admission_wait_time_seconds", "histogram",
     "The time between a workload was created or requeued until admission, per "
     "'cluster_queue'"),
    ("kueue_admitted_active_workloads", "gauge",
     "The number of admitted Workloads that are active (unsuspended and not finished), per "
     "'cluster_queue'"),
    ("kueue_cluster_queue_resource_usage", "gauge",
     "Reports the cluster_queue's total resource usage"),
    ("kueue_cluster_queue_nominal_quota", "gauge", "Reports the cluster_queue's resource quota"),
)


def families(shapes: ScrapeShapes, init_containers: bool,
             jobs: bool = False, dra: bool = False) -> list[tuple[str, str, str]]:
    """The file's metric families in order (init-container ones only where pods have them,
    Job ones only with ``--realistic``, kube_pod_resourceclaim_info only with
    ``--dra-pods``)."""
    ksm = [*KSM_FAMILIES, *(JOB_FAMILIES if jobs else ())]
    if dra:
        at = [name for name, _, _ in ksm].index("kube_pod_container_resource_requests") + 1
        ksm[at:at] = [CLAIM_INFO_FAMILY]
    if init_containers:
        at = [name for name, _, _ in ksm].index("kube_pod_container_resource_requests") + 1
        ksm[at:at] = INIT_FAMILIES
    return [*shapes.dcgm_families(), *ksm, *KUEUE_FAMILIES]
