-- node_holding_segments
-- Grain: one row per (node, segment) of [$from_ts, $to_ts): a stretch inside one UTC hour during
--   which no holder of the node's GPUs started or ended (an event sweep over allocation starts
--   and ends plus the hour bounds, O(n log n); no pairwise join). Every node of the physical
--   inventory and every node holding allocations has segments covering the whole range.
-- Parameters: $from_ts, $to_ts (TIMESTAMP at UTC hours). Reads nodes, node_gpu_slices,
--   allocations, the temp view slurm_agent_pods and the temp table slinky_slurm_names
--   (models/build.py create_staging_view).
-- capacity_gpus: the node's physical GPUs (a MIG node's GPUs, not its instances: node_gpu_slices,
--   as node_overcommit.sql); 0 for a node holding allocations that the inventory lacks. A Slurm
--   node name that is a Slinky slurmd pod's on another (Kubernetes) node is not a node of its
--   own: its GPUs are that node's (slurm_agent_pods.sql), so they are counted once.
-- slurm_gpus / kubernetes_gpus: the physical GPUs the charged holders of each domain hold in the
--   segment: whole GPUs and MIG instances at their row's rate (physical_gpu_seconds / seconds);
--   time-shared holders as the GPUs they occupy together (shared_keys below), which is what
--   allocation_shares.sql splits among them second by second;
--   agent_gpus: GPUs held by Slinky slurmd pods (Slurm's own agent: not charged).
WITH capacity AS (
    SELECT
        n.node,
        any_value(n.cluster) AS cluster,
        any_value(n.pool) AS pool,
        any_value(n.gpu_model) AS gpu_model,
        coalesce(any_value(m.physical_gpus), max(n.gpu_count)) AS capacity_gpus
    FROM nodes AS n
    LEFT JOIN (SELECT node, max(physical_gpus) AS physical_gpus FROM node_gpu_slices
               WHERE sharing = 'mig' AND valid_to IS NULL GROUP BY node) AS m USING (node)
    WHERE n.node NOT IN (SELECT name FROM slinky_slurm_names)
    GROUP BY n.node
),

holders AS (
    -- whole GPUs and MIG instances at their constant rate (physical_gpu_seconds / seconds); times
    -- cut to the second as the ledger counts them (gpu_seconds = gpus x date_diff of second
    -- boundaries), so the sweep holds exactly what the rows charge
    SELECT
        node, cluster, pool, gpu_model, domain, FALSE AS agent,
        greatest(date_trunc('second', start_ts), $from_ts) AS start_ts,
        least(date_trunc('second', end_ts), $to_ts) AS end_ts,
        CAST(physical_gpu_seconds AS DOUBLE) / date_diff('second', start_ts, end_ts) AS rate
    FROM allocations
    WHERE start_ts < $to_ts AND end_ts > $from_ts AND date_diff('second', start_ts, end_ts) > 0
        AND coalesce(sharing, '') NOT IN ('time_slicing', 'mps', 'shard')
    UNION ALL
    SELECT
        node, cluster, NULL, NULL, 'kubernetes', TRUE,
        greatest(date_trunc('second', start_ts), $from_ts),
        least(date_trunc('second', end_ts), $to_ts), CAST(gpus AS DOUBLE)
    FROM slurm_agent_pods
    WHERE start_ts < $to_ts AND end_ts > $from_ts AND coalesce(sharing, '') = ''
),

shared_rows AS (
    SELECT
        node, cluster, pool, gpu_model, domain, sharing, gpu_uuids, gpus,
        greatest(date_trunc('second', start_ts), $from_ts) AS start_ts,
        least(date_trunc('second', end_ts), $to_ts) AS end_ts
    FROM allocations
    WHERE start_ts < $to_ts AND end_ts > $from_ts AND date_diff('second', start_ts, end_ts) > 0
        AND sharing IN ('time_slicing', 'mps', 'shard')
),

shared_keys AS (
    -- time-shared holders (replicas, MPS units, shards) share each second of a GPU among the
    -- holders present (allocation_shares.sql): together they hold a GPU named for them
    -- (dcgm-exporter, scontrol) while any is on it, and of the node's pool of that mode the
    -- least of the units present and the pool's GPUs; per domain, so two schedulers time-sharing
    -- one GPU are a conflict
    SELECT node, domain, unnest(gpu_uuids) AS gpu_key, 1.0 AS units,
        CAST(NULL AS DOUBLE) AS pool_gpus, start_ts, end_ts
    FROM shared_rows
    WHERE len(coalesce(gpu_uuids, [])) > 0
    UNION ALL
    SELECT r.node, r.domain, 'pool:' || r.sharing, CAST(r.gpus AS DOUBLE),
        CAST(coalesce(l.physical_gpus, c.capacity_gpus, r.gpus) AS DOUBLE), r.start_ts, r.end_ts
    FROM shared_rows AS r
    LEFT JOIN (SELECT node, sharing, max(physical_gpus) AS physical_gpus FROM node_gpu_slices
               WHERE valid_to IS NULL GROUP BY ALL) AS l
        ON l.node = r.node AND l.sharing = r.sharing
    LEFT JOIN capacity AS c ON c.node = r.node
    WHERE len(coalesce(r.gpu_uuids, [])) = 0
),

shared_steps AS (
    SELECT node, domain, gpu_key, ts,
        CASE WHEN pool_gpus IS NULL THEN CASE WHEN units > 1e-9 THEN 1.0 ELSE 0.0 END
            ELSE least(greatest(units, 0), pool_gpus) END AS occupied
    FROM (
        SELECT node, domain, gpu_key, ts, pool_gpus,
            sum(d) OVER (PARTITION BY node, domain, gpu_key ORDER BY ts) AS units
        FROM (
            SELECT node, domain, gpu_key, ts, max(pool_gpus) AS pool_gpus, sum(d) AS d
            FROM (
                SELECT node, domain, gpu_key, pool_gpus, start_ts AS ts, units AS d
                FROM shared_keys
                UNION ALL
                SELECT node, domain, gpu_key, pool_gpus, end_ts, -units FROM shared_keys
            )
            GROUP BY ALL
        )
    )
),

shared_events AS (
    -- the change of GPUs the time-shared holders occupy, per node, domain and instant
    SELECT node, domain, ts,
        occupied - coalesce(lag(occupied) OVER (PARTITION BY node, domain, gpu_key ORDER BY ts),
                            0) AS d
    FROM shared_steps
),

node_list AS (
    SELECT node, cluster, pool, gpu_model, capacity_gpus FROM capacity
    UNION ALL
    SELECT node, any_value(cluster), any_value(pool), any_value(gpu_model), 0
    FROM (SELECT node, cluster, pool, gpu_model FROM holders
          UNION ALL SELECT node, cluster, pool, gpu_model FROM shared_rows)
    WHERE node NOT IN (SELECT node FROM capacity)
    GROUP BY node
),

events AS (
    SELECT node, ts, sum(d_slurm) AS d_slurm, sum(d_kubernetes) AS d_kubernetes,
           sum(d_agent) AS d_agent
    FROM (
        SELECT node, start_ts AS ts,
            CASE WHEN NOT agent AND domain = 'slurm' THEN rate ELSE 0 END AS d_slurm,
            CASE WHEN NOT agent AND domain = 'kubernetes' THEN rate ELSE 0 END AS d_kubernetes,
            CASE WHEN agent THEN rate ELSE 0 END AS d_agent
        FROM holders
        UNION ALL
        SELECT node, end_ts,
            CASE WHEN NOT agent AND domain = 'slurm' THEN -rate ELSE 0 END,
            CASE WHEN NOT agent AND domain = 'kubernetes' THEN -rate ELSE 0 END,
            CASE WHEN agent THEN -rate ELSE 0 END
        FROM holders
        UNION ALL
        SELECT node, ts, CASE WHEN domain = 'slurm' THEN d ELSE 0 END,
            CASE WHEN domain = 'kubernetes' THEN d ELSE 0 END, 0
        FROM shared_events
        UNION ALL
        -- every hour bound (and the range's end) of every node: segments stay inside an hour
        SELECT node, unnest(generate_series(CAST($from_ts AS TIMESTAMP),
                                            CAST($to_ts AS TIMESTAMP), INTERVAL 1 HOUR)),
               0, 0, 0
        FROM node_list
    )
    GROUP BY node, ts
),

steps AS (
    SELECT
        node,
        ts,
        lead(ts) OVER (PARTITION BY node ORDER BY ts) AS next_ts,
        -- shares are fractions: a running sum of doubles is rounded back to whole billionths
        greatest(round(sum(d_slurm) OVER (PARTITION BY node ORDER BY ts), 9), 0) AS slurm_gpus,
        greatest(round(sum(d_kubernetes) OVER (PARTITION BY node ORDER BY ts), 9), 0)
            AS kubernetes_gpus,
        greatest(round(sum(d_agent) OVER (PARTITION BY node ORDER BY ts), 9), 0) AS agent_gpus
    FROM events
)

SELECT
    s.node,
    l.cluster,
    l.pool,
    l.gpu_model,
    l.capacity_gpus,
    date_trunc('hour', s.ts) AS hour,
    s.ts AS from_ts,
    s.next_ts AS to_ts,
    epoch(s.next_ts - s.ts) AS seconds,
    s.slurm_gpus,
    s.kubernetes_gpus,
    s.agent_gpus
FROM steps AS s
INNER JOIN node_list AS l USING (node)
WHERE s.next_ts IS NOT NULL AND s.ts >= $from_ts AND s.next_ts <= $to_ts
