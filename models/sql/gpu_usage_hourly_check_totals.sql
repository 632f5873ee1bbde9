-- gpu_usage_hourly_check_totals
-- Grain: one row per UTC hour of the days [$first_day, $end_day) where the allocated
--   GPU-seconds disagree: the ledger's (allocations clipped to the hour, computed here from
--   allocations itself), the sum over identities (gpu_usage_hourly) and the sum over nodes
--   (node_usage_hourly). No row: the invariant holds.
-- Parameters: $first_day, $end_day (DATE, half-open).
WITH ledger_hours AS (
    SELECT
        gpus, start_ts, end_ts,
        unnest(generate_series(
            date_trunc('hour', start_ts),
            date_trunc('hour', end_ts - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR
        )) AS hour
    FROM allocations
    WHERE day >= $first_day AND day < $end_day
),

ledger AS (
    SELECT
        hour,
        sum(gpus * date_diff('second', greatest(start_ts, hour),
                             least(end_ts, hour + INTERVAL 1 HOUR))) AS ledger_gpu_seconds
    FROM ledger_hours
    GROUP BY hour
),

identities AS (
    SELECT hour, sum(allocated_gpu_seconds) AS identities_gpu_seconds
    FROM gpu_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY hour
),

per_node AS (
    SELECT hour, sum(allocated_gpu_seconds) AS nodes_gpu_seconds
    FROM node_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY hour
),

compared AS (
    SELECT
        hour,
        coalesce(l.ledger_gpu_seconds, 0)::BIGINT AS ledger_gpu_seconds,
        coalesce(i.identities_gpu_seconds, 0)::BIGINT AS identities_gpu_seconds,
        coalesce(n.nodes_gpu_seconds, 0)::BIGINT AS nodes_gpu_seconds
    FROM ledger AS l
    FULL OUTER JOIN identities AS i USING (hour)
    FULL OUTER JOIN per_node AS n USING (hour)
)

SELECT * FROM compared
WHERE ledger_gpu_seconds <> identities_gpu_seconds OR identities_gpu_seconds <> nodes_gpu_seconds
ORDER BY hour
