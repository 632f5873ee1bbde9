-- detect_unaccounted_use
-- Grain: one row per (node, run of consecutive UTC hours) with unaccounted use: dcgm-exporter saw
--   GPUs busy that no Slurm run or pod held (gpu_conservation_hourly.unaccounted_gpu_seconds).
-- Parameters: $scan_first, $scan_last (DATE, inclusive). Reads gpu_conservation_hourly (built
--   with the hourly usage, before the detectors).
-- gpu_seconds: the unaccounted GPU-seconds; share: the busy fraction of those readings; gpus: the
--   GPUs with busy readings no charged holder took; detail: every holder the series name (pod
--   labels, hpc_job) and the likely cause. Nobody is charged: owners stay unattributed, no cost.
WITH hours AS (
    SELECT
        *,
        hour - to_hours(CAST(row_number() OVER (PARTITION BY cluster, node ORDER BY hour)
                             AS BIGINT)) AS run
    FROM gpu_conservation_hourly
    WHERE day >= $scan_first AND day <= $scan_last AND unaccounted_gpu_seconds > 0
),

runs AS (
    SELECT
        cluster,
        node,
        run,
        any_value(gpu_model) AS gpu_model,
        min(hour) AS start_ts,
        max(hour) + INTERVAL 1 HOUR AS end_ts,
        sum(unaccounted_gpu_seconds) AS gpu_seconds,
        sum(unaccounted_busy_share * CAST(unaccounted_gpu_seconds AS DOUBLE))
            / sum(CAST(unaccounted_gpu_seconds AS DOUBLE)) AS share,
        list_sort(list_distinct(flatten(list(unaccounted_gpu_uuids)))) AS gpu_uuids,
        list_sort(list_distinct(flatten(list(unaccounted_hints)))) AS hints
    FROM hours
    GROUP BY cluster, node, run
)

SELECT
    'unaccounted_use' AS kind,
    'unknown' AS domain,
    cluster,
    node,
    gpu_uuids,
    CAST(len(gpu_uuids) AS BIGINT) AS gpus,
    start_ts,
    end_ts,
    CAST(round(gpu_seconds) AS BIGINT) AS gpu_seconds,
    CAST(NULL AS VARCHAR) AS slurm_job,
    CAST(NULL AS VARCHAR) AS k8s_workload,
    CAST(NULL AS VARCHAR) AS person,
    CAST(NULL AS VARCHAR) AS team,
    CAST(NULL AS VARCHAR) AS cost_centre,
    CAST(NULL AS VARCHAR) AS other_person,
    CAST(NULL AS VARCHAR) AS other_team,
    CAST(NULL AS VARCHAR) AS other_cost_centre,
    'gpu' AS evidence_level,
    share,
    CAST(NULL AS VARCHAR) AS rate_domain,
    gpu_model,
    CAST(NULL AS VARCHAR) AS qos,
    cluster || '|' || node || '|' || strftime(start_ts, '%Y-%m-%d %H:%M:%S') AS identity_key,
    round(CAST(gpu_seconds AS DOUBLE) / 3600, 3) || ' GPU-hours busy (busy share '
        || round(share, 3) || ') on ' || node || ' with no Slurm run or pod holding them; '
        || CASE WHEN len(hints) > 0
            THEN 'the series name ' || array_to_string(hints, ', ') || ', which the ledger '
                || 'does not charge there: '
                || CASE WHEN list_bool_or(list_transform(hints, h -> h LIKE 'pod %'))
                    THEN 'a pod whose GPUs were not read (DRA ResourceClaims not read, or its '
                        || 'GPU request not exported)'
                    ELSE 'a Slurm job the ledger has not loaded' END
            ELSE 'no holder labels: an exporter without pod mapping, or work outside both '
                || 'schedulers' END AS detail,
    'gpu_conservation_hourly{node=' || node || ',hour=' || strftime(start_ts, '%Y-%m-%d %H:%M')
        || '..' || strftime(end_ts, '%Y-%m-%d %H:%M') || '}' AS evidence
FROM runs
