-- detect_double_gpu_scontrol
-- Grain: one row per (node, Slurm run, pod uid) where the GPU indices Slurm gave the run
--   (`scontrol show job -d` snapshots, slurm_gpu_indices), mapped to UUIDs through the inventory
--   (nodes: node, gpu_index -> gpu_uuid), include GPUs the pod held (allocations.gpu_uuids, from
--   dcgm-exporter's pod labels): GPU-level evidence of double scheduling from Slurm's own
--   records, without dcgm-exporter's hpc_job labels. Whether and how long the two ledger
--   intervals overlap (beyond one scrape interval) is decided in detect_double_scheduled.sql.
-- Parameters: $scan_start, $scan_end (TIMESTAMP, half-open: the runs and pods read).
-- The snapshot only proves which GPUs; the time of the Slurm side is its ledger rows. The run is
--   the one of that JobIDRaw and node with the snapshot's StartTime (a requeued job's runs share
--   the JobIDRaw), else the one holding the node when the snapshot was taken.
-- Columns: cluster (Slurm's, as det_double_node), node, slurm_key, k8s_key, namespace, pod,
--   gpu_uuids (the GPUs both held), gpu_indices, and the first snapshot
--   row naming a shared GPU: job_id_raw, first_gpu_index, first_observed_at, source_file,
--   line_no, snapshots (how many snapshots showed the run on that node).
-- slurm-bridge representative jobs are left out: their pod is the same workload (bridge_pairs).
WITH runs AS (
    SELECT n.run_key, n.cluster, n.node, n.job_id_raw, n.start,
           coalesce(n."end", r."end", r.observed_until) AS end_ts
    FROM slurm_node_allocations AS n
    INNER JOIN slurm_runs AS r USING (run_key)
    WHERE n.start IS NOT NULL AND coalesce(len(r.bridge_pods), 0) = 0
      AND n.start < $scan_end AND coalesce(n."end", r."end", r.observed_until) > $scan_start
),

snapshots AS (
    -- one row per GPU of a run as the snapshots show it (they repeat it every collection)
    SELECT job_id_raw, start, node, gpu_index,
           min(observed_at) AS first_observed_at,
           arg_min(source_file, observed_at) AS source_file,
           arg_min(line_no, observed_at) AS line_no
    FROM slurm_gpu_indices
    WHERE node IN (SELECT node FROM runs) AND job_id_raw IN (SELECT job_id_raw FROM runs)
        -- a MIG type's IDX numbers MIG devices, not physical GPUs (docs/shared-gpus.md):
        -- a MIG instance's conflicts are seen at instance level in dcgm-exporter's series
        AND coalesce(sharing, '') <> 'mig'
    GROUP BY job_id_raw, start, node, gpu_index
),

seen AS (
    SELECT job_id_raw, start, node, count(DISTINCT observed_at) AS snapshots
    FROM slurm_gpu_indices
    WHERE node IN (SELECT node FROM runs) AND job_id_raw IN (SELECT job_id_raw FROM runs)
    GROUP BY ALL
),

slurm_gpus AS (
    SELECT s.*, r.run_key AS slurm_key, r.cluster, i.gpu_uuid
    FROM snapshots AS s
    INNER JOIN runs AS r
        ON r.job_id_raw = s.job_id_raw AND r.node = s.node
        AND (r.start = s.start
             OR (r.start <= s.first_observed_at AND r.end_ts > s.first_observed_at))
    INNER JOIN nodes AS i ON i.node = s.node AND i.gpu_index = s.gpu_index
    -- the run with the snapshot's start first, then the one holding the node at the snapshot
    QUALIFY row_number() OVER (
        PARTITION BY s.job_id_raw, s.start, s.node, s.gpu_index, i.gpu_uuid
        ORDER BY (r.start = s.start) DESC, r.start DESC
    ) = 1
),

pod_gpus AS (
    SELECT DISTINCT a.source_key AS k8s_key, a.node, a.k8s_namespace AS namespace, a.name AS pod,
           unnest(a.gpu_uuids) AS gpu_uuid
    FROM allocations AS a
    WHERE a.domain = 'kubernetes' AND a.gpu_uuids IS NOT NULL
      AND a.start_ts < $scan_end AND a.end_ts > $scan_start
      AND a.node IN (SELECT node FROM slurm_gpus)
),

pairs AS (
    -- an equi-join on (node, GPU): only runs and pods that held the same GPU meet
    SELECT g.cluster, g.node, g.slurm_key, p.k8s_key,
           any_value(p.namespace) AS namespace, any_value(p.pod) AS pod,
           any_value(g.job_id_raw) AS job_id_raw,
           any_value(g.start) AS sc_start,
           list_sort(list(DISTINCT g.gpu_uuid)) AS gpu_uuids,
           list_sort(list(DISTINCT g.gpu_index)) AS gpu_indices,
           arg_min(g.gpu_index, (g.first_observed_at, g.gpu_index)) AS first_gpu_index,
           min(g.first_observed_at) AS first_observed_at,
           arg_min(g.source_file, (g.first_observed_at, g.gpu_index)) AS source_file,
           arg_min(g.line_no, (g.first_observed_at, g.gpu_index)) AS line_no
    FROM slurm_gpus AS g
    INNER JOIN pod_gpus AS p ON p.node = g.node AND p.gpu_uuid = g.gpu_uuid
    GROUP BY g.cluster, g.node, g.slurm_key, p.k8s_key
)

SELECT
    k.cluster,
    k.node,
    k.slurm_key,
    k.k8s_key,
    k.namespace,
    k.pod,
    k.gpu_uuids,
    k.gpu_indices,
    k.job_id_raw,
    k.first_gpu_index,
    k.first_observed_at,
    k.source_file,
    k.line_no,
    n.snapshots
FROM pairs AS k
LEFT JOIN seen AS n ON n.job_id_raw = k.job_id_raw AND n.start = k.sc_start AND n.node = k.node
