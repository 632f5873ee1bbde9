-- detect_low_efficiency
-- Grain: one row per low-efficiency finding: a Slurm run or pod (allocations, domain and
--   source_key) whose GPUs' mean busy fraction over its life (the pieces in the scan) stayed
--   below its policy's efficiency_threshold, the life lasting at least efficiency_min_seconds.
-- Parameters: $scan_first, $scan_last (DATE, inclusive: the allocation days read),
--   $scan_start, $scan_end (TIMESTAMP: the minute buckets read), $efficiency_coverage (share of
--   the held GPU-time that samples must cover: a job mostly unseen is not judged, missing
--   samples are never read as 0 %). Reads idle_policy (first match by priority on cluster and
--   Slurm partition, i.e. allocations.pool, or Kubernetes namespace; efficiency_threshold 0 or
--   efficiency_min_seconds 0: off) and det_idle.
-- Apart from idle: a job with an idle_allocation incident, or in a double-scheduling or a
--   partial gang, is not reported here too (those incidents say more), and the finding holds
--   no wasted GPU-seconds (gpu_seconds = 0, so its
--   cost is 0): slow work is work, whose GPU-time stays the owner's charge; the GPU-time held is
--   in `detail`. One GPU-second is thus never in two incidents.
-- Columns: the candidate layout of detect_incidents.sql.
WITH sampled_nodes AS (
    -- only allocations on nodes with dcgm samples in the scan can be judged at all
    SELECT DISTINCT node FROM gpu_utilization
    WHERE bucket_start >= $scan_start AND bucket_start < $scan_end
),

pieces AS (
    SELECT a.*, n.job_id_raw,
           date_diff('second', a.start_ts, a.end_ts) AS piece_seconds
    FROM allocations AS a
    SEMI JOIN sampled_nodes AS sn ON sn.node = a.node
    LEFT JOIN slurm_node_allocations AS n
        ON a.domain = 'slurm' AND n.run_key = a.source_key AND n.node = a.node
    WHERE a.day >= $scan_first AND a.day <= $scan_last AND a.gpus > 0
      AND a.domain IN ('slurm', 'kubernetes')
),

policy AS (
    SELECT a.domain, a.source_key,
           arg_min({'threshold': p.efficiency_threshold,
                    'min_seconds': p.efficiency_min_seconds}, p.priority) AS rule
    FROM (SELECT DISTINCT domain, source_key, cluster, pool, k8s_namespace FROM pieces) AS a
    INNER JOIN idle_policy AS p
        ON (p.cluster = '' OR p.cluster = a.cluster)
        AND (p.namespace = '' OR (a.domain = 'kubernetes' AND p.namespace = a.k8s_namespace))
        AND (p.partition = '' OR (a.domain = 'slurm' AND p.partition = a.pool))
    GROUP BY a.domain, a.source_key
),

judged AS (
    -- allocations the rule could flag; the rest skip the join with the samples
    SELECT p.domain, p.source_key, p.rule.threshold, p.rule.min_seconds
    FROM policy AS p
    -- equi-joins only: a join over every allocation x every incident does not scale
    ANTI JOIN (SELECT domain, split_part(identity_key, '|', 1) AS source_key FROM det_idle) AS i
        ON i.domain = p.domain AND i.source_key = p.source_key
    ANTI JOIN (
        -- the allocations of a double-scheduling or a partial gang (whose GPU-time those hold)
        SELECT a.domain, a.source_key
        FROM (SELECT DISTINCT domain, source_key, node, job_id FROM pieces
              WHERE domain = 'slurm') AS a
        INNER JOIN det_double AS d ON d.slurm_job = a.job_id AND d.node = a.node
        UNION ALL
        SELECT a.domain, a.source_key
        FROM (SELECT DISTINCT domain, source_key, node,
                     k8s_namespace || '/' || job_id AS workload
              FROM pieces WHERE domain = 'kubernetes') AS a
        INNER JOIN (SELECT node, k8s_workload FROM det_double
                    UNION ALL SELECT NULL, k8s_workload FROM det_gang) AS d
            ON d.k8s_workload = a.workload AND coalesce(d.node, a.node) = a.node
    ) AS o ON o.domain = p.domain AND o.source_key = p.source_key
    WHERE p.rule.threshold > 0 AND p.rule.min_seconds > 0
),

lives AS (
    SELECT p.domain, p.source_key, any_value(j.threshold) AS threshold,
           any_value(j.min_seconds) AS min_seconds,
           min(p.start_ts) AS start_ts, max(p.end_ts) AS end_ts,
           sum(p.gpus * p.piece_seconds) AS held_gpu_seconds
    FROM pieces AS p
    INNER JOIN judged AS j ON j.domain = p.domain AND j.source_key = p.source_key
    GROUP BY p.domain, p.source_key
    HAVING date_diff('second', min(p.start_ts), max(p.end_ts)) >= any_value(j.min_seconds)
),

samples AS (
    SELECT p.domain, p.source_key, u.busy_fraction,
           greatest(60, coalesce(d.scrape_interval_s, 60)) AS step_seconds
    FROM pieces AS p
    SEMI JOIN lives AS l ON l.domain = p.domain AND l.source_key = p.source_key
    INNER JOIN gpu_utilization AS u
        ON u.node = p.node AND u.bucket_start >= p.start_ts AND u.bucket_start < p.end_ts
        AND CASE WHEN p.domain = 'kubernetes'
            THEN u.namespace = p.k8s_namespace AND u.pod = p.name
                AND coalesce(u.pod_uid, p.source_key) = p.source_key
            ELSE u.pod IS NULL AND u.hpc_job IN (CAST(p.job_id_raw AS VARCHAR), p.job_id) END
    LEFT JOIN gpu_busy_daily AS d
        ON d.cluster = u.cluster AND d.gpu_uuid = u.gpu_uuid
        AND coalesce(d.gpu_instance, '') = coalesce(u.gpu_instance, '')
        AND d.day = CAST(u.bucket_start AS DATE)
    WHERE u.bucket_start >= $scan_start AND u.bucket_start < $scan_end
),

measured AS (
    SELECT domain, source_key, avg(busy_fraction) AS mean_busy, count(*) AS sample_count,
           sum(least(step_seconds, 3600)) AS covered_gpu_seconds
    FROM samples
    GROUP BY domain, source_key
),

flagged AS (
    SELECT l.*, m.mean_busy, m.sample_count, m.covered_gpu_seconds
    FROM lives AS l
    INNER JOIN measured AS m USING (domain, source_key)
    WHERE m.mean_busy < l.threshold
      AND m.covered_gpu_seconds >= $efficiency_coverage * l.held_gpu_seconds
),

owners AS (
    SELECT p.domain, p.source_key,
           any_value(p.cluster) AS cluster,
           string_agg(DISTINCT p.node, ';' ORDER BY p.node) AS nodes,
           arg_min(p.day, p.start_ts) AS day,
           arg_min(p.node, p.start_ts) AS first_node,
           arg_min(p.job_id, p.start_ts) AS job_id,
           arg_min(p.name, p.start_ts) AS name,
           arg_min(p.k8s_namespace, p.start_ts) AS k8s_namespace,
           arg_min(p.person, p.start_ts) AS person,
           arg_min(p.team, p.start_ts) AS team,
           arg_min(p.cost_centre, p.start_ts) AS cost_centre,
           arg_min(p.gpu_model, p.start_ts) AS gpu_model,
           arg_min(p.qos, p.start_ts) AS qos,
           max(p.gpus) AS max_piece_gpus
    FROM pieces AS p
    SEMI JOIN flagged AS f ON f.domain = p.domain AND f.source_key = p.source_key
    GROUP BY p.domain, p.source_key
)

SELECT
    'low_efficiency' AS kind,
    f.domain,
    o.cluster,
    o.nodes AS node,
    CAST(NULL AS VARCHAR[]) AS gpu_uuids,
    o.max_piece_gpus AS gpus,
    f.start_ts,
    f.end_ts,
    CAST(0 AS BIGINT) AS gpu_seconds,
    CASE WHEN f.domain = 'slurm' THEN o.job_id END AS slurm_job,
    CASE WHEN f.domain = 'kubernetes' THEN o.k8s_namespace || '/' || o.job_id END
        AS k8s_workload,
    o.person,
    o.team,
    o.cost_centre,
    CAST(NULL AS VARCHAR) AS other_person,
    CAST(NULL AS VARCHAR) AS other_team,
    CAST(NULL AS VARCHAR) AS other_cost_centre,
    CAST(NULL AS VARCHAR) AS evidence_level,
    f.mean_busy AS share,
    f.domain AS rate_domain,
    o.gpu_model,
    o.qos,
    f.source_key || '|' || strftime(f.start_ts, '%Y-%m-%d %H:%M:%S') AS identity_key,
    CASE WHEN f.domain = 'slurm' THEN 'Slurm job ' || o.job_id
        ELSE 'pod ' || o.k8s_namespace || '/' || o.name END
        || ': mean ' || round(f.mean_busy * 100, 1) || '% busy (below '
        || round(f.threshold * 100, 1) || '%) over its '
        || round(date_diff('second', f.start_ts, f.end_ts) / 3600.0, 2) || ' h life, '
        || f.held_gpu_seconds || ' GPU-s held (low efficiency, not idle: no wasted GPU-s '
        || 'counted)' AS detail,
    f.sample_count || ' gpu_utilization sample(s) covering '
        || round(100.0 * f.covered_gpu_seconds / f.held_gpu_seconds, 1)
        || '% of the GPU-time held; allocations{day=' || strftime(o.day, '%Y-%m-%d')
        || ',domain=' || f.domain || ',source_key=' || f.source_key || ',node=' || o.first_node
        || '}' AS evidence
FROM flagged AS f
INNER JOIN owners AS o USING (domain, source_key)
