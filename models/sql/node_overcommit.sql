-- node_overcommit
-- Grain: one row per (node, instant interval) of the day where the GPUs allocated by both
--   schedulers together exceed the node's GPU count (an event sweep over allocation starts and
--   ends, O(n log n); no pairwise join).
-- Parameters: $day (DATE), $min_seconds (intervals this short or shorter are left out: Kubernetes
--   intervals are known to one scrape interval, so a handover can look overlapped that long).
-- Columns: node, from_ts, to_ts, allocated_gpus, capacity_gpus, excess_gpus, domains.
-- Expected only where GPUs are double-scheduled; the detectors name the owners.
WITH pieces AS (
    -- shared GPUs count their share of the node's physical GPUs (as detect_node_sweep.sql)
    SELECT node, domain,
        CASE WHEN sharing IS NULL THEN gpus::DOUBLE ELSE coalesce(capacity_gpus, 0) END AS gpus,
        start_ts, end_ts
    FROM allocations WHERE day = $day
),

events AS (
    -- net change of allocated GPUs per node and instant (ends and starts at one instant cancel)
    SELECT node, ts, sum(delta) AS delta
    FROM (
        SELECT node, start_ts AS ts, gpus AS delta FROM pieces
        UNION ALL
        SELECT node, end_ts AS ts, -gpus AS delta FROM pieces
    )
    GROUP BY node, ts
),

steps AS (
    SELECT
        node,
        ts,
        sum(delta) OVER (PARTITION BY node ORDER BY ts) AS allocated,
        lead(ts) OVER (PARTITION BY node ORDER BY ts) AS next_ts
    FROM events
),

capacity AS (
    -- physical GPUs: a MIG node's inventory rows count instances per GRES type (scontrol),
    -- its node_gpu_slices row the GPUs they are cut from (docs/shared-gpus.md)
    SELECT n.node, coalesce(any_value(m.physical_gpus), any_value(n.gpu_count)) AS capacity_gpus
    FROM nodes AS n
    LEFT JOIN (SELECT node, max(physical_gpus) AS physical_gpus FROM node_gpu_slices
               WHERE sharing = 'mig' AND valid_to IS NULL GROUP BY node) AS m USING (node)
    GROUP BY n.node
)

SELECT
    s.node,
    s.ts AS from_ts,
    s.next_ts AS to_ts,
    s.allocated AS allocated_gpus,
    c.capacity_gpus,
    s.allocated - c.capacity_gpus AS excess_gpus
FROM steps AS s
INNER JOIN capacity AS c USING (node)
WHERE s.next_ts IS NOT NULL
  AND date_diff('second', s.ts, s.next_ts) > $min_seconds
  AND s.allocated > c.capacity_gpus + 1e-6  -- shares are fractions: 7 x 1/7 is not > 1
ORDER BY s.node, s.ts
