-- gpu_usage_hourly_check_measured
-- Grain: one row per gpu_usage_hourly row of the days [$first_day, $end_day) that breaks
--   0 <= busy <= measured <= allocated or busy + idle = measured (exact: the columns are
--   DECIMAL sums). No row: the invariant holds.
-- Parameters: $first_day, $end_day (DATE, half-open).
SELECT
    hour, domain, node, person, team, cost_centre,
    allocated_gpu_seconds, measured_gpu_seconds, busy_gpu_seconds, idle_gpu_seconds
FROM gpu_usage_hourly
WHERE day >= $first_day AND day < $end_day
  AND (
    busy_gpu_seconds < 0
    OR idle_gpu_seconds < 0
    OR measured_gpu_seconds > allocated_gpu_seconds
    OR busy_gpu_seconds + idle_gpu_seconds <> measured_gpu_seconds
  )
ORDER BY hour, node, person
