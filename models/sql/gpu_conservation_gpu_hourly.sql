-- gpu_conservation_gpu_hourly
-- Grain: one row per (UTC hour, node, physical GPU) of the days [$first_day, $end_day): every GPU
--   of the inventory (nodes, where it names UUIDs) and every GPU dcgm-exporter read, on the
--   node-hours of gpu_conservation_hourly and those with readings (docs/accounting.md,
--   "Conservation", "Per GPU").
-- Parameters: $first_day, $end_day (DATE, half-open). Reads the temp tables reading_pieces
--   (gpu_reading_pieces.sql) and usage_span_matches (gpu_usage_span_matches.sql),
--   gpu_conservation_hourly (the same days, just rebuilt) and nodes.
-- Where each of the GPU's 3,600 seconds of the hour went, as dcgm-exporter's readings of that GPU
--   place its holders (a MIG instance's reading counts its slices of the GPU):
--   charged: a charged holder took the reading (usage_span_matches: its pod, hpc_job or
--     claim), once however many held it;
--   conflict: the time more than one charged holder took it at once (time-shared holders of one
--     GPU are one holder);
--   infrastructure: a reading only a Slinky slurmd pod's labels name (Slurm's capacity, no job);
--   unaccounted: the node-hour's unaccounted GPU-seconds (gpu_conservation_hourly) spread over
--     its GPUs in proportion to each GPU's busy readings that no charged holder took (so the
--     GPUs add up to the node exactly; rounding carried from GPU to GPU in UUID order);
--   idle: read, and none of the above;
--   not_observed: no reading of the GPU (no exporter there, a gap, or the GPU outside the
--     readings' reach): its holders are known only per node, in gpu_conservation_hourly.
--   capacity_gpu_seconds (3,600) = charged + conflict + infrastructure + unaccounted + idle
--     + not_observed. busy_gpu_seconds: the readings' busy fraction x seconds.
-- holders: every allocations row (domain|source_key) that took a reading of the GPU in the hour:
--   the job or pod behind its charged seconds.
WITH node_hours AS (
    SELECT hour, node, cluster, pool, gpu_model, unaccounted_gpu_seconds
    FROM gpu_conservation_hourly
    WHERE day >= $first_day AND day < $end_day
),

gpus AS (
    SELECT n.node, n.gpu_uuid, min(n.gpu_index) AS gpu_index
    FROM nodes AS n
    WHERE n.gpu_uuid IS NOT NULL AND n.node IN (SELECT node FROM node_hours)
    GROUP BY ALL
    UNION
    SELECT DISTINCT node, gpu_uuid, NULL AS gpu_index FROM reading_pieces
),

gpu_list AS (
    SELECT node, gpu_uuid, min(gpu_index) AS gpu_index FROM gpus GROUP BY ALL
),

read AS (
    SELECT
        hour, node, gpu_uuid,
        any_value(cluster) AS cluster,
        sum(CAST(seconds * weight AS DECIMAL(38, 6))) AS observed,
        sum(CAST(greatest(held_seconds - least(excess_seconds, held_seconds), 0) * weight
                 AS DECIMAL(38, 6))) FILTER (WHERE holders > 0) AS charged,
        sum(CAST(least(excess_seconds, held_seconds) * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders > 1) AS conflict,
        sum(CAST(seconds * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND agent_labelled) AS infrastructure,
        sum(CAST(seconds * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND busy AND NOT agent_labelled) AS unclaimed,
        sum(CAST(seconds * weight * busy_fraction AS DECIMAL(38, 6))) AS busy
    FROM reading_pieces
    GROUP BY hour, node, gpu_uuid
),

holder_lists AS (
    -- the allocations rows that took a reading of the GPU in the hour (the span matches, cut at
    -- the hours they touch)
    SELECT node, gpu_uuid, hour, list_sort(list(DISTINCT holder)) AS holders
    FROM (
        SELECT m.node, m.gpu_uuid, m.domain || '|' || m.source_key AS holder,
            unnest(generate_series(
                date_trunc('hour', greatest(m.span_start, m.start_ts)),
                date_trunc('hour', least(m.span_end, m.end_ts) - INTERVAL 1 MICROSECOND),
                INTERVAL 1 HOUR)) AS hour
        FROM usage_span_matches AS m
        WHERE least(m.span_end, m.end_ts) > greatest(m.span_start, m.start_ts)
    )
    WHERE hour >= CAST($first_day AS TIMESTAMP) AND hour < CAST($end_day AS TIMESTAMP)
    GROUP BY ALL
),

hours AS (
    SELECT hour, node, any_value(cluster) AS cluster FROM read GROUP BY ALL
    UNION
    SELECT hour, node, cluster FROM node_hours
),

grid AS (
    SELECT
        h.hour, h.node, g.gpu_uuid, g.gpu_index,
        coalesce(n.cluster, h.cluster) AS cluster, n.pool, n.gpu_model,
        coalesce(n.unaccounted_gpu_seconds, 0) AS node_unaccounted,
        coalesce(r.observed, 0) AS observed,
        coalesce(r.charged, 0) AS charged,
        coalesce(r.conflict, 0) AS conflict,
        coalesce(r.infrastructure, 0) AS infrastructure,
        coalesce(r.unclaimed, 0) AS unclaimed,
        coalesce(r.busy, 0) AS busy,
        l.holders
    FROM (SELECT hour, node, any_value(cluster) AS cluster FROM hours GROUP BY ALL) AS h
    INNER JOIN gpu_list AS g ON g.node = h.node
    LEFT JOIN node_hours AS n ON n.hour = h.hour AND n.node = h.node
    LEFT JOIN read AS r ON r.hour = h.hour AND r.node = h.node AND r.gpu_uuid = g.gpu_uuid
    LEFT JOIN holder_lists AS l
        ON l.hour = h.hour AND l.node = h.node AND l.gpu_uuid = g.gpu_uuid
),

spread AS (
    -- the node's unaccounted GPU-seconds carried over its GPUs: each GPU gets the rounded
    -- cumulative share less the GPUs' before it, so the GPUs add up to the node's figure
    SELECT
        *,
        CASE WHEN total_unclaimed > 0
            THEN CAST(node_unaccounted * (cum_unclaimed / total_unclaimed) AS DECIMAL(38, 6))
            ELSE CAST(0 AS DECIMAL(38, 6)) END AS cum_unaccounted
    FROM (
        SELECT
            *,
            sum(unclaimed) OVER (PARTITION BY hour, node ORDER BY gpu_uuid
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
                AS cum_unclaimed,
            sum(unclaimed) OVER (PARTITION BY hour, node) AS total_unclaimed
        FROM grid
    )
),

states AS (
    SELECT
        *,
        cum_unaccounted - coalesce(lag(cum_unaccounted) OVER (
            PARTITION BY hour, node ORDER BY gpu_uuid), 0) AS unaccounted
    FROM spread
)

SELECT
    hour,
    CAST(hour AS DATE) AS day,
    cluster,
    node,
    pool,
    gpu_model,
    gpu_uuid,
    gpu_index,
    CAST(3600 AS DECIMAL(38, 6)) AS capacity_gpu_seconds,
    observed AS observed_gpu_seconds,
    charged AS charged_gpu_seconds,
    conflict AS conflict_gpu_seconds,
    infrastructure AS infrastructure_gpu_seconds,
    unaccounted AS unaccounted_gpu_seconds,
    observed - charged - conflict - infrastructure - unaccounted AS idle_gpu_seconds,
    CAST(3600 AS DECIMAL(38, 6)) - observed AS not_observed_gpu_seconds,
    busy AS busy_gpu_seconds,
    holders
FROM states
