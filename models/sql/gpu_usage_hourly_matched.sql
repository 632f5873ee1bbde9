-- gpu_usage_hourly_matched
-- Grain: one row per (allocations row, GPU, UTC hour) for the allocation days in
--   [$first_day, $end_day): the seconds dcgm-exporter measured that GPU for that allocation, and
--   how many of them were busy.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations, slurm_runs and the temp
--   table usage_samples (gpu_usage_hourly_samples.sql).
-- Matching a reading to an allocation (only inside the allocation's own interval and GPUs):
--   Kubernetes: the reading's pod_uid is the pod uid (source_key); where the exporter gives no
--     pod_uid, its namespace and pod are the allocation's, in the same cluster; when the
--     allocation names its GPUs (gpu_uuids), the reading's GPU is one of them.
--   Slurm: the reading's hpc_job is the run's JobIDRaw (slurm_runs.job_id_raw; dcgm-exporter's
--     hpc job mapping writes it) on the same node. Every run of a requeued job has the same
--     JobIDRaw: each run takes only the readings inside its own [start_ts, end_ts). Matched by node
--     only, as the exporter's cluster label is the Kubernetes one.
-- Several readings of one GPU and span for one allocation (one per container) count once.
-- measured_seconds = seconds of the span inside the allocation piece and the hour x share;
-- busy_seconds = those seconds x busy_fraction; both summed as DECIMAL(38, 6) (exact, so
-- independent of the order DuckDB sums in).
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
    WHERE gpu_uuids IS NULL OR list_contains(gpu_uuids, gpu_uuid)
    GROUP BY ALL
),

clipped AS (
    SELECT
        * EXCLUDE (span_start, span_end),
        greatest(span_start, start_ts) AS from_ts,
        least(span_end, end_ts) AS to_ts
    FROM matched
),

hours AS (
    SELECT
        *,
        unnest(generate_series(
            date_trunc('hour', from_ts),
            date_trunc('hour', to_ts - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR
        )) AS hour
    FROM clipped
),

pieces_in_hours AS (
    SELECT
        *,
        epoch(least(to_ts, hour + INTERVAL 1 HOUR) - greatest(from_ts, hour)) * share AS seconds
    FROM hours
),

final AS (
    -- exact decimal sums: a rebuild gives the same figures whatever the summation order
    SELECT
        day, domain, source_key, node, start_ts, gpu_uuid, gpu_instance, hour,
        sum(CAST(seconds AS DECIMAL(38, 6))) AS measured_seconds,
        sum(CAST(seconds * busy_fraction AS DECIMAL(38, 6))) AS busy_seconds
    FROM pieces_in_hours
    GROUP BY ALL
)

SELECT * FROM final
WHERE measured_seconds > 0
