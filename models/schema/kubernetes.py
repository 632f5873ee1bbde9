"""Kubernetes and Kueue as loaded: pods, their GPUs and claims, node capacity, dcgm-exporter
readings, Kueue metrics and Workloads, and the ingest's warnings and rejects."""

from models.schema.core import Table
from models.schema.kueue import (
    KUEUE_ADMISSION_WAIT,
    KUEUE_ADMISSION_WAIT_BUCKETS,
    KUEUE_COUNTERS,
    KUEUE_PENDING,
    KUEUE_QUEUE_RESOURCES,
    KUEUE_WORKLOADS,
)

K8S_POD_GROUPS = Table(
    "k8s_pod_groups",
    (
        ("cluster", "VARCHAR"),
        ("uid", "VARCHAR"),
        ("pod_group", "VARCHAR"),  # a Workload's pod group (template); a PodGroup's template
        ("api_version", "VARCHAR"),  # scheduling.k8s.io/v1alpha1 ... | scheduling.x-k8s.io/v1alpha1
        ("kind", "VARCHAR"),  # Workload | PodGroup
        ("namespace", "VARCHAR"),
        ("name", "VARCHAR"),
        ("policy", "VARCHAR"),  # gang | basic
        ("min_count", "INTEGER"),  # gang minCount (scheduling.x-k8s.io: minMember)
        ("job_name", "VARCHAR"),  # the Job whose pods the group is
        ("pod_label", "VARCHAR"),  # scheduling.x-k8s.io/pod-group value of its pods
        ("workload_name", "VARCHAR"),  # a PodGroup's Workload
        ("controller_kind", "VARCHAR"),
        ("controller_name", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
        ("object_json", "JSON"),
        ("source_file", "VARCHAR"),
    ),
    key=("cluster", "uid", "pod_group"),
    doc="Gangs the scheduler itself knows, one row per pod group: Kubernetes' Workload API "
    "(scheduling.k8s.io Workload pod groups and PodGroups, KEP-4671) and scheduler-plugins "
    "coscheduling PodGroups (scheduling.x-k8s.io), with their gang minCount and the pods they "
    "cover as the ledger sees them (job_name, pod_label). The latest state seen of each uid, "
    "kept after the object is deleted (connectors/kubernetes/pod_groups.py).",
)

# --- kubernetes tables ---
# Written by gpuledger/ingest/kubernetes/run.py (Prometheus raw samples through
# connectors/kubernetes) and
# by import_workload_conditions (kubectl Workload snapshot). Every table carries the cluster it
# was read for; windows are replaced whole, so re-ingesting a window changes nothing.

_POD_INTERVAL_COLUMNS = (
    ("cluster", "VARCHAR"),
    ("namespace", "VARCHAR"),
    ("pod", "VARCHAR"),
    ("uid", "VARCHAR"),
    ("node", "VARCHAR"),
    ("gpus", "BIGINT"),
    ("start_ts", "TIMESTAMP"),
    ("end_ts", "TIMESTAMP"),
    ("samples", "BIGINT"),
    ("scrape_interval_s", "DOUBLE"),
    ("gpu_seconds", "DOUBLE"),
    ("service_account", "VARCHAR"),
    ("labels", "JSON"),
    ("queue_name", "VARCHAR"),
    ("owner_kind", "VARCHAR"),
    ("owner_name", "VARCHAR"),
    ("cluster_queue", "VARCHAR"),  # the pod's kueue.x-k8s.io/cluster-queue-name (Kueue >= 0.17)
    # which time each end is: kube_pod_start_time / kube_pod_completion_time, scrape_grid, or
    # window (the last window ingested clipped it: the pod ran on beyond it)
    ("start_source", "VARCHAR"),
    ("end_source", "VARCHAR"),
    # shared GPUs (docs/shared-gpus.md): the KSM resource the request was for
    # (nvidia_com_gpu, nvidia_com_mig_1g_10gb, ...), its sharing mode (mig, time_slicing, mps;
    # NULL: whole GPUs) and MIG profile; gpus = the request of that resource
    ("gpu_resource", "VARCHAR"),
    ("sharing", "VARCHAR"),
    ("slice_profile", "VARCHAR"),
    # the pod's first Running scrape: [start_ts, first_running_ts) is its start-up, admitted
    # and holding its GPUs (image pulls, init containers); NULL: never seen Running
    ("first_running_ts", "TIMESTAMP"),
    # DRA (gpu_resource 'dra/<device class>[/<MIG profile>|/shared]', docs/kubernetes.md "DRA"):
    # the pod's ResourceClaims and their devices as text (the evidence); NULL otherwise
    ("dra_claims", "VARCHAR"),
    # the DRA devices held, '<pool>/<device>' (a shared claim's pods split each one's seconds:
    # allocation_shares.sql)
    ("dra_devices", "VARCHAR[]"),
)

K8S_POD_ALLOCATION_PIECES = Table(
    "k8s_pod_allocation_pieces",
    _POD_INTERVAL_COLUMNS,
    key=("cluster", "uid", "gpu_resource", "start_ts"),
    doc="Pod GPU allocation intervals as each ingest window saw them (clipped to the window); "
    "a window's pieces are replaced whole. k8s_pod_allocations is their merge.",
)

K8S_POD_ALLOCATIONS = Table(
    "k8s_pod_allocations",
    _POD_INTERVAL_COLUMNS,
    key=("cluster", "uid", "gpu_resource", "start_ts"),
    doc="One row per pod GPU allocation interval and GPU-like resource (gpu_resource: a pod "
    "holding whole GPUs and MIG instances has a row for each; per uid; before "
    "kube-state-metrics v2.1.0 per 'namespace/pod@creation time'): from kube_pod_start_time, "
    "else the first Running sample, to kube_pod_completion_time, else the last Running "
    "sample + scrape interval (start_source/end_source say which; docs/kubernetes.md), bound "
    "to a node, GPUs = the pod's effective request of that resource. Pieces of consecutive "
    "ingest windows that touch are merged into one "
    "row; a scrape-grid end is late by less than one scrape interval.",
)

K8S_POD_PHASES = Table(
    "k8s_pod_phases",
    (
        ("cluster", "VARCHAR"),
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("pod", "VARCHAR"),
        ("phase", "VARCHAR"),
        ("phase_ts", "TIMESTAMP"),
    ),
    key=("cluster", "uid"),
    doc="The latest terminal phase (Succeeded, Failed, Unknown) kube-state-metrics showed for a "
    "GPU pod, and when; pods without a row were last seen Running.",
)

K8S_POD_GPUS = Table(
    "k8s_pod_gpus",
    (
        ("cluster", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("pod", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_uuid", "VARCHAR"),
        ("day", "DATE"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "namespace", "pod", "node", "gpu_uuid", "day"),
    doc="Which GPUs dcgm-exporter labelled with a pod, per UTC day: [first, last) 1-minute bucket "
    "with the pod as holder.",
)

K8S_RESOURCE_CLAIM_DEVICES = Table(
    "k8s_resource_claim_devices",
    (
        ("cluster", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("claim", "VARCHAR"),  # the ResourceClaim's name
        ("claim_uid", "VARCHAR"),
        ("request", "VARCHAR"),
        ("driver", "VARCHAR"),
        ("pool", "VARCHAR"),  # the node, for node-local drivers (gpu.nvidia.com)
        ("device", "VARCHAR"),
        ("device_class", "VARCHAR"),
        ("mig_profile", "VARCHAR"),
        ("sharing_strategy", "VARCHAR"),  # GpuConfig sharing.strategy: TimeSlicing, MPS
        ("share_id", "VARCHAR"),
        ("extended", "BOOLEAN"),  # made by the scheduler for an extended-resource request
        ("source", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "claim_uid", "request", "pool", "device"),
    doc="Every device a DRA ResourceClaim was allocated (status.allocation.devices.results, "
    "from the Kubernetes API or a kubectl snapshot), with the [first, last] observation showing "
    "it: the claim stays known after its pod and it are deleted (docs/kubernetes.md, \"DRA\").",
)

K8S_RESOURCE_SLICE_DEVICES = Table(
    "k8s_resource_slice_devices",
    (
        ("cluster", "VARCHAR"),
        ("driver", "VARCHAR"),
        ("pool", "VARCHAR"),  # the node, for node-local drivers
        ("device", "VARCHAR"),  # gpu-0, gpu-0-mig-1g10gb-19-0 …
        ("node", "VARCHAR"),
        ("device_type", "VARCHAR"),  # the attribute type: gpu, mig …
        ("gpu_uuid", "VARCHAR"),  # the physical GPU (a MIG device's parentUUID)
        ("mig_uuid", "VARCHAR"),
        ("mig_profile", "VARCHAR"),
        ("source", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "driver", "pool", "device", "gpu_uuid", "mig_uuid"),
    doc="Every device a DRA driver published in a ResourceSlice (from the Kubernetes API or a "
    "kubectl snapshot), with the GPU it is (attributes uuid / parentUUID) and its MIG profile: "
    "what ties a claim's device name to the GPU dcgm-exporter and Slurm name by UUID "
    "(docs/kubernetes.md, \"DRA\").",
)

K8S_RESOURCE_CLAIM_PODS = Table(
    "k8s_resource_claim_pods",
    (
        ("cluster", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("claim", "VARCHAR"),
        ("claim_uid", "VARCHAR"),  # '' when only the pod named the claim
        ("pod", "VARCHAR"),
        ("pod_uid", "VARCHAR"),
        # reservedFor, ownerReference, resourceClaims, resourceClaimStatuses,
        # extendedResourceClaimStatus
        ("via", "VARCHAR"),
        ("source", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "namespace", "claim", "claim_uid", "pod_uid", "via"),
    doc="Which pods a DRA ResourceClaim is for (its reservedFor and owner pod, a pod's "
    "resourceClaimStatuses / extendedResourceClaimStatus), per observation span.",
)

K8S_JOB_SPECS = Table(
    "k8s_job_specs",
    (
        ("cluster", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("job_name", "VARCHAR"),
        ("parallelism", "BIGINT"),
        ("completions", "BIGINT"),  # null: the Job has none (a work queue)
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "namespace", "job_name", "parallelism", "completions"),
    doc="The size a batch Job asks for (kube_job_spec_parallelism / _completions), per value "
    "seen, with the [first, last) scrapes showing it: a gang's size without its Workload "
    "(docs/detectors.md, partial_gang).",
)

K8S_PENDING_PODS = Table(
    "k8s_pending_pods",
    (
        ("cluster", "VARCHAR"),
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("pod", "VARCHAR"),
        ("gpus", "BIGINT"),
        ("owner_kind", "VARCHAR"),
        ("owner_name", "VARCHAR"),
        ("labels", "VARCHAR"),  # JSON, as k8s_pod_allocations.labels
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
        ("samples", "BIGINT"),
    ),
    key=("cluster", "uid"),
    doc="GPU pods Pending without a node (kube_pod_status_phase, no node on their requests): "
    "a gang's missing members, with their owner and labels and the [first, last) scrapes "
    "showing them waiting.",
)

_NODE_CAPACITY_COLUMNS = (
    ("cluster", "VARCHAR"),
    ("node", "VARCHAR"),
    ("start_ts", "TIMESTAMP"),
    ("end_ts", "TIMESTAMP"),
    ("capacity_gpus", "BIGINT"),
    ("allocatable_gpus", "BIGINT"),
    ("unschedulable", "BOOLEAN"),
    ("samples", "BIGINT"),
    ("scrape_interval_s", "DOUBLE"),
)

K8S_NODE_CAPACITY_PIECES = Table(
    "k8s_node_capacity_pieces",
    _NODE_CAPACITY_COLUMNS,
    key=("cluster", "node", "start_ts"),
    doc="Node GPU capacity intervals per ingest window; k8s_node_capacity is their merge.",
)

K8S_NODE_CAPACITY = Table(
    "k8s_node_capacity",
    _NODE_CAPACITY_COLUMNS,
    key=("cluster", "node", "start_ts"),
    doc="GPU capacity, allocatable GPUs and cordon state of each Kubernetes node over time "
    "(kube_node_status_capacity/allocatable, kube_node_spec_unschedulable).",
)

GPU_UTILIZATION = Table(
    "gpu_utilization",
    (
        ("cluster", "VARCHAR"),
        ("gpu_uuid", "VARCHAR"),
        ("gpu_instance", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_index", "INTEGER"),
        ("gpu_model", "VARCHAR"),
        ("bucket_start", "TIMESTAMP"),
        ("busy_fraction", "DOUBLE"),
        ("samples", "BIGINT"),
        ("namespace", "VARCHAR"),
        ("pod", "VARCHAR"),
        ("container", "VARCHAR"),
        ("pod_uid", "VARCHAR"),
        ("hpc_job", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("gpu_instance_profile", "VARCHAR"),
        ("attribution", "VARCHAR"),
        # dcgm-exporter --kubernetes-enable-dra: the holder pod's ResourceClaim and DRA device
        ("dra_claim_namespace", "VARCHAR"),
        ("dra_claim_name", "VARCHAR"),
        ("dra_driver_name", "VARCHAR"),
        ("dra_pool_name", "VARCHAR"),
        ("dra_device_name", "VARCHAR"),
        ("dra_mig_profile", "VARCHAR"),
        ("dra_mig_device_uuid", "VARCHAR"),
    ),
    key=("cluster", "gpu_uuid", "gpu_instance", "bucket_start", "namespace", "pod", "container",
         "pod_uid", "hpc_job", "attribution"),
    doc="Busy fraction per GPU (MIG instance, with its GPU_I_PROFILE) per 1-minute bucket and "
    "holder (pod or Slurm job). attribution: 'exporter_labels' (dcgm-exporter's holder labels), "
    "'sole_pod_on_node' (no labels; the only pod holding every GPU of the node), null (no "
    "holder: idle or unattributable). An exporter outage is missing rows, never zeros.",
)

GPU_BUSY_DAILY = Table(
    "gpu_busy_daily",
    (
        ("cluster", "VARCHAR"),
        ("gpu_uuid", "VARCHAR"),
        ("gpu_instance", "VARCHAR"),
        ("node", "VARCHAR"),
        ("day", "DATE"),
        ("busy_seconds", "DOUBLE"),
        ("covered_seconds", "DOUBLE"),
        ("samples", "BIGINT"),
        ("scrape_interval_s", "DOUBLE"),
        ("gpu_instance_profile", "VARCHAR"),
        ("device_kind", "VARCHAR"),
        ("mig_slices", "INTEGER"),
    ),
    key=("cluster", "gpu_uuid", "gpu_instance", "day"),
    doc="Busy GPU-seconds per device per UTC day (sum of value x seconds each sample stands for); "
    "covered_seconds shows gaps in the data. device_kind 'gpu' (a whole GPU), 'mig_instance' (one "
    "MIG instance, mig_slices its compute slices) or 'mig_parent' (gpu_instance null: the GPU's "
    "instances weighted by slices over its mig_slices, never above one GPU; docs/kubernetes.md).",
)

K8S_INGEST_WARNINGS = Table(
    "k8s_ingest_warnings",
    (
        ("cluster", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("component", "VARCHAR"),
        ("message", "VARCHAR"),
    ),
    key=("cluster", "window_start", "component", "message"),
    doc="What a Kubernetes ingest window reported: absent metrics, unrecognised label "
    "spellings, exporter label situations, server warnings.",
)

K8S_REJECTS = Table(
    "k8s_rejects",
    (
        ("cluster", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("component", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("series", "VARCHAR"),
        ("ts", "TIMESTAMP"),
        ("value", "DOUBLE"),
    ),
    key=("cluster", "window_start", "series", "ts"),
    doc="Samples a Kubernetes ingest window read but could not use (no key label, NaN or ±Inf, "
    "a bucket without a numeric le, a Running pod without a node, …), each with its series as "
    "JSON labels: kept and counted per reason, never dropped. Replaced with the window.",
)

KUBERNETES_TABLES: tuple[Table, ...] = (
    K8S_POD_ALLOCATION_PIECES,
    K8S_POD_ALLOCATIONS,
    K8S_POD_PHASES,
    K8S_POD_GPUS,
    K8S_RESOURCE_CLAIM_DEVICES,
    K8S_RESOURCE_CLAIM_PODS,
    K8S_RESOURCE_SLICE_DEVICES,
    K8S_JOB_SPECS,
    K8S_PENDING_PODS,
    K8S_NODE_CAPACITY_PIECES,
    K8S_NODE_CAPACITY,
    GPU_UTILIZATION,
    GPU_BUSY_DAILY,
    KUEUE_COUNTERS,
    KUEUE_PENDING,
    KUEUE_ADMISSION_WAIT,
    KUEUE_ADMISSION_WAIT_BUCKETS,
    KUEUE_QUEUE_RESOURCES,
    KUEUE_WORKLOADS,
    K8S_INGEST_WARNINGS,
    K8S_REJECTS,
)
