-- gpu_usage_daily
-- Grain: one row per (UTC day, domain, cluster, pool, GPU model, person, team, cost centre) of
--   the days [$first_day, $end_day): gpu_usage_hourly summed over the day's hours and nodes.
--   No allocation count: an allocation spans several hours and would be counted in each.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads gpu_usage_hourly (already rebuilt
--   for those days, in the same transaction).
-- Why: the utilization page's per-domain and per-owner charts draw ranges longer than two weeks
--   per day; a year of gpu_usage_hourly is two million rows on a 1,000-GPU cluster.
SELECT
    day,
    domain,
    cluster,
    pool,
    gpu_model,
    person,
    team,
    cost_centre,
    sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds,
    sum(measured_gpu_seconds)::DECIMAL(18, 6) AS measured_gpu_seconds,
    sum(busy_gpu_seconds)::DECIMAL(18, 6) AS busy_gpu_seconds,
    sum(idle_gpu_seconds)::DECIMAL(18, 6) AS idle_gpu_seconds
FROM gpu_usage_hourly
WHERE day >= $first_day AND day < $end_day
GROUP BY day, domain, cluster, pool, gpu_model, person, team, cost_centre
