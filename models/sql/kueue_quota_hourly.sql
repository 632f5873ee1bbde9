-- kueue_quota_hourly
-- Grain: one row per (cluster, UTC hour, scope, cohort, ClusterQueue, flavor, resource) for the
--   UTC days in [$first_day, $end_day): scope 'queue' per ClusterQueue; scope 'cohort' the sum
--   of the cohort's queues (cluster_queue NULL; a queue without cohort is its own, cohort = its
--   name). Every hour of a day on which a queue has quota gauges gets a row: an hour without
--   samples is known = false with NULL figures (unknown, never 0 % used).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads kueue_queue_resources (the GPU
--   resources the connector read) and kueue_pending.
-- Columns (docs/kubernetes.md "Kueue quota history"): GPU-hours are time-weighted (value x
--   seconds each scrape stands for / 3600); borrowed = usage above nominal and lendable =
--   unused nominal capped by the lending limit, both per scrape (connector); lent = the share
--   of the cohort's least(borrowed, lendable) in the hour, pro rata to each queue's lendable.
WITH gauges AS (
    SELECT cluster, window_start AS hour_start, nullif(cohort, '') AS cohort, cluster_queue,
           flavor, resource, metric, value_seconds, covered_seconds, above_nominal_seconds,
           lendable_seconds, "last"
    FROM kueue_queue_resources
    WHERE window_start >= $first_day AND window_start < $end_day
),

series AS (
    SELECT DISTINCT cluster, cohort, cluster_queue, flavor, resource,
           date_trunc('day', hour_start) AS day_start
    FROM gauges
),

hours AS (
    SELECT s.cluster, s.cohort, s.cluster_queue, s.flavor, s.resource, h.hour_start
    FROM series AS s
    CROSS JOIN LATERAL (
        SELECT unnest(generate_series(s.day_start, s.day_start + INTERVAL 23 HOUR,
                                      INTERVAL 1 HOUR)) AS hour_start
    ) AS h
),

per_queue AS (
    SELECT h.cluster, h.hour_start, h.cohort, h.cluster_queue, h.flavor, h.resource,
           max(g.covered_seconds) FILTER (WHERE g.metric = 'usage') AS covered_seconds,
           max(g.value_seconds) FILTER (WHERE g.metric = 'usage') / 3600 AS usage_gpu_hours,
           max(g.value_seconds) FILTER (WHERE g.metric = 'nominal_quota') / 3600
               AS nominal_gpu_hours,
           max(g.value_seconds) FILTER (WHERE g.metric = 'reservation') / 3600
               AS reservation_gpu_hours,
           max(g.above_nominal_seconds) FILTER (WHERE g.metric = 'usage') / 3600
               AS borrowed_gpu_hours,
           max(g.lendable_seconds) FILTER (WHERE g.metric = 'usage') / 3600
               AS lendable_gpu_hours,
           max(g."last") FILTER (WHERE g.metric = 'borrowing_limit' AND isfinite(g."last"))
               AS borrowing_limit_gpus,
           max(g."last") FILTER (WHERE g.metric = 'lending_limit' AND isfinite(g."last"))
               AS lending_limit_gpus
    FROM hours AS h
    LEFT JOIN gauges AS g
        ON g.cluster = h.cluster AND g.hour_start = h.hour_start
        AND g.cohort IS NOT DISTINCT FROM h.cohort AND g.cluster_queue = h.cluster_queue
        AND g.flavor IS NOT DISTINCT FROM h.flavor AND g.resource = h.resource
    GROUP BY ALL
),

queues AS (
    SELECT cluster, hour_start, cohort, cluster_queue, flavor, resource,
           coalesce(covered_seconds, 0) > 0 AND usage_gpu_hours IS NOT NULL
               AND nominal_gpu_hours IS NOT NULL AS known,
           borrowing_limit_gpus, lending_limit_gpus, coalesce(covered_seconds, 0)
               AS covered_seconds,
           nominal_gpu_hours, usage_gpu_hours, reservation_gpu_hours,
           coalesce(borrowed_gpu_hours, 0) AS borrowed_gpu_hours,
           -- a queue without a cohort has nobody to lend to
           CASE WHEN cohort IS NULL THEN 0 ELSE coalesce(lendable_gpu_hours, 0) END
               AS lendable_gpu_hours
    FROM per_queue
),

pool AS (  -- per cohort, flavor and resource: what its borrowers took of its lendable quota
    SELECT cluster, hour_start, cohort, flavor, resource,
           least(round(sum(borrowed_gpu_hours), 9), round(sum(lendable_gpu_hours), 9)) AS taken,
           round(sum(lendable_gpu_hours), 9) AS lendable
    FROM queues
    WHERE known AND cohort IS NOT NULL
    GROUP BY ALL
),

pending AS (
    SELECT cluster, window_start AS hour_start, cluster_queue,
           sum(pending_seconds) FILTER (WHERE status = 'active') AS active,
           sum(pending_seconds) FILTER (WHERE status = 'inadmissible') AS inadmissible
    FROM kueue_pending
    WHERE window_start >= $first_day AND window_start < $end_day
    GROUP BY ALL
),

queue_rows AS (
    SELECT q.cluster, q.hour_start, 'queue' AS scope, q.cohort, q.cluster_queue, q.flavor,
           q.resource, q.known, q.borrowing_limit_gpus, q.lending_limit_gpus,
           q.covered_seconds,
           CASE WHEN q.known THEN q.nominal_gpu_hours END AS nominal_gpu_hours,
           CASE WHEN q.known THEN q.usage_gpu_hours END AS usage_gpu_hours,
           CASE WHEN q.known THEN q.reservation_gpu_hours END AS reservation_gpu_hours,
           CASE WHEN q.known THEN q.borrowed_gpu_hours END AS borrowed_gpu_hours,
           CASE WHEN q.known THEN q.lendable_gpu_hours END AS lendable_gpu_hours,
           CASE WHEN q.known THEN round(coalesce(
               q.lendable_gpu_hours * p.taken / nullif(p.lendable, 0), 0), 9) END AS lent_gpu_hours,
           CASE WHEN q.known THEN q.usage_gpu_hours / nullif(q.nominal_gpu_hours, 0) END
               AS quota_used_share,
           CASE WHEN q.known THEN coalesce(d.active, 0) END AS pending_active_seconds,
           CASE WHEN q.known THEN coalesce(d.inadmissible, 0) END
               AS pending_inadmissible_seconds
    FROM queues AS q
    LEFT JOIN pool AS p
        ON p.cluster = q.cluster AND p.hour_start = q.hour_start AND p.cohort = q.cohort
        AND p.flavor IS NOT DISTINCT FROM q.flavor AND p.resource = q.resource
    LEFT JOIN pending AS d
        ON d.cluster = q.cluster AND d.hour_start = q.hour_start
        AND d.cluster_queue = q.cluster_queue
),

-- a cohort is known in an hour only when all its queues are: a partial sum is no figure.
-- Sums of DOUBLEs are rounded (9 decimals of a GPU-hour, far below a GPU-second): their last
-- bits depend on the order rows are added in, and a rebuild must give the same figures
cohort_rows AS (
    SELECT cluster, hour_start, 'cohort' AS scope, coalesce(cohort, cluster_queue) AS cohort,
           NULL::VARCHAR AS cluster_queue, flavor, resource, bool_and(known) AS known,
           NULL::DOUBLE AS borrowing_limit_gpus,  -- limits are a queue's, not a cohort's
           NULL::DOUBLE AS lending_limit_gpus,
           max(covered_seconds) AS covered_seconds,
           CASE WHEN bool_and(known) THEN round(sum(nominal_gpu_hours), 9) END AS nominal_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(usage_gpu_hours), 9) END AS usage_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(reservation_gpu_hours), 9) END
               AS reservation_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(borrowed_gpu_hours), 9) END AS borrowed_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(lendable_gpu_hours), 9) END AS lendable_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(lent_gpu_hours), 9) END AS lent_gpu_hours,
           CASE WHEN bool_and(known) THEN round(sum(usage_gpu_hours), 9)
               / nullif(round(sum(nominal_gpu_hours), 9), 0) END AS quota_used_share,
           -- seconds with pending work do not add across queues (they overlap)
           NULL::DOUBLE AS pending_active_seconds,
           NULL::DOUBLE AS pending_inadmissible_seconds
    FROM queue_rows
    GROUP BY cluster, hour_start, coalesce(cohort, cluster_queue), flavor, resource
)

SELECT hour_start::DATE AS day, * FROM queue_rows
UNION ALL BY NAME
SELECT hour_start::DATE AS day, * FROM cohort_rows
