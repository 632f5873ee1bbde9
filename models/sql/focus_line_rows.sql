-- focus_line_rows
-- Grain: one FOCUS 1.2 row per frozen invoice line (frozen_invoice_lines, latest revision) of a
--   week closed before allocation-level charges were frozen (frozen_allocation_charges), for
--   the weeks of the temp table focus_line_weeks (closed_period, revision, period_kind: 'week'
--   for a week's own file, 'day' for the days of it inside a month), on the days of the billing
--   period.
-- Parameters: $billing_period, $billing_start, $billing_end (TIMESTAMP), $provider,
--   $publisher, $issuer, $account_id, $account_name, $fallback_currency.
-- Line grain, so ResourceId is null (docs/focus.md "Weeks closed before ..."). BilledCost =
--   EffectiveCost = the line's amount as issued (cents); ListCost = ContractedCost = rate x the
--   line's gpu_hours (the list price before the once-per-line rounding, so that FOCUS's
--   ListUnitPrice x PricingQuantity = ListCost holds).
SELECT
    coalesce(f.amount, 0) AS BilledCost,
    $account_id AS BillingAccountId,
    $account_name AS BillingAccountName,
    CASE WHEN f.currency = '' THEN $fallback_currency ELSE f.currency END AS BillingCurrency,
    CAST($billing_end AS TIMESTAMP) AS BillingPeriodEnd,
    CAST($billing_start AS TIMESTAMP) AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    CAST(NULL AS VARCHAR) AS ChargeClass,
    'Invoice line ' || f.period || ': ' || f.domain || ' ' || coalesce(f.gpu_model, 'unknown GPU')
        || ' GPU-time of ' || f.person || ', ' || f.team || ', ' || f.cost_centre
        || ' (' || CAST(f.allocations AS VARCHAR) || ' allocations)' AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    CAST(NULL AS VARCHAR) AS CommitmentDiscountStatus,
    CAST(f.period_start + CASE f.period_kind WHEN 'day' THEN INTERVAL 1 DAY
         ELSE INTERVAL 7 DAY END AS TIMESTAMP) AS ChargePeriodEnd,
    CAST(f.period_start AS TIMESTAMP) AS ChargePeriodStart,
    f.gpu_hours AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    CAST(coalesce(f.rate_per_gpu_hour, 0) * f.gpu_hours AS DECIMAL(38, 13)) AS ContractedCost,
    coalesce(f.rate_per_gpu_hour, 0) AS ContractedUnitPrice,
    coalesce(f.amount, 0) AS EffectiveCost,
    $account_id || '-' || f.closed_period || '-r' || CAST(w.revision AS VARCHAR) AS InvoiceId,
    $issuer AS InvoiceIssuerName,
    CAST(coalesce(f.rate_per_gpu_hour, 0) * f.gpu_hours AS DECIMAL(38, 13)) AS ListCost,
    coalesce(f.rate_per_gpu_hour, 0) AS ListUnitPrice,
    'Standard' AS PricingCategory,
    CASE WHEN f.currency = '' THEN $fallback_currency ELSE f.currency END AS PricingCurrency,
    coalesce(f.rate_per_gpu_hour, 0) AS PricingCurrencyContractedUnitPrice,
    coalesce(f.amount, 0) AS PricingCurrencyEffectiveCost,
    coalesce(f.rate_per_gpu_hour, 0) AS PricingCurrencyListUnitPrice,
    f.gpu_hours AS PricingQuantity,
    'GPU-Hours' AS PricingUnit,
    $provider AS ProviderName,
    $publisher AS PublisherName,
    CAST(NULL AS VARCHAR) AS ResourceId,
    CAST(NULL AS VARCHAR) AS ResourceName,
    CAST(NULL AS VARCHAR) AS ResourceType,
    'Compute' AS ServiceCategory,
    CASE f.domain WHEN 'slurm' THEN 'Slurm GPU compute' ELSE 'Kubernetes GPU compute' END
        AS ServiceName,
    CASE f.domain WHEN 'slurm' THEN 'Other (Compute)' ELSE 'Containers' END
        AS ServiceSubcategory,
    coalesce(f.gpu_model, 'unknown') AS SkuId,
    'GPU time' AS SkuMeter,
    CAST(json_object('x_GpuModel', f.gpu_model, 'x_Domain', f.domain,
                     'x_RateValidFrom', CAST(f.rate_valid_from AS VARCHAR),
                     'x_Unpriced', f.rate_per_gpu_hour IS NULL) AS VARCHAR) AS SkuPriceDetails,
    coalesce(f.gpu_model, 'unknown') || ':' || f.domain || ':'
        || CASE WHEN f.rate_per_gpu_hour IS NULL THEN 'unpriced'
                ELSE coalesce(CAST(f.rate_valid_from AS VARCHAR), 'open') || ':'
                     || CAST(f.rate_per_gpu_hour AS VARCHAR) || ' ' || f.currency END
        AS SkuPriceId,
    f.cost_centre AS SubAccountId,
    f.cost_centre AS SubAccountName,
    'Cost Centre' AS SubAccountType,
    CAST(json_object('gpuledger/person', f.person, 'gpuledger/team', f.team,
                     'gpuledger/cost-centre', f.cost_centre, 'gpuledger/scheduler', f.domain)
         AS VARCHAR) AS Tags,
    f.domain AS x_Domain,
    f.person AS x_Person,
    f.team AS x_Team,
    f.gpu_model AS x_GpuModel,
    CAST(f.gpu_seconds AS DECIMAL(38, 3)) AS x_ChargedGpuSeconds,
    f.measured_gpu_hours AS x_MeasuredGpuHours,
    f.busy_gpu_hours AS x_BusyGpuHours,
    f.idle_gpu_hours AS x_IdleGpuHours,
    f.rate_per_gpu_hour IS NULL AS x_Unpriced,
    concat_ws('|', $billing_period, f.cost_centre, f.team, f.person, f.domain, f.gpu_model,
              coalesce(CAST(f.rate_valid_from AS VARCHAR), ''),
              coalesce(CAST(f.rate_per_gpu_hour AS VARCHAR), ''), f.currency)
        AS x_InvoiceLineKey,
    f.closed_period AS x_InvoiceWeek,
    'frozen_line' AS x_Source
FROM frozen_invoice_lines AS f
INNER JOIN focus_line_weeks AS w
    ON w.closed_period = f.closed_period AND w.revision = f.revision
    AND w.period_kind = f.period_kind
WHERE f.period_start >= CAST($billing_start AS DATE) AND f.period_start < CAST($billing_end AS DATE)
