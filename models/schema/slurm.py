"""Slurm accounting as loaded: sacct runs and steps, their node and GPU allocations, sreport."""

from models.schema.core import Table

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
