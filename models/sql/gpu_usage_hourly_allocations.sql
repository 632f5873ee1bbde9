-- gpu_usage_hourly_allocations (fills the table allocation_usage_hourly)
-- Grain: one row per (allocations row, UTC hour it overlaps) for the allocation days in
--   [$first_day, $end_day). Key: day, domain, source_key, node, start_ts (the allocations row),
--   hour.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations and the temp table
--   usage_matched (gpu_usage_hourly_matched.sql).
-- allocated_gpu_seconds = gpus x whole seconds of the row inside the hour: the row is clipped at
--   the hour boundaries, and date_diff counts second boundaries, so an allocations row's hours
--   add up to its gpu_seconds exactly.
-- measured_gpu_seconds: allocated GPU-seconds dcgm-exporter covered for this allocation;
--   busy_gpu_seconds: their utilization-weighted part; idle_gpu_seconds = measured - busy
--   (DECIMAL(18, 6): exact sums, so busy + idle = measured and a rebuild changes nothing).
--   Should the exporter name more GPUs than allocated (a MIG or time-sliced device, a wrong
--   label), measured and busy are scaled down together so that measured <= allocated.
WITH pieces AS (
    SELECT * FROM allocations
    WHERE day >= $first_day AND day < $end_day
),

hours AS (
    SELECT
        *,
        unnest(generate_series(
            date_trunc('hour', start_ts),
            date_trunc('hour', end_ts - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR
        )) AS hour
    FROM pieces
),

allocated AS (
    SELECT
        *,
        gpus * date_diff('second', greatest(start_ts, hour),
                         least(end_ts, hour + INTERVAL 1 HOUR)) AS allocated_gpu_seconds
    FROM hours
),

measured AS (
    SELECT
        day, domain, source_key, node, start_ts, hour,
        sum(measured_seconds) AS measured_seconds,
        sum(busy_seconds) AS busy_seconds
    FROM usage_matched
    GROUP BY ALL
),

joined AS (
    SELECT
        a.*,
        coalesce(m.measured_seconds, 0) AS raw_measured,
        coalesce(m.busy_seconds, 0) AS raw_busy
    FROM allocated AS a
    LEFT JOIN measured AS m
        ON m.day = a.day AND m.domain = a.domain AND m.source_key = a.source_key
        AND m.node = a.node AND m.start_ts = a.start_ts AND m.hour = a.hour
    WHERE a.allocated_gpu_seconds > 0
),

scaled AS (
    SELECT
        *,
        CASE WHEN raw_measured > allocated_gpu_seconds
            THEN CAST(allocated_gpu_seconds AS DECIMAL(18, 6))
            ELSE CAST(raw_measured AS DECIMAL(18, 6)) END AS measured_gpu_seconds,
        CASE WHEN raw_measured > allocated_gpu_seconds
            THEN CAST(raw_busy * allocated_gpu_seconds / raw_measured AS DECIMAL(18, 6))
            ELSE CAST(raw_busy AS DECIMAL(18, 6)) END AS busy_gpu_seconds
    FROM joined
)

SELECT
    day,
    hour,
    domain,
    cluster,
    pool,
    node,
    gpu_model,
    source_key,
    job_id,
    name,
    start_ts,
    gpus,
    person,
    team,
    cost_centre,
    allocated_gpu_seconds,
    measured_gpu_seconds,
    busy_gpu_seconds,
    measured_gpu_seconds - busy_gpu_seconds AS idle_gpu_seconds
FROM scaled
