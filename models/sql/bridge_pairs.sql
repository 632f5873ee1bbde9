-- bridge_pairs
-- Grain: one row per (slurm-bridge representative Slurm run, pod its AdminComment names), for the
--   runs that started on the UTC days [$first_day, $last_day]. The pair is one workload: charged
--   once, in the kubernetes domain, to the pod's owner; never a double-scheduling conflict.
-- Parameters: $first_day, $last_day (DATE, inclusive).
-- The pod is looked up by namespace and name in the staged allocations (view stg_allocations,
--   models/build.py: its uid, node and whole interval) and its owner in allocations; matched is false when the ledger has no such pod (then the
--   representative job's GPUs are not charged to anyone: worth a look).
WITH bridge_runs AS (
    SELECT
        r.cluster, r.run_key, r.job_id, r.start, coalesce(r."end", r.observed_until) AS end_ts,
        r.alloc_gpus, array_to_string(r.nodes, ';') AS slurm_nodes, r.source_file, r.line_no,
        unnest(r.bridge_pods) AS pod_ref
    FROM slurm_runs AS r
    WHERE coalesce(len(r.bridge_pods), 0) > 0 AND r.start IS NOT NULL
      AND CAST(r.start AS DATE) >= $first_day AND CAST(r.start AS DATE) <= $last_day
),

named AS (
    SELECT
        *,
        split_part(pod_ref, '/', 1) AS namespace,
        substr(pod_ref, strpos(pod_ref, '/') + 1) AS pod
    FROM bridge_runs
),

pods AS (
    -- the pod's whole interval per uid and node from the staged (uncut) allocations, so a pair
    -- does not depend on which days were built in the same pass; its owner from the ledger
    SELECT
        s.cluster, s.k8s_namespace AS namespace, s.name AS pod, s.source_key AS pod_uid, s.node,
        min(s.start_ts) AS pod_start, max(s.end_ts) AS pod_end, max(s.gpus) AS pod_gpus,
        any_value(o.first_day) AS first_day,
        any_value(o.person) AS person,
        any_value(o.team) AS team,
        any_value(o.cost_centre) AS cost_centre
    FROM stg_allocations AS s
    LEFT JOIN (
        SELECT
            source_key, node, arg_min(day, start_ts) AS first_day,
            arg_min(person, start_ts) AS person, arg_min(team, start_ts) AS team,
            arg_min(cost_centre, start_ts) AS cost_centre
        FROM allocations
        WHERE domain = 'kubernetes'
        GROUP BY source_key, node
    ) AS o ON o.source_key = s.source_key AND o.node = s.node
    WHERE s.domain = 'kubernetes'
      AND (s.k8s_namespace, s.name) IN (SELECT (namespace, pod) FROM named)
    GROUP BY s.cluster, s.k8s_namespace, s.name, s.source_key, s.node
)

SELECT
    CAST(n.start AS DATE) AS day,
    n.cluster,
    n.run_key AS slurm_run_key,
    n.job_id AS slurm_job,
    n.slurm_nodes,
    n.start AS slurm_start,
    n.end_ts AS slurm_end,
    n.alloc_gpus AS slurm_gpus,
    n.namespace AS k8s_namespace,
    n.pod,
    p.pod_uid,
    p.node,
    p.pod_start,
    p.pod_end,
    p.pod_gpus,
    p.pod_uid IS NOT NULL AS matched,
    p.person,
    p.team,
    p.cost_centre,
    'slurm_runs{run_key=' || n.run_key || '} (' || n.source_file || ':' || n.line_no
        || ', AdminComment pods ' || n.pod_ref || ')'
        || coalesce('; allocations{day=' || strftime(p.first_day, '%Y-%m-%d')
            || ',domain=kubernetes,source_key=' || p.pod_uid || ',node=' || p.node || '}', '')
        AS evidence
FROM named AS n
LEFT JOIN pods AS p
    -- by namespace and name only: Slurm and Kubernetes may call the cluster differently
    ON p.namespace = n.namespace AND p.pod = n.pod
