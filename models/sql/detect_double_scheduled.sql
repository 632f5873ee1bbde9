-- detect_double_scheduled
-- Grain: one row per double-scheduling incident: a (node, Slurm run, pod) whose allocations
--   overlapped on the same GPUs. GPU-level evidence (det_double_gpu: dcgm-exporter showed both
--   holders on one GPU; det_double_scontrol: Slurm's GPU indices for the run, from `scontrol show
--   job -d` snapshots, include GPUs of the pod) and node-level evidence (det_double_node: the node
--   was overcommitted while both ran) of the same pair are merged into one row with the stronger
--   level ('gpu').
-- Parameters: $tolerance_seconds (overlaps this long or shorter that only Slurm's GPU indices
--   show are left out: a pod's ledger end is late by up to one scrape interval); reads the temp
--   tables det_double_gpu (detect_double_gpu.sql),
--   det_double_scontrol (detect_double_gpu_scontrol.sql) and det_double_node
--   (detect_double_node.sql), and allocations.
-- Columns: the candidate layout of detect_incidents.sql.
-- gpu_seconds: GPU level: the GPUs both held (seen by dcgm-exporter with both holders, or named
--   by Slurm's indices and the pod's labels; the union when both) x the two ledger intervals'
--   common seconds; node level: the node's excess GPU-seconds shared by the pair
--   (detect_double_node). A MIG instance held by both (its pod's sharing 'mig'): x the
--   instance's fraction of the GPU (a 1g.10gb of an H100 for 45 min: 2,700 / 7 GPU-seconds).
-- Owners: person/team/cost_centre are the owner of the allocation that started later (the one
--   placed onto GPUs already held), other_* the owner of the one that held them first; the rate
--   (cost) is the later allocation's: its charge is the duplicate one (docs/detectors.md).
WITH gpu_pairs AS (
    -- dcgm-exporter's labels and Slurm's own GPU indices for one pair are one GPU-level row
    SELECT
        coalesce(d.cluster, s.cluster) AS cluster,
        coalesce(d.node, s.node) AS node,
        coalesce(d.slurm_key, s.slurm_key) AS slurm_key,
        coalesce(d.k8s_key, s.k8s_key) AS k8s_key,
        list_sort(list_distinct(list_concat(coalesce(d.gpu_uuids, []),
                                            coalesce(s.gpu_uuids, [])))) AS gpu_uuids,
        d.slurm_key IS NOT NULL AS seen_by_dcgm,
        d.gpu_uuids AS dcgm_gpu_uuids, d.buckets, d.first_bucket, d.last_bucket,
        d.first_gpu_uuid, d.hpc_job,
        coalesce(d.namespace, s.namespace) AS namespace,
        coalesce(d.pod, s.pod) AS pod,
        s.job_id_raw AS sc_job_id_raw, s.gpu_indices AS sc_gpu_indices,
        s.first_gpu_index AS sc_gpu_index, s.first_observed_at AS sc_observed_at,
        s.source_file AS sc_source_file, s.line_no AS sc_line_no, s.snapshots AS sc_snapshots
    FROM det_double_gpu AS d
    FULL OUTER JOIN det_double_scontrol AS s
        ON s.node = d.node AND s.slurm_key = d.slurm_key AND s.k8s_key = d.k8s_key
),

overlap AS (
    -- the common time of the two ledger intervals, piece by piece (both are cut at midnight)
    SELECT
        k.node, k.slurm_key, k.k8s_key,
        min(greatest(s.start_ts, c.start_ts)) AS overlap_start,
        max(least(s.end_ts, c.end_ts)) AS overlap_end,
        sum(date_diff('second', greatest(s.start_ts, c.start_ts), least(s.end_ts, c.end_ts)))
            AS overlap_seconds
    FROM (SELECT DISTINCT node, slurm_key, k8s_key FROM gpu_pairs) AS k
    INNER JOIN allocations AS s
        ON s.domain = 'slurm' AND s.source_key = k.slurm_key AND s.node = k.node
    INNER JOIN allocations AS c
        ON c.domain = 'kubernetes' AND c.source_key = k.k8s_key AND c.node = k.node
        AND c.day = s.day
    WHERE greatest(s.start_ts, c.start_ts) < least(s.end_ts, c.end_ts)
    GROUP BY ALL
),

gpu_level AS (
    -- dcgm-exporter saw both holders at once: any overlap counts; Slurm's indices only say which
    -- GPUs: an overlap within one scrape interval of a pod's edge is a clean handover
    SELECT p.*, o.overlap_start, o.overlap_end, o.overlap_seconds
    FROM gpu_pairs AS p
    INNER JOIN overlap AS o USING (node, slurm_key, k8s_key)
    WHERE p.seen_by_dcgm OR o.overlap_seconds > $tolerance_seconds
),

merged AS (
    SELECT
        coalesce(g.cluster, n.cluster) AS cluster,
        coalesce(g.node, n.node) AS node,
        coalesce(g.slurm_key, n.slurm_key) AS slurm_key,
        coalesce(g.k8s_key, n.k8s_key) AS k8s_key,
        CASE WHEN g.slurm_key IS NOT NULL THEN 'gpu' ELSE 'node' END AS evidence_level,
        coalesce(g.overlap_start, n.overlap_start) AS start_ts,
        coalesce(g.overlap_end, n.overlap_end) AS end_ts,
        coalesce(len(g.gpu_uuids) * g.overlap_seconds, n.gpu_seconds) AS gpu_seconds,
        g.gpu_uuids,
        g.buckets, g.first_bucket, g.last_bucket, g.first_gpu_uuid, g.hpc_job, g.namespace,
        g.pod, g.dcgm_gpu_uuids, g.sc_job_id_raw, g.sc_gpu_indices, g.sc_gpu_index,
        g.sc_observed_at, g.sc_source_file, g.sc_line_no, g.sc_snapshots,
        n.overcommitted_seconds, n.max_excess_gpus, n.capacity_gpus, n.segments,
        n.first_from_ts, n.first_to_ts
    FROM gpu_level AS g
    FULL OUTER JOIN det_double_node AS n
        ON n.cluster = g.cluster AND n.node = g.node AND n.slurm_key = g.slurm_key
        AND n.k8s_key = g.k8s_key
),

firsts AS (
    -- each allocation's first start on the node (for the pairs found only)
    SELECT a.domain, a.source_key, a.node, min(a.start_ts) AS first_start
    FROM allocations AS a
    WHERE a.source_key IN (SELECT slurm_key FROM merged UNION SELECT k8s_key FROM merged)
    GROUP BY a.domain, a.source_key, a.node
),

sides AS (
    -- each allocation's piece holding the incident's start
    SELECT
        m.*,
        s.job_id AS slurm_job, s.day AS slurm_day, s.person AS s_person, s.team AS s_team,
        s.cost_centre AS s_cost_centre, s.gpu_model AS s_gpu_model, s.qos AS s_qos,
        s.gpus AS s_gpus, s.slurm_user,
        k.k8s_namespace, k.job_id AS k8s_job, k.name AS k8s_pod, k.day AS k8s_day,
        k.person AS k_person, k.team AS k_team, k.cost_centre AS k_cost_centre,
        k.gpu_model AS k_gpu_model, k.gpus AS k_gpus,
        -- a MIG instance held twice wastes its fraction of the GPU (docs/shared-gpus.md)
        CASE WHEN k.sharing = 'mig' THEN k.capacity_gpus / nullif(k.gpus, 0) END
            AS k_instance_share,
        fs.first_start AS s_first,
        fk.first_start AS k_first
    FROM merged AS m
    INNER JOIN allocations AS s
        ON s.domain = 'slurm' AND s.source_key = m.slurm_key AND s.node = m.node
        AND s.day = CAST(m.start_ts AS DATE)
        AND s.start_ts <= m.start_ts AND s.end_ts > m.start_ts
    INNER JOIN allocations AS k
        ON k.domain = 'kubernetes' AND k.source_key = m.k8s_key AND k.node = m.node
        AND k.day = CAST(m.start_ts AS DATE)
        AND k.start_ts <= m.start_ts AND k.end_ts > m.start_ts
    INNER JOIN firsts AS fs
        ON fs.domain = 'slurm' AND fs.source_key = m.slurm_key AND fs.node = m.node
    INNER JOIN firsts AS fk
        ON fk.domain = 'kubernetes' AND fk.source_key = m.k8s_key AND fk.node = m.node
),

final AS (
    SELECT
        'double_scheduled' AS kind,
        'both' AS domain,
        cluster,
        node,
        gpu_uuids,
        coalesce(len(gpu_uuids), max_excess_gpus) AS gpus,
        start_ts,
        end_ts,
        CASE WHEN evidence_level = 'gpu' AND k_instance_share IS NOT NULL
            THEN CAST(round(gpu_seconds * k_instance_share) AS BIGINT)
            ELSE gpu_seconds END AS gpu_seconds,
        slurm_job,
        k8s_namespace || '/' || k8s_job AS k8s_workload,
        -- the later allocation was placed onto GPUs the earlier one held
        CASE WHEN k_first >= s_first THEN k_person ELSE s_person END AS person,
        CASE WHEN k_first >= s_first THEN k_team ELSE s_team END AS team,
        CASE WHEN k_first >= s_first THEN k_cost_centre ELSE s_cost_centre END AS cost_centre,
        CASE WHEN k_first >= s_first THEN s_person ELSE k_person END AS other_person,
        CASE WHEN k_first >= s_first THEN s_team ELSE k_team END AS other_team,
        CASE WHEN k_first >= s_first THEN s_cost_centre ELSE k_cost_centre END
            AS other_cost_centre,
        evidence_level,
        CAST(coalesce(len(gpu_uuids), max_excess_gpus) AS DOUBLE)
            / least(s_gpus, k_gpus) AS share,
        CASE WHEN k_first >= s_first THEN 'kubernetes' ELSE 'slurm' END AS rate_domain,
        CASE WHEN k_first >= s_first THEN k_gpu_model ELSE s_gpu_model END AS gpu_model,
        CASE WHEN k_first >= s_first THEN NULL ELSE s_qos END AS qos,
        slurm_key || '|' || k8s_key AS identity_key,
        'Slurm job ' || slurm_job || ' (' || s_person || ') and pod ' || k8s_namespace || '/'
            || k8s_pod || ' (' || k_person || ') held '
            || CASE WHEN gpu_uuids IS NOT NULL
                THEN len(gpu_uuids) || ' of the same GPU(s)'
                ELSE max_excess_gpus || ' GPU(s) more than node capacity ' || capacity_gpus
            END
            || ' for ' || round(date_diff('second', start_ts, end_ts) / 60.0, 1) || ' min; '
            || CASE WHEN k_first >= s_first THEN 'the pod started on GPUs the job held'
                ELSE 'the job started on GPUs the pod held' END AS detail,
        CASE WHEN buckets IS NOT NULL
            THEN 'gpu_utilization{cluster=' || cluster || ',gpu_uuid=' || first_gpu_uuid
                || ',bucket_start=' || strftime(first_bucket, '%Y-%m-%d %H:%M:%S')
                || ',hpc_job=' || hpc_job || '} with gpu_utilization{cluster=' || cluster
                || ',gpu_uuid=' || first_gpu_uuid || ',bucket_start='
                || strftime(first_bucket, '%Y-%m-%d %H:%M:%S') || ',namespace=' || namespace
                || ',pod=' || pod || '}: first of ' || buckets
                || ' minute(s) with both holders on ' || len(dcgm_gpu_uuids) || ' GPU(s), last '
                || strftime(last_bucket, '%Y-%m-%d %H:%M:%S') || '; '
            ELSE ''
        END
        || CASE WHEN sc_observed_at IS NOT NULL
            THEN 'slurm_gpu_indices{job_id_raw=' || sc_job_id_raw || ',node=' || node
                || ',gpu_index=' || sc_gpu_index || ',observed_at='
                || strftime(sc_observed_at, '%Y-%m-%d %H:%M:%S') || '}: first of '
                || coalesce(sc_snapshots, 1) || ' scontrol snapshot(s) (' || sc_source_file
                || ' line ' || sc_line_no || ') giving the job GPU index(es) '
                || array_to_string(sc_gpu_indices, ' ') || ' that the pod held too; '
            ELSE ''
        END
        || CASE WHEN overcommitted_seconds IS NOT NULL
            THEN 'nodes{node=' || node || '}: ' || capacity_gpus || ' GPUs; node_overcommit '
                || max_excess_gpus || ' GPU(s) over capacity in ' || segments
                || ' interval(s), ' || overcommitted_seconds || ' s, first '
                || strftime(first_from_ts, '%Y-%m-%d %H:%M:%S') || '..'
                || strftime(first_to_ts, '%Y-%m-%d %H:%M:%S') || '; '
            ELSE ''
        END
        || 'allocations{day=' || strftime(slurm_day, '%Y-%m-%d') || ',domain=slurm,source_key='
        || slurm_key || ',node=' || node || '}; allocations{day='
        || strftime(k8s_day, '%Y-%m-%d') || ',domain=kubernetes,source_key=' || k8s_key
        || ',node=' || node || '}' AS evidence
    FROM sides
)

SELECT * FROM final
WHERE gpu_seconds > 0
