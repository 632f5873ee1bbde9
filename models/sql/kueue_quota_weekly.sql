-- kueue_quota_weekly
-- Grain: one row per (cluster, ISO week, scope, cohort, ClusterQueue, flavor, resource) of
--   kueue_quota_hourly for the weeks starting in [$first_week, $end_week).
-- Parameters: $first_week, $end_week (DATE, Mondays, half-open). Reads kueue_quota_hourly.
-- Columns: the hourly figures summed over the week's known hours (hours: rows of the week,
--   known_hours: those with samples); quota_used_share = usage / nominal GPU-hours of the known
--   hours ("average % of quota used"), NULL when nominal is 0 or no hour is known; sums
--   rounded to 9 decimals (their last bits depend on the order rows are added in).
SELECT date_trunc('week', hour_start)::DATE AS week_start,
       strftime(date_trunc('week', hour_start), '%G-W%V') AS week,
       cluster, scope, cohort, cluster_queue, flavor, resource,
       count(*) AS hours,
       count(*) FILTER (WHERE known) AS known_hours,
       sum(covered_seconds) AS covered_seconds,
       round(sum(nominal_gpu_hours), 9) AS nominal_gpu_hours,
       round(sum(usage_gpu_hours), 9) AS usage_gpu_hours,
       round(sum(reservation_gpu_hours), 9) AS reservation_gpu_hours,
       round(sum(borrowed_gpu_hours), 9) AS borrowed_gpu_hours,
       round(sum(lendable_gpu_hours), 9) AS lendable_gpu_hours,
       round(sum(lent_gpu_hours), 9) AS lent_gpu_hours,
       round(sum(usage_gpu_hours), 9) / nullif(round(sum(nominal_gpu_hours), 9), 0) AS quota_used_share,
       sum(pending_active_seconds) AS pending_active_seconds,
       sum(pending_inadmissible_seconds) AS pending_inadmissible_seconds
FROM kueue_quota_hourly
WHERE hour_start >= $first_week AND hour_start < $end_week
GROUP BY ALL
