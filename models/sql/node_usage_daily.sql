-- node_usage_daily
-- Grain: one row per (UTC day, node) of the days [$first_day, $end_day): node_usage_hourly
--   summed over the day's 24 hours, same columns but capacity_gpus (a count, not a sum).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads node_usage_hourly (already rebuilt
--   for those days, in the same transaction).
-- Why: the utilization page draws ranges longer than two weeks per day; summing a year of
--   node-hours (1.4 million rows on a 1,000-GPU cluster) on every page view is the slow part.
--   Exact sums: the decimals stay decimals.
SELECT
    day,
    cluster,
    node,
    pool,
    gpu_model,
    sum(capacity_gpu_seconds)::BIGINT AS capacity_gpu_seconds,
    sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds,
    sum(slurm_gpu_seconds)::BIGINT AS slurm_gpu_seconds,
    sum(kubernetes_gpu_seconds)::BIGINT AS kubernetes_gpu_seconds,
    sum(unallocated_gpu_seconds)::BIGINT AS unallocated_gpu_seconds,
    sum(measured_gpu_seconds)::DECIMAL(18, 6) AS measured_gpu_seconds,
    sum(busy_gpu_seconds)::DECIMAL(18, 6) AS busy_gpu_seconds
FROM node_usage_hourly
WHERE day >= $first_day AND day < $end_day
GROUP BY day, cluster, node, pool, gpu_model
