-- data_quality_daily
-- Grain: one row per (cluster, UTC day) of the days [$first_day, $end_day) on which the cluster
--   has allocations: how far the sources cover the GPU-time charged that day, and whether the
--   day is provisional (beyond a threshold) with the reasons.
-- Parameters: $first_day, $end_day (DATE, half-open); $unattributed (the literal of
--   models/attribution.py: a job or pod is attributed when its cost_centre is not it);
--   thresholds of [gpuledger.quality] (docs/site-file.md): $min_sample_coverage,
--   $max_scrape_gap_minutes, $min_attributed_share, $max_unknown_nodes,
--   $max_sreport_difference, $max_k8s_rejects, $max_k8s_warnings,
--   $max_unverified_overlap_gpu_hours (NULL: not gated).
-- Reads allocations and gpu_usage_hourly (rebuilt for those days), gpu_utilization, nodes,
--   node_inventory, k8s_ingest_warnings, k8s_rejects, and the temp table quality_sreport
--   (cluster, day, sreport_window, sreport_difference, sreport_days_missing: the window's days
--   not built yet, sreport_days) that models/quality.py fills from
--   slurm_sreport_reconciliation.sql.
WITH days AS (
    SELECT DISTINCT cluster, day FROM allocations
    WHERE day >= $first_day AND day < $end_day
),

usage AS (
    SELECT cluster, day, sum(allocated_gpu_seconds)::BIGINT AS allocated,
        sum(measured_gpu_seconds)::DECIMAL(18, 6) AS measured
    FROM gpu_usage_hourly WHERE day >= $first_day AND day < $end_day
    GROUP BY ALL
),

-- a cluster without any dcgm-exporter sample has no exporter: its coverage is not measured
exported AS (SELECT DISTINCT cluster FROM gpu_utilization),

alloc_nodes AS (
    SELECT DISTINCT cluster, day, node FROM allocations
    WHERE day >= $first_day AND day < $end_day
),

-- nodes whose exporter reported around these days: silence on them is a gap
sampled_nodes AS (
    SELECT DISTINCT cluster, node FROM gpu_utilization
    WHERE bucket_start >= $first_day - INTERVAL 1 DAY AND bucket_start < $end_day + INTERVAL 1 DAY
),

watched AS (
    SELECT a.cluster, a.day, a.node
    FROM alloc_nodes AS a JOIN sampled_nodes AS s ON s.cluster = a.cluster AND s.node = a.node
),

buckets AS (
    SELECT DISTINCT u.cluster, u.bucket_start::DATE AS day, u.node, u.bucket_start
    FROM gpu_utilization AS u
    WHERE u.bucket_start >= $first_day AND u.bucket_start < $end_day
    UNION ALL  -- the day's edges, so a node silent from midnight or until midnight has a gap
    SELECT cluster, day, node, day - INTERVAL 1 MINUTE FROM watched
    UNION ALL
    SELECT cluster, day, node, day + INTERVAL 1 DAY FROM watched
),

gaps AS (
    SELECT b.cluster, b.day, b.node,
        date_diff('second', b.bucket_start, lead(b.bucket_start) OVER (
            PARTITION BY b.cluster, b.day, b.node ORDER BY b.bucket_start)) / 60.0 - 1
            AS gap_minutes
    FROM buckets AS b
    SEMI JOIN watched AS w ON w.cluster = b.cluster AND w.day = b.day AND w.node = b.node
),

gap AS (
    SELECT cluster, day, max(gap_minutes) AS longest,
        -- ties go to the first node by name: a rebuild names the same node
        first(node ORDER BY gap_minutes DESC, node) AS node
    FROM gaps WHERE gap_minutes IS NOT NULL GROUP BY ALL
),

owners AS (
    SELECT cluster, day,
        count(DISTINCT domain || '/' || source_key) AS n,
        count(DISTINCT domain || '/' || source_key) FILTER (WHERE cost_centre <> $unattributed)
            AS attributed,
        coalesce(sum(gpu_seconds) FILTER (WHERE cost_centre = $unattributed), 0)::BIGINT
            AS unattributed_s
    FROM allocations WHERE day >= $first_day AND day < $end_day
    GROUP BY ALL
),

inventory AS (
    SELECT cluster, node FROM nodes
    UNION
    SELECT cluster, node FROM node_inventory
),

unknown AS (
    SELECT a.cluster, a.day, count(*) AS n, string_agg(a.node, ', ' ORDER BY a.node) AS names
    FROM alloc_nodes AS a
    ANTI JOIN inventory AS i ON i.cluster = a.cluster AND i.node = a.node
    GROUP BY ALL
),

warned AS (
    SELECT d.cluster, d.day, count(*) AS n
    FROM days AS d JOIN k8s_ingest_warnings AS w ON w.cluster = d.cluster
        AND w.window_start < d.day + INTERVAL 1 DAY AND w.window_end > d.day
    GROUP BY ALL
),

rejected AS (
    SELECT d.cluster, d.day, count(*) AS n
    FROM days AS d JOIN k8s_rejects AS r ON r.cluster = d.cluster
        AND r.window_start < d.day + INTERVAL 1 DAY AND r.window_end > d.day
    GROUP BY ALL
),

unverified AS (
    -- a Slurm run and a pod on one node at once while the pod's GPUs are unknown (no pod labels
    -- in dcgm-exporter): the GPU-level detectors cannot tell whether they shared a GPU. Per
    -- pair: the fewer GPUs x the common time (an equi-join on node and day)
    SELECT s.cluster, s.day,
        sum(least(s.gpus, k.gpus) * date_diff('second', greatest(s.start_ts, k.start_ts),
                                              least(s.end_ts, k.end_ts)))::BIGINT AS seconds,
        string_agg(DISTINCT s.node, ', ' ORDER BY s.node) AS nodes
    FROM allocations AS s
    INNER JOIN allocations AS k
        ON k.cluster = s.cluster AND k.day = s.day AND k.node = s.node
        AND k.domain = 'kubernetes' AND len(coalesce(k.gpu_uuids, [])) = 0
        AND k.start_ts < s.end_ts AND k.end_ts > s.start_ts
    WHERE s.domain = 'slurm' AND s.day >= $first_day AND s.day < $end_day
    GROUP BY ALL
),

measures AS (
    SELECT
        d.cluster,
        d.day,
        coalesce(u.allocated, 0)::BIGINT AS allocated_gpu_seconds,
        coalesce(u.measured, 0)::DECIMAL(18, 6) AS measured_gpu_seconds,
        CASE WHEN e.cluster IS NOT NULL AND u.allocated > 0
            THEN (coalesce(u.measured, 0) / u.allocated)::DOUBLE END AS sample_coverage,
        g.longest::DOUBLE AS longest_scrape_gap_minutes,
        CASE WHEN g.longest > 0 THEN g.node END AS scrape_gap_node,
        coalesce(o.n, 0)::BIGINT AS jobs_and_pods,
        coalesce(o.attributed, 0)::BIGINT AS attributed_jobs_and_pods,
        (o.attributed / nullif(o.n, 0))::DOUBLE AS attributed_share,
        coalesce(o.unattributed_s, 0)::BIGINT AS unattributed_gpu_seconds,
        coalesce(k.n, 0)::BIGINT AS unknown_nodes,
        k.names AS unknown_node_names,
        s.sreport_window,
        -- a window with days not built yet was compared with part of the ledger: no figure
        CASE WHEN coalesce(s.sreport_days_missing, 0) = 0
            THEN s.sreport_difference::DOUBLE END AS sreport_difference,
        coalesce(s.sreport_days_missing, 0) AS sreport_days_missing,
        s.sreport_days,
        coalesce(w.n, 0)::BIGINT AS k8s_warnings,
        coalesce(r.n, 0)::BIGINT AS k8s_rejects,
        coalesce(v.seconds, 0)::BIGINT AS unverified_overlap_gpu_seconds,
        v.nodes AS unverified_overlap_nodes
    FROM days AS d
    LEFT JOIN usage AS u ON u.cluster = d.cluster AND u.day = d.day
    LEFT JOIN exported AS e ON e.cluster = d.cluster
    LEFT JOIN gap AS g ON g.cluster = d.cluster AND g.day = d.day
    LEFT JOIN owners AS o ON o.cluster = d.cluster AND o.day = d.day
    LEFT JOIN unknown AS k ON k.cluster = d.cluster AND k.day = d.day
    LEFT JOIN quality_sreport AS s ON s.cluster = d.cluster AND s.day = d.day
    LEFT JOIN warned AS w ON w.cluster = d.cluster AND w.day = d.day
    LEFT JOIN rejected AS r ON r.cluster = d.cluster AND r.day = d.day
    LEFT JOIN unverified AS v ON v.cluster = d.cluster AND v.day = d.day
),

judged AS (
    SELECT *, list_filter([
        CASE WHEN sample_coverage < $min_sample_coverage THEN format(
            'sample coverage: expected at least {:.1f} % of allocated GPU-time covered by '
            'dcgm samples, found {:.1f} %', 100 * $min_sample_coverage, 100 * sample_coverage)
        END,
        CASE WHEN longest_scrape_gap_minutes > $max_scrape_gap_minutes THEN format(
            'scrape gap: expected at most {:g} min without dcgm samples on a node, found '
            '{:g} min on {}', $max_scrape_gap_minutes::DOUBLE, longest_scrape_gap_minutes,
            scrape_gap_node)
        END,
        CASE WHEN attributed_share < $min_attributed_share THEN format(
            'owners: expected at least {:.1f} % of jobs and pods attributed to a cost centre, '
            'found {:.1f} % ({} of {})', 100 * $min_attributed_share, 100 * attributed_share,
            attributed_jobs_and_pods, jobs_and_pods)
        END,
        CASE WHEN unknown_nodes > $max_unknown_nodes THEN format(
            'unknown nodes: expected at most {:g} nodes outside the inventory, found {} ({})',
            $max_unknown_nodes::DOUBLE, unknown_nodes, unknown_node_names)
        END,
        CASE WHEN sreport_days_missing > 0 THEN format(
            'sreport: the window {} is compared once all its days are built; {} of its {} '
            'days are not built yet', sreport_window, sreport_days_missing, sreport_days)
        END,
        CASE WHEN sreport_difference > $max_sreport_difference THEN format(
            'sreport: expected at most {:.1f} % difference from sreport over {}, found {:.2f} %',
            100 * $max_sreport_difference, sreport_window, 100 * sreport_difference)
        END,
        CASE WHEN k8s_rejects > $max_k8s_rejects THEN format(
            'k8s rejects: expected at most {:g} rejected Kubernetes samples, found {}',
            $max_k8s_rejects::DOUBLE, k8s_rejects)
        END,
        CASE WHEN k8s_warnings > $max_k8s_warnings THEN format(
            'k8s warnings: expected at most {:g} Kubernetes ingest warnings, found {}',
            $max_k8s_warnings::DOUBLE, k8s_warnings)
        END,
        CASE WHEN unverified_overlap_gpu_seconds / 3600.0 > $max_unverified_overlap_gpu_hours
            THEN format(
            'unverified overlap: expected at most {:g} GPU-h held by both schedulers on one node '
            'with the pods'' GPUs unknown, found {:.2f} GPU-h on {}',
            $max_unverified_overlap_gpu_hours::DOUBLE, unverified_overlap_gpu_seconds / 3600.0,
            unverified_overlap_nodes)
        END
    ], x -> x IS NOT NULL) AS reason_list
    FROM measures
)

SELECT
    cluster, day, allocated_gpu_seconds, measured_gpu_seconds, sample_coverage,
    longest_scrape_gap_minutes, scrape_gap_node, jobs_and_pods, attributed_jobs_and_pods,
    attributed_share, unattributed_gpu_seconds, unknown_nodes, unknown_node_names,
    sreport_window, sreport_difference, k8s_warnings, k8s_rejects,
    unverified_overlap_gpu_seconds, unverified_overlap_nodes,
    len(reason_list) > 0 AS provisional,
    CASE WHEN len(reason_list) > 0 THEN array_to_string(reason_list, '; ') END AS reasons
FROM judged
ORDER BY cluster, day
