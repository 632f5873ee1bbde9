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
    doc="GPU inventory: one row per GPU.",
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
    ),
    key=("run_key",),
    doc="One row per run of a Slurm allocation (a requeued job has several), as sacct last "
    "reported it; observed_until is the end of the sacct query that saw it (a run still going "
    "is charged up to there).",
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
    ),
    key=("run_key", "node"),
    doc="One row per (run, node): the GPUs a run held on each node (even split of AllocTRES).",
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
        ("outcome", "VARCHAR"),
        ("evidence", "VARCHAR"),
    ),
    key=("day", "domain", "source_key", "node"),
    doc="The ledger: one row per charged allocation interval per node per UTC day, with the "
    "resolved owner. Intervals are cut at UTC midnight so each row has one daily partition.",
)

ALL_TABLES: tuple[Table, ...] = (
    ALLOCATIONS,
    REJECTS,
    SLURM_RUNS,
    SLURM_STEPS,
    SLURM_NODE_ALLOCATIONS,
    SREPORT_UTILIZATION,
    SREPORT_ACCOUNT_USAGE,
    INGEST_RUNS,
    SOURCE_FILES,
    NODES,
    IDENTITY_MAP,
    SLURM_ACCOUNTS,
    RATE_CARD,
    KUEUE_WORKLOADS_RAW,
)


def table(name: str) -> Table:
    """Look a table up by name."""
    for t in ALL_TABLES:
        if t.name == name:
            return t
    msg = f"expected one of the tables {[t.name for t in ALL_TABLES]}, found {name!r}"
    raise KeyError(msg)
