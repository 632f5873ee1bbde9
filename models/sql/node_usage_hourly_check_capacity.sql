-- node_usage_hourly_check_capacity
-- Grain: one row per (UTC hour, node) of the days [$first_day, $end_day) whose allocated
--   GPU-seconds exceed its capacity by more than capacity_gpus x $tolerance_s, and that no
--   flagged incident explains. No row: the invariant holds.
-- Parameters: $first_day, $end_day (DATE, half-open), $tolerance_s (BIGINT: Kubernetes interval
--   ends are late by up to one scrape interval, so a clean handover can overlap that long).
-- Reads incidents (the detectors' double_scheduled rows excuse a node-hour they cover).
WITH node_hours AS (
    SELECT * FROM node_usage_hourly
    WHERE day >= $first_day AND day < $end_day
      AND allocated_gpu_seconds > capacity_gpu_seconds + capacity_gpus * $tolerance_s
)

SELECT
    h.hour, h.node, h.pool, h.capacity_gpu_seconds, h.allocated_gpu_seconds,
    h.slurm_gpu_seconds, h.kubernetes_gpu_seconds,
    h.allocated_gpu_seconds - h.capacity_gpu_seconds AS excess_gpu_seconds
FROM node_hours AS h
WHERE NOT EXISTS (
    SELECT 1 FROM incidents AS f
    WHERE f.kind = 'double_scheduled' AND f.node = h.node AND f.start_ts < h.hour + INTERVAL 1 HOUR AND f.end_ts > h.hour
)
ORDER BY h.hour, h.node
