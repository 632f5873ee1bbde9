-- detect_partial_gang
-- Grain: one row per partial start of a gang: an attempt of a gang of N > 1 pods during which
--   only k < N of its pods ran while holding GPUs, from its first pod's start until all N ran,
--   or until the attempt ended without them (evicted, e.g. PodsReadyTimeout, and requeued).
-- A gang is the pods of one owner: their Kueue Workload where one is known (kueue_workloads,
--   the Workload history included; N = the pod-set counts, or the admitted count under partial
--   admission; the slices of a Kueue elastic job are one gang, below), else the gang the
--   scheduler knows (k8s_pod_groups: a Workload API pod group or PodGroup of the pods' Job, or
--   the coscheduling PodGroup their scheduling.x-k8s.io/pod-group label names; N = its gang
--   minCount), else their JobSet (label jobset.sigs.k8s.io/jobset-name; N = the sum of its
--   Jobs' sizes), else their Job (label batch.kubernetes.io/job-name, else kube_pod_owner; N =
--   kube_job_spec_parallelism when it equals kube_job_spec_completions: every pod needed at
--   once; k8s_job_specs, the value seen while its pods ran). A gang of a JobSet or Job alone is
--   partial only while a member waits Pending without a node (k8s_pending_pods).
-- Kueue elastic jobs (ElasticJobsViaWorkloadSlices): a scale-up creates a Workload slice that
--   replaces the admitted one (kueue.x-k8s.io/workload-slice-replacement-for; the old one
--   finishes, WorkloadSliceReplaced). The pods of every slice of the chain are one gang, and an
--   attempt is judged by the slice in force when it started (the latest created by then): a
--   scale-up comes after the attempt ran full at its size, so it never opens a partial phase.
-- Parameters: $scan_first, $scan_last (DATE, inclusive: the allocation days read),
--   $tolerance_seconds (pod starts are known to one scrape interval), $gang_grace_seconds
--   (normal start-up: partial phases no longer than this are not incidents).
-- Method: an event sweep per gang over its pods' ledger intervals (starts +1 pod, ends -1,
--   O(n log n)); an attempt is a maximal period with at least one pod running. Wasted
--   GPU-seconds: the GPUs held by the running pods x the time of the partial phase, minus the
--   GPU-time a double_scheduled incident (det_double) holds on those pods' GPUs in the phase
--   (each wasted GPU-second counted once: double_scheduled first, docs/detectors.md).
-- Decision: the phase is an incident when its length is surely above the grace: Kueue's own
--   PodsReady - Admitted times when the Workload's (last) admission is this attempt and it became
--   ready, else the measured length minus one scrape interval.
-- Columns: the candidate layout of detect_incidents.sql.
WITH RECURSIVE slice_chain AS (
    -- Kueue elastic jobs: each Workload slice with the first slice of its chain (slice_of
    -- names the slice it replaced, 'namespace/name'; one whose predecessor is not known starts
    -- a chain)
    SELECT w.uid, w.namespace, w.name, w.uid AS root_uid, 0 AS depth
    FROM kueue_workloads AS w
    WHERE w.slice_of IS NULL OR NOT EXISTS (
        SELECT 1 FROM kueue_workloads AS o WHERE o.namespace || '/' || o.name = w.slice_of)
    UNION ALL
    SELECT w.uid, w.namespace, w.name, c.root_uid, c.depth + 1
    FROM slice_chain AS c
    INNER JOIN kueue_workloads AS w
        ON w.slice_of = c.namespace || '/' || c.name AND w.uid <> c.uid
    WHERE c.depth < 100
),

all_workloads AS (
    SELECT * FROM (
        SELECT
            w.uid, w.namespace, w.name, w.created_at, w.admitted_at, w.pods_ready_at,
            w.eviction_reasons, w.evicted_reason, w.requeue_count,
            coalesce(c.root_uid, w.uid) AS gang_uid,
            -- partial admission (podSets[].minCount): Kueue admits fewer pods than the spec's
            -- count and shrinks the Job to them; the admitted GPUs / GPUs per pod say how many
            CASE WHEN min_count IS NOT NULL AND pod_sets = 1 AND gpus_per_pod > 0
                    AND gpus_admitted % gpus_per_pod = 0
                THEN least(pods_wanted, gpus_admitted // gpus_per_pod)
                ELSE w.pods_wanted
            END AS pods_wanted
        FROM kueue_workloads AS w
        LEFT JOIN (SELECT uid, min(root_uid) AS root_uid FROM slice_chain GROUP BY uid) AS c
            ON c.uid = w.uid
    )
),

pod_meta AS (
    -- a pod's owner and labels (the same on every interval of its uid)
    SELECT cluster, uid, namespace, first_start, labels,
        json_extract_string(labels, '$.jobset_sigs_k8s_io_jobset_name') AS jobset_name,
        coalesce(json_extract_string(labels, '$.batch_kubernetes_io_job_name'),
            CASE WHEN owner_kind = 'Job' THEN owner_name END) AS owner_job,
        json_extract_string(labels, '$.scheduling_x_k8s_io_pod_group') AS pod_group_label
    FROM (
        SELECT cluster, uid, any_value(namespace) AS namespace, min(start_ts) AS first_start,
            any_value(owner_kind) AS owner_kind, any_value(owner_name) AS owner_name,
            any_value(labels) AS labels
        FROM k8s_pod_allocations
        GROUP BY cluster, uid
    )
),

sched_groups AS (
    -- gangs the scheduler knows: a Workload API pod group or PodGroup (scheduling.k8s.io) or a
    -- coscheduling PodGroup (scheduling.x-k8s.io) with a gang minCount, and the pods it covers
    -- as the ledger sees them (its Job's, or those its pod-group label names)
    SELECT cluster, uid || CASE WHEN kind = 'Workload' THEN '/' || pod_group ELSE '' END
            AS group_key,
        uid, pod_group, api_version, kind, namespace, name, min_count, job_name, pod_label,
        created_at
    FROM k8s_pod_groups
    WHERE policy = 'gang' AND min_count IS NOT NULL
        AND (job_name IS NOT NULL OR pod_label IS NOT NULL)
),

pod_sched AS (
    -- each pod's scheduler gang: a PodGroup (the runtime object) before a Workload's pod group,
    -- the latest created before the pod started (a Job name used again is another gang)
    SELECT cluster, uid, pick.k AS group_key, pick.c AS group_cluster
    FROM (
        SELECT cluster, uid,
            arg_max({'c': g_cluster, 'k': group_key}, (kind = 'PodGroup',
                coalesce(created_at <= first_start, FALSE),
                coalesce(created_at, TIMESTAMP '1970-01-01'), g_cluster)) AS pick
        FROM (
            SELECT m.cluster, m.uid, m.first_start, g.cluster AS g_cluster, g.group_key, g.kind,
                g.created_at
            FROM pod_meta AS m
            INNER JOIN sched_groups AS g
                ON g.namespace = m.namespace AND g.job_name = m.owner_job
                AND (g.cluster = m.cluster OR g.cluster = '')
            UNION ALL
            SELECT m.cluster, m.uid, m.first_start, g.cluster, g.group_key, g.kind,
                g.created_at
            FROM pod_meta AS m
            INNER JOIN sched_groups AS g
                ON g.namespace = m.namespace AND g.pod_label = m.pod_group_label
                AND (g.cluster = m.cluster OR g.cluster = '')
        )
        GROUP BY cluster, uid
    )
),

members AS (
    -- the GPU pod pieces of the days read, with their Workload (if any), scheduler gang and
    -- owners; wl_uid is the gang's Workload (an elastic job's first slice), slice_uid the pod's
    SELECT a.*, w.gang_uid AS wl_uid, w.uid AS slice_uid, w.pods_wanted AS wl_wanted,
        m.jobset_name, m.owner_job,
        sg.group_key AS sg_key, sg.min_count AS sg_wanted, sg.name AS sg_name,
        'k8s_pod_groups{cluster=' || sg.cluster || ',uid=' || sg.uid || ',pod_group='
            || sg.pod_group || '} ('
            || CASE WHEN sg.api_version LIKE 'scheduling.k8s.io/%' THEN 'Workload API '
                ELSE 'coscheduling ' END
            || sg.api_version || ' ' || sg.kind || ' ' || sg.namespace || '/' || sg.name
            || CASE WHEN sg.pod_group <> '' THEN ' pod group ' || sg.pod_group ELSE '' END
            || ': gang minCount ' || sg.min_count || ')' AS sg_evidence
    FROM allocations AS a
    LEFT JOIN all_workloads AS w ON w.namespace = a.k8s_namespace AND w.name = a.job_id
    LEFT JOIN pod_meta AS m ON m.cluster = a.cluster AND m.uid = a.source_key
    LEFT JOIN pod_sched AS ps ON ps.cluster = a.cluster AND ps.uid = a.source_key
    LEFT JOIN sched_groups AS sg
        ON sg.group_key = ps.group_key AND sg.cluster = ps.group_cluster
    WHERE a.domain = 'kubernetes' AND a.day >= $scan_first AND a.day <= $scan_last
),

waiting AS (
    -- GPU pods Pending without a node: the missing members
    SELECT cluster, uid, namespace, pod, first_seen, last_seen,
        json_extract_string(labels, '$.jobset_sigs_k8s_io_jobset_name') AS jobset_name,
        coalesce(json_extract_string(labels, '$.batch_kubernetes_io_job_name'),
            CASE WHEN owner_kind = 'Job' THEN owner_name END) AS owner_job
    FROM k8s_pending_pods
    WHERE last_seen >= CAST($scan_first AS TIMESTAMP)
        AND first_seen < CAST($scan_last AS TIMESTAMP) + INTERVAL 1 DAY
),

job_spans AS (
    SELECT cluster, k8s_namespace AS namespace, owner_job, min(start_ts) AS first_start,
        max(end_ts) AS last_end
    FROM members
    WHERE wl_uid IS NULL AND owner_job IS NOT NULL
    GROUP BY ALL
),

job_sizes AS (
    -- the Job's spec seen at its first pod's start, else the first seen while its pods ran;
    -- a gang only when every pod is needed at once (completions = parallelism)
    SELECT cluster, namespace, owner_job,
        CASE WHEN completions = parallelism THEN parallelism END AS size
    FROM (
        SELECT j.cluster, j.namespace, j.owner_job,
            arg_min(s.parallelism, (NOT (s.first_seen <= j.first_start), s.first_seen))
                AS parallelism,
            arg_min(s.completions, (NOT (s.first_seen <= j.first_start), s.first_seen))
                AS completions
        FROM job_spans AS j
        INNER JOIN k8s_job_specs AS s
            ON s.cluster = j.cluster AND s.namespace = j.namespace AND s.job_name = j.owner_job
            AND s.first_seen < j.last_end AND s.last_seen > j.first_start
        GROUP BY ALL
    )
),

jobset_sizes AS (
    -- a JobSet's size: the sum of its Jobs' (each of its Jobs seen running or waiting)
    SELECT g.cluster, g.namespace, g.jobset_name,
        CASE WHEN count(js.size) = count(*) THEN sum(js.size) END AS size
    FROM (
        SELECT DISTINCT cluster, k8s_namespace AS namespace, jobset_name, owner_job
        FROM members WHERE wl_uid IS NULL AND jobset_name IS NOT NULL
        UNION
        SELECT DISTINCT cluster, namespace, jobset_name, owner_job
        FROM waiting WHERE jobset_name IS NOT NULL
    ) AS g
    LEFT JOIN job_sizes AS js
        ON js.cluster = g.cluster AND js.namespace = g.namespace AND js.owner_job = g.owner_job
    GROUP BY ALL
),

pods AS (
    -- every piece with its gang: gang_key, the gang's name and its size (an elastic job's
    -- pieces: their own slice's size; a gang is kept when any of its sizes is above 1)
    SELECT * FROM (
        SELECT m.*,
            CASE WHEN m.wl_uid IS NOT NULL THEN 'Workload'
                WHEN m.sg_key IS NOT NULL THEN 'PodGroup'
                WHEN m.jobset_name IS NOT NULL THEN 'JobSet'
                WHEN m.owner_job IS NOT NULL THEN 'Job' END AS gang_kind,
            CASE WHEN m.wl_uid IS NOT NULL THEN m.wl_uid
                WHEN m.sg_key IS NOT NULL THEN m.sg_key
                ELSE m.cluster || '/' || m.k8s_namespace || '/'
                    || coalesce(m.jobset_name, m.owner_job) END AS workload_uid,
            CASE WHEN m.wl_uid IS NULL AND m.sg_key IS NOT NULL THEN m.sg_name
                ELSE coalesce(m.jobset_name, m.owner_job) END AS gang_name,
            CASE WHEN m.wl_uid IS NOT NULL THEN m.wl_wanted
                WHEN m.sg_key IS NOT NULL THEN m.sg_wanted
                WHEN m.jobset_name IS NOT NULL THEN jss.size
                ELSE js.size END AS pods_wanted
        FROM members AS m
        LEFT JOIN job_sizes AS js
            ON m.wl_uid IS NULL AND m.jobset_name IS NULL AND js.cluster = m.cluster
            AND js.namespace = m.k8s_namespace AND js.owner_job = m.owner_job
        LEFT JOIN jobset_sizes AS jss
            ON m.wl_uid IS NULL AND jss.cluster = m.cluster AND jss.namespace = m.k8s_namespace
            AND jss.jobset_name = m.jobset_name
    )
    QUALIFY max(pods_wanted) OVER (PARTITION BY workload_uid) > 1
),

workloads AS (
    -- one row per gang: its Workload's fields where it has one (an elastic job: its first
    -- slice's; an attempt is judged by its own slice, attempt_slices)
    SELECT p.workload_uid AS uid, any_value(p.gang_kind) AS gang_kind,
        any_value(p.gang_name) AS gang_name, max(p.pods_wanted) AS pods_wanted,
        any_value(p.k8s_namespace) AS namespace,
        coalesce(any_value(w.name), any_value(p.gang_name)) AS name,
        any_value(w.eviction_reasons) AS eviction_reasons,
        any_value(p.sg_evidence) AS sg_evidence
    FROM pods AS p
    LEFT JOIN all_workloads AS w ON w.uid = p.wl_uid
    GROUP BY p.workload_uid
),

gang_waiting AS (
    -- the waiting members of the gangs of a JobSet or Job alone
    SELECT g.uid AS workload_uid, x.uid AS pod_uid, x.first_seen, x.last_seen
    FROM workloads AS g
    INNER JOIN waiting AS x
        ON g.gang_kind IN ('JobSet', 'Job')
        AND g.uid = x.cluster || '/' || x.namespace || '/' || coalesce(x.jobset_name, x.owner_job)
),

candidates AS (
    -- Workloads that can have a partial phase at all: fewer pods than needed, pods not all
    -- starting at one instant, or a pod ending before another starts. The others (a gang whose
    -- pods start together and overlap) are full from their first instant: no sweep needed.
    -- (a pod cut at midnight is two pieces, but then its second piece starts later: caught)
    SELECT workload_uid
    FROM pods
    GROUP BY workload_uid
    HAVING count(*) < max(pods_wanted)
        OR max(start_ts) > min(start_ts)
        OR min(end_ts) <= max(start_ts)
),

events AS (
    -- pieces cut at midnight end and start at one instant: they cancel here
    SELECT workload_uid, ts, sum(d_pods) AS d_pods, sum(d_gpus) AS d_gpus
    FROM (
        SELECT workload_uid, start_ts AS ts, 1 AS d_pods, gpus AS d_gpus
        FROM pods SEMI JOIN candidates USING (workload_uid)
        UNION ALL
        SELECT workload_uid, end_ts AS ts, -1 AS d_pods, -gpus AS d_gpus
        FROM pods SEMI JOIN candidates USING (workload_uid)
    )
    GROUP BY workload_uid, ts
),

steps AS (
    SELECT
        workload_uid,
        ts,
        running,
        gpus_held,
        next_ts,
        -- a new attempt begins where the previous step had no pod running
        CASE WHEN coalesce(lag(running) OVER w, 0) = 0 THEN 1 ELSE 0 END AS opens
    FROM (
        SELECT
            workload_uid,
            ts,
            sum(d_pods) OVER w AS running,
            sum(d_gpus) OVER w AS gpus_held,
            lead(ts) OVER w AS next_ts
        FROM events
        WINDOW w AS (PARTITION BY workload_uid ORDER BY ts)
    )
    WINDOW w AS (PARTITION BY workload_uid ORDER BY ts)
),

attempts AS (
    SELECT *, sum(opens) OVER (PARTITION BY workload_uid ORDER BY ts) AS attempt_no
    FROM steps
),

attempt_spans AS (
    SELECT workload_uid, attempt_no, min(ts) AS attempt_start,
        max(next_ts) FILTER (WHERE running > 0) AS attempt_end
    FROM attempts
    GROUP BY workload_uid, attempt_no
),

attempt_slices AS (
    -- the Kueue Workload an attempt is judged by: the gang's own, or for an elastic job the
    -- slice in force when the attempt started (the latest created by then, else the first)
    SELECT s.workload_uid, s.attempt_no,
        coalesce(arg_max(w.uid, w.created_at) FILTER (WHERE w.created_at <= s.attempt_start),
            arg_min(w.uid, w.created_at), any_value(w.uid)) AS slice_uid
    FROM attempt_spans AS s
    INNER JOIN all_workloads AS w ON w.gang_uid = s.workload_uid
    GROUP BY s.workload_uid, s.attempt_no
),

per_attempt AS (
    SELECT
        s.workload_uid,
        s.attempt_no,
        s.attempt_start,
        s.attempt_end,
        min(a.ts) FILTER (WHERE a.running >= coalesce(sw.pods_wanted, g.pods_wanted)) AS full_at,
        any_value(coalesce(sw.pods_wanted, g.pods_wanted)) AS pods_wanted,
        any_value(sl.slice_uid) AS slice_uid
    FROM attempt_spans AS s
    INNER JOIN attempts AS a USING (workload_uid, attempt_no)
    INNER JOIN workloads AS g ON g.uid = s.workload_uid
    LEFT JOIN attempt_slices AS sl USING (workload_uid, attempt_no)
    LEFT JOIN all_workloads AS sw ON sw.uid = sl.slice_uid
    GROUP BY s.workload_uid, s.attempt_no, s.attempt_start, s.attempt_end
),

phases AS (
    SELECT
        p.*,
        coalesce(p.full_at, p.attempt_end) AS phase_end,
        -- the Workload's admission this attempt started from (Kueue keeps the last one)
        w.admitted_at IS NOT NULL AND w.pods_ready_at >= w.admitted_at
            AND p.full_at IS NOT NULL
            AND p.attempt_start >= w.admitted_at
            AND p.attempt_start = min(p.attempt_start) FILTER (
                WHERE p.attempt_start >= w.admitted_at
            ) OVER (PARTITION BY p.workload_uid, p.slice_uid) AS kueue_knows,
        date_diff('second', w.admitted_at, w.pods_ready_at) AS ready_lag_seconds
    FROM per_attempt AS p
    LEFT JOIN all_workloads AS w ON w.uid = p.slice_uid
),

partial AS (
    -- the sweep's steps inside the partial phase
    SELECT
        ph.workload_uid, ph.attempt_no, ph.attempt_start, ph.phase_end, ph.full_at,
        ph.pods_wanted, ph.kueue_knows, ph.ready_lag_seconds, ph.slice_uid,
        max(s.running) AS max_running,
        max(s.gpus_held) AS max_gpus_held,
        sum(s.gpus_held * date_diff('second', s.ts, least(s.next_ts, ph.phase_end)))
            AS gpu_seconds
    FROM phases AS ph
    INNER JOIN attempts AS s
        ON s.workload_uid = ph.workload_uid AND s.attempt_no = ph.attempt_no
        AND s.ts < ph.phase_end AND s.running > 0
    GROUP BY ALL
),

flagged AS (
    SELECT pa.*, wt.pod_uid AS waiting_uid, wt.first_seen AS waiting_since
    FROM partial AS pa
    INNER JOIN workloads AS g ON g.uid = pa.workload_uid
    -- a gang of a JobSet or Job alone: a member must be seen waiting (Pending, no node)
    LEFT JOIN (
        SELECT p.workload_uid, p.attempt_no,
            arg_min(x.pod_uid, x.first_seen) AS pod_uid, min(x.first_seen) AS first_seen
        FROM partial AS p
        INNER JOIN gang_waiting AS x
            ON x.workload_uid = p.workload_uid
            AND x.first_seen < p.phase_end AND x.last_seen > p.attempt_start
        GROUP BY ALL
    ) AS wt USING (workload_uid, attempt_no)
    WHERE CASE WHEN pa.kueue_knows THEN pa.ready_lag_seconds
            ELSE date_diff('second', pa.attempt_start, pa.phase_end) - $tolerance_seconds
          END > $gang_grace_seconds
        AND (g.gang_kind IN ('Workload', 'PodGroup') OR wt.pod_uid IS NOT NULL)
),

held AS (
    -- the pods (pieces) holding GPUs during the partial phase
    SELECT
        f.workload_uid, f.attempt_no,
        list_sort(list(DISTINCT p.node)) AS nodes,
        list_sort(flatten(list(p.gpu_uuids) FILTER (WHERE p.gpu_uuids IS NOT NULL)))
            AS gpu_uuids,
        list_distinct(list(
            'allocations{day=' || strftime(p.day, '%Y-%m-%d')
            || ',domain=kubernetes,source_key=' || p.source_key || ',node=' || p.node || '}'
            ORDER BY p.start_ts, p.source_key)) AS refs,
        arg_min(p.person, p.start_ts) AS person,
        arg_min(p.team, p.start_ts) AS team,
        arg_min(p.cost_centre, p.start_ts) AS cost_centre,
        arg_min(p.gpu_model, p.start_ts) AS gpu_model,
        arg_min(p.k8s_namespace, p.start_ts) AS namespace
    FROM flagged AS f
    INNER JOIN pods AS p
        ON p.workload_uid = f.workload_uid
        AND p.start_ts < f.phase_end AND p.end_ts > f.attempt_start
    GROUP BY f.workload_uid, f.attempt_no
),

double_claims AS (
    -- GPU-time a double_scheduled incident holds on the gang's pods in the phase (precedence:
    -- double_scheduled first): with GPU-level evidence, its GPUs; without, every GPU of the pod
    -- it names on that node. Per pod piece and GPU (NULL: the piece's GPUs are unknown).
    -- Equi-joins only (on GPU, or on node and pod): never a join over every incident.
    WITH phase_pieces AS (
        SELECT f.workload_uid, f.attempt_no, f.attempt_start, f.phase_end, p.cluster,
            p.source_key, p.node, p.start_ts, p.end_ts, p.gpus,
            p.k8s_namespace || '/' || p.job_id AS workload
        FROM flagged AS f
        INNER JOIN pods AS p
            ON p.workload_uid = f.workload_uid
            AND p.start_ts < f.phase_end AND p.end_ts > f.attempt_start
    ),
    piece_gpus AS (
        SELECT pp.*, g.gpu_uuid
        FROM phase_pieces AS pp
        LEFT JOIN (SELECT source_key, node, start_ts, unnest(gpu_uuids) AS gpu_uuid
                   FROM pods) AS g
            ON g.source_key = pp.source_key AND g.node = pp.node AND g.start_ts = pp.start_ts
    ),
    by_gpu AS (
        SELECT pg.*, d.start_ts AS d_start, d.end_ts AS d_end
        FROM piece_gpus AS pg
        INNER JOIN (SELECT cluster, unnest(gpu_uuids) AS gpu_uuid, start_ts, end_ts
                    FROM det_double WHERE len(coalesce(gpu_uuids, [])) > 0) AS d
            ON d.cluster = pg.cluster AND d.gpu_uuid = pg.gpu_uuid
    ),
    by_pair AS (
        SELECT pg.*, d.start_ts AS d_start, d.end_ts AS d_end
        FROM piece_gpus AS pg
        INNER JOIN det_double AS d
            ON d.cluster = pg.cluster AND d.node = pg.node AND d.k8s_workload = pg.workload
            AND len(coalesce(d.gpu_uuids, [])) = 0
    )
    SELECT workload_uid, attempt_no, source_key, node AS piece_node, start_ts AS piece_start,
        gpu_uuid, gpus AS piece_gpus,
        greatest(d_start, start_ts, attempt_start) AS cs,
        least(d_end, end_ts, phase_end) AS ce
    FROM (SELECT * FROM by_gpu UNION ALL SELECT * FROM by_pair)
),

double_held AS (
    -- the union of those claims per piece and GPU, in GPU-seconds, per gang phase
    SELECT workload_uid, attempt_no,
        sum(date_diff('second', ms, me)
            * CASE WHEN gpu_uuid IS NULL THEN piece_gpus ELSE 1 END) AS gpu_seconds
    FROM (
        SELECT workload_uid, attempt_no, source_key, piece_node, piece_start, gpu_uuid,
            any_value(piece_gpus) AS piece_gpus, min(cs) AS ms, max(ce) AS me
        FROM (
            SELECT *, sum(CASE WHEN prev_end IS NULL OR cs > prev_end THEN 1 ELSE 0 END)
                OVER (PARTITION BY workload_uid, attempt_no, source_key, piece_node, piece_start,
                        gpu_uuid
                      ORDER BY cs, ce) AS island
            FROM (
                SELECT *, max(ce) OVER (
                    PARTITION BY workload_uid, attempt_no, source_key, piece_node, piece_start,
                        gpu_uuid
                    ORDER BY cs, ce ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
                FROM double_claims
                WHERE ce > cs
            )
        )
        GROUP BY workload_uid, attempt_no, source_key, piece_node, piece_start, gpu_uuid, island
    )
    GROUP BY workload_uid, attempt_no
)

SELECT
    'partial_gang' AS kind,
    'kubernetes' AS domain,
    (SELECT any_value(cluster) FROM pods WHERE pods.workload_uid = f.workload_uid) AS cluster,
    array_to_string(h.nodes, ';') AS node,
    list_distinct(h.gpu_uuids) AS gpu_uuids,
    f.max_gpus_held AS gpus,
    f.attempt_start AS start_ts,
    f.phase_end AS end_ts,
    CAST(f.gpu_seconds - coalesce(dh.gpu_seconds, 0) AS BIGINT) AS gpu_seconds,
    CAST(NULL AS VARCHAR) AS slurm_job,
    w.namespace || '/' || w.name AS k8s_workload,
    h.person,
    h.team,
    h.cost_centre,
    CAST(NULL AS VARCHAR) AS other_person,
    CAST(NULL AS VARCHAR) AS other_team,
    CAST(NULL AS VARCHAR) AS other_cost_centre,
    CAST(NULL AS VARCHAR) AS evidence_level,
    f.max_running / f.pods_wanted AS share,
    'kubernetes' AS rate_domain,
    h.gpu_model,
    CAST(NULL AS VARCHAR) AS qos,
    f.workload_uid || '|' || strftime(f.attempt_start, '%Y-%m-%d %H:%M:%S') AS identity_key,
    f.max_running || ' of ' || f.pods_wanted || ' pods running for '
        || round(date_diff('second', f.attempt_start, f.phase_end) / 60.0, 1) || ' min '
        || CASE WHEN f.full_at IS NOT NULL THEN 'until all ' || f.pods_wanted || ' ran'
            ELSE 'until the attempt ended without them'
                || coalesce(' (Kueue evictions: ' || w.eviction_reasons || ')', '')
        END
        || CASE WHEN f.kueue_knows
            THEN '; Kueue: PodsReady ' || f.ready_lag_seconds || ' s after admission'
            ELSE '' END AS detail,
    CASE WHEN w.gang_kind = 'Workload'
            THEN 'kueue_workloads{uid=' || coalesce(f.slice_uid, w.uid) || '}'
        WHEN w.gang_kind = 'PodGroup' THEN w.sg_evidence
        WHEN w.gang_kind = 'Job' THEN 'k8s_job_specs{cluster='
            || (SELECT any_value(cluster) FROM pods WHERE pods.workload_uid = f.workload_uid)
            || ',namespace=' || w.namespace || ',job_name=' || w.gang_name || '}'
        ELSE 'k8s_pod_allocations{labels.jobset_sigs_k8s_io_jobset_name=' || w.gang_name || '}'
    END
        || coalesce('; k8s_pending_pods{cluster='
            || (SELECT any_value(cluster) FROM pods WHERE pods.workload_uid = f.workload_uid)
            || ',uid=' || f.waiting_uid || '} waiting since '
            || strftime(f.waiting_since, '%Y-%m-%d %H:%M:%S'), '')
        || '; ' || array_to_string(h.refs, '; ') AS evidence
FROM flagged AS f
INNER JOIN held AS h USING (workload_uid, attempt_no)
INNER JOIN workloads AS w ON w.uid = f.workload_uid
LEFT JOIN double_held AS dh USING (workload_uid, attempt_no)
