-- detect_idle
-- Grain: one row per idle allocation incident: a Slurm run or pod (allocations) on one node some
--   or all of whose GPUs stayed below a busy threshold for at least a minimum time; idle periods
--   of its GPUs that overlap in time are one incident.
-- Parameters: $scan_start, $scan_end (TIMESTAMP, half-open: the minute buckets read),
--   $idle_threshold (busy fraction strictly below it is idle; default 0.05),
--   $idle_min_seconds (shortest idle period reported; default 1800, so warm-ups and short pauses
--   stay quiet), $tolerance_seconds (how far a pod's ledger interval may sit from the minutes its
--   GPUs were seen in).
-- Method: per GPU and holder (dcgm-exporter's pod / hpc_job labels), consecutive idle minutes
--   (gaps and islands); a period runs from its first sample to its last sample plus one sample
--   interval (gpu_busy_daily.scrape_interval_s, at least a minute). A gap in the data (exporter
--   outage) ends a period: unknown time is never counted as idle.
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

longest_step AS (
    SELECT greatest(60, coalesce(max(scrape_interval_s), 60)) AS seconds
    FROM gpu_busy_daily
    WHERE day >= CAST($scan_start AS DATE) AND day < CAST($scan_end AS DATE)
),

series AS (
    -- GPU-holder series with enough idle samples to make a long enough period at all (each
    -- sample stands for at most the longest step, 1.5 steps with a late scrape): the busy ones,
    -- nearly all, skip the window functions below
    SELECT cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
    FROM util
    GROUP BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
    HAVING count(*) FILTER (WHERE busy_fraction < $idle_threshold)
        * 1.5 * (SELECT seconds FROM longest_step) >= $idle_min_seconds
),

stepped AS (
    SELECT
        u.*,
        -- the time one sample stands for
        greatest(60, coalesce(d.scrape_interval_s, 60)) AS step_seconds
    FROM util AS u
    SEMI JOIN series AS s
        ON s.cluster = u.cluster AND s.gpu_uuid = u.gpu_uuid
        AND s.gpu_instance = u.gpu_instance AND s.namespace = u.namespace AND s.pod = u.pod
        AND s.pod_uid = u.pod_uid AND s.hpc_job = u.hpc_job
    LEFT JOIN gpu_busy_daily AS d
        ON d.cluster = u.cluster AND d.gpu_uuid = u.gpu_uuid
        AND coalesce(d.gpu_instance, '') = u.gpu_instance
        AND d.day = CAST(u.bucket_start AS DATE)
),

marked AS (
    SELECT
        *,
        busy_fraction < $idle_threshold AS idle,
        CASE WHEN busy_fraction < $idle_threshold
            AND (lag(busy_fraction) OVER w >= $idle_threshold
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

periods AS (
    SELECT
        cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no,
        min(bucket_start) AS start_ts,
        max(bucket_start + to_seconds(step_seconds)) AS end_ts,
        count(*) AS buckets,
        min(bucket_start) AS first_bucket,
        max(bucket_start) AS last_bucket,
        avg(busy_fraction) AS mean_busy
    FROM numbered
    WHERE idle
    GROUP BY cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no
    HAVING date_diff('second', min(bucket_start), max(bucket_start + to_seconds(step_seconds)))
        >= $idle_min_seconds
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

grouped AS (
    -- idle periods of one allocation's GPUs that overlap in time form one incident
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
        FROM picked
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
        sum(date_diff('second', start_ts, end_ts)) AS gpu_seconds,
        sum(buckets) AS buckets,
        max(mean_busy) AS max_mean_busy,
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
        || ': ' || gpus || ' of its ' || node_gpus || ' GPU(s) on ' || node || ' below '
        || round($idle_threshold * 100, 1) || '% busy for '
        || round(date_diff('second', start_ts, end_ts) / 60.0, 1) || ' min ('
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
