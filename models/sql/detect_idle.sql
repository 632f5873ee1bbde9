-- detect_idle
-- Grain: one row per idle allocation incident: a Slurm run or pod (allocations) on one node some
--   or all of whose GPUs were idle under its idle policy; idle pieces of its GPUs that overlap in
--   time are one incident.
-- Parameters: $scan_start, $scan_end (TIMESTAMP, half-open: the minute buckets read),
--   $tolerance_seconds (how far a pod's ledger interval may sit from the minutes its GPUs were
--   seen in). Reads the temp table idle_policy (models/incidents.py: per cluster and Slurm
--   partition or Kubernetes namespace, first match by priority): (a) zero rule: busy fraction
--   strictly below zero_threshold for at least zero_seconds (default 5 % for 1800 s, so warm-ups
--   and short pauses stay quiet); (b) window rule: mean busy fraction below window_threshold
--   over a window of window_seconds (0: off, the default) that samples cover for >= 90 %.
--   Reads det_double and det_gang: GPU-time they hold is not idle here (precedence below).
-- Method: per GPU and holder (dcgm-exporter's pod / hpc_job labels), the minutes either rule
--   marks idle form periods (gaps and islands); a period runs from its first sample to its last
--   sample plus one sample interval (gpu_busy_daily.scrape_interval_s, at least a minute). A gap
--   in the data (exporter outage) ends a period: unknown time is never counted as idle, and the
--   window rule's mean is over the samples present.
-- gpu_seconds: idle time x GPUs; a MIG instance counts its fraction of the GPU (allocations
--   .capacity_gpus per instance: a 1g of 7 idle for an hour wastes 1/7 GPU-hour).
-- Precedence (one GPU-second in at most one incident): double_scheduled, then partial_gang, then
--   idle. A period loses the time a double-scheduling holds its GPU (GPU level: the GPUs named;
--   node level: any GPU of either allocation on that node) and the time its pod's gang was
--   partial; what is left may be split in pieces, each kept.
-- share: the incident's GPUs / all GPUs of the Slurm run (every node) or of the pod.
-- Columns: the candidate layout of detect_incidents.sql.
WITH util AS (
    SELECT
        cluster, node, gpu_uuid, coalesce(gpu_instance, '') AS gpu_instance, bucket_start,
        busy_fraction,
        coalesce(namespace, '') AS namespace, coalesce(pod, '') AS pod,
        coalesce(pod_uid, '') AS pod_uid, coalesce(hpc_job, '') AS hpc_job
    FROM gpu_utilization
    WHERE bucket_start >= $scan_start AND bucket_start < $scan_end
      AND (coalesce(pod, '') <> '' OR coalesce(hpc_job, '') <> '')
),

series_keys AS (
    SELECT cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
           any_value(node) AS node, count(*) AS samples,
           min(busy_fraction) AS min_busy
    FROM util
    GROUP BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
),

run_partitions AS (
    -- a Slurm holder's partition, for the policies naming one
    SELECT DISTINCT n.node, CAST(n.job_id_raw AS VARCHAR) AS job_id_raw, n.job_id, r.partition
    FROM slurm_node_allocations AS n
    INNER JOIN slurm_runs AS r ON r.run_key = n.run_key
    WHERE n.start < $scan_end AND coalesce(n."end", $scan_end) > $scan_start
      AND (SELECT count(*) FROM idle_policy WHERE partition <> '') > 0
),

series_policy AS (
    SELECT
        s.cluster, s.gpu_uuid, s.gpu_instance, s.namespace, s.pod, s.pod_uid, s.hpc_job,
        arg_min({'zero_threshold': p.zero_threshold, 'zero_seconds': p.zero_seconds,
                 'window_threshold': p.window_threshold,
                 'window_seconds': p.window_seconds}, p.priority) AS rule,
        any_value(s.samples) AS samples,
        any_value(s.min_busy) AS min_busy
    FROM series_keys AS s
    LEFT JOIN run_partitions AS r
        ON s.pod = '' AND r.node = s.node AND s.hpc_job IN (r.job_id_raw, r.job_id)
    INNER JOIN idle_policy AS p
        ON (p.cluster = '' OR p.cluster = s.cluster)
        AND (p.namespace = '' OR (s.pod <> '' AND p.namespace = s.namespace))
        AND (p.partition = '' OR (s.pod = '' AND p.partition = r.partition))
    GROUP BY ALL
),

longest_step AS (
    SELECT greatest(60, coalesce(max(scrape_interval_s), 60)) AS seconds
    FROM gpu_busy_daily
    WHERE day >= CAST($scan_start AS DATE) AND day < CAST($scan_end AS DATE)
),

series AS (
    -- GPU-holder series that could make a period at all (each sample stands for at most the
    -- longest step, 1.5 steps with a late scrape): the busy ones, nearly all, skip the window
    -- functions below
    SELECT sp.cluster, sp.gpu_uuid, sp.gpu_instance, sp.namespace, sp.pod, sp.pod_uid,
           sp.hpc_job, sp.zero_threshold, sp.zero_seconds, sp.window_threshold,
           sp.window_seconds
    FROM (
        SELECT * EXCLUDE (rule), rule.zero_threshold, rule.zero_seconds,
               rule.window_threshold, rule.window_seconds
        FROM series_policy
    ) AS sp
    INNER JOIN util AS u
        ON u.cluster = sp.cluster AND u.gpu_uuid = sp.gpu_uuid
        AND u.gpu_instance = sp.gpu_instance AND u.namespace = sp.namespace AND u.pod = sp.pod
        AND u.pod_uid = sp.pod_uid AND u.hpc_job = sp.hpc_job
    GROUP BY sp.cluster, sp.gpu_uuid, sp.gpu_instance, sp.namespace, sp.pod, sp.pod_uid,
        sp.hpc_job, sp.zero_threshold, sp.zero_seconds, sp.window_threshold, sp.window_seconds,
        sp.samples, sp.min_busy
    HAVING count(*) FILTER (WHERE u.busy_fraction < sp.zero_threshold)
            * 1.5 * (SELECT seconds FROM longest_step) >= sp.zero_seconds
        OR (sp.window_seconds > 0 AND sp.min_busy < sp.window_threshold
            AND sp.samples * 1.5 * (SELECT seconds FROM longest_step) >= sp.window_seconds)
),

stepped AS (
    SELECT
        u.*,
        s.zero_threshold, s.zero_seconds, s.window_threshold, s.window_seconds,
        -- the time one sample stands for
        greatest(60, coalesce(d.scrape_interval_s, 60)) AS step_seconds
    FROM util AS u
    INNER JOIN series AS s
        ON s.cluster = u.cluster AND s.gpu_uuid = u.gpu_uuid
        AND s.gpu_instance = u.gpu_instance AND s.namespace = u.namespace AND s.pod = u.pod
        AND s.pod_uid = u.pod_uid AND s.hpc_job = u.hpc_job
    LEFT JOIN gpu_busy_daily AS d
        ON d.cluster = u.cluster AND d.gpu_uuid = u.gpu_uuid
        AND coalesce(d.gpu_instance, '') = u.gpu_instance
        AND d.day = CAST(u.bucket_start AS DATE)
),

marked AS (
    -- (a) zero rule: runs of consecutive samples below zero_threshold
    SELECT
        *,
        busy_fraction < zero_threshold AS idle,
        CASE WHEN busy_fraction < zero_threshold
            AND (lag(busy_fraction) OVER w >= zero_threshold
                 OR lag(busy_fraction) OVER w IS NULL
                 OR date_diff('second', lag(bucket_start) OVER w, bucket_start)
                    > 1.5 * step_seconds)
            THEN 1 ELSE 0 END AS opens
    FROM stepped
    WINDOW w AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
                 ORDER BY bucket_start)
),

numbered AS (
    SELECT
        *,
        sum(opens) OVER (
            PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
            ORDER BY bucket_start
        ) AS period_no
    FROM marked
),

zero_runs AS (
    SELECT cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no
    FROM numbered
    WHERE idle
    GROUP BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no,
        zero_seconds
    HAVING date_diff('second', min(bucket_start), max(bucket_start + to_seconds(step_seconds)))
        >= zero_seconds
),

cumulated AS (
    -- (b) window rule: running sums, so a window's mean is a difference of two rows
    SELECT
        cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, bucket_start,
        step_seconds, window_threshold, window_seconds,
        sum(busy_fraction) OVER w AS busy_sum,
        count(*) OVER w AS samples
    FROM stepped
    WHERE window_seconds > 0
    WINDOW w AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
                 ORDER BY bucket_start ROWS UNBOUNDED PRECEDING)
),

window_ends AS (
    -- windows (end - window_seconds, end] covered by samples for >= 90 % whose samples' mean
    -- is below the threshold (missing samples are left out, never read as 0 %)
    SELECT e.cluster, e.gpu_uuid, e.gpu_instance, e.namespace, e.pod, e.pod_uid, e.hpc_job,
           e.bucket_start AS window_end
    FROM cumulated AS e
    ASOF LEFT JOIN cumulated AS b
        ON b.cluster = e.cluster AND b.gpu_uuid = e.gpu_uuid
        AND b.gpu_instance = e.gpu_instance AND b.namespace = e.namespace AND b.pod = e.pod
        AND b.pod_uid = e.pod_uid AND b.hpc_job = e.hpc_job
        AND e.bucket_start - to_seconds(e.window_seconds) >= b.bucket_start
    WHERE (e.samples - coalesce(b.samples, 0)) * e.step_seconds >= 0.9 * e.window_seconds
      AND (e.busy_sum - coalesce(b.busy_sum, 0)) / (e.samples - coalesce(b.samples, 0))
          < e.window_threshold
),

window_minutes AS (
    -- a sample lies in a low window when the next low window's end is within one window
    SELECT c.cluster, c.gpu_uuid, c.gpu_instance, c.namespace, c.pod, c.pod_uid, c.hpc_job,
           c.bucket_start
    FROM cumulated AS c
    ASOF INNER JOIN window_ends AS e
        ON e.cluster = c.cluster AND e.gpu_uuid = c.gpu_uuid
        AND e.gpu_instance = c.gpu_instance AND e.namespace = c.namespace AND e.pod = c.pod
        AND e.pod_uid = c.pod_uid AND e.hpc_job = c.hpc_job
        AND e.window_end >= c.bucket_start
    WHERE e.window_end - to_seconds(c.window_seconds) < c.bucket_start
),

idle_minutes AS (
    SELECT n.cluster, n.node, n.gpu_uuid, n.gpu_instance, n.namespace, n.pod, n.pod_uid,
           n.hpc_job, n.bucket_start, n.busy_fraction, n.step_seconds, n.zero_threshold,
           n.window_threshold, n.window_seconds,
           z.period_no IS NOT NULL AS by_zero, w.bucket_start IS NOT NULL AS by_window
    FROM numbered AS n
    LEFT JOIN zero_runs AS z
        ON n.idle AND z.cluster = n.cluster AND z.gpu_uuid = n.gpu_uuid
        AND z.gpu_instance = n.gpu_instance AND z.namespace = n.namespace AND z.pod = n.pod
        AND z.pod_uid = n.pod_uid AND z.hpc_job = n.hpc_job AND z.period_no = n.period_no
    LEFT JOIN window_minutes AS w
        ON w.cluster = n.cluster AND w.gpu_uuid = n.gpu_uuid
        AND w.gpu_instance = n.gpu_instance AND w.namespace = n.namespace AND w.pod = n.pod
        AND w.pod_uid = n.pod_uid AND w.hpc_job = n.hpc_job AND w.bucket_start = n.bucket_start
    WHERE z.period_no IS NOT NULL OR w.bucket_start IS NOT NULL
),

idle_numbered AS (
    SELECT *, sum(opens) OVER (
        PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
        ORDER BY bucket_start) AS period_no
    FROM (
        SELECT *, CASE WHEN lag(bucket_start) OVER w IS NULL
                OR date_diff('second', lag(bucket_start) OVER w, bucket_start)
                    > 1.5 * step_seconds
            THEN 1 ELSE 0 END AS opens
        FROM idle_minutes
        WINDOW w AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                     hpc_job ORDER BY bucket_start)
    )
),

periods AS (
    SELECT
        cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no,
        min(bucket_start) AS start_ts,
        max(bucket_start + to_seconds(step_seconds)) AS end_ts,
        count(*) AS buckets,
        min(bucket_start) AS first_bucket,
        max(bucket_start) AS last_bucket,
        avg(busy_fraction) AS mean_busy,
        bool_or(by_zero) AS by_zero,
        bool_or(by_window) AS by_window,
        any_value(zero_threshold) AS zero_threshold,
        any_value(window_threshold) AS window_threshold,
        any_value(window_seconds) AS window_seconds
    FROM idle_numbered
    GROUP BY cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no
),

slurm_holders AS (
    -- hpc_job carries JobIDRaw; a requeued job's run is the one holding the period (matched by
    -- node: Slurm and Kubernetes may call the cluster differently)
    SELECT p.*, n.run_key
    FROM periods AS p
    INNER JOIN slurm_node_allocations AS n
        ON n.node = p.node AND p.hpc_job IN (CAST(n.job_id_raw AS VARCHAR), n.job_id)
        AND n.start < p.end_ts AND coalesce(n."end", p.end_ts) > p.start_ts
    WHERE p.pod = '' AND p.hpc_job <> ''
),

candidates AS (
    SELECT p.*, a.domain, a.source_key, a.day, a.job_id, a.name, a.k8s_namespace, a.person,
           a.team, a.cost_centre, a.gpu_model, a.qos, a.gpus AS node_gpus,
           -- a MIG instance wastes its fraction of the GPU per second (docs/shared-gpus.md)
           CASE WHEN a.sharing = 'mig' THEN a.capacity_gpus / nullif(a.gpus, 0) ELSE 1.0 END
               AS unit_share,
           date_diff('second', greatest(a.start_ts, p.start_ts), least(a.end_ts, p.end_ts))
               AS overlap_seconds
    FROM periods AS p
    INNER JOIN allocations AS a
        ON a.domain = 'kubernetes' AND a.cluster = p.cluster AND a.node = p.node
        AND a.k8s_namespace = p.namespace AND a.name = p.pod
        AND (p.pod_uid = '' OR a.source_key = p.pod_uid)
        AND a.start_ts <= p.end_ts + to_seconds($tolerance_seconds)
        AND a.end_ts >= p.start_ts - to_seconds($tolerance_seconds)
    WHERE p.pod <> ''
    UNION ALL
    SELECT p.* EXCLUDE (run_key), a.domain, a.source_key, a.day, a.job_id, a.name,
           a.k8s_namespace, a.person, a.team, a.cost_centre, a.gpu_model, a.qos,
           a.gpus AS node_gpus,
           CASE WHEN a.sharing = 'mig' THEN a.capacity_gpus / nullif(a.gpus, 0) ELSE 1.0 END,
           date_diff('second', greatest(a.start_ts, p.start_ts), least(a.end_ts, p.end_ts))
    FROM slurm_holders AS p
    INNER JOIN allocations AS a
        ON a.domain = 'slurm' AND a.source_key = p.run_key AND a.node = p.node
        AND a.start_ts < p.end_ts AND a.end_ts > p.start_ts
),

picked AS (
    -- one ledger piece per idle period: the one it overlaps most (its owner pays)
    SELECT * EXCLUDE (pick)
    FROM (
        SELECT *, row_number() OVER (
            PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
                period_no
            ORDER BY overlap_seconds DESC, day
        ) AS pick
        FROM candidates
    )
    WHERE pick = 1
),

claims AS (
    -- GPU-time earlier-precedence incidents hold: double_scheduled (its GPUs; without GPU-level
    -- evidence, either allocation on its node), then partial_gang (its workload's pods)
    SELECT 'gpu' AS by_what, cluster, unnest(gpu_uuids) AS gpu_uuid, NULL AS node,
           NULL AS slurm_job, NULL AS k8s_workload, start_ts, end_ts
    FROM det_double
    WHERE len(coalesce(gpu_uuids, [])) > 0
    UNION ALL
    SELECT 'pair', cluster, NULL, node, slurm_job, k8s_workload, start_ts, end_ts
    FROM det_double
    WHERE len(coalesce(gpu_uuids, [])) = 0
    UNION ALL
    SELECT 'gang', cluster, NULL, NULL, NULL, k8s_workload, start_ts, end_ts
    FROM det_gang
),

numbered_picks AS (
    SELECT *, row_number() OVER () AS pick_no,
           k8s_namespace || '/' || job_id AS workload
    FROM picked
),

claimed AS (
    SELECT p.pick_no, greatest(c.start_ts, p.start_ts) AS cs, least(c.end_ts, p.end_ts) AS ce
    FROM numbered_picks AS p
    INNER JOIN claims AS c
        ON c.start_ts < p.end_ts AND c.end_ts > p.start_ts
        AND CASE c.by_what
            WHEN 'gpu' THEN c.gpu_uuid = p.gpu_uuid
            WHEN 'pair' THEN c.node = p.node AND CASE WHEN p.domain = 'slurm'
                THEN c.slurm_job = p.job_id ELSE c.k8s_workload = p.workload END
            ELSE p.domain = 'kubernetes' AND c.cluster = p.cluster
                AND c.k8s_workload = p.workload
        END
),

claimed_merged AS (
    -- the union of the claims on one pick: overlapping claims are one interval
    SELECT pick_no, min(cs) AS ms, max(ce) AS me
    FROM (
        SELECT *, sum(CASE WHEN prev_end IS NULL OR cs > prev_end THEN 1 ELSE 0 END)
            OVER (PARTITION BY pick_no ORDER BY cs, ce) AS island
        FROM (
            SELECT *, max(ce) OVER (PARTITION BY pick_no ORDER BY cs, ce
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
            FROM claimed
        )
    )
    GROUP BY pick_no, island
),

piece_bounds AS (
    -- what is left of each pick: before, between and after the claims
    SELECT pick_no, start_ts AS ps, end_ts AS pe
    FROM numbered_picks
    WHERE pick_no NOT IN (SELECT pick_no FROM claimed_merged)
    UNION ALL
    SELECT m.pick_no, coalesce(lag(m.me) OVER w, p.start_ts), m.ms
    FROM claimed_merged AS m
    INNER JOIN numbered_picks AS p USING (pick_no)
    WINDOW w AS (PARTITION BY m.pick_no ORDER BY m.ms)
    UNION ALL
    SELECT m.pick_no, max(m.me), any_value(p.end_ts)
    FROM claimed_merged AS m
    INNER JOIN numbered_picks AS p USING (pick_no)
    GROUP BY m.pick_no
),

pieces AS (
    -- a split piece names the idle samples overlapping it
    SELECT p.* REPLACE (b.ps AS start_ts, b.pe AS end_ts,
           CASE WHEN b.ps = p.start_ts AND b.pe = p.end_ts THEN p.buckets
               ELSE (SELECT count(*) FROM idle_minutes AS m
                     WHERE m.cluster = p.cluster AND m.gpu_uuid = p.gpu_uuid
                     AND m.gpu_instance = p.gpu_instance AND m.namespace = p.namespace
                     AND m.pod = p.pod AND m.pod_uid = p.pod_uid AND m.hpc_job = p.hpc_job
                     AND m.bucket_start < b.pe
                     AND m.bucket_start + to_seconds(m.step_seconds) > b.ps) END AS buckets,
           CASE WHEN b.ps = p.start_ts THEN p.first_bucket
               ELSE (SELECT min(m.bucket_start) FROM idle_minutes AS m
                     WHERE m.cluster = p.cluster AND m.gpu_uuid = p.gpu_uuid
                     AND m.gpu_instance = p.gpu_instance AND m.namespace = p.namespace
                     AND m.pod = p.pod AND m.pod_uid = p.pod_uid AND m.hpc_job = p.hpc_job
                     AND m.bucket_start < b.pe
                     AND m.bucket_start + to_seconds(m.step_seconds) > b.ps) END
               AS first_bucket,
           CASE WHEN b.pe = p.end_ts THEN p.last_bucket
               ELSE (SELECT max(m.bucket_start) FROM idle_minutes AS m
                     WHERE m.cluster = p.cluster AND m.gpu_uuid = p.gpu_uuid
                     AND m.gpu_instance = p.gpu_instance AND m.namespace = p.namespace
                     AND m.pod = p.pod AND m.pod_uid = p.pod_uid AND m.hpc_job = p.hpc_job
                     AND m.bucket_start < b.pe
                     AND m.bucket_start + to_seconds(m.step_seconds) > b.ps) END
               AS last_bucket)
    FROM piece_bounds AS b
    INNER JOIN numbered_picks AS p USING (pick_no)
    WHERE b.pe > b.ps
),

grouped AS (
    -- idle pieces of one allocation's GPUs that overlap in time form one incident
    SELECT
        *,
        sum(CASE WHEN prev_end IS NULL OR start_ts > prev_end THEN 1 ELSE 0 END) OVER (
            PARTITION BY domain, source_key, node ORDER BY start_ts, gpu_uuid, gpu_instance
        ) AS incident_no
    FROM (
        SELECT *, max(end_ts) OVER (
            PARTITION BY domain, source_key, node ORDER BY start_ts, gpu_uuid, gpu_instance
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prev_end
        FROM pieces
    )
),

incidents AS (
    SELECT
        domain, source_key, node, incident_no,
        any_value(cluster) AS cluster,
        min(start_ts) AS start_ts,
        max(end_ts) AS end_ts,
        list_sort(list(DISTINCT gpu_uuid)) AS gpu_uuids,
        count(DISTINCT gpu_uuid) AS gpus,
        CAST(round(sum(date_diff('second', start_ts, end_ts) * coalesce(unit_share, 1.0)))
            AS BIGINT) AS gpu_seconds,
        sum(buckets) AS buckets,
        max(mean_busy) AS max_mean_busy,
        bool_or(by_zero) AS by_zero,
        bool_or(by_window) AS by_window,
        any_value(zero_threshold) AS zero_threshold,
        any_value(window_threshold) AS window_threshold,
        any_value(window_seconds) AS window_seconds,
        arg_min(day, start_ts) AS day,
        arg_min(job_id, start_ts) AS job_id,
        arg_min(name, start_ts) AS name,
        arg_min(k8s_namespace, start_ts) AS k8s_namespace,
        arg_min(person, start_ts) AS person,
        arg_min(team, start_ts) AS team,
        arg_min(cost_centre, start_ts) AS cost_centre,
        arg_min(gpu_model, start_ts) AS gpu_model,
        arg_min(qos, start_ts) AS qos,
        max(node_gpus) AS node_gpus,
        -- the first idle sample's row, named in the evidence
        arg_min({'gpu_uuid': gpu_uuid, 'bucket': first_bucket, 'namespace': namespace,
                 'pod': pod, 'hpc_job': hpc_job}, (start_ts, gpu_uuid)) AS first_row,
        max(last_bucket) AS last_bucket
    FROM grouped
    GROUP BY domain, source_key, node, incident_no
),

job_sizes AS (
    -- a Slurm run's GPUs and nodes over all its nodes
    SELECT run_key, sum(gpus) AS job_gpus, count(DISTINCT node) AS job_nodes
    FROM slurm_node_allocations
    WHERE run_key IN (SELECT source_key FROM incidents WHERE domain = 'slurm')
    GROUP BY run_key
),

sized AS (
    SELECT
        i.*,
        coalesce(j.job_gpus, i.node_gpus) AS job_gpus,
        coalesce(j.job_nodes, 1) AS job_nodes,
        i.gpus >= i.node_gpus AS whole_node,
        count(DISTINCT CASE WHEN i.gpus >= i.node_gpus THEN i.node END)
            OVER (PARTITION BY i.domain, i.source_key) AS idle_nodes
    FROM incidents AS i
    LEFT JOIN job_sizes AS j ON i.domain = 'slurm' AND j.run_key = i.source_key
)

SELECT
    'idle_allocation' AS kind,
    domain,
    cluster,
    node,
    gpu_uuids,
    gpus,
    start_ts,
    end_ts,
    gpu_seconds,
    CASE WHEN domain = 'slurm' THEN job_id END AS slurm_job,
    CASE WHEN domain = 'kubernetes' THEN k8s_namespace || '/' || job_id END AS k8s_workload,
    person,
    team,
    cost_centre,
    CAST(NULL AS VARCHAR) AS other_person,
    CAST(NULL AS VARCHAR) AS other_team,
    CAST(NULL AS VARCHAR) AS other_cost_centre,
    CAST(NULL AS VARCHAR) AS evidence_level,
    CAST(gpus AS DOUBLE) / job_gpus AS share,
    domain AS rate_domain,
    gpu_model,
    qos,
    source_key || '|' || node || '|' || strftime(start_ts, '%Y-%m-%d %H:%M:%S') AS identity_key,
    CASE WHEN domain = 'slurm' THEN 'Slurm job ' || job_id ELSE 'pod ' || k8s_namespace || '/'
        || name END
        || ': ' || gpus || ' of its ' || node_gpus || ' GPU(s) on ' || node || ' '
        || CASE WHEN by_zero THEN 'below ' || round(zero_threshold * 100, 1) || '% busy'
            ELSE 'under ' || round(window_threshold * 100, 1) || '% mean busy over '
                || round(window_seconds / 60.0, 1) || '-min windows' END
        || ' for ' || round(date_diff('second', start_ts, end_ts) / 60.0, 1) || ' min ('
        || round(100.0 * gpus / job_gpus, 1) || '% of its ' || job_gpus || ' GPU(s)'
        || CASE WHEN job_nodes > 1
            THEN '; ' || idle_nodes || ' of its ' || job_nodes || ' nodes idle' ELSE '' END
        || ')' AS detail,
    'gpu_utilization{cluster=' || cluster || ',gpu_uuid=' || first_row.gpu_uuid
        || ',bucket_start=' || strftime(first_row.bucket, '%Y-%m-%d %H:%M:%S')
        || CASE WHEN first_row.pod <> ''
            THEN ',namespace=' || first_row.namespace || ',pod=' || first_row.pod
            ELSE ',hpc_job=' || first_row.hpc_job END
        || '}: first of ' || buckets || ' idle sample minute(s) on ' || gpus
        || ' GPU(s), last ' || strftime(last_bucket, '%Y-%m-%d %H:%M:%S')
        || '; allocations{day=' || strftime(day, '%Y-%m-%d') || ',domain=' || domain
        || ',source_key=' || source_key || ',node=' || node || '}' AS evidence
FROM sized
