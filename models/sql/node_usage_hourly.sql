-- node_usage_hourly
-- Grain: one row per (UTC hour, node) for every hour of the days [$first_day, $end_day) and
--   every node of the GPU inventory (nodes), plus any node that holds allocations but is missing
--   from the inventory (capacity 0, so it shows as over-allocated).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads nodes, slinky_slurm_names,
--   allocation_usage_hourly
--   (already rebuilt for those days) and the temp table usage_samples
--   (gpu_usage_hourly_samples.sql).
-- capacity_gpu_seconds = the inventory's GPU count x 3600: the inventory covers both schedulers'
--   nodes, and a node's GPUs do not disappear when Kubernetes cordons it or a scrape is missed
--   (k8s_node_capacity covers Kubernetes nodes only, from samples).
-- allocated_gpu_seconds: both domains (also split by domain); unallocated = capacity - allocated,
--   negative only where the node is over-allocated (double-scheduled GPUs).
-- busy_gpu_seconds / measured_gpu_seconds: what dcgm-exporter saw on the node's GPUs, whoever
--   held them (a GPU-reading with two holders counts once, at its highest busy fraction); not
--   limited to allocations, so busy on an unallocated GPU shows here. Exact decimal sums.
WITH inventory AS (
    -- a Slurm node name that is a Slinky slurmd pod's is that pod's Kubernetes node's GPUs, not
    -- more capacity (the temp table slinky_slurm_names, models/build.py)
    SELECT
        node,
        any_value(cluster) AS cluster,
        any_value(pool) AS pool,
        any_value(gpu_model) AS gpu_model,
        max(gpu_count) AS capacity_gpus
    FROM nodes
    WHERE node NOT IN (SELECT name FROM slinky_slurm_names)
    GROUP BY node
),

inventory_hours AS (
    SELECT
        *,
        unnest(generate_series(
            CAST($first_day AS TIMESTAMP),
            CAST($end_day AS TIMESTAMP) - INTERVAL 1 HOUR,
            INTERVAL 1 HOUR
        )) AS hour
    FROM inventory
),

allocated AS (
    SELECT
        node,
        hour,
        any_value(cluster) AS cluster,
        any_value(pool) AS pool,
        any_value(gpu_model) AS gpu_model,
        sum(allocated_gpu_seconds) AS allocated_gpu_seconds,
        coalesce(sum(allocated_gpu_seconds) FILTER (WHERE domain = 'slurm'), 0)
            AS slurm_gpu_seconds,
        coalesce(sum(allocated_gpu_seconds) FILTER (WHERE domain = 'kubernetes'), 0)
            AS kubernetes_gpu_seconds
    FROM allocation_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY node, hour
),

readings AS (
    -- one reading per GPU and span, whoever held it
    SELECT
        node, gpu_uuid, gpu_instance,
        greatest(span_start, CAST($first_day AS TIMESTAMP)) AS from_ts,
        least(span_end, CAST($end_day AS TIMESTAMP)) AS to_ts,
        max(busy_fraction) AS busy_fraction
    FROM usage_samples
    GROUP BY ALL
),

reading_hours AS (
    SELECT
        *,
        unnest(generate_series(
            date_trunc('hour', from_ts),
            date_trunc('hour', to_ts - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR
        )) AS hour
    FROM readings
    WHERE to_ts > from_ts
),

physical AS (
    SELECT
        node,
        hour,
        sum(CAST(seconds AS DECIMAL(38, 6))) AS measured_gpu_seconds,
        sum(CAST(seconds * busy_fraction AS DECIMAL(38, 6))) AS busy_gpu_seconds
    FROM (
        SELECT
            *,
            epoch(least(to_ts, hour + INTERVAL 1 HOUR) - greatest(from_ts, hour)) AS seconds
        FROM reading_hours
    )
    GROUP BY node, hour
),

node_hours AS (
    SELECT node, hour FROM inventory_hours
    UNION
    SELECT node, hour FROM allocated
)

SELECT
    h.hour,
    CAST(h.hour AS DATE) AS day,
    coalesce(i.cluster, a.cluster) AS cluster,
    h.node,
    coalesce(i.pool, a.pool) AS pool,
    coalesce(i.gpu_model, a.gpu_model) AS gpu_model,
    coalesce(i.capacity_gpus, 0) AS capacity_gpus,
    coalesce(i.capacity_gpus, 0) * 3600 AS capacity_gpu_seconds,
    coalesce(a.allocated_gpu_seconds, 0)::BIGINT AS allocated_gpu_seconds,
    coalesce(a.slurm_gpu_seconds, 0)::BIGINT AS slurm_gpu_seconds,
    coalesce(a.kubernetes_gpu_seconds, 0)::BIGINT AS kubernetes_gpu_seconds,
    (coalesce(i.capacity_gpus, 0) * 3600 - coalesce(a.allocated_gpu_seconds, 0))::BIGINT
        AS unallocated_gpu_seconds,
    coalesce(p.measured_gpu_seconds, 0) AS measured_gpu_seconds,
    coalesce(p.busy_gpu_seconds, 0) AS busy_gpu_seconds
FROM node_hours AS h
LEFT JOIN inventory_hours AS i ON i.node = h.node AND i.hour = h.hour
LEFT JOIN allocated AS a ON a.node = h.node AND a.hour = h.hour
LEFT JOIN physical AS p ON p.node = h.node AND p.hour = h.hour
