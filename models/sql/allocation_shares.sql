-- allocation_shares
-- Grain: one row per allocation piece (the temp table alloc_pieces, allocation_pieces.sql): the
--   physical GPU-time it is charged (docs/shared-gpus.md "The charging rule").
-- Parameters: none; reads alloc_pieces, node_gpu_slices (the layout in force at the piece's
--   start) and nodes (a node's GPU count where node_gpu_slices has none).
-- Columns:
--   slices: the units held (MIG instances, replicas, shards, MPS units); NULL for whole GPUs.
--   physical_gpu_seconds (DECIMAL, to the millisecond):
--     whole GPUs: gpus x seconds;
--     mig: instances x (profile compute slices / GPU compute slices: node_gpu_slices.gpu_slices,
--       else 4 on an A30 and 7 on the others) x seconds;
--     time_slicing, mps, shard: each second of a physical GPU split among the holders present
--       on it in proportion to the units each holds there (a holder's units spread evenly over
--       the GPUs dcgm-exporter or scontrol name for it); where no GPU is named, the node's GPUs
--       (node_gpu_slices.physical_gpus, else nodes) are split likewise among the holders of that
--       mode on the node, a holder never charged more GPUs than it holds units.
--   capacity_gpus: the share of the node's physical GPUs the piece holds while it runs, for the
--     capacity sweeps (node_overcommit.sql): gpus; MIG instances x their fraction; shared units
--     / units per GPU (NULL when the node's units per GPU are unknown).
-- Method: an event sweep per physical GPU (or node pool): starts +units, ends -units; every
--   holder is joined to the segments of its own GPU only (an equi-join on the GPU key).
WITH pieces AS (
    SELECT piece_id, cluster, node, gpu_model, gpus, gpu_uuids, start_ts, end_ts, sharing,
        slice_profile, date_diff('second', start_ts, end_ts) AS seconds
    FROM alloc_pieces
),

layout AS (
    -- the node's layout for the piece's mode (and MIG profile) at the piece's start
    SELECT p.piece_id,
        arg_max(s.units_per_gpu, s.valid_from) AS units_per_gpu,
        arg_max(s.gpu_slices, s.valid_from) AS gpu_slices,
        arg_max(s.physical_gpus, s.valid_from) AS physical_gpus
    FROM pieces AS p
    INNER JOIN node_gpu_slices AS s
        ON s.cluster = p.cluster AND s.node = p.node AND s.sharing = p.sharing
        AND (p.sharing <> 'mig' OR s.slice_profile = p.slice_profile)
        AND s.valid_from <= p.start_ts AND (s.valid_to IS NULL OR s.valid_to > p.start_ts)
    WHERE p.sharing IS NOT NULL
    GROUP BY p.piece_id
),

node_gpus AS (
    SELECT cluster, node, max(gpu_count) AS gpu_count FROM nodes GROUP BY ALL
),

mig AS (
    SELECT p.piece_id,
        -- compute slices: 3 of 3g.40gb; 1 of a compute instance 1c.3g.20gb (Slurm AutoDetect)
        p.gpus * CAST(regexp_extract(p.slice_profile, '^(\d+)[cg]\.', 1) AS INTEGER)
            / coalesce(l.gpu_slices, CASE WHEN lower(p.gpu_model) LIKE '%a30%' THEN 4 ELSE 7 END)
            AS fraction
    FROM pieces AS p
    LEFT JOIN layout AS l USING (piece_id)
    WHERE p.sharing = 'mig'
),

holdings AS (
    -- time-shared holders: one row per (piece, physical GPU it is on), else one per node pool
    SELECT piece_id, cluster, node, unnest(gpu_uuids) AS gpu_key,
        gpus / len(gpu_uuids) AS units, CAST(NULL AS DOUBLE) AS pool, start_ts, end_ts
    FROM pieces
    WHERE sharing IN ('time_slicing', 'mps', 'shard') AND len(coalesce(gpu_uuids, [])) > 0
    UNION ALL
    SELECT p.piece_id, p.cluster, p.node, 'pool:' || p.sharing, p.gpus::DOUBLE,
        coalesce(l.physical_gpus, g.gpu_count, p.gpus)::DOUBLE, p.start_ts, p.end_ts
    FROM pieces AS p
    LEFT JOIN layout AS l USING (piece_id)
    LEFT JOIN node_gpus AS g ON g.cluster = p.cluster AND g.node = p.node
    WHERE p.sharing IN ('time_slicing', 'mps', 'shard') AND len(coalesce(p.gpu_uuids, [])) = 0
),

events AS (
    SELECT cluster, node, gpu_key, ts, sum(d) AS d
    FROM (
        SELECT cluster, node, gpu_key, start_ts AS ts, units AS d FROM holdings
        UNION ALL
        SELECT cluster, node, gpu_key, end_ts, -units FROM holdings
    )
    GROUP BY ALL
),

segments AS (
    SELECT * FROM (
        SELECT cluster, node, gpu_key, ts AS seg_start,
            lead(ts) OVER w AS seg_end,
            sum(d) OVER (PARTITION BY cluster, node, gpu_key ORDER BY ts) AS units_present
        FROM events
        WINDOW w AS (PARTITION BY cluster, node, gpu_key ORDER BY ts)
    )
    WHERE seg_end IS NOT NULL AND units_present > 1e-9
),

time_shared AS (
    SELECT h.piece_id,
        sum(date_diff('second', s.seg_start, s.seg_end) * CASE
            WHEN h.pool IS NULL THEN h.units / s.units_present
            ELSE least(h.units, h.pool * h.units / s.units_present) END) AS seconds
    FROM holdings AS h
    INNER JOIN segments AS s
        ON s.cluster = h.cluster AND s.node = h.node AND s.gpu_key = h.gpu_key
        AND s.seg_start >= h.start_ts AND s.seg_end <= h.end_ts
    GROUP BY h.piece_id
)

SELECT
    p.piece_id,
    CASE WHEN p.sharing IS NOT NULL THEN p.gpus END AS slices,
    CAST(round(CASE
        WHEN p.sharing IS NULL THEN p.gpus * p.seconds
        WHEN p.sharing = 'mig' THEN m.fraction * p.seconds
        ELSE coalesce(t.seconds, 0)
    END, 3) AS DECIMAL(18, 3)) AS physical_gpu_seconds,
    CASE
        WHEN p.sharing IS NULL THEN p.gpus::DOUBLE
        WHEN p.sharing = 'mig' THEN m.fraction
        ELSE p.gpus / nullif(l.units_per_gpu, 0)
    END AS capacity_gpus
FROM pieces AS p
LEFT JOIN mig AS m USING (piece_id)
LEFT JOIN time_shared AS t USING (piece_id)
LEFT JOIN layout AS l USING (piece_id)
