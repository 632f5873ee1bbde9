"""The accounting model built from both schedulers: allocations, hourly and daily usage, GPU
conservation, the data-quality gate, incidents and Kueue quota history."""

from models.schema.core import Table

ALLOCATIONS = Table(
    "allocations",
    (
        ("day", "DATE"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("source_key", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("name", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpus", "BIGINT"),
        ("gpu_uuids", "VARCHAR[]"),
        ("start_ts", "TIMESTAMP"),
        ("end_ts", "TIMESTAMP"),
        ("gpu_seconds", "BIGINT"),
        # shared GPUs (docs/shared-gpus.md): sharing mode (NULL: whole GPUs), MIG profile, units
        # held (instances, replicas, shards); physical_gpu_seconds = the physical GPU-time charged
        # (= gpu_seconds for whole GPUs)
        ("sharing", "VARCHAR"),
        ("slice_profile", "VARCHAR"),
        ("slices", "BIGINT"),
        ("physical_gpu_seconds", "DECIMAL(18,3)"),
        # the share of the node's physical GPUs held while it runs (capacity sweeps): gpus; MIG
        # instances x their fraction; shared units / units per GPU (NULL: units per GPU unknown)
        ("capacity_gpus", "DOUBLE"),
        ("slurm_user", "VARCHAR"),
        ("slurm_account", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("k8s_namespace", "VARCHAR"),
        ("k8s_service_account", "VARCHAR"),
        ("kueue_queue", "VARCHAR"),
        ("kueue_cluster_queue", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("identity_evidence", "VARCHAR"),
        # which source named the owner: identity_map, slurm_assoc, namespace_labels or
        # unattributed (resolve_identity.sql; docs/accounting.md)
        ("identity_source", "VARCHAR"),
        ("outcome", "VARCHAR"),
        ("evidence", "VARCHAR"),
    ),
    key=("day", "domain", "source_key", "node"),
    doc="The ledger: one row per charged allocation interval per node per UTC day, with the "
    "resolved owner. Intervals are cut at UTC midnight so each row has one daily partition.",
)

# --- Kueue quota history (models/kueue_quota.py; docs/kubernetes.md "Kueue quota history") ---

_KUEUE_QUOTA_FIGURES = (
    ("covered_seconds", "DOUBLE"),  # seconds the quota gauges covered (cohort: its queues' max)
    ("nominal_gpu_hours", "DOUBLE"),  # time-weighted nominal quota
    ("usage_gpu_hours", "DOUBLE"),
    ("reservation_gpu_hours", "DOUBLE"),
    ("borrowed_gpu_hours", "DOUBLE"),  # usage above nominal quota
    ("lendable_gpu_hours", "DOUBLE"),  # unused nominal quota, capped by the lending limit
    ("lent_gpu_hours", "DOUBLE"),  # of the lendable, what the cohort's borrowers took
    ("quota_used_share", "DOUBLE"),  # usage / nominal GPU-hours; null when nominal is 0
    ("pending_active_seconds", "DOUBLE"),  # seconds with > 0 active pending (queues only)
    ("pending_inadmissible_seconds", "DOUBLE"),
)

KUEUE_QUOTA_HOURLY = Table(
    "kueue_quota_hourly",
    (
        ("day", "DATE"),
        ("hour_start", "TIMESTAMP"),
        ("cluster", "VARCHAR"),
        ("scope", "VARCHAR"),  # queue | cohort
        ("cohort", "VARCHAR"),  # cohort rows: the cohort, or a queue without one: its name
        ("cluster_queue", "VARCHAR"),  # null on cohort rows
        ("flavor", "VARCHAR"),
        ("resource", "VARCHAR"),
        ("known", "BOOLEAN"),  # false: no samples that hour (figures null, never 0 %)
        ("borrowing_limit_gpus", "DOUBLE"),  # last in the hour; null when unset (±Inf, none)
        ("lending_limit_gpus", "DOUBLE"),
        *_KUEUE_QUOTA_FIGURES,
    ),
    key=("cluster", "hour_start", "scope", "cohort", "cluster_queue", "flavor", "resource"),
    doc="Kueue quota per UTC hour for each ClusterQueue and cohort (GPU resources, per "
    "flavor): nominal quota, usage, reservation, borrowed and lent GPU-hours, share of quota "
    "used, seconds with pending workloads and the seconds covered (docs/kubernetes.md).",
)

KUEUE_QUOTA_WEEKLY = Table(
    "kueue_quota_weekly",
    (
        ("week_start", "DATE"),  # Monday (ISO week)
        ("week", "VARCHAR"),  # YYYY-Www
        ("cluster", "VARCHAR"),
        ("scope", "VARCHAR"),
        ("cohort", "VARCHAR"),
        ("cluster_queue", "VARCHAR"),
        ("flavor", "VARCHAR"),
        ("resource", "VARCHAR"),
        ("hours", "BIGINT"),  # hourly rows of the week
        ("known_hours", "BIGINT"),  # of them with samples; figures are theirs
        *_KUEUE_QUOTA_FIGURES,
    ),
    key=("cluster", "week_start", "scope", "cohort", "cluster_queue", "flavor", "resource"),
    doc="kueue_quota_hourly summed per ISO week over its known hours; quota_used_share is the "
    "week's usage over nominal GPU-hours (\"average % of quota used\").",
)

# --- hourly usage (models/sql/gpu_usage_hourly*.sql, node_usage_hourly.sql) ---
# Rebuilt per UTC day by build_gpu_usage_hourly; GPU-seconds: allocated exact to the second,
# measured/busy/idle utilization-weighted, summed exactly in DECIMAL (a rebuild changes nothing).

_USAGE_COLUMNS = (
    ("allocated_gpu_seconds", "BIGINT"),
    ("measured_gpu_seconds", "DECIMAL(18,6)"),
    ("busy_gpu_seconds", "DECIMAL(18,6)"),
    ("idle_gpu_seconds", "DECIMAL(18,6)"),
)

ALLOCATION_USAGE_HOURLY = Table(
    "allocation_usage_hourly",
    (
        ("day", "DATE"),
        ("hour", "TIMESTAMP"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("source_key", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("name", "VARCHAR"),
        ("start_ts", "TIMESTAMP"),
        ("gpus", "BIGINT"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        *_USAGE_COLUMNS,
    ),
    key=("day", "domain", "source_key", "node", "start_ts", "hour"),
    doc="One row per allocations row per UTC hour it overlaps (day, domain, source_key, node, "
    "start_ts name the allocations row): allocated GPU-seconds clipped to the hour, and the "
    "dcgm-exporter readings of that allocation's own GPUs inside its own interval.",
)

GPU_USAGE_HOURLY = Table(
    "gpu_usage_hourly",
    (
        ("hour", "TIMESTAMP"),
        ("day", "DATE"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        *_USAGE_COLUMNS,
        ("allocations", "BIGINT"),
    ),
    key=("hour", "domain", "cluster", "pool", "node", "gpu_model", "person", "team",
         "cost_centre"),
    doc="GPU usage per UTC hour, domain, cluster, pool (Slurm partition / node pool), node, GPU "
    "model and owner: allocated, measured (covered by dcgm data), busy and idle GPU-seconds.",
)

NODE_USAGE_HOURLY = Table(
    "node_usage_hourly",
    (
        ("hour", "TIMESTAMP"),
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("capacity_gpus", "BIGINT"),
        ("capacity_gpu_seconds", "BIGINT"),
        ("allocated_gpu_seconds", "BIGINT"),
        ("slurm_gpu_seconds", "BIGINT"),
        ("kubernetes_gpu_seconds", "BIGINT"),
        ("unallocated_gpu_seconds", "BIGINT"),
        ("measured_gpu_seconds", "DECIMAL(18,6)"),
        ("busy_gpu_seconds", "DECIMAL(18,6)"),
    ),
    key=("hour", "node"),
    doc="Per node and UTC hour: inventory capacity, GPU-seconds allocated by both schedulers, "
    "unallocated (capacity - allocated; negative only when over-allocated) and what "
    "dcgm-exporter measured busy on the node's GPUs, whoever held them.",
)

_GS = "DECIMAL(38,6)"

GPU_CONSERVATION_HOURLY = Table(
    "gpu_conservation_hourly",
    (
        ("hour", "TIMESTAMP"),
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("capacity_gpus", "DOUBLE"),
        ("capacity_gpu_seconds", _GS),
        ("charged_gpu_seconds", _GS),
        ("charged_slurm_gpu_seconds", _GS),
        ("charged_kubernetes_gpu_seconds", _GS),
        ("conflict_gpu_seconds", _GS),
        ("infrastructure_gpu_seconds", _GS),
        ("unaccounted_gpu_seconds", _GS),
        ("idle_gpu_seconds", _GS),
        ("held_gpu_seconds", _GS),
        ("excess_gpu_seconds", _GS),
        ("invoiced_gpu_seconds", _GS),
        ("unknown_holder_busy_gpu_seconds", _GS),
        ("unaccounted_gpu_uuids", "VARCHAR[]"),
        ("unaccounted_busy_share", "DOUBLE"),
        ("unaccounted_hints", "VARCHAR[]"),
        ("cross_scheduler", "BOOLEAN"),
    ),
    key=("hour", "node"),
    doc="Where every physical GPU-second went, per node and UTC hour: capacity = charged + "
    "conflict + infrastructure + unaccounted + idle; held (every holder's physical share, as "
    "invoiced) = charged + conflict + excess (models/sql/gpu_conservation_hourly.sql, "
    "docs/accounting.md \"Conservation\").",
)

GPU_CONSERVATION_GPU_HOURLY = Table(
    "gpu_conservation_gpu_hourly",
    (
        ("hour", "TIMESTAMP"),
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_uuid", "VARCHAR"),
        ("gpu_index", "INTEGER"),
        ("capacity_gpu_seconds", _GS),
        ("observed_gpu_seconds", _GS),
        ("charged_gpu_seconds", _GS),
        ("conflict_gpu_seconds", _GS),
        ("infrastructure_gpu_seconds", _GS),
        ("unaccounted_gpu_seconds", _GS),
        ("idle_gpu_seconds", _GS),
        ("not_observed_gpu_seconds", _GS),
        ("busy_gpu_seconds", _GS),
        ("holders", "VARCHAR[]"),
    ),
    key=("hour", "node", "gpu_uuid"),
    doc="Where each physical GPU's seconds went, per GPU and UTC hour, as dcgm-exporter's "
    "readings place the holders: capacity (3,600) = charged + conflict + infrastructure + "
    "unaccounted + idle + not_observed; unaccounted adds up to gpu_conservation_hourly's per "
    "node; holders names the allocations rows (domain|source_key) behind the charged seconds "
    "(models/sql/gpu_conservation_gpu_hourly.sql, docs/accounting.md \"Conservation\").",
)

# Daily rollups of the two above, rebuilt with them (same days, same transaction): the
# dashboards read them for ranges drawn per day.
NODE_USAGE_DAILY = Table(
    "node_usage_daily",
    (
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("capacity_gpu_seconds", "BIGINT"),
        ("allocated_gpu_seconds", "BIGINT"),
        ("slurm_gpu_seconds", "BIGINT"),
        ("kubernetes_gpu_seconds", "BIGINT"),
        ("unallocated_gpu_seconds", "BIGINT"),
        ("measured_gpu_seconds", "DECIMAL(18,6)"),
        ("busy_gpu_seconds", "DECIMAL(18,6)"),
    ),
    key=("day", "node"),
    doc="node_usage_hourly summed per node and UTC day.",
)

GPU_USAGE_DAILY = Table(
    "gpu_usage_daily",
    (
        ("day", "DATE"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        *_USAGE_COLUMNS,
    ),
    key=("day", "domain", "cluster", "pool", "gpu_model", "person", "team", "cost_centre"),
    doc="gpu_usage_hourly summed per UTC day, domain, cluster, pool, GPU model and owner (over "
    "hours and nodes; no allocation count, which would count a job once per hour).",
)

# --- data-quality gate (models/quality.py, models/sql/data_quality_daily.sql) ---

DATA_QUALITY_DAYS = Table(
    "data_quality_days",
    (
        ("cluster", "VARCHAR"),
        ("day", "DATE"),
        ("allocated_gpu_seconds", "BIGINT"),
        ("measured_gpu_seconds", "DECIMAL(18,6)"),
        # measured / allocated; NULL: the cluster has no dcgm-exporter samples at all
        ("sample_coverage", "DOUBLE"),
        # longest run of missing 1-minute buckets on a node holding allocations that day
        ("longest_scrape_gap_minutes", "DOUBLE"),
        ("scrape_gap_node", "VARCHAR"),
        ("jobs_and_pods", "BIGINT"),
        ("attributed_jobs_and_pods", "BIGINT"),
        ("attributed_share", "DOUBLE"),
        ("unattributed_gpu_seconds", "BIGINT"),
        ("unknown_nodes", "BIGINT"),
        ("unknown_node_names", "VARCHAR"),
        # sreport window holding the day: sum |ours - sreport| / ours; NULL: no sreport window
        ("sreport_window", "VARCHAR"),
        ("sreport_difference", "DOUBLE"),
        ("k8s_warnings", "BIGINT"),
        ("k8s_rejects", "BIGINT"),
        # GPU-time both schedulers held on one node while the pods' GPUs were unknown: per
        # (Slurm run, pod) pair, the fewer GPUs x their common time (double scheduling there is
        # neither provable nor excluded at GPU level); the nodes concerned
        ("unverified_overlap_gpu_seconds", "BIGINT"),
        ("unverified_overlap_nodes", "VARCHAR"),
        ("provisional", "BOOLEAN"),
        ("reasons", "VARCHAR"),  # '; '-joined, each "measure: expected …, found …"
    ),
    key=("cluster", "day"),
    doc="The data-quality gate: per cluster and UTC day, how much of the charged GPU-time the "
    "sources cover (dcgm samples, scrape gaps, owners, inventory, sreport, Kubernetes ingest "
    "warnings and rejects). A day beyond a `[gpuledger.quality]` threshold is provisional, with "
    "its reasons; invoice lines with GPU-time of such a day carry `provisional` "
    "(docs/accounting.md).",
)

# --- detectors (models/incidents.py, models/sql/detect_*.sql, bridge_pairs.sql) ---

INCIDENTS = Table(
    "incidents",
    (
        ("incident_id", "VARCHAR"),
        ("day", "DATE"),
        ("kind", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_uuids", "VARCHAR[]"),
        ("gpus", "BIGINT"),
        ("start_ts", "TIMESTAMP"),
        ("end_ts", "TIMESTAMP"),
        ("gpu_seconds", "BIGINT"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("cost", "DECIMAL(18,2)"),
        ("currency", "VARCHAR"),
        ("slurm_job", "VARCHAR"),
        ("k8s_workload", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("other_person", "VARCHAR"),
        ("other_team", "VARCHAR"),
        ("other_cost_centre", "VARCHAR"),
        ("evidence_level", "VARCHAR"),
        ("share", "DOUBLE"),
        ("detail", "VARCHAR"),
        ("evidence", "VARCHAR"),
    ),
    key=("incident_id",),
    doc="Detected incidents (double_scheduled, partial_gang, idle_allocation), one row each, "
    "filed under the UTC day they started: where, which GPUs, when, the overlapped or wasted "
    "GPU-seconds and their cost, the owners and the evidence rows (docs/detectors.md).",
)

BRIDGE_PAIRS = Table(
    "bridge_pairs",
    (
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("slurm_run_key", "VARCHAR"),
        ("slurm_job", "VARCHAR"),
        ("slurm_nodes", "VARCHAR"),
        ("slurm_start", "TIMESTAMP"),
        ("slurm_end", "TIMESTAMP"),
        ("slurm_gpus", "BIGINT"),
        ("k8s_namespace", "VARCHAR"),
        ("pod", "VARCHAR"),
        ("pod_uid", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pod_start", "TIMESTAMP"),
        ("pod_end", "TIMESTAMP"),
        ("pod_gpus", "BIGINT"),
        ("matched", "BOOLEAN"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("evidence", "VARCHAR"),
    ),
    key=("slurm_run_key", "k8s_namespace", "pod", "pod_uid", "node"),
    doc="slurm-bridge pairs: a representative Slurm run and the pod its AdminComment names are "
    "one workload (charged once, kubernetes domain, to the pod's owner), not a conflict.",
)
