-- detect_idle
-- Grain: one row per idle allocation incident: a Slurm run or pod (allocations) on one node some
--   or all of whose GPUs were idle under its idle policy; idle pieces of its GPUs that overlap in
--   time are one incident.
-- Parameters: $scan_start, $scan_end (TIMESTAMP, half-open: the minute buckets read),
--   $tolerance_seconds (how far a pod's ledger interval may sit from the minutes its GPUs were
--   seen in), $window_rule (BOOLEAN: whether any policy has a window rule; false skips its
--   time line). Reads the temp table idle_policy (models/incidents.py: per cluster and Slurm
--   partition or Kubernetes namespace, first match by priority): (a) zero rule: busy fraction
--   strictly below zero_threshold for at least zero_seconds (default 5 % for 1800 s, so warm-ups
--   and short pauses stay quiet); (b) window rule: mean busy fraction below window_threshold
--   over a window of window_seconds (0: off, the default) that samples cover for >= 90 %.
--   Reads det_double and det_gang: GPU-time they hold is not idle here (precedence below).
-- Method: per GPU and holder (dcgm-exporter's pod / hpc_job labels), the minutes either rule
--   marks idle form periods (gaps and islands); a period runs from its first sample to its last
--   sample plus one sample interval (gpu_busy_daily.scrape_interval_s, at least a minute). A gap
--   in the data (exporter outage) ends a period: unknown time is never counted as idle, and the
--   window rule's mean is over the samples present. Window rule: per series, running sums of the
--   samples (busy in whole billionths: exact sums, so a mean equal to its threshold is not below
--   it on any engine); each sample's window start, on one time line with the samples, reads the
--   sums of the last sample at or before it (an as-of join, which Spark SQL has not); a sample is
--   in a low window when a low window starting before it ends at or after it.
-- gpu_seconds: idle time x GPUs; a MIG instance counts its fraction of the GPU (allocations
--   .capacity_gpus per instance: a 1g of 7 idle for an hour wastes 1/7 GPU-hour).
-- Precedence (one GPU-second in at most one incident): double_scheduled, then partial_gang, then
--   idle. A period loses the time a double-scheduling holds its GPU (GPU level: the GPUs named;
--   node level: any GPU of either allocation on that node) and the time its pod's gang was
--   partial; what is left may be split in pieces, each kept while it still lasts its rule's
--   length (zero_seconds, or window_seconds for a window-rule period): a shorter remnant is no
--   idle incident and its GPU-time is dropped from idle.
-- share: the incident's GPUs / all GPUs of the Slurm run (every node) or of the pod.
-- Engines: DuckDB, and Spark after models/engines/transpile.py (HEAVY_DETECTORS): no as-of
--   joins, correlated subqueries, * REPLACE or DISTINCT window aggregates; every choice among
--   rows is by a total order (ties broken by the series), so both engines pick the same rows.
--   Spark inlines every reference to a CTE (read twice, computed twice: the plan doubles), so
--   after `stepped` each CTE is read once, idle_minutes twice, zero_marked twice in branches
--   of which $window_rule keeps one.
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
    -- (a) zero rule: runs of consecutive samples below zero_threshold; (b) window rule: running
    -- sums, so a window's mean is a difference of two rows
    SELECT
        *,
        busy_fraction < zero_threshold AS idle,
        CASE WHEN busy_fraction < zero_threshold
            AND (lag(busy_fraction) OVER w >= zero_threshold
                 OR lag(busy_fraction) OVER w IS NULL
                 OR date_diff('second', lag(bucket_start) OVER w, bucket_start)
                    > 1.5 * step_seconds)
            THEN 1 ELSE 0 END AS opens,
        -- in billionths: whole numbers, so the sums and a window's mean are the same on every
        -- engine (a mean equal to its threshold, common with whole-percent samples, is not
        -- below it whatever order an engine adds in)
        CASE WHEN window_seconds > 0
            THEN sum(CAST(round(busy_fraction * 1e9) AS BIGINT)) OVER running END AS busy_sum,
        CASE WHEN window_seconds > 0 THEN count(*) OVER running END AS samples
    FROM stepped
    WINDOW w AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
                 ORDER BY bucket_start),
        running AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                    hpc_job ORDER BY bucket_start ROWS UNBOUNDED PRECEDING)
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

zero_marked AS (
    -- (a) a run of idle samples counts when it lasts zero_seconds (a period number holds one
    -- run, then the busy samples after it)
    SELECT
        *,
        coalesce(idle AND date_diff('second',
            min(CASE WHEN idle THEN bucket_start END) OVER run,
            max(CASE WHEN idle THEN bucket_start + to_seconds(step_seconds) END) OVER run)
            >= zero_seconds, false) AS by_zero
    FROM numbered
    WINDOW run AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                   hpc_job, period_no)
),

window_events AS (
    -- (b) one time line per series: each sample (kind 0, at its bucket_start) and, under the
    -- window rule, each sample's window start (kind 1, at bucket_start - window_seconds); at
    -- one instant samples sort first
    SELECT
        z.*, k.kind,
        CASE WHEN k.kind = 0 THEN z.bucket_start
            ELSE z.bucket_start - to_seconds(z.window_seconds) END AS at_ts
    FROM zero_marked AS z
    INNER JOIN (VALUES (0), (1)) AS k(kind) ON k.kind = 0 OR z.window_seconds > 0
    WHERE $window_rule
),

window_ends AS (
    -- a window start reads the running sums of the last sample at or before it (an as-of join
    -- without one); its window (end - window_seconds, end] is low when covered by samples for
    -- >= 90 % and their mean is below the threshold (missing samples are left out, never read
    -- as 0 %)
    SELECT
        *,
        CASE WHEN kind = 1
                AND (samples - coalesce(samples_before, 0)) * step_seconds
                    >= 0.9 * window_seconds
            THEN (busy_sum - coalesce(busy_before, 0))
                / ((samples - coalesce(samples_before, 0)) * 1e9) < window_threshold
            ELSE false END AS low_end
    FROM (
        SELECT
            *,
            -- samples counts rows: rising, so its max is the last sample's
            max(CASE WHEN kind = 0 THEN samples END) OVER w AS samples_before,
            last_value(CASE WHEN kind = 0 THEN busy_sum END IGNORE NULLS) OVER w AS busy_before
        FROM window_events
        WINDOW w AS (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                     hpc_job ORDER BY at_ts, kind ROWS UNBOUNDED PRECEDING)
    )
),

idle_minutes AS (
    -- no policy with a window rule (the default): the zero rule's samples, no time line (its
    -- windows would sort every sample again; the constant filter drops the unused branch)
    SELECT cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
           bucket_start, busy_fraction, step_seconds, zero_threshold, zero_seconds,
           window_threshold, window_seconds, by_zero, false AS by_window
    FROM zero_marked
    WHERE NOT $window_rule AND by_zero
    UNION ALL
    -- a sample lies in a low window when one starting before it ends at or after it (one window
    -- length per series: the windows starting before it end in their order)
    SELECT cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
           bucket_start, busy_fraction, step_seconds, zero_threshold, zero_seconds,
           window_threshold, window_seconds, by_zero,
           coalesce(low_until >= bucket_start, false) AS by_window
    FROM (
        SELECT *, max(CASE WHEN low_end THEN bucket_start END) OVER (
            PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job
            ORDER BY at_ts, kind ROWS UNBOUNDED PRECEDING) AS low_until
        FROM window_ends
    )
    WHERE $window_rule AND kind = 0 AND (by_zero OR low_until >= bucket_start)
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
        any_value(zero_seconds) AS zero_seconds,
        any_value(window_threshold) AS window_threshold,
        any_value(window_seconds) AS window_seconds
    FROM idle_numbered
    GROUP BY cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, period_no
),

holders AS (
    -- hpc_job carries JobIDRaw; a requeued job's run is the one holding the period (matched by
    -- node: Slurm and Kubernetes may call the cluster differently); a pod's period has no run
    SELECT p.*, n.run_key
    FROM periods AS p
    LEFT JOIN slurm_node_allocations AS n
        ON p.pod = '' AND n.node = p.node
        AND p.hpc_job IN (CAST(n.job_id_raw AS VARCHAR), n.job_id)
        AND n.start < p.end_ts AND coalesce(n."end", p.end_ts) > p.start_ts
),

candidates AS (
    -- the ledger pieces of the period's holder: its pod (by name, within the scrape tolerance)
    -- or its Slurm run (overlapping)
    SELECT p.* EXCLUDE (run_key), a.domain, a.source_key, a.day, a.job_id, a.name,
           a.k8s_namespace, a.person, a.team, a.cost_centre, a.gpu_model, a.qos,
           a.gpus AS node_gpus,
           -- a MIG instance wastes its fraction of the GPU per second (docs/shared-gpus.md)
           CASE WHEN a.sharing = 'mig' THEN a.capacity_gpus / nullif(a.gpus, 0) ELSE 1.0 END
               AS unit_share,
           date_diff('second', greatest(a.start_ts, p.start_ts), least(a.end_ts, p.end_ts))
               AS overlap_seconds
    FROM holders AS p
    INNER JOIN allocations AS a
        ON a.node = p.node
        AND a.domain = CASE WHEN p.pod <> '' THEN 'kubernetes' ELSE 'slurm' END
        AND CASE WHEN a.domain = 'kubernetes' THEN a.name ELSE a.source_key END
            = CASE WHEN p.pod <> '' THEN p.pod ELSE p.run_key END
        AND CASE WHEN p.pod <> ''
            THEN a.cluster = p.cluster AND a.k8s_namespace = p.namespace
                AND (p.pod_uid = '' OR a.source_key = p.pod_uid)
                AND a.start_ts <= p.end_ts + to_seconds($tolerance_seconds)
                AND a.end_ts >= p.start_ts - to_seconds($tolerance_seconds)
            ELSE a.start_ts < p.end_ts AND a.end_ts > p.start_ts END
),

picked AS (
    -- one ledger piece per idle period: the one it overlaps most (its owner pays)
    SELECT * EXCLUDE (pick)
    FROM (
        SELECT *, row_number() OVER (
            PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
                period_no
            ORDER BY overlap_seconds DESC, day, source_key
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

claimed AS (
    -- each pick with the claims on it in time order (a pick without any: one row, cs NULL);
    -- prev_end: the latest end of the claims before (an island of overlapping claims starts
    -- where a claim starts after it)
    SELECT
        *,
        max(ce) OVER (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                          hpc_job, period_no
                      ORDER BY cs, ce ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
            AS prev_end,
        max(ce) OVER (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
                          hpc_job, period_no) AS last_end,
        row_number() OVER (PARTITION BY cluster, gpu_uuid, gpu_instance, namespace, pod,
                               pod_uid, hpc_job, period_no ORDER BY cs, ce) AS claim_no
    FROM (
        SELECT p.*,
               CASE WHEN c.by_what IS NOT NULL THEN greatest(c.start_ts, p.start_ts) END AS cs,
               CASE WHEN c.by_what IS NOT NULL THEN least(c.end_ts, p.end_ts) END AS ce
        FROM picked AS p
        LEFT JOIN claims AS c
            ON c.start_ts < p.end_ts AND c.end_ts > p.start_ts
            AND CASE c.by_what
                WHEN 'gpu' THEN c.gpu_uuid = p.gpu_uuid
                WHEN 'pair' THEN c.node = p.node AND CASE WHEN p.domain = 'slurm'
                    THEN c.slurm_job = p.job_id
                    ELSE c.k8s_workload = p.k8s_namespace || '/' || p.job_id END
                ELSE p.domain = 'kubernetes' AND c.cluster = p.cluster
                    AND c.k8s_workload = p.k8s_namespace || '/' || p.job_id
            END
    )
),

piece_bounds AS (
    -- what is left of each pick: before each island of claims (kind 0: empty unless the claim
    -- starts an island) and after the last claim (kind 1, once per pick: the whole pick when
    -- nothing claims it)
    SELECT
        c.*,
        CASE WHEN k.kind = 0 THEN coalesce(c.prev_end, c.start_ts)
            ELSE coalesce(c.last_end, c.start_ts) END AS ps,
        CASE WHEN k.kind = 0 THEN c.cs ELSE c.end_ts END AS pe
    FROM claimed AS c
    INNER JOIN (VALUES (0), (1)) AS k(kind) ON k.kind = 0 OR c.claim_no = 1
),

pieces AS (
    -- a split piece names the idle samples overlapping it (a whole pick keeps its figures)
    SELECT
        domain, source_key, cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid,
        hpc_job, ps AS start_ts, pe AS end_ts,
        CASE WHEN ps = start_ts AND pe = end_ts THEN buckets ELSE split_buckets END AS buckets,
        CASE WHEN ps = start_ts THEN first_bucket ELSE split_first END AS first_bucket,
        CASE WHEN pe = end_ts THEN last_bucket ELSE split_last END AS last_bucket,
        mean_busy, by_zero, by_window, zero_threshold, window_threshold, window_seconds, day,
        job_id, name, k8s_namespace, person, team, cost_centre, gpu_model, qos, node_gpus,
        unit_share
    FROM (
        SELECT
            b.*,
            count(m.bucket_start) OVER piece AS split_buckets,
            min(m.bucket_start) OVER piece AS split_first,
            max(m.bucket_start) OVER piece AS split_last,
            row_number() OVER (PARTITION BY b.cluster, b.gpu_uuid, b.gpu_instance, b.namespace,
                                   b.pod, b.pod_uid, b.hpc_job, b.period_no, b.ps, b.pe
                               ORDER BY m.bucket_start) AS sample_no
        FROM piece_bounds AS b
        LEFT JOIN idle_minutes AS m
            -- split pieces only (a key of NULL joins nothing: a hash join, not a loop)
            ON m.gpu_uuid = CASE WHEN b.ps <> b.start_ts OR b.pe <> b.end_ts THEN b.gpu_uuid END
            AND m.cluster = b.cluster
            AND m.gpu_instance = b.gpu_instance AND m.namespace = b.namespace
            AND m.pod = b.pod AND m.pod_uid = b.pod_uid AND m.hpc_job = b.hpc_job
            AND m.bucket_start < b.pe
            AND m.bucket_start + to_seconds(m.step_seconds) > b.ps
        WHERE b.pe > b.ps
            -- a piece left by a subtraction is idle only if it still meets its rule's length:
            -- a 2-minute remnant beside a partial gang is no 30-minute idle incident (its
            -- GPU-time is dropped from idle)
            AND ((b.ps = b.start_ts AND b.pe = b.end_ts)
                 OR date_diff('second', b.ps, b.pe) >= CASE
                     WHEN b.by_zero AND b.by_window AND b.window_seconds > 0
                         THEN least(b.zero_seconds, b.window_seconds)
                     WHEN b.by_zero THEN b.zero_seconds
                     ELSE b.window_seconds END)
        WINDOW piece AS (PARTITION BY b.cluster, b.gpu_uuid, b.gpu_instance, b.namespace,
                         b.pod, b.pod_uid, b.hpc_job, b.period_no, b.ps, b.pe)
    )
    WHERE sample_no = 1
),

grouped AS (
    -- idle pieces of one allocation's GPUs that overlap in time form one incident
    SELECT
        *,
        sum(CASE WHEN prev_end IS NULL OR start_ts > prev_end THEN 1 ELSE 0 END) OVER (
            PARTITION BY domain, source_key, node ORDER BY start_ts, gpu_uuid, gpu_instance
        ) AS incident_no,
        -- the order arg_min reads an incident's first piece in (start_ts, then the series)
        row_number() OVER (
            PARTITION BY domain, source_key, node
            ORDER BY start_ts, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job, cluster
        ) AS piece_rank
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
        -- the first piece's owner (a NULL value is skipped: the next piece's is taken, on Spark
        -- too: models/engines/transpile.py)
        arg_min(day, piece_rank) AS day,
        arg_min(job_id, piece_rank) AS job_id,
        arg_min(name, piece_rank) AS name,
        arg_min(k8s_namespace, piece_rank) AS k8s_namespace,
        arg_min(person, piece_rank) AS person,
        arg_min(team, piece_rank) AS team,
        arg_min(cost_centre, piece_rank) AS cost_centre,
        arg_min(gpu_model, piece_rank) AS gpu_model,
        arg_min(qos, piece_rank) AS qos,
        max(node_gpus) AS node_gpus,
        -- the first idle sample's row, named in the evidence
        arg_min({'gpu_uuid': gpu_uuid, 'bucket': first_bucket, 'namespace': namespace,
                 'pod': pod, 'hpc_job': hpc_job}, piece_rank) AS first_row,
        max(last_bucket) AS last_bucket
    FROM grouped
    GROUP BY domain, source_key, node, incident_no
),

sized AS (
    -- one row per incident (incident_row 1) with its Slurm run's GPUs and nodes over all its
    -- nodes and the nodes its allocation has wholly idle; a distinct count is the highest
    -- dense_rank (Spark has no DISTINCT window aggregates)
    SELECT
        *,
        coalesce(max(run_node_rank) OVER incident, 1) AS job_nodes,
        coalesce(max(CASE WHEN whole_node THEN idle_node_rank END)
            OVER (PARTITION BY domain, source_key), 0) AS idle_nodes
    FROM (
        SELECT
            *,
            coalesce(sum(run_node_gpus) OVER incident, node_gpus) AS job_gpus,
            CASE WHEN run_node IS NOT NULL THEN dense_rank() OVER (
                PARTITION BY domain, source_key, node, incident_no ORDER BY run_node) END
                AS run_node_rank,
            CASE WHEN node IS NOT NULL THEN dense_rank() OVER (
                PARTITION BY domain, source_key, whole_node ORDER BY node) END AS idle_node_rank,
            row_number() OVER (
                PARTITION BY domain, source_key, node, incident_no ORDER BY run_node)
                AS incident_row
        FROM (
            SELECT i.*, i.gpus >= i.node_gpus AS whole_node, n.node AS run_node,
                   n.gpus AS run_node_gpus
            FROM incidents AS i
            LEFT JOIN slurm_node_allocations AS n
                ON i.domain = 'slurm' AND n.run_key = i.source_key
        )
        WINDOW incident AS (PARTITION BY domain, source_key, node, incident_no)
    )
    WINDOW incident AS (PARTITION BY domain, source_key, node, incident_no)
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
        -- CAST: a DOUBLE the transpiler sees, rounded the DuckDB way on Spark too
        || CASE WHEN by_zero
            THEN 'below ' || round(CAST(zero_threshold AS DOUBLE) * 100, 1) || '% busy'
            ELSE 'under ' || round(CAST(window_threshold AS DOUBLE) * 100, 1)
                || '% mean busy over ' || round(window_seconds / 60.0, 1) || '-min windows' END
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
WHERE incident_row = 1
