-- allocations
-- Grain: one row per charged allocation interval per node per UTC day (a run or pod spanning
--   midnight has one row per day). Slurm: one row per run (a requeued job's runs separately);
--   Kubernetes: one row per pod (uid) interval. slurm-bridge representative jobs are not here:
--   their pods are (charged once, kubernetes domain); see bridge_pairs.
-- Parameters: none; reads the temp table alloc_pieces (allocation_pieces.sql) and the temp table
--   resolved_identity (resolve_identity.sql over those pieces).
-- gpu_seconds = gpus x seconds of the piece. Times are UTC. identity_source: which source named
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
