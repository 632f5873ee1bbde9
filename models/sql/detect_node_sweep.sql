-- detect_node_sweep
-- Grain: one row per (node, UTC day, instant interval) where the GPUs allocated by both
--   schedulers together exceed the node's GPU count: the event sweep of node_overcommit.sql
--   (same rule, same columns, min_seconds 0), run for a range of days in one pass and only on
--   the node-days that both Slurm and Kubernetes used (on the others the two schedulers cannot
--   collide; node_overcommit.sql, in the accounting check, covers them all day by day).
-- Parameters: $scan_first, $scan_last (DATE, inclusive).
-- Columns: node, day, from_ts, to_ts, allocated_gpus, capacity_gpus, excess_gpus.
-- O(n log n): one sort of the start/end events per node-day; no pairwise join.
WITH pieces AS (
    -- shared GPUs count their share of the node's physical GPUs (allocations.capacity_gpus,
    -- docs/shared-gpus.md): seven 1g MIG instances are one GPU, not seven
    SELECT node, day, domain,
        CASE WHEN sharing IS NULL THEN gpus::DOUBLE ELSE coalesce(capacity_gpus, 0) END AS gpus,
        start_ts, end_ts
    FROM allocations
    WHERE day >= $scan_first AND day <= $scan_last
),

mixed AS (
    SELECT node, day FROM pieces GROUP BY node, day HAVING min(domain) <> max(domain)
),

events AS (
    -- net change of allocated GPUs per node and instant (ends and starts at one instant cancel)
    SELECT node, day, ts, sum(delta) AS delta
    FROM (
        SELECT p.node, p.day, p.start_ts AS ts, p.gpus AS delta
        FROM pieces AS p SEMI JOIN mixed AS m ON m.node = p.node AND m.day = p.day
        UNION ALL
        SELECT p.node, p.day, p.end_ts AS ts, -p.gpus AS delta
        FROM pieces AS p SEMI JOIN mixed AS m ON m.node = p.node AND m.day = p.day
    )
    GROUP BY node, day, ts
),

steps AS (
    SELECT
        node,
        day,
        ts,
        sum(delta) OVER (PARTITION BY node, day ORDER BY ts) AS allocated,
        lead(ts) OVER (PARTITION BY node, day ORDER BY ts) AS next_ts
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
    s.day,
    s.ts AS from_ts,
    s.next_ts AS to_ts,
    s.allocated AS allocated_gpus,
    c.capacity_gpus,
    s.allocated - c.capacity_gpus AS excess_gpus
FROM steps AS s
INNER JOIN capacity AS c USING (node)
WHERE s.next_ts IS NOT NULL
  AND s.next_ts > s.ts
  AND s.allocated > c.capacity_gpus + 1e-6  -- shares are fractions: 7 x 1/7 is not > 1
