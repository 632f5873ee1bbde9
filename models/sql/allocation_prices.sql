-- allocation_prices
-- Grain: one row per allocations row (day, domain, source_key, node, start_ts) on the days in
--   [$first_day, $end_day): the rate its GPU-time is charged at and what the rate multiplies.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads allocations and the temp table
--   rate_choice (rate_for_allocation.sql: the one rate precedence).
-- The one pricing rule of allocations, shared GPUs included (docs/shared-gpus.md), read by the
--   invoice lines (chargeback.sql) and the shared-GPU summary (shared_gpu_daily.sql):
--   - a MIG profile the rate card prices itself (gpu_model = the profile, e.g. 1g.10gb) is
--     charged per instance-hour at that rate, on a line of that model (profile_priced);
--   - everything else at its GPU model's rate, on its physical GPU-time
--     (allocations.physical_gpu_seconds; = gpu_seconds for whole GPUs).
--   charged_ms = what the rate multiplies, in milliseconds. No valid rate: rate and currency
--   stay null (flagged by the callers, never priced at zero).
SELECT
    a.day, a.domain, a.source_key, a.node, a.start_ts,
    p.rate_per_gpu_hour IS NOT NULL AS profile_priced,
    CASE WHEN p.rate_per_gpu_hour IS NOT NULL THEN a.slice_profile ELSE a.gpu_model END
        AS priced_model,
    coalesce(p.rate_per_gpu_hour, r.rate_per_gpu_hour) AS rate_per_gpu_hour,
    CASE WHEN p.rate_per_gpu_hour IS NOT NULL THEN p.currency ELSE r.currency END AS currency,
    CASE WHEN p.rate_per_gpu_hour IS NOT NULL THEN p.rate_valid_from
         ELSE r.rate_valid_from END AS rate_valid_from,
    CASE WHEN p.rate_per_gpu_hour IS NOT NULL THEN a.gpu_seconds::HUGEINT * 1000
         ELSE CAST(coalesce(a.physical_gpu_seconds, a.gpu_seconds) * 1000 AS HUGEINT)
    END AS charged_ms
FROM allocations AS a
LEFT JOIN rate_choice AS r
    ON r.day = a.day AND r.domain = a.domain AND r.gpu_model IS NOT DISTINCT FROM a.gpu_model
    AND r.qos = coalesce(a.qos, '')
LEFT JOIN rate_choice AS p
    ON a.slice_profile IS NOT NULL AND p.day = a.day AND p.domain = a.domain
    AND p.gpu_model = a.slice_profile AND p.qos = coalesce(a.qos, '')
WHERE a.day >= $first_day AND a.day < $end_day
