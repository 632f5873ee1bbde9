"""Kueue as loaded: Workloads (raw objects, their history, the normalized rows) and Kueue's
metrics (admission counters, pending workloads, admission wait, queue resources)."""

from models.schema.core import Table

KUEUE_WORKLOADS_RAW = Table(
    "kueue_workloads_raw",
    (
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("name", "VARCHAR"),
        ("queue_name", "VARCHAR"),
        ("cluster_queue", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        ("pod_sets", "INTEGER"),
        ("pods_wanted", "INTEGER"),
        ("object_json", "JSON"),
        ("source_file", "VARCHAR"),
    ),
    key=("uid",),
    doc="Kueue Workload objects as loaded from a snapshot, one row per workload.",
)

KUEUE_WORKLOAD_HISTORY = Table(
    "kueue_workload_history",
    (
        ("cluster", "VARCHAR"),
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("name", "VARCHAR"),
        ("resource_version", "VARCHAR"),
        ("content_sha256", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
        ("deleted_seen_at", "TIMESTAMP"),
        ("object_json", "JSON"),
        ("source_file", "VARCHAR"),
    ),
    key=("cluster", "uid", "content_sha256"),
    doc="Every state of a Kueue Workload seen by a snapshot (API sensor or file): one row per "
    "cluster, uid and distinct object (content_sha256; resource_version as the API said), "
    "first_seen/last_seen the snapshot times that showed it, deleted_seen_at the first later "
    "snapshot that no longer listed the uid. kueue_workloads is its latest state per uid "
    "(gpuledger/ingest/kubernetes/workload_history.py).",
)

KUEUE_COUNTERS = Table(
    "kueue_counters",
    (
        ("cluster", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("cluster_queue", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("increase", "DOUBLE"),
        ("resets", "BIGINT"),
        ("samples", "BIGINT"),
    ),
    key=("cluster", "metric", "window_start", "cluster_queue", "reason"),
    doc="Reset-aware increases of Kueue's workload counters (admitted, evicted, quota reserved, "
    "preempted) per hour and ClusterQueue (and reason).",
)

KUEUE_PENDING = Table(
    "kueue_pending",
    (
        ("cluster", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("cluster_queue", "VARCHAR"),
        ("status", "VARCHAR"),
        ("mean", "DOUBLE"),
        ("max", "DOUBLE"),
        ("last", "DOUBLE"),
        ("workload_seconds", "DOUBLE"),
        ("samples", "BIGINT"),
        ("pending_seconds", "DOUBLE"),  # seconds with > 0 pending (gap-aware)
        ("covered_seconds", "DOUBLE"),  # seconds the samples stand for
    ),
    key=("cluster", "window_start", "cluster_queue", "status"),
    doc="kueue_pending_workloads per hour, ClusterQueue and status (active, inadmissible).",
)

KUEUE_ADMISSION_WAIT = Table(
    "kueue_admission_wait",
    (
        ("cluster", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("cluster_queue", "VARCHAR"),
        ("count", "DOUBLE"),
        ("sum_seconds", "DOUBLE"),
        ("mean_seconds", "DOUBLE"),
    ),
    key=("cluster", "window_start", "cluster_queue"),
    doc="Admissions and their total/mean wait per hour and ClusterQueue "
    "(kueue_admission_wait_time_seconds _count/_sum increases).",
)

KUEUE_ADMISSION_WAIT_BUCKETS = Table(
    "kueue_admission_wait_buckets",
    (
        ("cluster", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("cluster_queue", "VARCHAR"),
        ("le", "DOUBLE"),
        ("cumulative_count", "DOUBLE"),
        ("bucket_count", "DOUBLE"),
    ),
    key=("cluster", "window_start", "cluster_queue", "le"),
    doc="The admission-wait histogram per hour and ClusterQueue (increases per bucket).",
)

KUEUE_QUEUE_RESOURCES = Table(
    "kueue_queue_resources",
    (
        ("cluster", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("cohort", "VARCHAR"),
        ("cluster_queue", "VARCHAR"),
        ("flavor", "VARCHAR"),
        ("resource", "VARCHAR"),
        ("mean", "DOUBLE"),
        ("max", "DOUBLE"),
        ("last", "DOUBLE"),
        ("samples", "BIGINT"),
        ("value_seconds", "DOUBLE"),  # time-weighted: value x seconds each sample stands for
        ("covered_seconds", "DOUBLE"),  # seconds the samples stand for
        ("above_nominal_seconds", "DOUBLE"),  # usage rows: borrowed GPU-seconds, per scrape
        ("lendable_seconds", "DOUBLE"),  # usage rows: unused nominal, capped by lending limit
    ),
    key=("cluster", "metric", "window_start", "cluster_queue", "flavor", "resource"),
    doc="ClusterQueue GPU usage, reservation, nominal quota, borrowing and lending limits per "
    "hour (quota bookkeeping, not device use).",
)

KUEUE_WORKLOADS = Table(
    "kueue_workloads",
    (
        ("uid", "VARCHAR"),
        ("namespace", "VARCHAR"),
        ("name", "VARCHAR"),
        ("queue_name", "VARCHAR"),
        ("cluster_queue", "VARCHAR"),
        ("owner_kind", "VARCHAR"),
        ("owner_name", "VARCHAR"),
        ("owner_uid", "VARCHAR"),
        ("priority", "BIGINT"),
        ("active", "BOOLEAN"),
        ("pod_sets", "INTEGER"),
        ("pods_wanted", "INTEGER"),
        ("min_count", "INTEGER"),
        ("gpus_per_pod", "BIGINT"),
        ("gpus_admitted", "BIGINT"),
        ("flavor", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
        ("quota_reserved", "BOOLEAN"),
        ("quota_reserved_at", "TIMESTAMP"),
        ("admitted", "BOOLEAN"),
        ("admitted_at", "TIMESTAMP"),
        ("pods_ready", "BOOLEAN"),
        ("pods_ready_at", "TIMESTAMP"),
        ("evicted", "BOOLEAN"),
        ("evicted_at", "TIMESTAMP"),
        ("evicted_reason", "VARCHAR"),
        ("evicted_message", "VARCHAR"),
        ("preempted", "BOOLEAN"),
        ("eviction_count", "INTEGER"),
        ("eviction_reasons", "VARCHAR"),
        ("requeue_count", "INTEGER"),
        ("requeue_at", "TIMESTAMP"),
        ("finished", "BOOLEAN"),
        ("finished_at", "TIMESTAMP"),
        ("finished_reason", "VARCHAR"),
        ("pending_message", "VARCHAR"),
        ("source_file", "VARCHAR"),
        # added with the single Workload read (docs/kubernetes.md, "Kueue Workloads")
        ("gpu_resource", "VARCHAR"),
        ("eviction_count_source", "VARCHAR"),
        # Kueue elastic jobs (ElasticJobsViaWorkloadSlices): kueue.x-k8s.io/elastic-job "true",
        # the slice it replaces (workload-slice-replacement-for, 'namespace/name') and its
        # chain's first slice (workload-slice-name)
        ("elastic", "BOOLEAN"),
        ("slice_of", "VARCHAR"),
        ("slice_name", "VARCHAR"),
    ),
    key=("uid",),
    doc="Kueue Workloads with their conditions read: queue, ClusterQueue, owner, pod-set sizes, "
    "GPUs per pod and admitted (gpu_resource: the configured resource names they were counted "
    "from), when quota was reserved / admitted / PodsReady, evictions (reason: Preempted, "
    "PodsReadyTimeout, ...; eviction_count from schedulingStats, else a lower bound from the "
    "conditions: eviction_count_source), PodsReadyTimeout requeues (requeue_count) and whether "
    "it finished. Condition times are the last transitions (a re-admitted workload shows its "
    "latest admission). Filled with kueue_workloads_raw from one read of a snapshot.",
)
