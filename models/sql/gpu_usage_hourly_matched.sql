-- gpu_usage_hourly_matched
-- Grain: one row per (allocations row, GPU, UTC hour) for the allocation days the temp table
--   usage_span_matches holds: the seconds dcgm-exporter measured that GPU for that allocation, and
--   how many of them were busy.
-- Parameters: none. Reads the temp table usage_span_matches
--   (gpu_usage_span_matches.sql: the one rule matching a reading to its allocation).
-- measured_seconds = seconds of the span inside the allocation piece and the hour x share;
-- busy_seconds = those seconds x busy_fraction; both summed as DECIMAL(38, 6) (exact, so
-- independent of the order DuckDB sums in).
WITH matched AS (
    SELECT * FROM usage_span_matches
),

clipped AS (
    SELECT
        * EXCLUDE (span_start, span_end),
        greatest(span_start, start_ts) AS from_ts,
        least(span_end, end_ts) AS to_ts
    FROM matched
),

hours AS (
    SELECT
        *,
        unnest(generate_series(
            date_trunc('hour', from_ts),
            date_trunc('hour', to_ts - INTERVAL 1 MICROSECOND),
            INTERVAL 1 HOUR
        )) AS hour
    FROM clipped
),

pieces_in_hours AS (
    SELECT
        *,
        epoch(least(to_ts, hour + INTERVAL 1 HOUR) - greatest(from_ts, hour)) * share AS seconds
    FROM hours
),

final AS (
    -- exact decimal sums: a rebuild gives the same figures whatever the summation order
    SELECT
        day, domain, source_key, node, start_ts, gpu_uuid, gpu_instance, hour,
        sum(CAST(seconds AS DECIMAL(38, 6))) AS measured_seconds,
        sum(CAST(seconds * busy_fraction AS DECIMAL(38, 6))) AS busy_seconds
    FROM pieces_in_hours
    GROUP BY ALL
)

SELECT * FROM final
WHERE measured_seconds > 0
