-- chargeback
-- Grain: one invoice line per (period, cost_centre, team, person, domain, gpu_model, rate line).
--   A rate change inside a period gives two lines (one per rate), so every line has one rate.
-- Parameters: $period_kind ('day' | 'week' | 'month'), $first_day, $end_day (DATE, half-open:
--   the days of allocations that are priced; the runner passes whole periods).
-- Rate per allocation row: the temp table allocation_prices (allocation_prices.sql: the one
--   pricing rule, over rate_choice, the rate precedence the incidents' cost uses too). An
--   allocation with no rate keeps rate and amount null (flagged).
-- Shared GPUs (docs/shared-gpus.md): a line charges physical GPU-time (allocations
--   .physical_gpu_seconds: MIG instances their fraction, time-shared GPUs split among holders),
--   at the physical GPU model's rate; a MIG profile the rate card prices itself (gpu_model = the
--   profile, e.g. 1g.10gb) is charged per instance-hour at that rate, on a line of that model.
--   gpu_seconds / gpu_hours = the physical GPU-time charged (rounded to the second on the line);
--   slice_hours = the units x hours of the shared allocations in the line (0: whole GPUs only).
-- amount = charged seconds x rate / 3600, exact to the millisecond, rounded half up to cents once
--   per line.
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
    SELECT c.* REPLACE (ap.priced_model AS gpu_model),
        ap.rate_per_gpu_hour, ap.currency, ap.rate_valid_from, ap.charged_ms,
        CASE WHEN c.sharing IS NOT NULL THEN c.gpu_seconds ELSE 0 END AS slice_seconds,
        -- measured and busy time in the unit charged: a shared allocation's readings cover its
        -- units' seconds, scaled to its physical share (a priced profile: instance time)
        -- (exact DECIMAL sums either way: whole GPUs keep their readings untouched)
        CASE WHEN ap.profile_priced OR c.sharing IS NULL OR c.gpu_seconds = 0
                OR c.physical_gpu_seconds IS NULL THEN c.measured_gpu_seconds
             ELSE CAST(c.measured_gpu_seconds * c.physical_gpu_seconds / c.gpu_seconds
                       AS DECIMAL(38, 6)) END AS charged_measured,
        CASE WHEN ap.profile_priced OR c.sharing IS NULL OR c.gpu_seconds = 0
                OR c.physical_gpu_seconds IS NULL THEN c.busy_gpu_seconds
             ELSE CAST(c.busy_gpu_seconds * c.physical_gpu_seconds / c.gpu_seconds
                       AS DECIMAL(38, 6)) END AS charged_busy
    FROM charged AS c
    INNER JOIN allocation_prices AS ap
        ON ap.day = c.day AND ap.domain = c.domain AND ap.source_key = c.source_key
        AND ap.node = c.node AND ap.start_ts = c.start_ts
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
    ((sum(charged_ms) + 500) // 1000)::BIGINT AS gpu_seconds,
    round(sum(charged_ms) / 3600000.0, 6) AS gpu_hours,
    round(sum(slice_seconds) / 3600.0, 6) AS slice_hours,
    count(DISTINCT source_key) AS allocations,
    -- exact half-up rounding to the cent in integers (a DECIMAL divided in DuckDB becomes a
    -- DOUBLE, and 79.475 would round down): micro-units x milliseconds / (3.6e6 ms x 10^4 per
    -- cent)
    CAST(CAST((sum(charged_ms)::HUGEINT * CAST(rate_per_gpu_hour * 1000000 AS HUGEINT)
               + 18000000000) // 36000000000 AS DECIMAL(18, 0)) * 0.01 AS DECIMAL(18, 2))
        AS amount,
    CAST(round(sum(charged_measured) / 3600, 6) AS DECIMAL(18, 6))
        AS measured_gpu_hours,
    CAST(round(sum(charged_busy) / 3600, 6) AS DECIMAL(18, 6))
        AS busy_gpu_hours,
    CAST(round(sum(charged_measured) / 3600, 6) AS DECIMAL(18, 6))
        - CAST(round(sum(charged_busy) / 3600, 6) AS DECIMAL(18, 6))
        AS idle_gpu_hours
FROM periods
GROUP BY period, period_start, cost_centre, team, person, domain, gpu_model, rate_valid_from,
    rate_per_gpu_hour, currency
