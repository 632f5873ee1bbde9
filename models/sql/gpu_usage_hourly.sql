-- gpu_usage_hourly
-- Grain: one row per (UTC hour, domain, cluster, pool, node, gpu_model, person, team,
--   cost_centre) for the allocation days in [$first_day, $end_day).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocation_usage_hourly (already
--   rebuilt for those days).
-- pool is the Slurm partition or the Kubernetes node pool. GPU-seconds: allocated is exact to
--   the second; measured, busy and idle (= measured - busy) are fractional (utilization-weighted).
-- allocations = distinct runs/pods holding GPUs in the row.
SELECT
    hour,
    day,
    domain,
    cluster,
    pool,
    node,
    gpu_model,
    person,
    team,
    cost_centre,
    sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds,
    sum(measured_gpu_seconds) AS measured_gpu_seconds,
    sum(busy_gpu_seconds) AS busy_gpu_seconds,
    sum(idle_gpu_seconds) AS idle_gpu_seconds,
    count(DISTINCT source_key) AS allocations
FROM allocation_usage_hourly
WHERE day >= $first_day AND day < $end_day
GROUP BY ALL
