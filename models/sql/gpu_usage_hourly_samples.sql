-- gpu_usage_hourly_samples
-- Grain: one row per (GPU, 1-minute bucket, holder) of gpu_utilization with bucket_start in
--   [$from_ts, $to_ts), with the span of time its samples stand for.
-- Parameters: $from_ts, $to_ts (TIMESTAMP, UTC). The caller widens the days it builds by an hour
--   on each side, so a span crossing a day edge and the bucket after the last one are both seen.
-- A bucket stands for [bucket_start, bucket_start + w), w = least(seconds to the GPU's next
--   bucket, the bucket's samples x the scrape interval, 3600): the next scrape ends it and an
--   exporter gap is never bridged (missing data is unmeasured, not idle). The scrape interval is
--   gpu_busy_daily's for that GPU-day (60 s, the bucket, where it has none).
-- Holders sharing a bucket (a pod ending mid-minute, a double-scheduled GPU) each stand for
--   share = their samples / the most samples any holder has in the bucket, of the span.
-- Columns: cluster, node, gpu_uuid, gpu_instance, namespace, pod, pod_uid, hpc_job,
--   busy_fraction, span_start, span_end, share.
WITH readings AS (
    SELECT * FROM gpu_utilization
    WHERE bucket_start >= $from_ts AND bucket_start < $to_ts
),

buckets AS (
    SELECT cluster, gpu_uuid, gpu_instance, bucket_start, max(samples) AS samples
    FROM readings
    GROUP BY ALL
),

spans AS (
    SELECT
        b.cluster,
        b.gpu_uuid,
        b.gpu_instance,
        b.bucket_start,
        b.samples,
        least(
            coalesce(epoch(lead(b.bucket_start) OVER (
                PARTITION BY b.cluster, b.gpu_uuid, b.gpu_instance ORDER BY b.bucket_start
            ) - b.bucket_start), 3600),
            b.samples * coalesce(d.scrape_interval_s, 60),
            3600
        ) AS span_seconds
    FROM buckets AS b
    LEFT JOIN gpu_busy_daily AS d
        ON d.cluster = b.cluster
        AND d.gpu_uuid = b.gpu_uuid
        AND d.gpu_instance IS NOT DISTINCT FROM b.gpu_instance
        AND d.day = CAST(b.bucket_start AS DATE)
)

SELECT
    r.cluster,
    r.node,
    r.gpu_uuid,
    r.gpu_instance,
    r.namespace,
    r.pod,
    r.pod_uid,
    r.hpc_job,
    r.busy_fraction,
    r.bucket_start AS span_start,
    r.bucket_start + to_microseconds(CAST(s.span_seconds * 1000000 AS BIGINT)) AS span_end,
    r.samples / s.samples AS share
FROM readings AS r
INNER JOIN spans AS s
    ON s.cluster = r.cluster
    AND s.gpu_uuid = r.gpu_uuid
    AND s.gpu_instance IS NOT DISTINCT FROM r.gpu_instance
    AND s.bucket_start = r.bucket_start
