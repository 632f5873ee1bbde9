-- detect_incidents
-- Grain: one row per incident (kind double_scheduled, partial_gang or idle_allocation) whose
--   start_ts falls on a UTC day in [$first_day, $last_day]; `day` is that day (an incident
--   crossing midnight stays one row, filed under the day it started).
-- Parameters: $first_day, $last_day (DATE, inclusive). Reads the temp tables det_double
--   (detect_double_scheduled.sql), det_gang (detect_partial_gang.sql), det_idle
--   (detect_idle.sql), det_low_eff (detect_low_efficiency.sql), det_shared
--   (detect_shared_overcommit.sql), det_mig_layout (detect_mig_layout_change.sql),
--   det_over_capacity (detect_over_capacity.sql), det_unaccounted (detect_unaccounted_use.sql), all in one
--   candidate layout, and rate_choice.
-- cost = gpu_seconds x the rate per GPU-hour / 3600, rounded to cents once per incident. The rate
--   is the one the chargeback uses for the allocation the incident charges (rate_domain,
--   gpu_model, qos) on the incident's day: the temp table rate_choice, made by
--   rate_for_allocation.sql (the one rate precedence) over those keys. No valid rate: cost and
--   currency stay null (flagged, never priced at zero).
-- incident_id: kind and an md5 of what identifies the incident (its allocations and, for gangs,
--   the attempt), so re-building gives the same ids.
WITH candidates AS (
    SELECT * FROM det_double
    UNION ALL BY NAME
    SELECT * FROM det_gang
    UNION ALL BY NAME
    SELECT * FROM det_idle
    UNION ALL BY NAME
    SELECT * FROM det_low_eff
    UNION ALL BY NAME
    SELECT * FROM det_shared
    UNION ALL BY NAME
    SELECT * FROM det_mig_layout
    UNION ALL BY NAME
    SELECT * FROM det_over_capacity
    UNION ALL BY NAME
    SELECT * FROM det_unaccounted
),

in_range AS (
    SELECT *, CAST(start_ts AS DATE) AS day
    FROM candidates
    WHERE CAST(start_ts AS DATE) >= $first_day AND CAST(start_ts AS DATE) <= $last_day
      -- findings without wasted GPU-s
      AND (gpu_seconds > 0 OR kind IN ('low_efficiency', 'mig_layout_change'))
)

SELECT
    c.kind || '-' || substr(md5(c.kind || '|' || c.identity_key), 1, 16) AS incident_id,
    c.day,
    c.kind,
    c.domain,
    c.cluster,
    c.node,
    c.gpu_uuids,
    c.gpus,
    c.start_ts,
    c.end_ts,
    c.gpu_seconds,
    r.rate_per_gpu_hour,
    -- exact half-up to the cent in integers, as chargeback.sql (a DECIMAL division in DuckDB
    -- is a DOUBLE)
    CAST(CAST((c.gpu_seconds::HUGEINT * CAST(r.rate_per_gpu_hour * 1000000 AS HUGEINT)
               + 18000000) // 36000000 AS DECIMAL(18, 0)) * 0.01 AS DECIMAL(18, 2)) AS cost,
    r.currency,
    c.slurm_job,
    c.k8s_workload,
    coalesce(c.person, 'unattributed') AS person,
    coalesce(c.team, 'unattributed') AS team,
    coalesce(c.cost_centre, 'unattributed') AS cost_centre,
    c.other_person,
    c.other_team,
    c.other_cost_centre,
    c.evidence_level,
    c.share,
    c.detail,
    c.evidence
FROM in_range AS c
LEFT JOIN rate_choice AS r
    ON r.day = c.day AND r.domain = c.rate_domain
    AND r.gpu_model IS NOT DISTINCT FROM c.gpu_model AND r.qos = coalesce(c.qos, '')
