-- detect_double_gpu
-- Grain: one row per (cluster, node, Slurm run, pod uid) that dcgm-exporter showed on the same
--   GPU in the same minute: a series labelled with both `pod` and `hpc_job`, or two series of one
--   GPU and minute, one per holder (GPU-level evidence of double scheduling).
-- Parameters: $scan_start, $scan_end (TIMESTAMP, half-open: the minute buckets read),
--   $tolerance_seconds (how far a pod's ledger interval may sit from the minutes it was seen in:
--   kube-state-metrics knows pod starts and ends to one scrape interval).
-- Columns: cluster, node, slurm_key, k8s_key (allocations.source_key of each side), gpu_uuids
--   (the GPUs seen with both), buckets, first_bucket, last_bucket, the labels of the first
--   bucket. The two ledger intervals' common time is computed once for the pairs of both GPU-level
--   detectors, in detect_double_scheduled.sql.
-- slurm-bridge representative jobs are left out: their pod is the same workload (bridge_pairs).
WITH util AS (
    SELECT cluster, node, gpu_uuid, coalesce(gpu_instance, '') AS gpu_instance, bucket_start,
           namespace, pod, pod_uid, hpc_job
    FROM gpu_utilization
    WHERE bucket_start >= $scan_start AND bucket_start < $scan_end
      AND (coalesce(pod, '') <> '' OR coalesce(hpc_job, '') <> '')
),

both_holders AS (
    -- a series carrying both labels joins itself here, two series of one GPU join each other
    SELECT p.cluster, p.node, p.gpu_uuid, p.bucket_start, p.namespace, p.pod, p.pod_uid,
           j.hpc_job
    FROM util AS p
    INNER JOIN util AS j USING (cluster, gpu_uuid, gpu_instance, bucket_start)
    WHERE coalesce(p.pod, '') <> '' AND coalesce(j.hpc_job, '') <> ''
),

runs AS (
    -- per node: Slurm and Kubernetes may call the cluster differently, the node is shared
    SELECT n.run_key, n.node, CAST(n.job_id_raw AS VARCHAR) AS job_id_raw, n.job_id, n.start,
           coalesce(n."end", r."end", r.observed_until) AS end_ts
    FROM slurm_node_allocations AS n
    INNER JOIN slurm_runs AS r USING (run_key)
    WHERE n.start IS NOT NULL AND coalesce(len(r.bridge_pods), 0) = 0
),

with_run AS (
    -- hpc_job carries JobIDRaw; the run of a requeued job is the one holding the minute
    SELECT b.*, r.run_key AS slurm_key
    FROM both_holders AS b
    INNER JOIN runs AS r
        ON r.node = b.node AND b.hpc_job IN (r.job_id_raw, r.job_id)
        AND r.start < b.bucket_start + INTERVAL 1 MINUTE AND r.end_ts > b.bucket_start
),

per_pod AS (
    SELECT cluster, node, slurm_key, namespace, pod, any_value(pod_uid) AS pod_uid,
           hpc_job,
           list_sort(list(DISTINCT gpu_uuid)) AS gpu_uuids,
           count(DISTINCT bucket_start) AS buckets,
           min(bucket_start) AS first_bucket,
           max(bucket_start) AS last_bucket,
           -- the first minute's smallest GPU: one answer however the rows are ordered
           arg_min(gpu_uuid, (bucket_start, gpu_uuid)) AS first_gpu_uuid
    FROM with_run
    GROUP BY cluster, node, slurm_key, namespace, pod, hpc_job
),

pod_keys AS (
    -- the pod's ledger interval(s) on that node around the minutes it was seen
    SELECT DISTINCT p.*, a.source_key AS k8s_key
    FROM per_pod AS p
    INNER JOIN allocations AS a
        ON a.domain = 'kubernetes' AND a.cluster = p.cluster AND a.node = p.node
        AND a.k8s_namespace = p.namespace AND a.name = p.pod
        AND (coalesce(p.pod_uid, '') = '' OR a.source_key = p.pod_uid)
        AND a.start_ts <= p.last_bucket + INTERVAL 1 MINUTE + to_seconds($tolerance_seconds)
        AND a.end_ts >= p.first_bucket - to_seconds($tolerance_seconds)
)

SELECT
    k.cluster,
    k.node,
    k.slurm_key,
    k.k8s_key,
    k.namespace,
    k.pod,
    k.hpc_job,
    k.gpu_uuids,
    k.buckets,
    k.first_bucket,
    k.last_bucket,
    k.first_gpu_uuid
FROM pod_keys AS k
