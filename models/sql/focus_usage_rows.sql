-- focus_usage_rows
-- Grain: one FOCUS 1.2 row (ChargeCategory 'Usage') per charged allocation piece of the temp
--   table focus_input (focus_charges.sql's columns, from the ledger for open days and from
--   frozen_allocation_charges for the days of closed weeks, plus invoice_week,
--   invoice_revision and source), in the billing period [$billing_start, $billing_end).
-- Parameters: $billing_period (YYYY-Www or YYYY-MM), $billing_start, $billing_end (TIMESTAMP),
--   $provider, $publisher, $issuer, $account_id, $account_name, $fallback_currency (the
--   BillingCurrency of unpriced pieces).
-- Costs are exact to 1e-13 (a cost is charged_ms x rate / 3.6e6: not a finite decimal), cut so
--   that the pieces of one invoice line (x_InvoiceLineKey) add up to the line's exact total:
--   each piece is the rounded running total minus the previous one (in integers), so
--   their sum rounded half up to cents is the line's amount and their GPU-hours x 3600 rounded
--   half up is its gpu_seconds (docs/focus.md "Exact costs"). No discounts: List = Contracted
--   = Billed = Effective cost. An unpriced piece (rate null) costs 0 with x_Unpriced.
WITH keyed AS (
    SELECT
        *,
        concat_ws('|', $billing_period, cost_centre, team, person, domain, gpu_model,
                  coalesce(CAST(rate_valid_from AS VARCHAR), ''),
                  coalesce(CAST(rate_per_gpu_hour AS VARCHAR), ''), currency)
            AS line_key,
        coalesce(CAST(rate_per_gpu_hour * 1000000 AS HUGEINT), 0) AS rate_micro,
        -- FOCUS strings are ASCII (StringHandling): other characters as their UTF-8 bytes
        -- (\xE3\x83...); the name as given is x_Name
        CAST(encode(coalesce(name, '')) AS VARCHAR) AS ascii_name
    FROM focus_input
),

running AS (
    SELECT
        *,
        sum(CAST(charged_ms AS HUGEINT)) OVER (
            PARTITION BY line_key ORDER BY day, domain, source_key, node, start_ts
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running_ms
    FROM keyed
),

-- running totals in 1e-13 units: cost = ms x micro-units x 25 / 9 (1e13 / (3.6e6 ms per hour
-- x 1e6)) rounded half up (a half cent is a whole number of units, so it is kept exactly);
-- hours = ms x 25e6 / 9 (1e13 / 3.6e6) rounded up (a half second is not a whole number of
-- units: rounding up keeps a line of x.5 s at or above it, so it rounds half up as the line)
scaled AS (
    SELECT
        *,
        (running_ms * rate_micro * 50 + 9) // 18 AS running_cost,
        (running_ms * 25000000 + 8) // 9 AS running_hours
    FROM running
),

pieces AS (
    SELECT
        *,
        CAST(running_cost - coalesce(lag(running_cost) OVER w, 0) AS DECIMAL(38, 0))
            * CAST(0.0000000000001 AS DECIMAL(14, 13)) AS cost,
        CAST(running_hours - coalesce(lag(running_hours) OVER w, 0) AS DECIMAL(38, 0))
            * CAST(0.0000000000001 AS DECIMAL(14, 13)) AS hours
    FROM scaled
    WINDOW w AS (PARTITION BY line_key ORDER BY day, domain, source_key, node, start_ts)
)

SELECT
    cost AS BilledCost,
    $account_id AS BillingAccountId,
    $account_name AS BillingAccountName,
    CASE WHEN currency = '' THEN $fallback_currency ELSE currency END AS BillingCurrency,
    CAST($billing_end AS TIMESTAMP) AS BillingPeriodEnd,
    CAST($billing_start AS TIMESTAMP) AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    CAST(NULL AS VARCHAR) AS ChargeClass,
    CASE domain
        WHEN 'slurm' THEN 'Slurm job ' || job_id || ' (' || ascii_name || ')'
        ELSE 'Kubernetes pod ' || coalesce(k8s_namespace, '') || '/' || ascii_name
    END || ' on ' || node || ': ' || CAST(gpus AS VARCHAR) || ' x '
        || coalesce(slice_profile, physical_gpu_model, 'unknown GPU')
        || CASE WHEN sharing IS NOT NULL THEN ' (' || sharing || ')' ELSE '' END
        || ', ' || strftime(day, '%Y-%m-%d') AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    CAST(NULL AS VARCHAR) AS CommitmentDiscountStatus,
    CAST(day + INTERVAL 1 DAY AS TIMESTAMP) AS ChargePeriodEnd,
    CAST(day AS TIMESTAMP) AS ChargePeriodStart,
    hours AS ConsumedQuantity,
    CASE WHEN profile_priced THEN 'MIG Instance-Hours' ELSE 'GPU-Hours' END AS ConsumedUnit,
    cost AS ContractedCost,
    coalesce(rate_per_gpu_hour, 0) AS ContractedUnitPrice,
    cost AS EffectiveCost,
    $account_id || '-' || invoice_week
        || CASE WHEN invoice_revision IS NULL THEN '' ELSE '-r' || invoice_revision END
        AS InvoiceId,
    $issuer AS InvoiceIssuerName,
    cost AS ListCost,
    coalesce(rate_per_gpu_hour, 0) AS ListUnitPrice,
    'Standard' AS PricingCategory,
    CASE WHEN currency = '' THEN $fallback_currency ELSE currency END AS PricingCurrency,
    coalesce(rate_per_gpu_hour, 0) AS PricingCurrencyContractedUnitPrice,
    cost AS PricingCurrencyEffectiveCost,
    coalesce(rate_per_gpu_hour, 0) AS PricingCurrencyListUnitPrice,
    hours AS PricingQuantity,
    CASE WHEN profile_priced THEN 'MIG Instance-Hours' ELSE 'GPU-Hours' END AS PricingUnit,
    $provider AS ProviderName,
    $publisher AS PublisherName,
    source_key AS ResourceId,
    CASE domain
        WHEN 'slurm' THEN cluster || ' job ' || job_id || ' ' || ascii_name
        ELSE coalesce(k8s_namespace || '/', '') || CAST(encode(coalesce(name, job_id)) AS VARCHAR)
    END AS ResourceName,
    CASE domain WHEN 'slurm' THEN 'Slurm job' ELSE 'Kubernetes pod' END AS ResourceType,
    'Compute' AS ServiceCategory,
    CASE domain WHEN 'slurm' THEN 'Slurm GPU compute' ELSE 'Kubernetes GPU compute' END
        AS ServiceName,
    CASE domain WHEN 'slurm' THEN 'Other (Compute)' ELSE 'Containers' END AS ServiceSubcategory,
    coalesce(gpu_model, 'unknown') AS SkuId,
    CASE WHEN profile_priced THEN 'MIG instance time' ELSE 'GPU time' END AS SkuMeter,
    CAST(json_object('x_GpuModel', gpu_model, 'x_Domain', domain,
                     'x_RateValidFrom', CAST(rate_valid_from AS VARCHAR),
                     'x_Unpriced', rate_per_gpu_hour IS NULL) AS VARCHAR) AS SkuPriceDetails,
    coalesce(gpu_model, 'unknown') || ':' || domain || ':'
        || CASE WHEN rate_per_gpu_hour IS NULL THEN 'unpriced'
                ELSE coalesce(CAST(rate_valid_from AS VARCHAR), 'open') || ':'
                     || CAST(rate_per_gpu_hour AS VARCHAR) || ' ' || currency END
        AS SkuPriceId,
    cost_centre AS SubAccountId,
    cost_centre AS SubAccountName,
    'Cost Centre' AS SubAccountType,
    CAST(json_object('gpuledger/person', person, 'gpuledger/team', team,
                     'gpuledger/cost-centre', cost_centre, 'gpuledger/scheduler', domain,
                     'gpuledger/cluster', cluster, 'gpuledger/node', node) AS VARCHAR) AS Tags,
    domain AS x_Domain,
    cluster AS x_Cluster,
    node AS x_Node,
    CASE WHEN domain = 'slurm' THEN job_id END AS x_Job,
    CASE WHEN domain = 'kubernetes' THEN name END AS x_Pod,
    CASE WHEN domain = 'kubernetes' THEN job_id END AS x_Workload,
    name AS x_Name,
    k8s_namespace AS x_Namespace,
    kueue_queue AS x_Queue,
    slurm_user AS x_SlurmUser,
    slurm_account AS x_SlurmAccount,
    qos AS x_Qos,
    person AS x_Person,
    team AS x_Team,
    physical_gpu_model AS x_GpuModel,
    gpus AS x_Gpus,
    coalesce(sharing, 'whole') AS x_Sharing,
    slice_profile AS x_SliceProfile,
    CAST(CASE WHEN sharing IS NOT NULL THEN gpu_seconds ELSE 0 END AS DECIMAL(38, 6)) / 3600
        AS x_SliceHours,
    CAST(charged_ms AS DECIMAL(38, 0)) * CAST(0.001 AS DECIMAL(4, 3)) AS x_ChargedGpuSeconds,
    round(measured_gpu_seconds / 3600, 9) AS x_MeasuredGpuHours,
    round(busy_gpu_seconds / 3600, 9) AS x_BusyGpuHours,
    round((measured_gpu_seconds - busy_gpu_seconds) / 3600, 9) AS x_IdleGpuHours,
    start_ts AS x_AllocationStart,
    end_ts AS x_AllocationEnd,
    rate_per_gpu_hour IS NULL AS x_Unpriced,
    line_key AS x_InvoiceLineKey,
    invoice_week AS x_InvoiceWeek,
    CAST(NULL AS VARCHAR) AS x_CorrectedPeriod,
    source AS x_Source
FROM pieces
