-- detect_shared_overcommit
-- Grain: one row per episode in which a physical GPU with at least one shared holder (MIG,
--   time-slicing, MPS, shard) is charged more than one GPU-second per second: the invariant of
--   docs/shared-gpus.md broken (a MIG layout over-committed, a whole-GPU job on a GPU that is
--   also sliced or time-shared, a slice held by two holders).
-- Parameters: $scan_first, $scan_last (DATE, inclusive), $tolerance_seconds (episodes this short
--   or shorter are dropped: a pod's ends are known to one scrape interval).
-- Load of a GPU at an instant: 1 per whole-GPU holder naming it, the MIG fraction of each MIG
--   holder on it (allocations.capacity_gpus spread over its GPUs), and 1 while any time-shared
--   holder is on it (their seconds are split among them, docs/shared-gpus.md: together they
--   hold the GPU once). Only holders whose GPUs are known (allocations.gpu_uuids) are placed.
-- Method: one event sweep per GPU (two running sums: weight and time-shared presence), O(n log n);
--   violating segments that follow each other form an episode.
-- gpu_seconds = the excess over one GPU x the time (the physical GPU-time charged twice).
-- Columns: the candidate layout of detect_incidents.sql.
WITH shared_node_days AS (
    -- node-days with a shared holder: only there can the invariant break unnoticed (whole-GPU
    -- conflicts elsewhere are double_scheduled's); a ledger without shared GPUs reads nothing
    SELECT DISTINCT cluster, node, day FROM allocations
    WHERE day >= $scan_first AND day <= $scan_last AND sharing IS NOT NULL
),

placed AS (
    SELECT a.*, unnest(a.gpu_uuids) AS gpu_uuid, len(a.gpu_uuids) AS n_gpus
    FROM allocations AS a
    SEMI JOIN shared_node_days AS s ON s.cluster = a.cluster AND s.node = a.node AND s.day = a.day
    WHERE a.day >= $scan_first AND a.day <= $scan_last AND len(coalesce(a.gpu_uuids, [])) > 0
),

shared_gpus AS (
    SELECT DISTINCT cluster, day, gpu_uuid FROM placed WHERE sharing IS NOT NULL
),

holders AS (
    SELECT p.*,
        CASE WHEN p.sharing IS NULL THEN 1.0
             WHEN p.sharing = 'mig' THEN coalesce(p.capacity_gpus, 0) / p.n_gpus
             ELSE 0.0 END AS weight,
        CASE WHEN p.sharing IN ('time_slicing', 'mps', 'shard') THEN 1 ELSE 0 END AS timeshared
    FROM placed AS p
    SEMI JOIN shared_gpus AS g ON g.cluster = p.cluster AND g.day = p.day AND g.gpu_uuid = p.gpu_uuid
),

events AS (
    SELECT cluster, day, gpu_uuid, ts, sum(dw) AS dw, sum(dc) AS dc
    FROM (
        SELECT cluster, day, gpu_uuid, start_ts AS ts, weight AS dw, timeshared AS dc FROM holders
        UNION ALL
        SELECT cluster, day, gpu_uuid, end_ts, -weight, -timeshared FROM holders
    )
    GROUP BY ALL
),

steps AS (
    SELECT *, weight_sum + CASE WHEN present > 0 THEN 1 ELSE 0 END AS load
    FROM (
        SELECT cluster, day, gpu_uuid, ts,
            lead(ts) OVER w AS next_ts,
            sum(dw) OVER w AS weight_sum,
            sum(dc) OVER w AS present
        FROM events
        WINDOW w AS (PARTITION BY cluster, day, gpu_uuid ORDER BY ts)
    )
),

violating AS (
    SELECT *, sum(CASE WHEN prev_next IS DISTINCT FROM ts THEN 1 ELSE 0 END)
        OVER (PARTITION BY cluster, day, gpu_uuid ORDER BY ts) AS episode
    FROM (
        SELECT *, lag(next_ts) OVER (PARTITION BY cluster, day, gpu_uuid ORDER BY ts) AS prev_next
        FROM steps
        WHERE next_ts IS NOT NULL AND next_ts > ts AND load > 1 + 1e-6
    )
),

episodes AS (
    SELECT cluster, day, gpu_uuid, episode, min(ts) AS start_ts, max(next_ts) AS end_ts,
        max(load) AS max_load,
        sum((load - 1) * date_diff('second', ts, next_ts)) AS excess_seconds
    FROM violating
    GROUP BY ALL
    HAVING date_diff('second', min(ts), max(next_ts)) > $tolerance_seconds
),

involved AS (
    SELECT e.cluster, e.day, e.gpu_uuid, e.episode,
        list_distinct(list(h.domain ORDER BY h.domain)) AS domains,
        string_agg(DISTINCT h.domain || ' ' || CASE WHEN h.domain = 'slurm'
            THEN 'job ' || h.job_id ELSE 'pod ' || h.k8s_namespace || '/' || h.name END
            || ' (' || coalesce(h.sharing, 'whole GPU')
            || coalesce(' ' || h.slice_profile, '') || ')', ', ') AS who,
        arg_max(h.node, h.start_ts) AS node,
        arg_max(h.person, h.start_ts) AS person,
        arg_max(h.team, h.start_ts) AS team,
        arg_max(h.cost_centre, h.start_ts) AS cost_centre,
        arg_min(h.person, h.start_ts) AS other_person,
        arg_min(h.team, h.start_ts) AS other_team,
        arg_min(h.cost_centre, h.start_ts) AS other_cost_centre,
        arg_max(h.domain, h.start_ts) AS rate_domain,
        arg_max(h.gpu_model, h.start_ts) AS gpu_model,
        arg_max(h.qos, h.start_ts) AS qos,
        arg_max(CASE WHEN h.domain = 'slurm' THEN h.job_id END, h.start_ts) AS slurm_job,
        arg_max(CASE WHEN h.domain = 'kubernetes' THEN h.k8s_namespace || '/' || h.job_id END,
                h.start_ts) AS k8s_workload,
        list_distinct(list('allocations{day=' || strftime(h.day, '%Y-%m-%d') || ',domain='
            || h.domain || ',source_key=' || h.source_key || ',node=' || h.node || '}'
            ORDER BY h.start_ts, h.source_key)) AS refs
    FROM episodes AS e
    INNER JOIN holders AS h
        ON h.cluster = e.cluster AND h.day = e.day AND h.gpu_uuid = e.gpu_uuid
        AND h.start_ts < e.end_ts AND h.end_ts > e.start_ts
    GROUP BY ALL
)

SELECT
    'shared_overcommit' AS kind,
    CASE WHEN len(i.domains) > 1 THEN 'both' ELSE i.domains[1] END AS domain,
    e.cluster,
    i.node,
    [e.gpu_uuid] AS gpu_uuids,
    1 AS gpus,
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
    'gpu' AS evidence_level,
    e.max_load AS share,
    i.rate_domain,
    i.gpu_model,
    i.qos,
    e.cluster || '|' || e.gpu_uuid || '|' || strftime(e.start_ts, '%Y-%m-%d %H:%M:%S')
        AS identity_key,
    'GPU ' || e.gpu_uuid || ' charged ' || round(e.max_load, 3)
        || ' GPU-seconds per second at most (shares over one) for '
        || round(date_diff('second', e.start_ts, e.end_ts) / 60.0, 1) || ' min: ' || i.who
        AS detail,
    array_to_string(i.refs, '; ') AS evidence
FROM episodes AS e
INNER JOIN involved AS i USING (cluster, day, gpu_uuid, episode)
