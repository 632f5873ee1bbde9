-- shared_gpu_daily
-- Grain: one row per (UTC day, cluster, domain, sharing mode, MIG profile, GPU model, currency
--   of its rate: amounts in two currencies never add; '' when unpriced) of the
--   allocations on days in [$first_day, $end_day), whole GPUs included (sharing 'whole'), so the
--   share of the estate that runs shared is a ratio of two rows of one table.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations,
--   allocation_usage_hourly and the temp table allocation_prices (allocation_prices.sql, the
--   one pricing rule the invoice lines use too).
-- Columns: allocations, slice_seconds (units x seconds), physical_gpu_seconds (charged),
--   busy_slice_seconds (readings' busy time of the units), amount (exact to the cent once per
--   row, NULL when a rate is missing), cost_per_busy_slice_hour = amount / busy slice-hours.
WITH usage AS (
    SELECT day, domain, source_key, node, start_ts, sum(busy_gpu_seconds) AS busy
    FROM allocation_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY ALL
),

priced AS (
    SELECT a.day, a.cluster, a.domain, coalesce(a.sharing, 'whole') AS sharing,
        a.slice_profile, a.gpu_model, a.source_key, a.gpu_seconds,
        coalesce(a.physical_gpu_seconds, a.gpu_seconds) AS physical_gpu_seconds,
        coalesce(u.busy, 0) AS busy,
        ap.rate_per_gpu_hour AS rate, ap.currency, ap.charged_ms
    FROM allocations AS a
    LEFT JOIN usage AS u
        ON u.day = a.day AND u.domain = a.domain AND u.source_key = a.source_key
        AND u.node = a.node AND u.start_ts = a.start_ts
    INNER JOIN allocation_prices AS ap
        ON ap.day = a.day AND ap.domain = a.domain AND ap.source_key = a.source_key
        AND ap.node = a.node AND ap.start_ts = a.start_ts
    WHERE a.day >= $first_day AND a.day < $end_day
)

SELECT
    day, cluster, domain, sharing, slice_profile, gpu_model,
    coalesce(currency, '') AS currency,
    count(DISTINCT source_key) AS allocations,
    sum(gpu_seconds)::BIGINT AS slice_seconds,
    CAST(sum(physical_gpu_seconds) AS DECIMAL(18, 3)) AS physical_gpu_seconds,
    CAST(sum(busy) AS DECIMAL(18, 6)) AS busy_slice_seconds,
    -- half-up to the cent in integers, as chargeback.sql; NULL when any row lacks a rate
    CASE WHEN count(*) FILTER (WHERE rate IS NULL) = 0 THEN
        CAST(CAST((sum(charged_ms::HUGEINT * CAST(rate * 1000000 AS HUGEINT)) + 18000000000)
                  // 36000000000 AS DECIMAL(18, 0)) * 0.01 AS DECIMAL(18, 2)) END AS amount,
    CASE WHEN count(*) FILTER (WHERE rate IS NULL) = 0 AND sum(busy) > 0 THEN
        CAST(sum(charged_ms::HUGEINT * CAST(rate * 1000000 AS HUGEINT)) / 3.6e12
             / (sum(busy) / 3600) AS DOUBLE) END AS cost_per_busy_slice_hour
FROM priced
GROUP BY day, cluster, domain, sharing, slice_profile, gpu_model, coalesce(currency, '')
