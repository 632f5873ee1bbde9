-- gpu_conservation_hourly_check
-- Grain: one row per (UTC hour, node) of the days [$first_day, $end_day) where conservation
--   breaks; no row: every GPU-second of capacity is accounted once (docs/accounting.md,
--   "Conservation").
-- Parameters: $first_day, $end_day (DATE, half-open), $tolerance_s (seconds: a Kubernetes end is
--   known to one scrape interval, so a handover may overlap that long per GPU without an
--   incident, as double_scheduled allows). Reads gpu_conservation_hourly and incidents.
-- A row breaks when (problem says which):
--   'states': charged + conflict + infrastructure + unaccounted + idle <> capacity, or a state
--     is negative;
--   'invoice' (one row per node and day, hour = the day's start, figures the day's sums): what
--     the invoices charge there (the allocations rows' own physical GPU-seconds) differs from
--     what the sweep holds (charged + conflict + excess) by more than 10 ms per GPU;
--   'no_inventory': GPU-time is charged on a node the inventory does not have;
--   'unexplained_conflict': GPU-time held twice, beyond the tolerance, that no double_scheduled,
--     shared_overcommit or over_capacity incident covers (more holders than GPUs is an incident,
--     never a silent over-charge);
--   'gpu_states' (gpu_uuid set, from gpu_conservation_gpu_hourly): a GPU's charged + conflict +
--     infrastructure + unaccounted + idle + not_observed <> its 3,600 seconds, or a state is
--     negative (readings of one GPU overlapping, or more placed on it than it was read);
--   'gpu_unaccounted': the node's GPUs' unaccounted seconds do not add up to the node's.
WITH c AS (
    SELECT * FROM gpu_conservation_hourly WHERE day >= $first_day AND day < $end_day
),

g AS (
    SELECT * FROM gpu_conservation_gpu_hourly WHERE day >= $first_day AND day < $end_day
),

problems AS (
    SELECT *, 'states' AS problem FROM c
    WHERE abs(charged_gpu_seconds + conflict_gpu_seconds + infrastructure_gpu_seconds
              + unaccounted_gpu_seconds + idle_gpu_seconds - capacity_gpu_seconds) > 0.001
        OR least(charged_gpu_seconds, conflict_gpu_seconds, infrastructure_gpu_seconds,
                 unaccounted_gpu_seconds, idle_gpu_seconds, excess_gpu_seconds) < -0.001
    UNION ALL BY NAME
    -- per node and day: a time-shared row's physical GPU-seconds vary within it, so its pro rata
    -- per hour is exact only summed over its day (the rows are cut at midnight)
    SELECT * REPLACE (CAST(day AS TIMESTAMP) AS hour), 'invoice' AS problem FROM (
        SELECT day, node, any_value(capacity_gpus) AS capacity_gpus,
            sum(capacity_gpu_seconds) AS capacity_gpu_seconds,
            sum(charged_gpu_seconds) AS charged_gpu_seconds,
            sum(conflict_gpu_seconds) AS conflict_gpu_seconds,
            sum(infrastructure_gpu_seconds) AS infrastructure_gpu_seconds,
            sum(unaccounted_gpu_seconds) AS unaccounted_gpu_seconds,
            sum(idle_gpu_seconds) AS idle_gpu_seconds,
            sum(excess_gpu_seconds) AS excess_gpu_seconds,
            sum(invoiced_gpu_seconds) AS invoiced_gpu_seconds,
            min(hour) AS hour
        FROM c GROUP BY day, node
    )
    WHERE abs(invoiced_gpu_seconds - charged_gpu_seconds - conflict_gpu_seconds
              - excess_gpu_seconds) > 0.01 * greatest(capacity_gpus, 1)
    UNION ALL BY NAME
    SELECT *, 'no_inventory' AS problem FROM c
    WHERE capacity_gpus = 0 AND held_gpu_seconds > 0
    UNION ALL BY NAME
    SELECT *, 'unexplained_conflict' AS problem FROM c
    WHERE excess_gpu_seconds > capacity_gpus * $tolerance_s AND capacity_gpus > 0 AND NOT EXISTS (
        SELECT 1 FROM incidents AS f
        WHERE f.kind IN ('double_scheduled', 'shared_overcommit', 'over_capacity')
            AND f.node = c.node
            AND f.start_ts < c.hour + INTERVAL 1 HOUR AND f.end_ts > c.hour
    )
    UNION ALL BY NAME
    SELECT
        hour, node, gpu_uuid, capacity_gpu_seconds, charged_gpu_seconds, conflict_gpu_seconds,
        infrastructure_gpu_seconds, unaccounted_gpu_seconds, idle_gpu_seconds,
        not_observed_gpu_seconds, 'gpu_states' AS problem
    FROM g
    WHERE abs(charged_gpu_seconds + conflict_gpu_seconds + infrastructure_gpu_seconds
              + unaccounted_gpu_seconds + idle_gpu_seconds + not_observed_gpu_seconds
              - capacity_gpu_seconds) > 0.001
        OR least(charged_gpu_seconds, conflict_gpu_seconds, infrastructure_gpu_seconds,
                 unaccounted_gpu_seconds, idle_gpu_seconds, not_observed_gpu_seconds) < -0.001
    UNION ALL BY NAME
    SELECT c.hour, c.node, c.unaccounted_gpu_seconds, 'gpu_unaccounted' AS problem
    FROM c
    LEFT JOIN (
        SELECT hour, node, sum(unaccounted_gpu_seconds) AS placed FROM g GROUP BY ALL
    ) AS p ON p.hour = c.hour AND p.node = c.node
    WHERE abs(c.unaccounted_gpu_seconds - coalesce(p.placed, 0)) > 0.001
)

SELECT
    hour, node, problem, gpu_uuid, capacity_gpu_seconds, charged_gpu_seconds, conflict_gpu_seconds,
    infrastructure_gpu_seconds, unaccounted_gpu_seconds, idle_gpu_seconds, excess_gpu_seconds,
    not_observed_gpu_seconds, invoiced_gpu_seconds
FROM problems
ORDER BY hour, node, problem, gpu_uuid
