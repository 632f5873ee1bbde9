-- detect_over_capacity
-- Grain: one row per over-capacity episode: a stretch of time during which the holders of ONE
--   scheduler on a node held more physical GPUs than the node has (forty one-GPU pods on an
--   8-GPU node, a Slurm node name and its Slinky pod's node both filling one node's GPUs).
--   Both schedulers at once on the node are double_scheduled (detect_double_scheduled.sql).
-- Parameters: $scan_first, $scan_last (DATE, inclusive: the days read). Reads the temp table
--   holding_segments (node_holding_segments.sql over the scan days: the one sweep) and
--   allocations (who held the node).
-- gpu_seconds: the excess, the GPU-seconds charged beyond the node's GPUs (what a credit would
--   refund); share: the most GPUs held at once over the node's GPUs. Owners: the allocation that
--   started last (the one placed beyond the GPUs) and, as other_*, the one that started first;
--   the rate is the later one's (docs/accounting.md, "Conservation").
WITH over AS (
    SELECT
        *,
        slurm_gpus + kubernetes_gpus AS held,
        slurm_gpus + kubernetes_gpus - capacity_gpus AS excess
    FROM holding_segments
    WHERE capacity_gpus > 0
        AND slurm_gpus + kubernetes_gpus > capacity_gpus + 1e-6  -- shares are fractions
        AND NOT (slurm_gpus > 0 AND kubernetes_gpus > 0)
        AND CAST(hour AS DATE) >= $scan_first AND CAST(hour AS DATE) <= $scan_last
),

marked AS (
    SELECT
        *,
        CASE WHEN lag(to_ts) OVER (PARTITION BY node ORDER BY from_ts) = from_ts
            THEN 0 ELSE 1 END AS starts
    FROM over
),

islands AS (
    SELECT *, sum(starts) OVER (PARTITION BY node ORDER BY from_ts) AS episode FROM marked
),

episodes AS (
    SELECT
        node,
        episode,
        any_value(cluster) AS cluster,
        any_value(gpu_model) AS gpu_model,
        any_value(capacity_gpus) AS capacity_gpus,
        min(from_ts) AS start_ts,
        max(to_ts) AS end_ts,
        sum(excess * seconds) AS excess_seconds,
        max(held) AS max_held,
        CASE WHEN max(slurm_gpus) > 0 THEN 'slurm' ELSE 'kubernetes' END AS domain
    FROM islands
    GROUP BY node, episode
),

involved AS (
    SELECT
        e.node,
        e.episode,
        count(DISTINCT a.source_key) AS holders,
        arg_max(a.person, a.start_ts) AS person,
        arg_max(a.team, a.start_ts) AS team,
        arg_max(a.cost_centre, a.start_ts) AS cost_centre,
        arg_min(a.person, a.start_ts) AS other_person,
        arg_min(a.team, a.start_ts) AS other_team,
        arg_min(a.cost_centre, a.start_ts) AS other_cost_centre,
        arg_max(a.qos, a.start_ts) AS qos,
        arg_max(a.gpu_model, a.start_ts) AS gpu_model,
        arg_max(CASE WHEN a.domain = 'slurm' THEN a.job_id END, a.start_ts) AS slurm_job,
        arg_max(CASE WHEN a.domain = 'kubernetes' THEN a.k8s_namespace || '/' || a.job_id END,
                a.start_ts) AS k8s_workload,
        list_distinct(list('allocations{day=' || strftime(a.day, '%Y-%m-%d') || ',domain='
            || a.domain || ',source_key=' || a.source_key || ',node=' || a.node || '}'
            ORDER BY a.start_ts, a.source_key)) AS refs
    FROM episodes AS e
    INNER JOIN allocations AS a
        ON a.node = e.node AND a.domain = e.domain
        AND a.start_ts < e.end_ts AND a.end_ts > e.start_ts
    GROUP BY e.node, e.episode
)

SELECT
    'over_capacity' AS kind,
    e.domain,
    e.cluster,
    e.node,
    CAST(NULL AS VARCHAR[]) AS gpu_uuids,
    CAST(ceil(e.max_held - e.capacity_gpus) AS BIGINT) AS gpus,
    e.start_ts,
    e.end_ts,
    CAST(round(e.excess_seconds) AS BIGINT) AS gpu_seconds,
    i.slurm_job,
    i.k8s_workload,
    i.person,
    i.team,
    i.cost_centre,
    i.other_person,
    i.other_team,
    i.other_cost_centre,
    'node' AS evidence_level,
    e.max_held / e.capacity_gpus AS share,
    e.domain AS rate_domain,
    coalesce(i.gpu_model, e.gpu_model) AS gpu_model,
    i.qos,
    e.cluster || '|' || e.node || '|' || strftime(e.start_ts, '%Y-%m-%d %H:%M:%S')
        AS identity_key,
    'node ' || e.node || ' (' || e.capacity_gpus || ' GPUs): ' || i.holders || ' '
        || e.domain || ' holders held up to ' || round(e.max_held, 3) || ' GPUs at once for '
        || round(date_diff('second', e.start_ts, e.end_ts) / 60.0, 1) || ' min; '
        || round(e.excess_seconds / 3600, 3) || ' GPU-hours charged beyond the GPUs'
        AS detail,
    array_to_string(i.refs, '; ') AS evidence
FROM episodes AS e
INNER JOIN involved AS i USING (node, episode)
