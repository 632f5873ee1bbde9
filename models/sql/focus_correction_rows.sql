-- focus_correction_rows
-- Grain: one FOCUS 1.2 row (ChargeClass 'Correction') per adjustment line (invoice_adjustments)
--   carried by a week of the billing period: what late data changed in a closed week, per
--   invoice line key (models/closing.py).
-- Parameters: $billing_period, $billing_start, $billing_end (TIMESTAMP: the carrying weeks'
--   Mondays in [$billing_start, $billing_end)), $provider, $publisher, $issuer, $account_id,
--   $account_name, $fallback_currency.
-- FOCUS 1.2 ChargeClass: "Correction" when the row corrects a previously invoiced billing
--   period; ChargePeriodStart/End = the corrected (original) ISO week, BillingPeriod = the
--   billing period carrying it; signed costs (the adjustment's amount, already rounded to
--   cents: it is the difference of two lines rounded once each) and signed GPU-hours.
--   x_CorrectedPeriod names the week corrected. Line grain (ResourceId null): adjustments are
--   differences of invoice lines, not of allocations.
SELECT
    coalesce(a.amount, 0) AS BilledCost,
    $account_id AS BillingAccountId,
    $account_name AS BillingAccountName,
    CASE WHEN a.currency = '' THEN $fallback_currency ELSE a.currency END AS BillingCurrency,
    CAST($billing_end AS TIMESTAMP) AS BillingPeriodEnd,
    CAST($billing_start AS TIMESTAMP) AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    'Correction' AS ChargeClass,
    'Correction of ' || a.original_period || ' (' || a.reason || '): ' || a.domain || ' '
        || coalesce(a.gpu_model, 'unknown GPU') || ' GPU-time of ' || a.person || ', '
        || a.team || ', ' || a.cost_centre AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    CAST(NULL AS VARCHAR) AS CommitmentDiscountStatus,
    CAST(a.original_period_start + INTERVAL 7 DAY AS TIMESTAMP) AS ChargePeriodEnd,
    CAST(a.original_period_start AS TIMESTAMP) AS ChargePeriodStart,
    a.gpu_hours AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    coalesce(a.amount, 0) AS ContractedCost,
    coalesce(a.rate_per_gpu_hour, 0) AS ContractedUnitPrice,
    coalesce(a.amount, 0) AS EffectiveCost,
    $account_id || '-' || a.period
        || coalesce('-r' || (SELECT max(p.revision) FROM closed_periods AS p
                             WHERE p.period = a.period), '') AS InvoiceId,
    $issuer AS InvoiceIssuerName,
    coalesce(a.amount, 0) AS ListCost,
    coalesce(a.rate_per_gpu_hour, 0) AS ListUnitPrice,
    'Standard' AS PricingCategory,
    CASE WHEN a.currency = '' THEN $fallback_currency ELSE a.currency END AS PricingCurrency,
    coalesce(a.rate_per_gpu_hour, 0) AS PricingCurrencyContractedUnitPrice,
    coalesce(a.amount, 0) AS PricingCurrencyEffectiveCost,
    coalesce(a.rate_per_gpu_hour, 0) AS PricingCurrencyListUnitPrice,
    a.gpu_hours AS PricingQuantity,
    'GPU-Hours' AS PricingUnit,
    $provider AS ProviderName,
    $publisher AS PublisherName,
    CAST(NULL AS VARCHAR) AS ResourceId,
    CAST(NULL AS VARCHAR) AS ResourceName,
    CAST(NULL AS VARCHAR) AS ResourceType,
    'Compute' AS ServiceCategory,
    CASE a.domain WHEN 'slurm' THEN 'Slurm GPU compute' ELSE 'Kubernetes GPU compute' END
        AS ServiceName,
    CASE a.domain WHEN 'slurm' THEN 'Other (Compute)' ELSE 'Containers' END
        AS ServiceSubcategory,
    coalesce(a.gpu_model, 'unknown') AS SkuId,
    'GPU time' AS SkuMeter,
    CAST(json_object('x_GpuModel', a.gpu_model, 'x_Domain', a.domain,
                     'x_RateValidFrom', CAST(a.rate_valid_from AS VARCHAR),
                     'x_Unpriced', a.rate_per_gpu_hour IS NULL) AS VARCHAR) AS SkuPriceDetails,
    coalesce(a.gpu_model, 'unknown') || ':' || a.domain || ':'
        || CASE WHEN a.rate_per_gpu_hour IS NULL THEN 'unpriced'
                ELSE coalesce(CAST(a.rate_valid_from AS VARCHAR), 'open') || ':'
                     || CAST(a.rate_per_gpu_hour AS VARCHAR) || ' ' || a.currency END
        AS SkuPriceId,
    a.cost_centre AS SubAccountId,
    a.cost_centre AS SubAccountName,
    'Cost Centre' AS SubAccountType,
    CAST(json_object('gpuledger/person', a.person, 'gpuledger/team', a.team,
                     'gpuledger/cost-centre', a.cost_centre, 'gpuledger/scheduler', a.domain)
         AS VARCHAR) AS Tags,
    a.domain AS x_Domain,
    a.person AS x_Person,
    a.team AS x_Team,
    a.gpu_model AS x_GpuModel,
    CAST(a.gpu_seconds AS DECIMAL(38, 3)) AS x_ChargedGpuSeconds,
    a.rate_per_gpu_hour IS NULL AS x_Unpriced,
    concat_ws('|', $billing_period, a.cost_centre, a.team, a.person, a.domain, a.gpu_model,
              coalesce(CAST(a.rate_valid_from AS VARCHAR), ''),
              coalesce(CAST(a.rate_per_gpu_hour AS VARCHAR), ''), a.currency)
        AS x_InvoiceLineKey,
    a.period AS x_InvoiceWeek,
    a.original_period AS x_CorrectedPeriod,
    'adjustment' AS x_Source
FROM invoice_adjustments AS a
WHERE a.period_start >= CAST($billing_start AS DATE) AND a.period_start < CAST($billing_end AS DATE)
