-- gpu_conservation_hourly_check
-- Grain: one row per (UTC hour, node) of the days [$first_day, $end_day) where conservation
--   breaks; no row: every GPU-second of capacity is accounted once (docs/accounting.md,
--   "Conservation").
-- Parameters: $first_day, $end_day (DATE, half-open). Reads gpu_conservation_hourly and incidents.
-- A row breaks when (problem says which):
--   'states': charged + conflict + infrastructure + unaccounted + idle <> capacity, or a state
--     is negative;
--   'invoice': what the invoices charge there (the allocations rows' own physical GPU-seconds)
--     differs from what the sweep holds (charged + conflict + excess) by more than a
--     millisecond per GPU;
--   'no_inventory': GPU-time is charged on a node the inventory does not have;
--   'unexplained_conflict': GPU-time held twice that no double_scheduled, shared_overcommit or
--     over_capacity incident covers (more holders than GPUs is an incident, never a silent over-charge).
WITH c AS (
    SELECT * FROM gpu_conservation_hourly WHERE day >= $first_day AND day < $end_day
),

problems AS (
    SELECT *, 'states' AS problem FROM c
    WHERE abs(charged_gpu_seconds + conflict_gpu_seconds + infrastructure_gpu_seconds
              + unaccounted_gpu_seconds + idle_gpu_seconds - capacity_gpu_seconds) > 0.001
        OR least(charged_gpu_seconds, conflict_gpu_seconds, infrastructure_gpu_seconds,
                 unaccounted_gpu_seconds, idle_gpu_seconds, excess_gpu_seconds) < -0.001
    UNION ALL
    SELECT *, 'invoice' FROM c
    WHERE abs(invoiced_gpu_seconds - charged_gpu_seconds - conflict_gpu_seconds
              - excess_gpu_seconds) > 0.001 * greatest(capacity_gpus, 1)
    UNION ALL
    SELECT *, 'no_inventory' FROM c
    WHERE capacity_gpus = 0 AND held_gpu_seconds > 0
    UNION ALL
    SELECT *, 'unexplained_conflict' FROM c
    WHERE excess_gpu_seconds > 0 AND capacity_gpus > 0 AND NOT EXISTS (
        SELECT 1 FROM incidents AS f
        WHERE f.kind IN ('double_scheduled', 'shared_overcommit', 'over_capacity')
            AND f.node = c.node
            AND f.start_ts < c.hour + INTERVAL 1 HOUR AND f.end_ts > c.hour
    )
)

SELECT
    hour, node, problem, capacity_gpu_seconds, charged_gpu_seconds, conflict_gpu_seconds,
    infrastructure_gpu_seconds, unaccounted_gpu_seconds, idle_gpu_seconds, excess_gpu_seconds,
    invoiced_gpu_seconds
FROM problems
ORDER BY hour, node, problem
