-- gpu_reading_pieces
-- Grain: one row per (dcgm-exporter reading span of one GPU or MIG instance, UTC hour it
--   touches) of the hours in [$first_day, $end_day): the reading cut at the hours, with the
--   charged holders that took it. Made once per usage pass as the temp table reading_pieces;
--   both conservation tables read it (gpu_conservation_hourly.sql per node, and
--   gpu_conservation_gpu_hourly.sql per physical GPU), so the rule lives here.
-- Parameters: $first_day, $end_day (DATE, half-open). Reads the temp tables usage_samples and
--   usage_span_matches (gpu_usage_hourly_samples.sql, gpu_usage_span_matches.sql: the one rule
--   matching a reading to its holder), and allocations, slurm_agent_pods, gpu_busy_daily.
-- Columns: node, cluster, gpu_uuid, gpu_instance, span_start, span_end, hour, piece_start,
--   piece_end, seconds; weight (a whole GPU's reading 1; a MIG instance's its compute slices
--   over the GPU's, gpu_busy_daily's mig_parent, else 1 / the instances of that GPU read in the
--   hour): the physical GPU-seconds are seconds x weight; busy, busy_fraction, labelled (the
--   series name a pod or an hpc_job), agent_labelled (a Slinky slurmd pod's own labels), hints
--   (who the series name); holders (charged holders, time-shared ones counted as one),
--   held_seconds (their joint extent in the piece), excess_seconds (the time more than one held
--   it: the sum of their clipped times beyond that extent; a handover inside a reading is no
--   overlap).
WITH agent_keys AS (
    SELECT DISTINCT node, namespace, pod FROM slurm_agent_pods
),

readings AS (
    -- one reading per GPU (MIG instance) and span, whoever held it
    SELECT
        s.node, any_value(s.cluster) AS cluster, s.gpu_uuid, s.gpu_instance, s.span_start,
        s.span_end,
        max(s.busy_fraction) > 0 AS busy,
        max(s.busy_fraction) AS busy_fraction,
        -- who the series name: the hints of an unaccounted reading
        list_distinct(list(CASE WHEN s.pod IS NOT NULL
            THEN 'pod ' || coalesce(s.namespace, '') || '/' || s.pod END)
            || list(CASE WHEN s.hpc_job IS NOT NULL THEN 'hpc_job ' || s.hpc_job END))
            AS hints,
        bool_or(s.pod IS NOT NULL OR s.pod_uid IS NOT NULL OR s.hpc_job IS NOT NULL)
            AS labelled,
        -- a slurmd pod's own labels: Slurm's capacity in use outside a job it knows (neither a
        -- customer's nor unaccounted)
        bool_or(k.pod IS NOT NULL) AS agent_labelled
    FROM usage_samples AS s
    LEFT JOIN agent_keys AS k ON k.node = s.node AND k.namespace = s.namespace AND k.pod = s.pod
    WHERE s.span_end > CAST($first_day AS TIMESTAMP)
        AND s.span_start < CAST($end_day AS TIMESTAMP)
    GROUP BY s.node, s.gpu_uuid, s.gpu_instance, s.span_start, s.span_end
),

reading_hours AS (
    -- each reading cut at the hours: [piece_start, piece_end)
    SELECT
        r.*,
        h.hour,
        greatest(r.span_start, h.hour) AS piece_start,
        least(r.span_end, h.hour + INTERVAL 1 HOUR) AS piece_end
    FROM readings AS r,
        LATERAL (SELECT unnest(generate_series(
            date_trunc('hour', r.span_start),
            date_trunc('hour', r.span_end - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR)) AS hour) AS h
    WHERE h.hour >= CAST($first_day AS TIMESTAMP) AND h.hour < CAST($end_day AS TIMESTAMP)
),

holder_pieces AS (
    -- each charged holder of a reading piece, clipped to it; time-shared holders (replicas,
    -- MPS, shards) share a GPU by design: together they are one holder
    SELECT
        r.node, r.gpu_uuid, r.gpu_instance, r.piece_start, r.piece_end,
        CASE WHEN coalesce(a.sharing IN ('time_slicing', 'mps', 'shard'), FALSE) THEN 'shared'
            ELSE m.domain || '|' || m.source_key END AS holder,
        min(greatest(m.start_ts, r.piece_start)) AS from_ts,
        max(least(m.end_ts, r.piece_end)) AS to_ts
    FROM reading_hours AS r
    INNER JOIN usage_span_matches AS m
        ON m.node = r.node AND m.gpu_uuid = r.gpu_uuid
        AND m.gpu_instance IS NOT DISTINCT FROM r.gpu_instance
        AND m.span_start = r.span_start AND m.span_end = r.span_end
        AND m.start_ts < r.piece_end AND m.end_ts > r.piece_start
    INNER JOIN allocations AS a
        ON a.day = m.day AND a.domain = m.domain AND a.source_key = m.source_key
        AND a.node = m.node AND a.start_ts = m.start_ts
    GROUP BY ALL
),

claims AS (
    SELECT
        node, gpu_uuid, gpu_instance, piece_start, piece_end,
        count(*) AS holders,
        greatest(sum(epoch(to_ts - from_ts)) - epoch(max(to_ts) - min(from_ts)), 0)
            AS excess_seconds,
        epoch(max(to_ts) - min(from_ts)) AS held_seconds
    FROM holder_pieces
    GROUP BY ALL
),

slices AS (
    -- a MIG instance's share of its GPU: its compute slices over the GPU's (dcgm_mig.py)
    SELECT i.cluster, i.gpu_uuid, i.gpu_instance, i.day,
        CAST(i.mig_slices AS DOUBLE) / p.mig_slices AS weight
    FROM gpu_busy_daily AS i
    INNER JOIN gpu_busy_daily AS p
        ON p.cluster = i.cluster AND p.gpu_uuid = i.gpu_uuid AND p.day = i.day
        AND p.device_kind = 'mig_parent'
    WHERE i.device_kind = 'mig_instance' AND i.mig_slices IS NOT NULL AND p.mig_slices > 0
        AND i.day >= $first_day AND i.day < $end_day
),

instances AS (
    SELECT node, gpu_uuid, hour, count(DISTINCT gpu_instance) AS instances
    FROM reading_hours
    WHERE gpu_instance IS NOT NULL
    GROUP BY ALL
)

SELECT
    r.node, r.cluster, r.gpu_uuid, r.gpu_instance, r.span_start, r.span_end, r.hour,
    r.piece_start, r.piece_end,
    epoch(r.piece_end - r.piece_start) AS seconds,
    CASE WHEN r.gpu_instance IS NULL THEN 1.0
        ELSE coalesce(w.weight, 1.0 / n.instances) END AS weight,
    r.busy, r.busy_fraction, r.labelled, r.agent_labelled, r.hints,
    coalesce(c.holders, 0) AS holders,
    coalesce(c.excess_seconds, 0) AS excess_seconds,
    coalesce(c.held_seconds, 0) AS held_seconds
FROM reading_hours AS r
LEFT JOIN claims AS c
    ON c.node = r.node AND c.gpu_uuid = r.gpu_uuid
    AND c.gpu_instance IS NOT DISTINCT FROM r.gpu_instance
    AND c.piece_start = r.piece_start AND c.piece_end = r.piece_end
LEFT JOIN slices AS w
    ON w.cluster = r.cluster AND w.gpu_uuid = r.gpu_uuid AND w.gpu_instance = r.gpu_instance
    AND w.day = CAST(r.hour AS DATE)
LEFT JOIN instances AS n
    ON n.node = r.node AND n.gpu_uuid = r.gpu_uuid AND n.hour = r.hour
