-- slurm_sreport_reconciliation
-- Grain: one row per (cluster, account, user) present in our runs or in sreport's
--   AccountUtilizationByUser user rows for exactly the window [$window_start, $window_end).
-- Parameters: $window_start, $window_end (TIMESTAMP, UTC; whole hours, as sreport rolls up hourly).
-- ours: GPU-seconds from slurm_runs clipped to the window (slurm_gpu_seconds_by_account_user);
-- theirs: sreport's Used for tres 'gres/gpu'. difference = ours - theirs; a row with a non-zero
-- difference is what the reconciliation check reports.
WITH ours AS (
    SELECT
        cluster,
        account,
        "user",
        alloc_gpus * greatest(
            0,
            date_diff('second', greatest(start, $window_start),
                      least(coalesce("end", observed_until), $window_end))
        ) AS gpu_seconds
    FROM slurm_runs
    WHERE start IS NOT NULL AND coalesce(alloc_gpus, 0) > 0
      AND start < $window_end AND coalesce("end", observed_until) > $window_start
),

ours_total AS (
    SELECT cluster, account, "user", sum(gpu_seconds)::BIGINT AS ours
    FROM ours GROUP BY ALL
),

theirs AS (
    SELECT cluster, account, login AS "user", sum(used_seconds)::BIGINT AS theirs
    FROM sreport_account_usage
    WHERE tres_name = 'gres/gpu' AND NOT is_account_total
      AND report_start = $window_start AND report_end = $window_end
    GROUP BY ALL
)

SELECT
    coalesce(o.cluster, t.cluster) AS cluster,
    coalesce(o.account, t.account) AS account,
    coalesce(o."user", t."user") AS "user",
    coalesce(o.ours, 0) AS ours_gpu_seconds,
    coalesce(t.theirs, 0) AS sreport_gpu_seconds,
    coalesce(o.ours, 0) - coalesce(t.theirs, 0) AS difference
FROM ours_total AS o
FULL OUTER JOIN theirs AS t
    ON o.cluster = t.cluster AND o.account = t.account AND o."user" = t."user"
WHERE coalesce(o.ours, 0) <> 0 OR coalesce(t.theirs, 0) <> 0
ORDER BY 1, 2, 3
