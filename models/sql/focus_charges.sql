-- focus_charges
-- Grain: one row per charged allocation piece: an allocations row (day, domain, source_key,
--   node, start_ts: a Slurm run or a pod on one node, cut at UTC midnight) on the days in
--   [$first_day, $end_day), with what its invoice line charges it (docs/focus.md).
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations,
--   allocation_usage_hourly and the temp table allocation_prices (allocation_prices.sql: the one
--   pricing rule of the invoice lines).
-- Columns: the invoice line key (cost_centre, team, person, domain, priced gpu_model,
--   rate_valid_from, rate_per_gpu_hour, currency: chargeback.sql's grouping), charged_ms (what
--   the rate multiplies, ms: the line's gpu_seconds and amount are sums of it), and the busy and
--   measured seconds in the unit charged, scaled for shared GPUs exactly as chargeback.sql's
--   `priced` step does (tests/export check both agree per invoice line).
WITH usage AS (
    SELECT
        day, domain, source_key, node, start_ts,
        sum(measured_gpu_seconds) AS measured_gpu_seconds,
        sum(busy_gpu_seconds) AS busy_gpu_seconds
    FROM allocation_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY ALL
)

SELECT
    a.day, a.domain, a.cluster, a.source_key, a.job_id, a.name, a.node, a.start_ts, a.end_ts,
    a.gpu_model AS physical_gpu_model, ap.priced_model AS gpu_model, ap.profile_priced,
    a.sharing, a.slice_profile, a.slices, a.gpus, a.gpu_seconds,
    a.slurm_user, a.slurm_account, a.qos, a.k8s_namespace, a.kueue_queue,
    a.person, a.team, a.cost_centre,
    ap.rate_valid_from, ap.rate_per_gpu_hour, coalesce(ap.currency, '') AS currency,
    CAST(ap.charged_ms AS BIGINT) AS charged_ms,
    CAST(CASE WHEN ap.profile_priced OR a.sharing IS NULL OR a.gpu_seconds = 0
            OR a.physical_gpu_seconds IS NULL THEN coalesce(u.measured_gpu_seconds, 0)
         ELSE coalesce(u.measured_gpu_seconds, 0) * a.physical_gpu_seconds / a.gpu_seconds
         END AS DECIMAL(38, 6)) AS measured_gpu_seconds,
    CAST(CASE WHEN ap.profile_priced OR a.sharing IS NULL OR a.gpu_seconds = 0
            OR a.physical_gpu_seconds IS NULL THEN coalesce(u.busy_gpu_seconds, 0)
         ELSE coalesce(u.busy_gpu_seconds, 0) * a.physical_gpu_seconds / a.gpu_seconds
         END AS DECIMAL(38, 6)) AS busy_gpu_seconds
FROM allocations AS a
INNER JOIN allocation_prices AS ap
    ON ap.day = a.day AND ap.domain = a.domain AND ap.source_key = a.source_key
    AND ap.node = a.node AND ap.start_ts = a.start_ts
LEFT JOIN usage AS u
    ON u.day = a.day AND u.domain = a.domain AND u.source_key = a.source_key
    AND u.node = a.node AND u.start_ts = a.start_ts
WHERE a.day >= $first_day AND a.day < $end_day
