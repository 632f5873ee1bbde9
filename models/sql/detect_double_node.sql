-- detect_double_node
-- Grain: one row per (node, Slurm allocation, Kubernetes allocation) that were both running while
--   the node's allocated GPUs (both schedulers together) exceeded its GPU count: node-level
--   evidence of double scheduling.
-- Parameters: $tolerance_seconds (overcommit episodes, runs of segments without a gap, this long
--   or shorter are left out: Kubernetes interval ends are known to one scrape interval, so a
--   clean handover can look overlapped that long). Reads the temp table det_overcommit
--   (detect_node_sweep.sql: node_overcommit.sql's event sweep, O(n log n), over a day range).
-- Only the overcommitted segments are joined to the allocations of their node and day (an
--   equi-join on (day, node)); there is no pairwise join over all intervals.
-- gpu_seconds: each segment's excess GPUs x its seconds, shared among the Slurm x Kubernetes
--   pairs running in it in proportion to their GPUs (so the pairs of a segment add up to its
--   excess).
WITH numbered AS (
    SELECT
        node, day, from_ts, to_ts, excess_gpus, capacity_gpus,
        date_diff('second', from_ts, to_ts) AS seconds,
        -- an episode: overcommitted segments that follow each other without a gap
        CASE WHEN lag(to_ts) OVER (PARTITION BY node ORDER BY from_ts) = from_ts
            THEN 0 ELSE 1 END AS opens
    FROM det_overcommit
),

episodes AS (
    SELECT *, sum(opens) OVER (PARTITION BY node ORDER BY from_ts) AS episode_no
    FROM numbered
),

segments AS (
    -- segments of episodes longer than the tolerance (a handover seen late is shorter)
    SELECT row_number() OVER (ORDER BY node, from_ts) AS segment_id, *
    FROM (
        SELECT *, sum(seconds) OVER (PARTITION BY node, episode_no) AS episode_seconds
        FROM episodes
    )
    WHERE episode_seconds > $tolerance_seconds
),

running AS (
    -- an allocation piece either covers a segment or misses it (segments lie between events)
    SELECT s.segment_id, s.node, s.day, s.from_ts, s.to_ts, s.seconds, s.excess_gpus,
           s.capacity_gpus, a.domain, a.cluster, a.source_key, a.gpus
    FROM segments AS s
    INNER JOIN allocations AS a
        ON a.day = s.day AND a.node = s.node
        AND a.start_ts <= s.from_ts AND a.end_ts >= s.to_ts
),

per_segment AS (
    SELECT
        segment_id,
        sum(gpus) FILTER (WHERE domain = 'slurm') AS slurm_gpus,
        sum(gpus) FILTER (WHERE domain = 'kubernetes') AS k8s_gpus
    FROM running
    GROUP BY segment_id
),

pairs AS (
    SELECT
        s.cluster, s.node, s.source_key AS slurm_key, k.source_key AS k8s_key,
        s.from_ts, s.to_ts, s.seconds, s.excess_gpus, s.capacity_gpus,
        s.excess_gpus * (s.gpus / p.slurm_gpus) * (k.gpus / p.k8s_gpus) * s.seconds
            AS share_gpu_seconds
    FROM running AS s
    INNER JOIN running AS k ON k.segment_id = s.segment_id AND k.domain = 'kubernetes'
    INNER JOIN per_segment AS p ON p.segment_id = s.segment_id
    WHERE s.domain = 'slurm'
)

SELECT
    cluster,
    node,
    slurm_key,
    k8s_key,
    min(from_ts) AS overlap_start,
    max(to_ts) AS overlap_end,
    sum(seconds) AS overcommitted_seconds,
    CAST(round(sum(share_gpu_seconds)) AS BIGINT) AS gpu_seconds,
    count(*) AS segments,
    max(excess_gpus) AS max_excess_gpus,
    any_value(capacity_gpus) AS capacity_gpus,
    arg_min(from_ts, from_ts) AS first_from_ts,
    arg_min(to_ts, from_ts) AS first_to_ts
FROM pairs
GROUP BY cluster, node, slurm_key, k8s_key
