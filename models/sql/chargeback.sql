-- chargeback
-- Grain: one invoice line per (period, cost_centre, team, person, domain, gpu_model, rate line).
--   A rate change inside a period gives two lines (one per rate), so every line has one rate.
-- Parameters: $period_kind ('day' | 'week' | 'month'), $first_day, $end_day (DATE, half-open:
--   the days of allocations that are priced; the runner passes whole periods).
-- Rate choice per allocation day: rate_card rows for the GPU model valid that day whose domain
--   and qos are empty (any) or equal; the most specific wins (domain over qos over neither), then
--   the latest valid_from. An allocation with no rate keeps rate and amount null (flagged).
-- amount = gpu_seconds x rate / 3600, computed in DECIMAL and rounded to cents once per line.
WITH charged AS (
    SELECT * FROM allocations
    WHERE day >= $first_day AND day < $end_day
),

candidates AS (
    SELECT
        c.day, c.domain, c.source_key, c.node, c.start_ts,
        r.rate_per_gpu_hour, r.currency, r.valid_from AS rate_valid_from,
        row_number() OVER (
            PARTITION BY c.day, c.domain, c.source_key, c.node, c.start_ts
            ORDER BY (r.domain <> '')::INT * 2 + (r.qos <> '')::INT DESC,
                     r.valid_from DESC NULLS LAST
        ) AS preference
    FROM charged AS c
    INNER JOIN rate_card AS r
        ON r.gpu_model = c.gpu_model
        AND (r.domain = '' OR r.domain = c.domain)
        AND (r.qos = '' OR r.qos = coalesce(c.qos, ''))
        AND (r.valid_from IS NULL OR r.valid_from <= c.day)
        AND (r.valid_to IS NULL OR c.day < r.valid_to)
),

priced AS (
    SELECT c.*, p.rate_per_gpu_hour, p.currency, p.rate_valid_from
    FROM charged AS c
    LEFT JOIN candidates AS p
        ON p.preference = 1 AND p.day = c.day AND p.domain = c.domain
        AND p.source_key = c.source_key AND p.node = c.node AND p.start_ts = c.start_ts
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
    CAST(round(CAST(sum(gpu_seconds) AS DECIMAL(38, 6)) * rate_per_gpu_hour / 3600, 2)
         AS DECIMAL(18, 2)) AS amount
FROM periods
GROUP BY period, period_start, cost_centre, team, person, domain, gpu_model, rate_valid_from,
    rate_per_gpu_hour, currency
