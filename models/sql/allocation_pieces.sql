-- allocation_pieces
-- Grain: one row per (staged allocation, UTC day) for the days in [$day_start, $day_end):
--   each allocation interval is cut at UTC midnights so every piece belongs to one daily
--   partition (and identity validity, which is per UTC day, is constant within a piece).
-- Parameters: $day_start, $day_end (TIMESTAMP at UTC midnight).
-- evidence: the staged row's; a pod's piece cut at midnight gets the parts that do not change as
--   later days arrive (evidence_cut_*: stg_kubernetes_allocations.sql).
-- Reads the view stg_allocations (the union of the domain staging models), without slurm-bridge
--   representative jobs (their pods are charged) and Slinky slurmd pods (the Slurm jobs inside
--   are charged; the rest is Slurm's capacity, docs/accounting.md).
WITH staged AS (
    SELECT * FROM stg_allocations
    WHERE NOT is_bridge AND NOT coalesce(is_slurm_agent, FALSE) AND start_ts < $day_end AND end_ts > $day_start
),

days AS (
    SELECT
        s.*,
        unnest(generate_series(
            date_trunc('day', greatest(s.start_ts, $day_start)),
            date_trunc('day', least(s.end_ts, $day_end) - INTERVAL 1 MICROSECOND),
            INTERVAL 1 DAY
        )) AS day_ts
    FROM staged AS s
),

final AS (
    SELECT
        row_number() OVER (ORDER BY domain, source_key, node, day_ts) AS piece_id,
        CAST(day_ts AS DATE) AS day,
        * EXCLUDE (day_ts, start_ts, end_ts, evidence, evidence_cut_head, evidence_cut_start,
                   evidence_cut_end, evidence_cut_tail),
        greatest(start_ts, day_ts) AS start_ts,
        least(end_ts, day_ts + INTERVAL 1 DAY) AS end_ts,
        -- a pod's piece cut at midnight: its evidence names what the piece's day and the days
        -- beside it know (they are rebuilt together: models/build.py days_to_build), so the
        -- text is the same whatever order the days arrived in
        CASE WHEN evidence_cut_head IS NOT NULL
                AND (start_ts < day_ts OR end_ts > day_ts + INTERVAL 1 DAY)
            THEN evidence_cut_head || '; '
                || CASE WHEN start_ts < day_ts THEN 'running since the day before'
                    ELSE evidence_cut_start END || ', '
                || CASE WHEN end_ts > day_ts + INTERVAL 1 DAY THEN 'running into the next day'
                    ELSE evidence_cut_end END
                || evidence_cut_tail
            ELSE evidence END AS evidence
    FROM days
)

SELECT * FROM final
WHERE end_ts > start_ts
