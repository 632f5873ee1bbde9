"""Explicit Polars schemas of everything the Slurm connectors return.

Times are UTC instants as naive ``Datetime("us")`` (docs/contracts.md, "Times"). Durations are
whole seconds (``Int64``). Memory is bytes. GPU counts are whole GPUs.
"""

from __future__ import annotations

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.slurm.tres import GPU_TYPES_DTYPE

TS = pl.Datetime("us")
NODES = pl.List(pl.String)

#: One row per allocation (job, array task, het component; one per run of a requeued job).
RUNS_SCHEMA: SchemaDict = {
    "run_key": pl.String(),  # {cluster}:{job_id_raw}:{submit_epoch}[#n], see parse.py
    "cluster": pl.String(),
    "job_id": pl.String(),  # JobID as printed: 123, 123_4, 123_[5-9%2], 123+1
    "job_id_raw": pl.Int64(),  # JobIDRaw (the database id of this allocation)
    "array_job_id": pl.Int64(),
    "array_task_id": pl.Int64(),
    "array_task_range": pl.String(),  # pending rest of an array: "5-9%2"
    "het_job_id": pl.Int64(),
    "het_offset": pl.Int64(),
    "job_name": pl.String(),
    "user": pl.String(),
    "uid": pl.Int64(),
    "account": pl.String(),
    "partition": pl.String(),
    "qos": pl.String(),
    "state": pl.String(),  # base state: CANCELLED for "CANCELLED by 1001"
    "cancelled_by_uid": pl.Int64(),
    "exit_code": pl.Int64(),
    "exit_signal": pl.Int64(),
    "derived_exit_code": pl.Int64(),
    "derived_exit_signal": pl.Int64(),
    "submit": TS,
    "eligible": TS,
    "start": TS,
    "end": TS,  # null while running (End=Unknown)
    "elapsed_s": pl.Int64(),  # ElapsedRaw, else Elapsed parsed
    "timelimit_s": pl.Int64(),  # TimelimitRaw×60, else Timelimit parsed; null = unlimited/unknown
    "alloc_cpus": pl.Int64(),
    "alloc_nodes": pl.Int64(),
    "nodelist": pl.String(),  # as printed: a100-[01-02], None assigned
    "nodes": NODES,  # expanded, zero padding kept
    "alloc_tres": pl.String(),
    "alloc_gpus": pl.Int64(),  # gres/gpu= (typed keys summed only when no untyped key)
    "alloc_gpu_types": GPU_TYPES_DTYPE,  # [{model: "a100", gpus: 1}] from gres/gpu:TYPE=N
    # shared GPUs (docs/shared-gpus.md): gres/shard=N, gres/mps=N; null when absent
    "alloc_shards": pl.Int64(),
    "alloc_mps": pl.Int64(),
    "alloc_mem_bytes": pl.Int64(),
    "alloc_billing": pl.Int64(),
    "req_tres": pl.String(),
    "req_gpus": pl.Int64(),
    "req_mem_bytes": pl.Int64(),
    "reservation": pl.String(),
    "reason": pl.String(),
    "flags": pl.String(),
    "wckey": pl.String(),
    "admin_comment": pl.String(),
    "bridge_pods": NODES,  # slurm-bridge: AdminComment {"pods": ["ns/pod", …]}, else []
    "source_file": pl.String(),
    "line_no": pl.Int64(),  # 1-based; the header is line 1
}

#: One row per step (``.batch``, ``.extern``, ``.interactive``, ``.0`` …).
STEPS_SCHEMA: SchemaDict = {
    "run_key": pl.String(),  # its run; null if the allocation line is absent or was rejected
    "cluster": pl.String(),
    "job_id": pl.String(),  # the parent's JobID text: 123, 123_4, 15+1
    "step_job_id": pl.String(),  # the full JobID text: 123_4.batch
    "job_id_raw": pl.Int64(),  # the parent's JobIDRaw
    "step_id": pl.String(),  # batch, extern, interactive, TBD, 0, 1, 0+1
    "step_name": pl.String(),
    "account": pl.String(),
    "state": pl.String(),
    "cancelled_by_uid": pl.Int64(),
    "exit_code": pl.Int64(),
    "exit_signal": pl.Int64(),
    "start": TS,
    "end": TS,
    "elapsed_s": pl.Int64(),
    "alloc_cpus": pl.Int64(),
    "alloc_nodes": pl.Int64(),
    "nodelist": pl.String(),
    "nodes": NODES,
    "alloc_tres": pl.String(),
    "alloc_gpus": pl.Int64(),
    "alloc_gpu_types": GPU_TYPES_DTYPE,
    "alloc_mem_bytes": pl.Int64(),
    "source_file": pl.String(),
    "line_no": pl.Int64(),
}

#: One row per (run, node): ``allocations_per_node``.
NODE_ALLOCATIONS_SCHEMA: SchemaDict = {
    "run_key": pl.String(),
    "cluster": pl.String(),
    "job_id": pl.String(),
    "job_id_raw": pl.Int64(),
    "node": pl.String(),
    "node_index": pl.Int64(),  # position in the expanded hostlist, 0-based
    "gpus": pl.Int64(),
    "gpu_model": pl.String(),  # "" when unknown
    "start": TS,
    "end": TS,
    "gpus_source": pl.String(),  # single_node (exact) | even_split (estimated), see parse.py
    # shared GPUs (docs/shared-gpus.md): mig, shard or mps (null: whole GPUs) and the MIG
    # profile (1g.10gb); ``gpus`` then counts MIG instances, shards or MPS units
    "sharing": pl.String(),
    "slice_profile": pl.String(),
}

#: ``sreport -P -t seconds -T … cluster utilization``: one row per (cluster, TRES).
SREPORT_UTILIZATION_SCHEMA: SchemaDict = {
    "cluster": pl.String(),
    "tres_name": pl.String(),
    "allocated_seconds": pl.Int64(),
    "down_seconds": pl.Int64(),
    "planned_down_seconds": pl.Int64(),
    "idle_seconds": pl.Int64(),
    "planned_seconds": pl.Int64(),  # "Planned" (22.05+), formerly "Reserved"
    "over_committed_seconds": pl.Int64(),  # only when the report has "Over Comm"
    "reported_seconds": pl.Int64(),
    "report_start": TS,
    "report_end": TS,  # exclusive: the banner's inclusive last second + 1 s
    "unit": pl.String(),  # seconds, minutes or hours: what the report was in
}

#: ``sreport -P -t seconds -T … cluster AccountUtilizationByUser``: one row per
#: (cluster, account, login, TRES).
SREPORT_ACCOUNT_USER_SCHEMA: SchemaDict = {
    "cluster": pl.String(),
    "account": pl.String(),
    "login": pl.String(),  # "" on account rows
    "proper_name": pl.String(),
    "tres_name": pl.String(),
    "used_seconds": pl.Int64(),
    "is_account_total": pl.Boolean(),  # login empty: the account's whole subtree
    "report_start": TS,
    "report_end": TS,
    "unit": pl.String(),
}


#: ``scontrol show job -d``: one row per (job, node, GPU index) Slurm gave the job, per snapshot.
SCONTROL_GPU_INDICES_SCHEMA: SchemaDict = {
    "job_id": pl.String(),  # as sacct prints it: 123, 123_4, 123+1
    "job_id_raw": pl.Int64(),  # scontrol's JobId (sacct's JobIDRaw)
    "node": pl.String(),
    "gpu_index": pl.Int64(),  # Slurm's GRES index on the node (IDX:…)
    "gpu_model": pl.String(),  # the GRES type (gpu:a100:2 → a100); null when untyped
    # shared GPUs (docs/shared-gpus.md): mig (gpu_index is the MIG instance's GRES index), mps
    # (gpu_index is the GPU's); null: a whole GPU. units: instances (1) or MPS units held there
    "sharing": pl.String(),
    "slice_profile": pl.String(),
    "units": pl.Int64(),
    "start": TS,
    "end": TS,  # null unless the job has ended (a running job's EndTime is its time limit)
    "state": pl.String(),  # JobState: RUNNING, COMPLETING, …
    "observed_at": TS,  # when the snapshot was taken
    "source_file": pl.String(),
    "line_no": pl.Int64(),  # the `Nodes=… GRES=…` line, 1-based
}

def empty(schema: SchemaDict) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)
