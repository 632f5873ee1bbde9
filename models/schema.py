"""Table definitions: the single source of table and column names.

Times are UTC ``TIMESTAMP`` (naive, meaning UTC). Periods are half-open ``[start, end)``.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A table of the ledger: its name, columns (name -> DuckDB type) and key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...] = ()
    doc: str = ""

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c}" {t}' for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"


INGEST_RUNS = Table(
    "ingest_runs",
    (
        ("source", "VARCHAR"),
        ("partition_key", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
        ("rows_loaded", "BIGINT"),
        ("rows_rejected", "BIGINT"),
        ("detail", "VARCHAR"),
    ),
    key=("source", "partition_key"),
    doc="One row per successful load of a source partition; feeds the freshness line.",
)

BUILDS_UNFINISHED = Table(
    "builds_unfinished",
    (
        ("first_day", "DATE"),
        ("last_day", "DATE"),
        ("started_at", "TIMESTAMP"),
        ("pid", "BIGINT"),
        ("host", "VARCHAR"),
    ),
    key=("first_day", "last_day", "started_at"),
    doc="Builds that started and have not finished: while a row is here the derived tables "
    "(allocations, usage, invoices, incidents) may disagree, and publishing is refused. The "
    "next build of those days repairs them and removes the row.",
)

BUILT_DAYS = Table(
    "built_days",
    (
        ("day", "DATE"),
        ("built_at", "TIMESTAMP"),
    ),
    key=("day",),
    doc="The UTC days whose derived tables a build finished, and when. A later build of a "
    "neighbouring day rebuilds them too: their figures read that day's data (readings and "
    "incidents across midnight, pods placed by the next day's samples), so whatever order the "
    "days arrive in gives one ledger (docs/accounting.md \"Order of arrival\").",
)

DAYS_TO_REBUILD = Table(
    "days_to_rebuild",
    (
        ("day", "DATE"),
        ("reason", "VARCHAR"),
        ("marked_at", "TIMESTAMP"),
    ),
    key=("day", "reason"),
    doc="Built days whose inputs a load changed afterwards (a sacct pull that found a run of "
    "the day changed or late, a Kubernetes window re-read): the next build of any days also "
    "rebuilds these, and the days beside them, and clears the marks (docs/accounting.md "
    "\"Order of arrival\").",
)

SOURCE_FILES = Table(
    "source_files",
    (
        ("kind", "VARCHAR"),
        ("path", "VARCHAR"),
        ("sha256", "VARCHAR"),
        ("bytes", "BIGINT"),
        ("lines", "BIGINT"),
        ("loaded_at", "TIMESTAMP"),
    ),
    key=("kind", "path"),
    doc="Every input file loaded, with its hash, so a figure can be traced to its file.",
)

NODES = Table(
    "nodes",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_count", "INTEGER"),
        ("gpu_index", "INTEGER"),
        ("gpu_uuid", "VARCHAR"),
        ("slurm_partition", "VARCHAR"),
    ),
    key=("cluster", "node", "gpu_index"),
    doc="GPU inventory: one row per GPU, as of now (the open rows of node_inventory; a node "
    "the nodes file lists has the file's rows, with UUIDs; a node only a source knows has "
    "gpu_uuid NULL).",
)

SLURM_NODE_PODS = Table(
    "slurm_node_pods",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pod_namespace", "VARCHAR"),
        ("pod_name", "VARCHAR"),
        ("k8s_node", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "node", "pod_namespace", "pod_name"),
    doc="Slurm nodes that are Slinky slurmd pods, as `scontrol show node` Comment= names them "
    "({\"namespace\":…,\"podName\":…,\"node\":…}, slurm-operator docs/usage/topology.md): "
    "which pod a Slurm NodeName is (models/sql/slurm_agent_pods.sql), and the reads that "
    "showed it.",
)

NODE_INVENTORY = Table(
    "node_inventory",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_count", "INTEGER"),
        ("pool", "VARCHAR"),
        ("slurm_partition", "VARCHAR"),
        ("gpu_product", "VARCHAR"),
        ("source", "VARCHAR"),
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("cluster", "node", "gpu_model", "valid_from"),
    doc="GPU nodes over time: one row per cluster, node and GPU model for each span in which "
    "its count, pool and partitions stayed the same; valid_to NULL = still so. pool is slurm "
    "(scontrol only), kubernetes (kube-state-metrics only) or shared (both); source says who "
    "decided: scontrol, ksm, scontrol+ksm or nodes_file (the site's file overrides the sources "
    "per node). A change closes the row (valid_to = when it was seen) and opens a new one; a "
    "re-read with nothing changed changes nothing (gpuledger/reference_ingest.py).",
)

NODE_GPU_SLICES = Table(
    "node_gpu_slices",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("sharing", "VARCHAR"),  # mig, time_slicing, mps, shard
        ("slice_profile", "VARCHAR"),  # MIG profile (1g.10gb); NULL for the other modes
        ("units", "INTEGER"),  # capacity: instances of the profile, replicas, shards, MPS units
        ("physical_gpus", "INTEGER"),
        ("units_per_gpu", "INTEGER"),  # replicas/shards/MPS units per GPU; MIG: the profile's
        ("gpu_slices", "INTEGER"),  # MIG: compute slices per physical GPU (7, or 4 on A30)
        ("mig_config", "VARCHAR"),  # nvidia.com/mig.config
        ("source", "VARCHAR"),  # ksm, scontrol
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("cluster", "node", "sharing", "slice_profile", "source", "valid_from"),
    doc="Shared GPUs on a node over time (docs/shared-gpus.md): one row per sharing mode and MIG "
    "profile with its capacity, from kube-state-metrics (GPU Feature Discovery node labels, "
    "kube_node_status_capacity) or scontrol (Gres=). Effective-dated like node_inventory: a "
    "change (a MIG layout changed mid-day) closes the row and opens a new one.",
)

IDENTITY_CANDIDATES = Table(
    "identity_candidates",
    (
        ("source", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("source_kind", "VARCHAR"),
        ("key", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("evidence", "VARCHAR"),
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("source", "cluster", "source_kind", "key", "valid_from"),
    doc="Owners the sources name, used where identity_map names none: slurm_assoc (sacctmgr: "
    "a Slurm user is its own person, an account its team) and namespace_labels "
    "(kube_namespace_labels with the site's namespace_labels keys). Effective-dated like "
    "node_inventory; the first row of a key is valid from the start (valid_from NULL).",
)

IDENTITY_MAP = Table(
    "identity_map",
    (
        ("source_kind", "VARCHAR"),
        ("key", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
    ),
    key=("source_kind", "key", "valid_from"),
    doc="Raw identity keys to person, team, cost centre (see docs/contracts.md).",
)

SLURM_ACCOUNTS = Table(
    "slurm_accounts",
    (("account", "VARCHAR"), ("parent", "VARCHAR")),
    key=("account",),
    doc="The Slurm account tree.",
)

RATE_CARD = Table(
    "rate_card",
    (
        ("gpu_model", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
    ),
    key=("gpu_model", "domain", "qos", "valid_from"),
    doc="Effective-dated GPU-hour rates; empty domain or qos means any.",
)

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
    "(gpuledger/workload_history.py).",
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

NODE_ALIASES = Table(
    "node_aliases",
    (
        ("alias", "VARCHAR"),
        ("canonical", "VARCHAR"),
    ),
    key=("alias",),
    doc="The site's node name aliases (raw name as a source prints it -> canonical name), "
    "from the config's node_aliases; the first rule of gpuledger/nodenames.py.",
)

NODE_NAMES = Table(
    "node_names",
    (
        ("raw", "VARCHAR"),
        ("canonical", "VARCHAR"),
        ("rule", "VARCHAR"),
        ("source", "VARCHAR"),
        ("first_seen_at", "TIMESTAMP"),
    ),
    key=("raw",),
    doc="Every node name a source printed, once, with the canonical name every table uses "
    "and the rule that decided it (alias, short_name, as_is, kept_whole).",
)

REJECTS = Table(
    "rejects",
    (
        ("source", "VARCHAR"),
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
        ("field", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("raw", "VARCHAR"),
    ),
    key=("source", "source_file", "line_no"),
    doc="Input lines that could not be loaded: kept and counted, never dropped.",
)

_GPU_TYPES = "STRUCT(model VARCHAR, gpus BIGINT)[]"

SLURM_RUNS = Table(
    "slurm_runs",
    (
        ("run_key", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("job_id_raw", "BIGINT"),
        ("array_job_id", "BIGINT"),
        ("array_task_id", "BIGINT"),
        ("array_task_range", "VARCHAR"),
        ("het_job_id", "BIGINT"),
        ("het_offset", "BIGINT"),
        ("job_name", "VARCHAR"),
        ("user", "VARCHAR"),
        ("uid", "BIGINT"),
        ("account", "VARCHAR"),
        ("partition", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("state", "VARCHAR"),
        ("cancelled_by_uid", "BIGINT"),
        ("exit_code", "BIGINT"),
        ("exit_signal", "BIGINT"),
        ("derived_exit_code", "BIGINT"),
        ("derived_exit_signal", "BIGINT"),
        ("submit", "TIMESTAMP"),
        ("eligible", "TIMESTAMP"),
        ("start", "TIMESTAMP"),
        ("end", "TIMESTAMP"),
        ("elapsed_s", "BIGINT"),
        ("timelimit_s", "BIGINT"),
        ("alloc_cpus", "BIGINT"),
        ("alloc_nodes", "BIGINT"),
        ("nodelist", "VARCHAR"),
        ("nodes", "VARCHAR[]"),
        ("alloc_tres", "VARCHAR"),
        ("alloc_gpus", "BIGINT"),
        ("alloc_gpu_types", _GPU_TYPES),
        # gres/shard=N and gres/mps=N of AllocTRES (docs/shared-gpus.md)
        ("alloc_shards", "BIGINT"),
        ("alloc_mps", "BIGINT"),
        ("alloc_mem_bytes", "BIGINT"),
        ("alloc_billing", "BIGINT"),
        ("req_tres", "VARCHAR"),
        ("req_gpus", "BIGINT"),
        ("req_mem_bytes", "BIGINT"),
        ("reservation", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("flags", "VARCHAR"),
        ("wckey", "VARCHAR"),
        ("admin_comment", "VARCHAR"),
        ("bridge_pods", "VARCHAR[]"),
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
        ("observed_until", "TIMESTAMP"),
        ("load_id", "BIGINT"),
    ),
    key=("run_key",),
    doc="One row per run of a Slurm allocation (a requeued job has several), as sacct last "
    "reported it; observed_until is the end of the sacct query that saw it (a run still going "
    "is charged up to there); load_id is the sacct load that stored the row (sacct_loads: when "
    "its source was observed; only a record observed as late or later replaces it, "
    "docs/slurm.md).",
)

SACCT_LOADS = Table(
    "sacct_loads",
    (
        ("load_id", "BIGINT"),
        ("source_file", "VARCHAR"),
        ("observed_at", "TIMESTAMP"),
    ),
    key=("load_id",),
    doc="The sacct loads whose rows are in slurm_runs, with when their source was observed (a "
    "dump's --as-of, else its latest instant; a live sacct query's time): a run's record is "
    "replaced only by one observed as late or later (monotonic ingest, docs/slurm.md).",
)

SLURM_STEPS = Table(
    "slurm_steps",
    (
        ("run_key", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("step_job_id", "VARCHAR"),
        ("job_id_raw", "BIGINT"),
        ("step_id", "VARCHAR"),
        ("step_name", "VARCHAR"),
        ("account", "VARCHAR"),
        ("state", "VARCHAR"),
        ("cancelled_by_uid", "BIGINT"),
        ("exit_code", "BIGINT"),
        ("exit_signal", "BIGINT"),
        ("start", "TIMESTAMP"),
        ("end", "TIMESTAMP"),
        ("elapsed_s", "BIGINT"),
        ("alloc_cpus", "BIGINT"),
        ("alloc_nodes", "BIGINT"),
        ("nodelist", "VARCHAR"),
        ("nodes", "VARCHAR[]"),
        ("alloc_tres", "VARCHAR"),
        ("alloc_gpus", "BIGINT"),
        ("alloc_gpu_types", _GPU_TYPES),
        ("alloc_mem_bytes", "BIGINT"),
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
    ),
    key=("cluster", "step_job_id", "start"),
    doc="One row per job step (.batch, .extern, .0 …); never charged (the allocation is).",
)

SLURM_NODE_ALLOCATIONS = Table(
    "slurm_node_allocations",
    (
        ("run_key", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("job_id_raw", "BIGINT"),
        ("node", "VARCHAR"),
        ("node_index", "BIGINT"),
        ("gpus", "BIGINT"),
        ("gpu_model", "VARCHAR"),
        ("start", "TIMESTAMP"),
        ("end", "TIMESTAMP"),
        ("gpus_source", "VARCHAR"),
        # shared GPUs (docs/shared-gpus.md): mig, shard or mps (NULL: whole GPUs) and the MIG
        # profile; gpus then counts MIG instances, shards or MPS units
        ("sharing", "VARCHAR"),
        ("slice_profile", "VARCHAR"),
    ),
    key=("run_key", "node", "sharing", "slice_profile"),
    doc="One row per (run, node) and, for shared GPUs, per sharing mode and MIG profile (a run "
    "holding whole GPUs and MIG instances has a row of each): the GPUs a run held on each node "
    "as split at load: the total "
    "on a single node (gpus_source 'single_node'), else an even split of AllocTRES "
    "('even_split'); stg_slurm_allocations takes the counts of an scontrol snapshot instead "
    "where one was loaded (docs/slurm.md).",
)

SLURM_GPU_INDICES = Table(
    "slurm_gpu_indices",
    (
        ("job_id", "VARCHAR"),
        ("job_id_raw", "BIGINT"),
        ("node", "VARCHAR"),
        ("gpu_index", "BIGINT"),
        ("gpu_model", "VARCHAR"),
        # shared GPUs (docs/shared-gpus.md): mig (gpu_index is the MIG instance's GRES index, not
        # the physical GPU's), mps (gpu_index is the GPU's; units = MPS units); NULL: whole GPU
        ("sharing", "VARCHAR"),
        ("slice_profile", "VARCHAR"),
        ("units", "BIGINT"),
        ("start", "TIMESTAMP"),
        ("end", "TIMESTAMP"),
        ("state", "VARCHAR"),
        ("observed_at", "TIMESTAMP"),
        ("source_file", "VARCHAR"),
        ("line_no", "BIGINT"),
    ),
    key=("job_id_raw", "node", "gpu_index", "observed_at"),
    doc="Which GPUs Slurm gave a job: one row per (job, node, GPU index) per `scontrol show job "
    "-d` snapshot (observed_at); the index maps to a UUID through nodes (node, gpu_index).",
)

SREPORT_UTILIZATION = Table(
    "sreport_utilization",
    (
        ("cluster", "VARCHAR"),
        ("tres_name", "VARCHAR"),
        ("allocated_seconds", "BIGINT"),
        ("down_seconds", "BIGINT"),
        ("planned_down_seconds", "BIGINT"),
        ("idle_seconds", "BIGINT"),
        ("planned_seconds", "BIGINT"),
        ("over_committed_seconds", "BIGINT"),
        ("reported_seconds", "BIGINT"),
        ("report_start", "TIMESTAMP"),
        ("report_end", "TIMESTAMP"),
        ("unit", "VARCHAR"),
    ),
    key=("cluster", "tres_name", "report_start", "report_end"),
    doc="sreport cluster utilization for a window, in TRES-seconds.",
)

SREPORT_ACCOUNT_USAGE = Table(
    "sreport_account_usage",
    (
        ("cluster", "VARCHAR"),
        ("account", "VARCHAR"),
        ("login", "VARCHAR"),
        ("proper_name", "VARCHAR"),
        ("tres_name", "VARCHAR"),
        ("used_seconds", "BIGINT"),
        ("is_account_total", "BOOLEAN"),
        ("report_start", "TIMESTAMP"),
        ("report_end", "TIMESTAMP"),
        ("unit", "VARCHAR"),
    ),
    key=("cluster", "account", "login", "tres_name", "report_start", "report_end"),
    doc="sreport AccountUtilizationByUser for a window; account rows (login '') are subtree "
    "totals.",
)

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

# --- kubernetes tables ---
# Written by gpuledger/k8s_ingest.py (Prometheus raw samples through connectors/kubernetes) and
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

CHARGEBACK = Table(
    "chargeback_periods",
    (
        ("period_kind", "VARCHAR"),
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("cost_centre", "VARCHAR"),
        ("team", "VARCHAR"),
        ("person", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("gpu_seconds", "BIGINT"),
        ("gpu_hours", "DECIMAL(18,6)"),
        ("allocations", "BIGINT"),
        ("amount", "DECIMAL(18,2)"),
        ("measured_gpu_hours", "DECIMAL(18,6)"),
        ("busy_gpu_hours", "DECIMAL(18,6)"),
        ("idle_gpu_hours", "DECIMAL(18,6)"),
        # shared GPUs: units (MIG instances, replicas, shards) x hours in the line; 0: whole
        # GPUs only (docs/shared-gpus.md). Last: closes frozen before it have it NULL
        ("slice_hours", "DECIMAL(18,6)"),
    ),
    key=("period_kind", "period", "cost_centre", "team", "person", "domain", "gpu_model",
         "rate_valid_from", "rate_per_gpu_hour"),
    doc="Invoice lines of every period kind (day, ISO week, month) and owner (the view "
    "`chargeback` shows the ISO-week lines); one rate per line, amount "
    "rounded once per line (on allocated GPU-seconds only). measured/busy/idle GPU-hours are "
    "shown beside it: the allocated hours dcgm-exporter covered, and their busy and idle parts.",
)

SHARED_GPU_DAILY = Table(
    "shared_gpu_daily",
    (
        ("day", "DATE"),
        ("cluster", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("sharing", "VARCHAR"),  # whole, mig, time_slicing, mps, shard
        ("slice_profile", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("currency", "VARCHAR"),  # of the rate; '' when unpriced
        ("allocations", "BIGINT"),
        ("slice_seconds", "BIGINT"),  # units (instances, replicas, shards) x seconds
        ("physical_gpu_seconds", "DECIMAL(18,3)"),
        ("busy_slice_seconds", "DECIMAL(18,6)"),
        ("amount", "DECIMAL(18,2)"),
        ("cost_per_busy_slice_hour", "DOUBLE"),
    ),
    key=("day", "cluster", "domain", "sharing", "slice_profile", "gpu_model", "currency"),
    doc="Shared GPUs per day (docs/shared-gpus.md): allocations, slice-seconds, the physical "
    "GPU-seconds charged, busy slice-seconds and the amount per sharing mode and MIG profile, "
    "whole GPUs included (sharing 'whole'), so the share of the estate that runs shared and the "
    "cost per busy slice-hour read off one table.",
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

# --- closed periods (models/closing.py; docs/accounting.md "Closed periods and adjustments") ---

CLOSED_PERIODS = Table(
    "closed_periods",
    (
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("period_end", "DATE"),
        ("revision", "INTEGER"),
        ("closed_at", "TIMESTAMP"),
        ("closed_by", "VARCHAR"),
        ("run_id", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("lines", "BIGINT"),
        ("gpu_seconds", "BIGINT"),
        ("amount", "DECIMAL(18,2)"),
        ("checksum", "VARCHAR"),
    ),
    key=("period", "revision"),
    doc="Every close of an ISO week (period YYYY-Www, [period_start, period_end)): revision 1 "
    "is the weekly close, each explicit re-close adds one with who and why. The latest revision's "
    "frozen lines are the week's invoice; checksum is a sha256 of those lines and of the "
    "adjustment lines the week carries.",
)

FROZEN_INVOICE_LINES = Table(
    "frozen_invoice_lines",
    (("closed_period", "VARCHAR"), ("revision", "INTEGER"), *CHARGEBACK.columns),
    key=("closed_period", "revision", *CHARGEBACK.key),
    doc="The week and day invoice lines of a closed week exactly as issued at its close "
    "(revision of closed_periods); late data never changes them (it lands in "
    "invoice_adjustments).",
)

INVOICE_ADJUSTMENTS = Table(
    "invoice_adjustments",
    (
        ("period", "VARCHAR"),
        ("period_start", "DATE"),
        ("original_period", "VARCHAR"),
        ("original_period_start", "DATE"),
        ("cost_centre", "VARCHAR"),
        ("team", "VARCHAR"),
        ("person", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("gpu_seconds", "BIGINT"),
        ("gpu_hours", "DECIMAL(18,6)"),
        ("amount", "DECIMAL(18,2)"),
        ("reason", "VARCHAR"),
        ("run_id", "VARCHAR"),
        ("created_at", "TIMESTAMP"),
    ),
    key=("period", "original_period", "cost_centre", "team", "person", "domain", "gpu_model",
         "rate_valid_from", "rate_per_gpu_hour", "currency"),
    doc="Adjustment lines: what late data changed in a closed week (original_period), per "
    "invoice line key, carried by the next open week (period): the rebuilt line minus the "
    "frozen line minus adjustments already carried by closed weeks. Signed GPU-seconds and "
    "amount; reason and run say why and who.",
)

# the allocation-level charges of a closed week, frozen by the close (models/focus.py,
# models/sql/focus_charges.sql; docs/focus.md): its FOCUS file reproduces what was issued
FROZEN_ALLOCATION_CHARGES = Table(
    "frozen_allocation_charges",
    (
        ("closed_period", "VARCHAR"),
        ("revision", "INTEGER"),
        ("day", "DATE"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("source_key", "VARCHAR"),
        ("job_id", "VARCHAR"),
        ("name", "VARCHAR"),
        ("node", "VARCHAR"),
        ("start_ts", "TIMESTAMP"),
        ("end_ts", "TIMESTAMP"),
        ("physical_gpu_model", "VARCHAR"),
        ("gpu_model", "VARCHAR"),  # the model priced (a MIG profile the rate card prices)
        ("profile_priced", "BOOLEAN"),
        ("sharing", "VARCHAR"),
        ("slice_profile", "VARCHAR"),
        ("slices", "BIGINT"),
        ("gpus", "BIGINT"),
        ("gpu_seconds", "BIGINT"),
        ("slurm_user", "VARCHAR"),
        ("slurm_account", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("k8s_namespace", "VARCHAR"),
        ("kueue_queue", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("rate_valid_from", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
        ("charged_ms", "BIGINT"),
        ("measured_gpu_seconds", "DECIMAL(38,6)"),
        ("busy_gpu_seconds", "DECIMAL(38,6)"),
    ),
    key=("closed_period", "revision", "day", "domain", "source_key", "node", "start_ts"),
    doc="The allocation pieces (a Slurm run or pod on one node and UTC day) a closed week's "
    "invoice lines charged, as they were at its close (revision of closed_periods): the FOCUS "
    "export of a closed week reads them, so it reproduces what was issued (docs/focus.md). "
    "charged_ms is what the rate multiplies; per invoice line they sum to its gpu_seconds and "
    "amount. A week closed before this table existed has none (exported at line grain).",
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

# --- alerts to the owners of idle GPUs (gpuledger/alerts/, docs/alerts.md)

ALERT_LOG = Table(
    "alert_log",
    (
        ("attempt_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("kind", "VARCHAR"),
        ("family", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("allocation", "VARCHAR"),
        ("workload", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpus", "VARCHAR[]"),
        ("incident_start", "TIMESTAMP"),
        ("idle_since", "TIMESTAMP"),
        ("as_of", "TIMESTAMP"),
        ("idle_minutes", "DOUBLE"),
        ("gpu_hours_idle", "DOUBLE"),
        ("cost", "DECIMAL(18,2)"),
        ("currency", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("recipients_to", "VARCHAR[]"),
        ("recipients_cc", "VARCHAR[]"),
        ("recipient_source", "VARCHAR"),
        ("link", "VARCHAR"),
        ("dry_run", "BOOLEAN"),
        ("status", "VARCHAR"),
        ("detail", "VARCHAR"),
        ("logged_at", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("attempt_id",),
    doc="Every alert gpuledger meant to send (one row per attempt): the dedupe key (family, "
    "allocation, node, incident start, level), what it said, to whom (recipient_source: "
    "person, team or admins), and the outcome: status pending (intent recorded, delivery "
    "under way or interrupted), sent, failed (retried next tick) or dry_run (logged only).",
)

ALERT_DELIVERIES = Table(
    "alert_deliveries",
    (
        ("attempt_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("channel", "VARCHAR"),
        ("ok", "BOOLEAN"),
        ("detail", "VARCHAR"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("attempt_id", "channel"),
    doc="Per alert attempt and channel (smtp, webhook) the outcome of the delivery: the "
    "server's reply, the HTTP status or the error.",
)

ALERT_ACTIONS = Table(
    "alert_actions",
    (
        ("action_id", "VARCHAR"),
        ("alert_key", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("allocation", "VARCHAR"),
        ("node", "VARCHAR"),
        ("command", "VARCHAR[]"),
        ("dry_run", "BOOLEAN"),
        ("status", "VARCHAR"),
        ("exit_code", "INTEGER"),
        ("stdout_tail", "VARCHAR"),
        ("stderr_tail", "VARCHAR"),
        ("started_at", "TIMESTAMP"),
        ("finished_at", "TIMESTAMP"),
    ),
    key=("action_id",),
    doc="The action hook ([gpuledger.alerts.action]): the command run once per idle incident "
    "(never through a shell), its exit code and the tails of its output; status pending, "
    "done, failed, timeout or dry_run (logged, not run).",
)

LAKE_CHANGES = Table(
    "lake_changes",
    (
        ("table_name", "VARCHAR"),
        ("cluster", "VARCHAR"),  # NULL: every cluster of the day
        ("day", "DATE"),
    ),
    key=("table_name", "cluster", "day"),
    doc="Partitions of the lake tables (docs/storage.md) written since the last publish, marked "
    "in the same transaction as the write: the next publish rewrites only these Parquet "
    "partitions and then clears the rows. cluster NULL means every cluster of that day.",
)

ALERT_TABLES: tuple[Table, ...] = (ALERT_LOG, ALERT_DELIVERIES, ALERT_ACTIONS)

SCHEMA_MIGRATIONS = Table(
    "schema_migrations",
    (
        ("version", "INTEGER"),
        ("name", "VARCHAR"),
        ("applied_at", "TIMESTAMP"),
        ("changes", "VARCHAR[]"),
    ),
    key=("version",),
    doc="Every migration applied to the ledger (models/migrations.py): its version, name, when "
    "and what it changed; the ledger's schema version is the highest (docs/storage.md, "
    "\"Upgrades\").",
)

ALL_TABLES: tuple[Table, ...] = (
    SCHEMA_MIGRATIONS,
    KUEUE_QUOTA_HOURLY,
    KUEUE_QUOTA_WEEKLY,
    CHARGEBACK,
    SHARED_GPU_DAILY,
    CLOSED_PERIODS,
    FROZEN_INVOICE_LINES,
    INVOICE_ADJUSTMENTS,
    FROZEN_ALLOCATION_CHARGES,
    ALLOCATIONS,
    ALLOCATION_USAGE_HOURLY,
    GPU_USAGE_HOURLY,
    NODE_USAGE_HOURLY,
    GPU_CONSERVATION_HOURLY,
    GPU_CONSERVATION_GPU_HOURLY,
    GPU_USAGE_DAILY,
    NODE_USAGE_DAILY,
    REJECTS,
    SLURM_NODE_PODS,
    NODE_ALIASES,
    NODE_NAMES,
    SLURM_RUNS,
    SACCT_LOADS,
    SLURM_STEPS,
    SLURM_NODE_ALLOCATIONS,
    SLURM_GPU_INDICES,
    SREPORT_UTILIZATION,
    SREPORT_ACCOUNT_USAGE,
    INGEST_RUNS,
    BUILDS_UNFINISHED,
    BUILT_DAYS,
    DAYS_TO_REBUILD,
    SOURCE_FILES,
    NODES,
    NODE_INVENTORY,
    NODE_GPU_SLICES,
    IDENTITY_MAP,
    IDENTITY_CANDIDATES,
    SLURM_ACCOUNTS,
    RATE_CARD,
    KUEUE_WORKLOADS_RAW,
    KUEUE_WORKLOAD_HISTORY,
    K8S_POD_GROUPS,
    *KUBERNETES_TABLES,
    INCIDENTS,
    BRIDGE_PAIRS,
    DATA_QUALITY_DAYS,
    *ALERT_TABLES,
    LAKE_CHANGES,
)


@dataclass(frozen=True)
class View:
    """A view of the ledger, created after the tables (operators query it like a table)."""

    name: str
    select: str
    doc: str = ""

    def ddl(self) -> str:
        return f"CREATE OR REPLACE VIEW {self.name} AS {self.select}"


# The invoice: one line per ISO week, owner, domain, GPU model and rate. Summing it never counts
# a GPU-second twice (chargeback_periods holds the same time as day, week and month lines).
_LINE_COLUMNS = ", ".join(f'"{c}"' for c in CHARGEBACK.column_names)

# What was invoiced: the ledger's lines, except the day and week lines of a closed week, which
# are the frozen lines of its latest close (month lines always follow the ledger).
# The one rule of the provisional mark: a line is provisional when GPU-time of its owner, domain
# and GPU model lies on a provisional (cluster, day) of data_quality_days inside its period.
_OWNER_KEYS = ("cost_centre", "team", "person", "domain", "gpu_model")
_SAME_OWNER = " AND ".join(f"l.{k} IS NOT DISTINCT FROM d.{k}" for k in _OWNER_KEYS)
_PROVISIONAL_MARKS = (
    f"provisional_days AS (SELECT DISTINCT a.day, a.cluster, q.reasons, "
    f"{', '.join('a.' + k for k in _OWNER_KEYS)} FROM allocations AS a "
    f"JOIN {DATA_QUALITY_DAYS.name} AS q ON q.cluster = a.cluster AND q.day = a.day "
    "WHERE q.provisional), "
    "periods AS (SELECT DISTINCT period_kind, period, period_start, "
    f"{', '.join(_OWNER_KEYS)}, CASE period_kind WHEN 'day' THEN period_start + 1 "
    "WHEN 'week' THEN period_start + 7 ELSE (period_start + INTERVAL 1 MONTH)::DATE END "
    "AS period_end FROM issued), "
    f"marks AS (SELECT l.period_kind, l.period, {', '.join('l.' + k for k in _OWNER_KEYS)}, "
    "string_agg(DISTINCT strftime(d.day, '%Y-%m-%d') || ' ' || d.cluster || ': ' || d.reasons, "
    "' | ' ORDER BY strftime(d.day, '%Y-%m-%d') || ' ' || d.cluster || ': ' || d.reasons) "
    "AS reasons FROM periods AS l JOIN provisional_days AS d ON d.day >= l.period_start "
    f"AND d.day < l.period_end AND {_SAME_OWNER} GROUP BY ALL)"
)

INVOICE_LINES_VIEW = View(
    "invoice_lines",
    f"WITH issued AS (SELECT {_LINE_COLUMNS} FROM chargeback_periods AS c "
    "WHERE c.period_kind = 'month' "
    "OR NOT EXISTS (SELECT 1 FROM closed_periods AS p WHERE c.period_start >= p.period_start "
    "AND c.period_start < p.period_end) "
    f"UNION ALL SELECT {_LINE_COLUMNS} FROM frozen_invoice_lines AS f WHERE f.revision = "
    "(SELECT max(p.revision) FROM closed_periods AS p WHERE p.period = f.closed_period)), "
    f"{_PROVISIONAL_MARKS} "
    "SELECT i.*, m.reasons IS NOT NULL AS provisional, m.reasons AS provisional_reasons "
    "FROM issued AS i LEFT JOIN marks AS m ON m.period_kind = i.period_kind "
    "AND m.period = i.period AND "
    + " AND ".join(f"m.{k} IS NOT DISTINCT FROM i.{k}" for k in _OWNER_KEYS),
    doc="The invoice lines as issued: chargeback_periods for open weeks and months, the frozen "
    "day and week lines (frozen_invoice_lines, latest revision) for closed weeks; "
    "`provisional` (with `provisional_reasons`: 'day cluster: reasons', ' | '-joined) when "
    "GPU-time of the line's owner, domain and GPU model lies on a provisional day of "
    "data_quality_days.",
)

CHARGEBACK_VIEW = View(
    "chargeback",
    "SELECT * FROM invoice_lines WHERE period_kind = 'week'",
    doc="The weekly invoice lines (ISO week, Monday 00:00 UTC) as issued: a closed week's "
    "frozen lines, an open week's lines from the ledger (invoice_lines where period_kind = "
    "'week').",
)

ALL_VIEWS: tuple[View, ...] = (INVOICE_LINES_VIEW, CHARGEBACK_VIEW)


def table(name: str) -> Table:
    """Look a table up by name."""
    for t in ALL_TABLES:
        if t.name == name:
            return t
    msg = f"expected one of the tables {[t.name for t in ALL_TABLES]}, found {name!r}"
    raise KeyError(msg)
