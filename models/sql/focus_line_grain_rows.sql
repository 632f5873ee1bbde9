-- focus_line_grain_rows
-- Grain: one FOCUS 1.2 row per invoice-level line of the billing period, from two inputs:
--   (a) 'frozen_line': every frozen invoice line (frozen_invoice_lines, latest revision) of a
--       week closed before allocation-level charges were frozen (frozen_allocation_charges), for
--       the weeks of the temp table focus_line_weeks (closed_period, revision, period_kind:
--       'week' for a week's own file, 'day' for the days of it inside a month), on the days of
--       the billing period. BilledCost = EffectiveCost = the line's amount as issued (cents);
--       ListCost = ContractedCost = rate x the line's gpu_hours (the list price before the
--       once-per-line rounding, so that ListUnitPrice x PricingQuantity = ListCost holds).
--   (b) 'adjustment': every adjustment line (invoice_adjustments) carried by a week of the
--       billing period: what late data changed in a closed week, per invoice line key
--       (models/closing.py). FOCUS 1.2 ChargeClass: "Correction" when the row corrects a
--       previously invoiced billing period; ChargePeriodStart/End = the corrected (original)
--       ISO week, BillingPeriod = the billing period carrying it; signed costs (the
--       adjustment's amount, already rounded to cents: it is the difference of two lines
--       rounded once each) and signed GPU-hours; x_CorrectedPeriod names the week corrected.
-- Parameters: $billing_period, $billing_start, $billing_end (TIMESTAMP), $provider,
--   $publisher, $issuer, $account_id, $account_name, $fallback_currency.
-- Line grain, so ResourceId is null (docs/focus.md): adjustments are differences of invoice
--   lines, not of allocations. The FOCUS mapping of a line is written once, below `lines`.
WITH lines AS (
    SELECT
        f.amount, f.currency, f.cost_centre, f.team, f.person, f.domain, f.gpu_model,
        f.rate_valid_from, f.rate_per_gpu_hour, f.gpu_hours, f.gpu_seconds,
        CAST(NULL AS VARCHAR) AS charge_class,
        'Invoice line ' || f.period || ': ' || f.domain || ' '
            || coalesce(f.gpu_model, 'unknown GPU') || ' GPU-time of ' || f.person || ', '
            || f.team || ', ' || f.cost_centre
            || ' (' || CAST(f.allocations AS VARCHAR) || ' allocations)' AS description,
        CAST(f.period_start AS TIMESTAMP) AS charge_start,
        CAST(f.period_start + CASE f.period_kind WHEN 'day' THEN INTERVAL 1 DAY
             ELSE INTERVAL 7 DAY END AS TIMESTAMP) AS charge_end,
        CAST(coalesce(f.rate_per_gpu_hour, 0) * f.gpu_hours AS DECIMAL(38, 13)) AS list_cost,
        $account_id || '-' || f.closed_period || '-r' || CAST(w.revision AS VARCHAR)
            AS invoice_id,
        f.measured_gpu_hours, f.busy_gpu_hours, f.idle_gpu_hours,
        f.closed_period AS invoice_week,
        CAST(NULL AS VARCHAR) AS corrected_period,
        'frozen_line' AS source
    FROM frozen_invoice_lines AS f
    INNER JOIN focus_line_weeks AS w
        ON w.closed_period = f.closed_period AND w.revision = f.revision
        AND w.period_kind = f.period_kind
    WHERE f.period_start >= CAST($billing_start AS DATE)
        AND f.period_start < CAST($billing_end AS DATE)

    UNION ALL BY NAME

    SELECT
        a.amount, a.currency, a.cost_centre, a.team, a.person, a.domain, a.gpu_model,
        a.rate_valid_from, a.rate_per_gpu_hour, a.gpu_hours, a.gpu_seconds,
        'Correction' AS charge_class,
        'Correction of ' || a.original_period || ' (' || a.reason || '): ' || a.domain || ' '
            || coalesce(a.gpu_model, 'unknown GPU') || ' GPU-time of ' || a.person || ', '
            || a.team || ', ' || a.cost_centre AS description,
        CAST(a.original_period_start AS TIMESTAMP) AS charge_start,
        CAST(a.original_period_start + INTERVAL 7 DAY AS TIMESTAMP) AS charge_end,
        coalesce(a.amount, 0) AS list_cost,
        $account_id || '-' || a.period
            || coalesce('-r' || (SELECT max(p.revision) FROM closed_periods AS p
                                 WHERE p.period = a.period), '') AS invoice_id,
        CAST(NULL AS DECIMAL(18, 6)) AS measured_gpu_hours,
        CAST(NULL AS DECIMAL(18, 6)) AS busy_gpu_hours,
        CAST(NULL AS DECIMAL(18, 6)) AS idle_gpu_hours,
        a.period AS invoice_week,
        a.original_period AS corrected_period,
        'adjustment' AS source
    FROM invoice_adjustments AS a
    WHERE a.period_start >= CAST($billing_start AS DATE)
        AND a.period_start < CAST($billing_end AS DATE)
)

SELECT
    coalesce(f.amount, 0) AS BilledCost,
    $account_id AS BillingAccountId,
    $account_name AS BillingAccountName,
    CASE WHEN f.currency = '' THEN $fallback_currency ELSE f.currency END AS BillingCurrency,
    CAST($billing_end AS TIMESTAMP) AS BillingPeriodEnd,
    CAST($billing_start AS TIMESTAMP) AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    f.charge_class AS ChargeClass,
    f.description AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    CAST(NULL AS VARCHAR) AS CommitmentDiscountStatus,
    f.charge_end AS ChargePeriodEnd,
    f.charge_start AS ChargePeriodStart,
    f.gpu_hours AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    f.list_cost AS ContractedCost,
    coalesce(f.rate_per_gpu_hour, 0) AS ContractedUnitPrice,
    coalesce(f.amount, 0) AS EffectiveCost,
    f.invoice_id AS InvoiceId,
    $issuer AS InvoiceIssuerName,
    f.list_cost AS ListCost,
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
    f.invoice_week AS x_InvoiceWeek,
    f.corrected_period AS x_CorrectedPeriod,
    f.source AS x_Source
FROM lines AS f
