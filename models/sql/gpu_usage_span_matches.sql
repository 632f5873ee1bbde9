-- gpu_usage_span_matches
-- Grain: one row per (allocations row, GPU reading span) for the allocation days in
--   [$first_day, $end_day): which readings a charged holder took, before they are cut at the
--   hours (gpu_usage_hourly_matched.sql sums them per hour; gpu_conservation_hourly.sql counts
--   the holders of each reading).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations, slurm_runs and the temp
--   table usage_samples (gpu_usage_hourly_samples.sql).
-- Matching a reading to an allocation (only inside the allocation's own interval and GPUs):
--   Kubernetes: the reading's pod_uid is the pod uid (source_key); where the exporter gives no
--     pod_uid, its namespace and pod are the allocation's, in the same cluster; when the
--     allocation names its GPUs by UUID (gpu_uuids), the reading's GPU is one of them (a shared
--     DRA claim's '<pool>/<device>' keys name no UUID: its pod's labels alone place it).
--   Slurm: the reading's hpc_job is the run's JobIDRaw (slurm_runs.job_id_raw; dcgm-exporter's
--     hpc job mapping writes it) on the same node. Every run of a requeued job has the same
--     JobIDRaw: each run takes only the readings inside its own [start_ts, end_ts). Matched by node
--     only, as the exporter's cluster label is the Kubernetes one.
-- Several readings of one GPU and span for one allocation (one per container) count once.
WITH pieces AS (
    SELECT
        a.day, a.domain, a.cluster, a.source_key, a.node, a.start_ts, a.end_ts, a.gpu_uuids,
        a.k8s_namespace, a.name, CAST(r.job_id_raw AS VARCHAR) AS job_id_raw
    FROM allocations AS a
    LEFT JOIN slurm_runs AS r ON a.domain = 'slurm' AND r.run_key = a.source_key
    WHERE a.day >= $first_day AND a.day < $end_day
),

slurm_matches AS (
    SELECT p.*, s.gpu_uuid, s.gpu_instance, s.span_start, s.span_end, s.share, s.busy_fraction
    FROM pieces AS p
    INNER JOIN usage_samples AS s
        -- node names are canonical since ingest (docs/node-names.md): an exporter's FQDN
        -- Hostname and Slurm's short NodeName are one name here
        ON s.node = p.node AND s.hpc_job = p.job_id_raw
        AND s.span_start < p.end_ts AND s.span_end > p.start_ts
    WHERE p.domain = 'slurm'
),

pod_uid_matches AS (
    SELECT p.*, s.gpu_uuid, s.gpu_instance, s.span_start, s.span_end, s.share, s.busy_fraction
    FROM pieces AS p
    INNER JOIN usage_samples AS s
        ON s.cluster = p.cluster AND s.node = p.node AND s.pod_uid = p.source_key
        AND s.span_start < p.end_ts AND s.span_end > p.start_ts
    WHERE p.domain = 'kubernetes'
),

pod_name_matches AS (
    SELECT p.*, s.gpu_uuid, s.gpu_instance, s.span_start, s.span_end, s.share, s.busy_fraction
    FROM pieces AS p
    INNER JOIN usage_samples AS s
        ON s.cluster = p.cluster AND s.node = p.node
        AND s.namespace = p.k8s_namespace AND s.pod = p.name
        AND s.span_start < p.end_ts AND s.span_end > p.start_ts
    WHERE p.domain = 'kubernetes' AND s.pod_uid IS NULL
),

matched AS (
    SELECT
        day, domain, source_key, node, start_ts, end_ts, gpu_uuid, gpu_instance,
        span_start, span_end, max(share) AS share, max(busy_fraction) AS busy_fraction
    FROM (
        SELECT * FROM slurm_matches
        UNION ALL
        SELECT * FROM pod_uid_matches
        UNION ALL
        SELECT * FROM pod_name_matches
    )
    -- GPUs named by UUID: the reading's must be one; a DRA claim several pods share names its
    -- devices as '<pool>/<device>' keys instead (stg_kubernetes_allocations.sql: a row's list
    -- is all keys or all UUIDs), which no reading's UUID is: its pods' own labels place them
    WHERE gpu_uuids IS NULL OR list_contains(gpu_uuids, gpu_uuid)
        OR contains(array_to_string(gpu_uuids, ' '), '/')
    GROUP BY ALL
)

SELECT * FROM matched
