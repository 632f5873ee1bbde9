-- chargeback
-- Grain: one invoice line per (period, cost_centre, team, person, domain, gpu_model, rate line).
--   A rate change inside a period gives two lines (one per rate), so every line has one rate.
-- Parameters: $period_kind ('day' | 'week' | 'month'), $first_day, $end_day (DATE, half-open:
--   the days of allocations that are priced; the runner passes whole periods).
-- Rate per allocation day: the temp table rate_choice (rate_for_allocation.sql over the
--   (day, domain, gpu_model, qos) keys of these allocations), the one rate precedence that the
--   incidents' cost uses too. An allocation with no rate keeps rate and amount null (flagged).
-- amount = gpu_seconds x rate / 3600, exact, rounded half up to cents once per line.
-- Busy and idle are shown beside the charge, never priced: measured_gpu_hours = the allocated
--   GPU-hours dcgm-exporter covered (allocation_usage_hourly of the same allocations rows; 0 where
--   nothing was measured or usage was not built), busy_gpu_hours their utilization-weighted part,
--   idle_gpu_hours = measured - busy (after rounding, so busy + idle = measured exactly).
WITH usage AS (
    SELECT
        day, domain, source_key, node, start_ts,
        sum(measured_gpu_seconds) AS measured_gpu_seconds,
        sum(busy_gpu_seconds) AS busy_gpu_seconds
    FROM allocation_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY ALL
),

charged AS (
    SELECT
        a.*,
        coalesce(u.measured_gpu_seconds, 0) AS measured_gpu_seconds,
        coalesce(u.busy_gpu_seconds, 0) AS busy_gpu_seconds
    FROM allocations AS a
    LEFT JOIN usage AS u
        ON u.day = a.day AND u.domain = a.domain AND u.source_key = a.source_key
        AND u.node = a.node AND u.start_ts = a.start_ts
    WHERE a.day >= $first_day AND a.day < $end_day
),

priced AS (
    SELECT c.*, r.rate_per_gpu_hour, r.currency, r.rate_valid_from
    FROM charged AS c
    LEFT JOIN rate_choice AS r
        ON r.day = c.day AND r.domain = c.domain AND r.gpu_model IS NOT DISTINCT FROM c.gpu_model
        AND r.qos = coalesce(c.qos, '')
),

periods AS (
    SELECT
        *,
        CASE $period_kind
            WHEN 'day' THEN strftime(day, '%Y-%m-%d')
            WHEN 'week' THEN strftime(day, '%G-W%V')
            ELSE strftime(day, '%Y-%m')
        END AS period,
        CASE $period_kind
            WHEN 'day' THEN day
            WHEN 'week' THEN CAST(date_trunc('week', day) AS DATE)
            ELSE CAST(date_trunc('month', day) AS DATE)
        END AS period_start,
        $period_kind AS period_kind
    FROM priced
)

SELECT
    any_value(period_kind) AS period_kind,
    period,
    period_start,
    cost_centre,
    team,
    person,
    domain,
    gpu_model,
    rate_valid_from,
    rate_per_gpu_hour,
    coalesce(currency, '') AS currency,
    sum(gpu_seconds)::BIGINT AS gpu_seconds,
    round(sum(gpu_seconds) / 3600.0, 6) AS gpu_hours,
    count(DISTINCT source_key) AS allocations,
    -- exact half-up rounding to the cent in integers (a DECIMAL divided in DuckDB becomes a
    -- DOUBLE, and 79.475 would round down): micro-units x seconds / (3600 s x 10^4 per cent)
    CAST(CAST((sum(gpu_seconds)::HUGEINT * CAST(rate_per_gpu_hour * 1000000 AS HUGEINT)
               + 18000000) // 36000000 AS DECIMAL(18, 0)) * 0.01 AS DECIMAL(18, 2)) AS amount,
    CAST(round(sum(measured_gpu_seconds) / 3600, 6) AS DECIMAL(18, 6)) AS measured_gpu_hours,
    CAST(round(sum(busy_gpu_seconds) / 3600, 6) AS DECIMAL(18, 6)) AS busy_gpu_hours,
    CAST(round(sum(measured_gpu_seconds) / 3600, 6) AS DECIMAL(18, 6))
        - CAST(round(sum(busy_gpu_seconds) / 3600, 6) AS DECIMAL(18, 6)) AS idle_gpu_hours
FROM periods
GROUP BY period, period_start, cost_centre, team, person, domain, gpu_model, rate_valid_from,
    rate_per_gpu_hour, currency
