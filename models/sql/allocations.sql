-- allocations
-- Grain: one row per charged allocation interval per node per UTC day (a run or pod spanning
--   midnight has one row per day). Slurm: one row per run (a requeued job's runs separately);
--   Kubernetes: one row per pod (uid) interval. slurm-bridge representative jobs are not here:
--   their pods are (charged once, kubernetes domain); see bridge_pairs.
-- Parameters: none; reads the temp table alloc_pieces (allocation_pieces.sql), the temp table
--   resolved_identity (resolve_identity.sql over those pieces) and the temp table alloc_shares
--   (allocation_shares.sql: the physical share of shared GPUs, docs/shared-gpus.md).
-- gpu_seconds = gpus x seconds of the piece (units: MIG instances, replicas and shards count one
--   each); physical_gpu_seconds = the physical GPU-time charged (= gpu_seconds for whole GPUs). Times are UTC. identity_source: which source named
--   the owner (resolve_identity.sql).
SELECT
    p.day,
    p.domain,
    p.cluster,
    p.source_key,
    p.job_id,
    p.name,
    p.node,
    p.pool,
    p.gpu_model,
    p.gpus,
    p.gpu_uuids,
    p.start_ts,
    p.end_ts,
    p.gpus * date_diff('second', p.start_ts, p.end_ts) AS gpu_seconds,
    p.sharing,
    p.slice_profile,
    sh.slices,
    sh.physical_gpu_seconds,
    sh.capacity_gpus,
    p.slurm_user,
    p.slurm_account,
    p.qos,
    p.k8s_namespace,
    p.k8s_service_account,
    p.kueue_queue,
    p.kueue_cluster_queue,
    r.person,
    r.team,
    r.cost_centre,
    r.identity_evidence,
    r.identity_source,
    p.outcome,
    p.evidence
FROM alloc_pieces AS p
INNER JOIN resolved_identity AS r USING (piece_id)
INNER JOIN alloc_shares AS sh USING (piece_id)
