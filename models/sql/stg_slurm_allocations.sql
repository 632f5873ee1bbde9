-- stg_slurm_allocations
-- Grain: one row per (Slurm run, node) that held GPUs, before day splitting.
-- Parameters: none (reads slurm_runs and slurm_node_allocations).
-- Columns: the common staging layout shared with stg_kubernetes_allocations (see models/build.py).
-- A run still going (end null) is charged up to observed_until, the end of the sacct query that
-- saw it. slurm-bridge representative jobs (bridge_pods not empty) are flagged is_bridge: they are
-- the same workload as their pods and are charged once, in the kubernetes domain.
WITH runs AS (
    SELECT * FROM slurm_runs
),

per_node AS (
    SELECT * FROM slurm_node_allocations
),

final AS (
    SELECT
        'slurm' AS domain,
        r.cluster,
        r.run_key AS source_key,
        r.job_id,
        r.job_name AS name,
        n.node,
        n.gpu_model,
        n.gpus,
        CAST(NULL AS VARCHAR[]) AS gpu_uuids,
        r.start AS start_ts,
        coalesce(r."end", r.observed_until) AS end_ts,
        r."user" AS slurm_user,
        r.account AS slurm_account,
        r.partition AS pool,
        r.qos,
        CAST(NULL AS VARCHAR) AS k8s_namespace,
        CAST(NULL AS VARCHAR) AS k8s_service_account,
        CAST(NULL AS VARCHAR) AS kueue_queue,
        CAST(NULL AS VARCHAR) AS kueue_cluster_queue,
        CAST(NULL AS VARCHAR[]) AS pod_labels,
        CASE
            WHEN r."end" IS NULL THEN 'running'
            WHEN r.state = 'COMPLETED' THEN 'completed'
            WHEN r.state = 'REQUEUED' THEN 'requeued'
            WHEN r.state = 'PREEMPTED' THEN 'preempted'
            WHEN r.state = 'TIMEOUT' THEN 'timeout'
            WHEN r.state = 'NODE_FAIL' THEN 'node_fail'
            WHEN r.state = 'CANCELLED' THEN 'cancelled'
            WHEN r.state IN ('FAILED', 'OUT_OF_MEMORY', 'BOOT_FAIL', 'DEADLINE') THEN 'failed'
            ELSE lower(r.state)
        END AS outcome,
        len(r.bridge_pods) > 0 AS is_bridge,
        r.source_file || ':' || r.line_no AS evidence
    FROM per_node AS n
    INNER JOIN runs AS r USING (run_key)
    WHERE r.start IS NOT NULL
)

SELECT * FROM final
WHERE end_ts > start_ts
