-- detect_mig_layout_change
-- Grain: one row per change of a node's MIG layout (node_gpu_slices, sharing 'mig': the set of
--   profiles and instance counts, or nvidia.com/mig.config) at an instant on a day in
--   [$scan_first, $scan_last], per source that saw it (ksm, scontrol).
-- Parameters: $scan_first, $scan_last (DATE, inclusive).
-- A finding, not waste: gpu_seconds 0. Holders across the change may have lost their instances
--   (MIG reconfiguration needs the GPU idle): the detail names the allocations on the node that
--   held MIG instances across the instant.
-- Columns: the candidate layout of detect_incidents.sql.
WITH layouts AS (
    SELECT cluster, node, source, valid_from,
        string_agg(slice_profile || ' x' || units, ', ' ORDER BY slice_profile) AS layout,
        any_value(mig_config) AS mig_config
    FROM node_gpu_slices
    WHERE sharing = 'mig'
    GROUP BY ALL
),

changes AS (
    SELECT * FROM (
        SELECT *, lag(layout) OVER w AS old_layout, lag(mig_config) OVER w AS old_config
        FROM layouts
        WINDOW w AS (PARTITION BY cluster, node, source ORDER BY valid_from)
    )
    WHERE old_layout IS NOT NULL
        AND (old_layout <> layout OR old_config IS DISTINCT FROM mig_config)
        AND CAST(valid_from AS DATE) >= $scan_first AND CAST(valid_from AS DATE) <= $scan_last
),

across AS (
    SELECT c.cluster, c.node, c.source, c.valid_from,
        count(a.source_key) AS holders,
        string_agg(a.domain || ' ' || coalesce(a.job_id, a.source_key), ', '
                   ORDER BY a.domain, a.source_key) AS who
    FROM changes AS c
    LEFT JOIN allocations AS a
        ON a.cluster = c.cluster AND a.node = c.node AND a.sharing = 'mig'
        AND a.start_ts < c.valid_from AND a.end_ts > c.valid_from
    GROUP BY ALL
)

SELECT
    'mig_layout_change' AS kind,
    CASE c.source WHEN 'scontrol' THEN 'slurm' ELSE 'kubernetes' END AS domain,
    c.cluster,
    c.node,
    CAST(NULL AS VARCHAR[]) AS gpu_uuids,
    0 AS gpus,
    c.valid_from AS start_ts,
    c.valid_from AS end_ts,
    CAST(0 AS BIGINT) AS gpu_seconds,
    CAST(NULL AS VARCHAR) AS slurm_job,
    CAST(NULL AS VARCHAR) AS k8s_workload,
    CAST(NULL AS VARCHAR) AS person,
    CAST(NULL AS VARCHAR) AS team,
    CAST(NULL AS VARCHAR) AS cost_centre,
    CAST(NULL AS VARCHAR) AS other_person,
    CAST(NULL AS VARCHAR) AS other_team,
    CAST(NULL AS VARCHAR) AS other_cost_centre,
    CAST(NULL AS VARCHAR) AS evidence_level,
    CAST(NULL AS DOUBLE) AS share,
    CASE c.source WHEN 'scontrol' THEN 'slurm' ELSE 'kubernetes' END AS rate_domain,
    CAST(NULL AS VARCHAR) AS gpu_model,
    CAST(NULL AS VARCHAR) AS qos,
    c.cluster || '|' || c.node || '|' || c.source || '|'
        || strftime(c.valid_from, '%Y-%m-%d %H:%M:%S') AS identity_key,
    'MIG layout of ' || c.node || ' changed at ' || strftime(c.valid_from, '%Y-%m-%d %H:%M:%S')
        || ' (' || c.source || '): ' || c.old_layout || ' -> ' || c.layout
        || coalesce(' (mig.config ' || c.old_config || ' -> ' || c.mig_config || ')', '')
        || '; ' || CASE WHEN x.holders > 0
            THEN x.holders || ' allocation(s) held MIG instances across it: ' || x.who
            ELSE 'no allocation held MIG instances across it' END AS detail,
    'node_gpu_slices{cluster=' || c.cluster || ',node=' || c.node || ',source=' || c.source
        || ',valid_from=' || strftime(c.valid_from, '%Y-%m-%d %H:%M:%S') || '}' AS evidence
FROM changes AS c
INNER JOIN across AS x USING (cluster, node, source, valid_from)
