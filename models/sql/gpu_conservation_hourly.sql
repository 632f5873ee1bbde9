-- gpu_conservation_hourly
-- Grain: one row per (UTC hour, node) of the days [$first_day, $end_day) for every node of the
--   physical inventory and every node holding allocations: where each of the node's physical
--   GPU-seconds of the hour went (docs/accounting.md, "Conservation").
-- Parameters: $first_day, $end_day (DATE, half-open). Reads the temp tables holding_segments
--   (node_holding_segments.sql over those days) and reading_pieces (gpu_reading_pieces.sql: each
--   dcgm-exporter reading cut at the hours, with the charged holders that took it), and
--   allocations, allocation_usage_hourly.
-- Every GPU-second of capacity is in exactly one state:
--   charged_gpu_seconds: held by one charged holder (split by domain: charged_slurm_…,
--     charged_kubernetes_…, in proportion to what each domain held in the segment);
--   conflict_gpu_seconds: held by more than one holder at once beyond the node's GPUs (GPUs
--     fungible on the node: the fewest GPUs that must be doubly held);
--   infrastructure_gpu_seconds: held by a scheduler's own agent (a Slinky slurmd pod) and by no
--     job inside it: Slurm's idle capacity;
--   unaccounted_gpu_seconds: held by nobody, yet dcgm-exporter saw the GPU busy (busy fraction
--     above 0): readings whose holder labels name no charged holder, plus unlabelled readings
--     beyond the GPU-time holders held without a reading of their own (less one reading span
--     per GPU that started or ended being held in the hour: the reading grid's reach); at most
--     the free time;
--   idle_gpu_seconds: held by nobody and not seen busy.
--   capacity_gpu_seconds = charged + conflict + infrastructure + unaccounted + idle.
-- excess_gpu_seconds: what was charged beyond the GPUs (the second, third … holder of a GPU):
--   held_gpu_seconds (every holder's physical share, as the invoices charge it)
--   = charged + conflict + excess. invoiced_gpu_seconds: the allocations rows' own
--   physical_gpu_seconds pro rata in the hour, computed apart from the sweep; the check
--   gpu_conservation_hourly_check.sql holds the two equal.
-- unaccounted_gpu_uuids / _busy_share / _hints: where unaccounted > 0, the GPUs with busy readings
--   no charged holder took, their mean busy fraction, and every holder the series name (pod
--   labels, hpc_job): what the unaccounted_use incident shows.
-- All GPU-seconds DECIMAL(38, 6), rounded once per segment.
WITH seg AS (
    SELECT
        *,
        slurm_gpus + kubernetes_gpus AS held,
        least(slurm_gpus + kubernetes_gpus, capacity_gpus) AS covered,
        least(greatest(slurm_gpus + kubernetes_gpus - capacity_gpus, 0), capacity_gpus)
            AS conflict,
        greatest(slurm_gpus + kubernetes_gpus - capacity_gpus, 0) AS excess,
        greatest(least(agent_gpus, capacity_gpus)
                 - least(slurm_gpus + kubernetes_gpus, capacity_gpus), 0) AS infra
    FROM holding_segments
    WHERE hour >= CAST($first_day AS TIMESTAMP) AND hour < CAST($end_day AS TIMESTAMP)
),

swept AS (
    SELECT
        hour,
        node,
        any_value(cluster) AS cluster,
        any_value(pool) AS pool,
        any_value(gpu_model) AS gpu_model,
        any_value(capacity_gpus) AS capacity_gpus,
        sum(CAST(held * seconds AS DECIMAL(38, 6))) AS held_gpu_seconds,
        sum(CAST((covered - conflict) * seconds AS DECIMAL(38, 6))) AS charged_gpu_seconds,
        sum(CAST(CASE WHEN held > 0 THEN (covered - conflict) * seconds * slurm_gpus / held
                 ELSE 0 END AS DECIMAL(38, 6))) AS charged_slurm_gpu_seconds,
        sum(CAST(conflict * seconds AS DECIMAL(38, 6))) AS conflict_gpu_seconds,
        sum(CAST(excess * seconds AS DECIMAL(38, 6))) AS excess_gpu_seconds,
        sum(CAST(infra * seconds AS DECIMAL(38, 6))) AS infrastructure_gpu_seconds,
        sum(CAST(covered * seconds AS DECIMAL(38, 6))) AS covered_gpu_seconds,
        count(*) FILTER (WHERE slurm_gpus > 0 AND kubernetes_gpus > 0 AND excess > 0)
            AS cross_scheduler_segments
    FROM seg
    GROUP BY hour, node
),

invoiced AS (
    -- the invoices' side: every allocations row's physical GPU-seconds, pro rata in the hour
    SELECT node, hour, sum(CAST(physical_gpu_seconds * in_hour / seconds AS DECIMAL(38, 6)))
        AS invoiced_gpu_seconds
    FROM (
        SELECT
            node, physical_gpu_seconds, date_diff('second', start_ts, end_ts) AS seconds,
            hour,
            date_diff('second', greatest(start_ts, hour), least(end_ts, hour + INTERVAL 1 HOUR))
                AS in_hour
        FROM (
            SELECT *, unnest(generate_series(date_trunc('hour', start_ts),
                                             date_trunc('hour', end_ts - INTERVAL 1 MICROSECOND),
                                             INTERVAL 1 HOUR)) AS hour
            FROM allocations
            WHERE day >= $first_day AND day < $end_day AND end_ts > start_ts
        )
    )
    GROUP BY node, hour
),

measured AS (
    -- GPU-time the charged holders held with a reading of their own
    SELECT node, hour, sum(measured_gpu_seconds) AS measured_gpu_seconds
    FROM allocation_usage_hourly
    WHERE day >= $first_day AND day < $end_day
    GROUP BY node, hour
),

by_reading AS (
    -- reading_pieces (gpu_reading_pieces.sql): each reading piece with its charged holders;
    -- seconds x weight are physical GPU-seconds (a MIG instance's reading counts its slices)
    SELECT
        node,
        hour,
        -- unclaimed busy readings: labels of no charged holder (provable), or no labels
        sum(CAST(seconds * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND busy AND labelled AND NOT agent_labelled)
            AS unknown_holder_busy,
        sum(CAST(seconds * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND busy AND NOT labelled) AS unlabelled_busy,
        -- the longest such reading: how far one can reach past a holder's end (or before its
        -- start) on the reading grid
        max(epoch(span_end - span_start)) FILTER (WHERE holders = 0 AND busy AND NOT labelled)
            AS unlabelled_span,
        -- the unclaimed busy readings' GPUs, busy GPU-seconds and holder hints
        list_sort(list(DISTINCT gpu_uuid)
            FILTER (WHERE holders = 0 AND busy AND NOT agent_labelled)) AS unclaimed_gpu_uuids,
        sum(CAST(seconds * weight * busy_fraction AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND busy AND NOT agent_labelled) AS unclaimed_busy,
        sum(CAST(seconds * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders = 0 AND busy AND NOT agent_labelled) AS unclaimed_seconds,
        list_sort(list_distinct(flatten(list(hints)
            FILTER (WHERE holders = 0 AND busy AND NOT agent_labelled)))) AS unclaimed_hints,
        -- dcgm-exporter saw two or more charged holders on one GPU at once (double-scheduled
        -- GPUs the node-level sweep cannot see while the node is within its count)
        sum(CAST(least(excess_seconds, held_seconds) * weight AS DECIMAL(38, 6)))
            FILTER (WHERE holders > 1) AS gpu_conflict,
        sum(CAST(excess_seconds * weight AS DECIMAL(38, 6))) FILTER (WHERE holders > 1)
            AS gpu_excess
    FROM reading_pieces
    GROUP BY node, hour
),

edges AS (
    -- GPUs that started or ended being held inside the hour: a reading without labels spans up
    -- to a scrape interval, so at each such edge it may reach that far past the holder
    SELECT node, hour, sum(gpus) AS edge_gpus
    FROM (
        SELECT node, date_trunc('hour', start_ts) AS hour, gpus FROM allocations
        WHERE day >= $first_day AND day < $end_day AND start_ts > CAST(day AS TIMESTAMP)
        UNION ALL
        SELECT node, date_trunc('hour', end_ts - INTERVAL 1 MICROSECOND), gpus FROM allocations
        WHERE day >= $first_day AND day < $end_day
            AND end_ts < CAST(day AS TIMESTAMP) + INTERVAL 1 DAY
    )
    GROUP BY node, hour
),

joined AS (
    SELECT
        s.* EXCLUDE (charged_gpu_seconds, charged_slurm_gpu_seconds, conflict_gpu_seconds,
                     excess_gpu_seconds),
        -- conflict and excess: the node-level sweep's or dcgm-exporter's GPU-level figure,
        -- whichever is larger (both are lower bounds of the GPU-time held twice)
        greatest(s.conflict_gpu_seconds, coalesce(u.gpu_conflict, 0)) AS conflict_gpu_seconds,
        greatest(s.excess_gpu_seconds, coalesce(u.gpu_excess, 0)) AS excess_gpu_seconds,
        s.held_gpu_seconds - greatest(s.conflict_gpu_seconds, coalesce(u.gpu_conflict, 0))
            - greatest(s.excess_gpu_seconds, coalesce(u.gpu_excess, 0)) AS charged_gpu_seconds,
        CASE WHEN s.charged_gpu_seconds > 0
            THEN CAST(s.charged_slurm_gpu_seconds
                      * (s.held_gpu_seconds
                         - greatest(s.conflict_gpu_seconds, coalesce(u.gpu_conflict, 0))
                         - greatest(s.excess_gpu_seconds, coalesce(u.gpu_excess, 0)))
                      / s.charged_gpu_seconds AS DECIMAL(38, 6))
            ELSE 0 END AS charged_slurm_gpu_seconds,
        CAST(s.capacity_gpus * 3600 AS DECIMAL(38, 6)) AS capacity_gpu_seconds,
        coalesce(i.invoiced_gpu_seconds, 0) AS invoiced_gpu_seconds,
        coalesce(u.unknown_holder_busy, 0) AS unknown_holder_busy,
        coalesce(u.unlabelled_busy, 0) AS unlabelled_busy,
        CAST(coalesce(e.edge_gpus, 0) * coalesce(u.unlabelled_span, 0) AS DECIMAL(38, 6))
            AS edge_slack,
        u.unclaimed_gpu_uuids,
        u.unclaimed_hints,
        u.unclaimed_busy / nullif(u.unclaimed_seconds, 0) AS unclaimed_busy_share,
        greatest(s.covered_gpu_seconds - coalesce(m.measured_gpu_seconds, 0), 0)
            AS unmeasured_held
    FROM swept AS s
    LEFT JOIN invoiced AS i USING (node, hour)
    LEFT JOIN by_reading AS u USING (node, hour)
    LEFT JOIN measured AS m USING (node, hour)
    LEFT JOIN edges AS e USING (node, hour)
),

free AS (
    SELECT
        *,
        capacity_gpu_seconds - charged_gpu_seconds - conflict_gpu_seconds
            - infrastructure_gpu_seconds AS free_gpu_seconds
    FROM joined
),

final AS (
    SELECT
        *,
        greatest(least(free_gpu_seconds, unknown_holder_busy
                       + greatest(unlabelled_busy - unmeasured_held - edge_slack, 0)), 0)
            AS unaccounted_gpu_seconds
    FROM free
)

SELECT
    hour,
    CAST(hour AS DATE) AS day,
    cluster,
    node,
    pool,
    gpu_model,
    capacity_gpus,
    capacity_gpu_seconds,
    charged_gpu_seconds,
    charged_slurm_gpu_seconds,
    charged_gpu_seconds - charged_slurm_gpu_seconds AS charged_kubernetes_gpu_seconds,
    conflict_gpu_seconds,
    infrastructure_gpu_seconds,
    unaccounted_gpu_seconds,
    free_gpu_seconds - unaccounted_gpu_seconds AS idle_gpu_seconds,
    held_gpu_seconds,
    excess_gpu_seconds,
    invoiced_gpu_seconds,
    unknown_holder_busy AS unknown_holder_busy_gpu_seconds,
    CASE WHEN unaccounted_gpu_seconds > 0 THEN unclaimed_gpu_uuids END AS unaccounted_gpu_uuids,
    CASE WHEN unaccounted_gpu_seconds > 0 THEN CAST(unclaimed_busy_share AS DOUBLE) END
        AS unaccounted_busy_share,
    CASE WHEN unaccounted_gpu_seconds > 0 THEN unclaimed_hints END AS unaccounted_hints,
    cross_scheduler_segments > 0 AS cross_scheduler
FROM final
