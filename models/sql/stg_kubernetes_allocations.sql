-- stg_kubernetes_allocations
-- Grain: one row per pod-uid GPU allocation interval (k8s_pod_allocations), before day splitting.
-- Parameters: none (reads k8s_pod_allocations, k8s_pod_phases, k8s_pod_gpus, kueue_workloads,
--   nodes).
-- Columns: the common staging layout shared with stg_slurm_allocations (see models/build.py).
-- source_key = pod uid ('uid#resource' for a second GPU-like resource of one pod; a pod
--   recreated by a Job retry has a new uid: its own rows; before
--   kube-state-metrics v2.1.0 'namespace/pod@creation time', docs/kubernetes.md); name = pod.
-- Identity inputs (docs/contracts.md): k8s_service_account 'namespace/sa', kueue_queue
--   'namespace/localqueue' (queue_name: the pod's kueue.x-k8s.io/local-queue-name label, else
--   its kueue.x-k8s.io/queue-name, else its Job's; else the Workload's spec.queueName),
--   kueue_cluster_queue: the pod's kueue.x-k8s.io/cluster-queue-name label (Kueue >= 0.17),
--   else the pod's Workload (its admission, else the ClusterQueue its LocalQueue points at in
--   other admitted Workloads), pod_labels as 'label=value' with kube-state-metrics label names
--   without 'label_'.
-- evidence names the pod, its samples and which time each end is (start_source/end_source:
--   kube_pod_start_time / kube_pod_completion_time, scrape_grid, window).
-- The pod's Workload: the Workload owned by the pod's controller (kind/name in its namespace),
--   by the pod itself (Kueue pod integration), by its JobSet (jobset.sigs.k8s.io/jobset-name
--   label), or named by its kueue.x-k8s.io/pod-group-name or prebuilt-workload-name label; the
--   latest one created before the pod ran.
-- outcome: 'preempted' / 'evicted' when the pod belongs to an admission of its Workload that
--   ended in an eviction (every admission before the last one did; the last one did if the
--   Workload is Evicted now); else the pod's terminal phase (succeeded / failed); else the
--   Workload's Finished condition; else 'running' (no terminal state seen yet).
-- is_slurm_agent: the pod is a Slinky slurmd pod (the temp view slurm_agent_pods): its GPU-time
--   is Slurm's capacity, charged through the Slurm jobs inside it (docs/accounting.md).
-- gpu_uuids: GPUs dcgm-exporter labelled with the pod (same namespace, pod, node) during the
--   interval; null when the exporter does not carry pod labels.
-- DRA pods (gpu_resource 'dra/...', docs/kubernetes.md "DRA"): evidence names their claims and
--   devices; gpu_uuids are the GPUs the driver's ResourceSlices say those devices are
--   (k8s_resource_slice_devices; a MIG device's parent GPU) when they name every one; else a
--   claim several pods share (sharing time_slicing/mps) has gpu_uuids = its device keys
--   '<pool>/<device>' (dra_devices), so allocation_shares.sql splits each device's seconds
--   among the pods present and the holding sweeps count it once, whatever dcgm-exporter saw.
WITH pods AS (
    SELECT * FROM k8s_pod_allocations
),

workloads AS (
    SELECT * FROM kueue_workloads
),

local_queues AS (
    -- a LocalQueue points at one ClusterQueue; learnt from the Workloads admitted through it
    SELECT
        namespace,
        queue_name,
        arg_max(cluster_queue, coalesce(admitted_at, quota_reserved_at, created_at))
            AS cluster_queue
    FROM workloads
    WHERE coalesce(cluster_queue, '') <> '' AND coalesce(queue_name, '') <> ''
    GROUP BY ALL
),

candidate_workloads AS (
    -- owned by the pod's controller (Job, ...) or by the pod itself (pod integration)
    SELECT p.cluster, p.uid, p.start_ts, w.uid AS workload_uid, w.created_at
    FROM pods AS p
    INNER JOIN workloads AS w
        ON w.namespace = p.namespace AND w.owner_kind = p.owner_kind
        AND w.owner_name = p.owner_name
    UNION ALL
    SELECT p.cluster, p.uid, p.start_ts, w.uid, w.created_at
    FROM pods AS p
    INNER JOIN workloads AS w
        ON w.namespace = p.namespace AND w.owner_kind = 'Pod' AND w.owner_name = p.pod
    UNION ALL
    -- a JobSet's pods are owned by its Jobs; the Workload by the JobSet
    SELECT p.cluster, p.uid, p.start_ts, w.uid, w.created_at
    FROM pods AS p
    INNER JOIN workloads AS w
        ON w.namespace = p.namespace AND w.owner_kind = 'JobSet'
        AND w.owner_name = json_extract_string(p.labels, '$.jobset_sigs_k8s_io_jobset_name')
    UNION ALL
    -- pod groups and prebuilt Workloads are named by a pod label
    SELECT p.cluster, p.uid, p.start_ts, w.uid, w.created_at
    FROM pods AS p
    INNER JOIN workloads AS w
        ON w.namespace = p.namespace
        AND w.name = coalesce(
            json_extract_string(p.labels, '$.kueue_x_k8s_io_pod_group_name'),
            json_extract_string(p.labels, '$.kueue_x_k8s_io_prebuilt_workload_name')
        )
),

pod_workload AS (
    -- the latest Workload created before the pod ran
    SELECT
        cluster,
        uid,
        start_ts,
        arg_max(workload_uid, (created_at <= start_ts, created_at)) AS workload_uid
    FROM candidate_workloads
    GROUP BY ALL
),

gpus AS (
    SELECT
        p.cluster,
        p.uid,
        p.start_ts,
        list_sort(list(DISTINCT g.gpu_uuid)) AS gpu_uuids
    FROM pods AS p
    INNER JOIN k8s_pod_gpus AS g
        ON g.cluster = p.cluster
        AND g.namespace = p.namespace
        AND g.pod = p.pod
        AND g.node = p.node
        AND g.first_seen < p.end_ts
        AND g.last_seen > p.start_ts
    GROUP BY ALL
),

slice_gpus AS (
    -- the GPU each DRA device name is, as its driver's ResourceSlice last said
    SELECT cluster, pool || '/' || device AS device_key, arg_max(gpu_uuid, last_seen) AS gpu_uuid
    FROM k8s_resource_slice_devices
    WHERE gpu_uuid IS NOT NULL
    GROUP BY ALL
),

dra_gpus AS (
    -- a DRA pod's GPUs by UUID, where the slices name every device of its claims
    SELECT
        d.cluster, d.uid, d.start_ts, d.gpu_resource,
        CASE WHEN bool_and(s.gpu_uuid IS NOT NULL)
            THEN list_sort(list(DISTINCT s.gpu_uuid)) END AS dra_uuids
    FROM (
        SELECT cluster, uid, start_ts, gpu_resource, unnest(dra_devices) AS device_key
        FROM pods WHERE len(coalesce(dra_devices, [])) > 0
    ) AS d
    LEFT JOIN slice_gpus AS s ON s.cluster = d.cluster AND s.device_key = d.device_key
    GROUP BY ALL
),

node_models AS (
    SELECT node, arg_max(gpu_model, cluster) AS gpu_model, arg_max(pool, cluster) AS pool
    FROM nodes
    GROUP BY node
),

joined AS (
    SELECT
        p.*,
        w.name AS workload_name,
        w.queue_name AS workload_queue,
        coalesce(nullif(w.cluster_queue, ''), lq.cluster_queue) AS workload_cluster_queue,
        w.evicted,
        w.evicted_reason,
        w.eviction_count,
        w.admitted_at,
        w.finished,
        w.finished_at,
        w.finished_reason,
        ph.phase,
        g.gpu_uuids,
        dg.dra_uuids,
        n.gpu_model,
        n.pool
    FROM pods AS p
    LEFT JOIN pod_workload AS pw
        ON pw.cluster = p.cluster AND pw.uid = p.uid AND pw.start_ts = p.start_ts
    LEFT JOIN workloads AS w ON w.uid = pw.workload_uid
    LEFT JOIN local_queues AS lq
        ON lq.namespace = p.namespace
        AND lq.queue_name = coalesce(nullif(p.queue_name, ''), w.queue_name)
    LEFT JOIN k8s_pod_phases AS ph ON ph.cluster = p.cluster AND ph.uid = p.uid
    LEFT JOIN gpus AS g ON g.cluster = p.cluster AND g.uid = p.uid AND g.start_ts = p.start_ts
    LEFT JOIN dra_gpus AS dg
        ON dg.cluster = p.cluster AND dg.uid = p.uid AND dg.start_ts = p.start_ts
        AND dg.gpu_resource IS NOT DISTINCT FROM p.gpu_resource
    LEFT JOIN node_models AS n ON n.node = p.node
),

final AS (
    SELECT
        'kubernetes' AS domain,
        cluster,
        -- a pod holding two GPU-like resources (whole GPUs and MIG instances) has a row of
        -- each; the second and later keep the uid and add '#<resource>' (docs/shared-gpus.md)
        CASE WHEN row_number() OVER (
                PARTITION BY cluster, uid, start_ts
                ORDER BY coalesce(gpu_resource, 'nvidia_com_gpu') <> 'nvidia_com_gpu',
                    gpu_resource) > 1
            THEN uid || '#' || gpu_resource ELSE uid END AS source_key,
        coalesce(workload_name, owner_name) AS job_id,
        pod AS name,
        node,
        gpu_model,
        gpus,
        -- a DRA pod: its claims' GPUs by UUID where the driver's ResourceSlices name them all
        -- (authoritative, whatever dcgm-exporter's labels say); a claim several pods share
        -- otherwise: its device keys, which the time-shared rule splits
        -- (allocation_shares.sql) and the holding sweeps count once
        CASE WHEN dra_uuids IS NOT NULL THEN dra_uuids
            WHEN sharing IN ('time_slicing', 'mps') AND dra_devices IS NOT NULL
            THEN dra_devices ELSE gpu_uuids END AS gpu_uuids,
        sharing,
        slice_profile,
        start_ts,
        end_ts,
        CAST(NULL AS VARCHAR) AS slurm_user,
        CAST(NULL AS VARCHAR) AS slurm_account,
        pool,
        CAST(NULL AS VARCHAR) AS qos,
        namespace AS k8s_namespace,
        CASE WHEN coalesce(service_account, '') <> ''
            THEN namespace || '/' || service_account END AS k8s_service_account,
        CASE WHEN coalesce(nullif(queue_name, ''), workload_queue, '') <> ''
            THEN namespace || '/' || coalesce(nullif(queue_name, ''), workload_queue)
        END AS kueue_queue,
        coalesce(nullif(cluster_queue, ''), nullif(workload_cluster_queue, ''))
            AS kueue_cluster_queue,
        CASE WHEN labels IS NOT NULL THEN list_sort(list_transform(
            map_entries(json_transform(labels, '"MAP(VARCHAR, VARCHAR)"')),
            e -> e.key || '=' || e.value
        )) END AS pod_labels,
        CASE
            WHEN coalesce(eviction_count, 0) > 0
                AND (evicted OR (admitted_at IS NOT NULL AND start_ts < admitted_at))
                THEN CASE WHEN evicted_reason = 'Preempted' THEN 'preempted' ELSE 'evicted' END
            WHEN phase = 'Succeeded' THEN 'succeeded'
            WHEN phase = 'Failed' THEN 'failed'
            WHEN finished AND finished_reason IN ('Succeeded', 'Failed')
                THEN lower(finished_reason)
            ELSE 'running'
        END AS outcome,
        FALSE AS is_bridge,
        -- a Slinky slurmd pod: Slurm's hold on the node's GPUs, never a customer
        -- (slurm_agent_pods.sql; allocation_pieces.sql leaves it out)
        uid IN (SELECT uid FROM slurm_agent_pods) AS is_slurm_agent,
        'kube-state-metrics ' || namespace || '/' || pod || ' uid ' || uid || ': '
            || samples || ' Running samples every ' || scrape_interval_s || ' s; start from '
            || coalesce(start_source, 'scrape_grid') || ', end from '
            || coalesce(end_source, 'scrape_grid')
            || coalesce('; DRA ' || dra_claims, '')
            -- admitted and holding its GPUs before its first Running scrape (image pulls,
            -- init containers: docs/kubernetes.md "Pod boundaries")
            || CASE
                WHEN samples = 0 THEN '; admitted, never seen Running'
                WHEN first_running_ts > start_ts
                    THEN '; start-up ' || date_diff('second', start_ts, first_running_ts)
                        || ' s to the first Running scrape'
                ELSE '' END AS evidence,
        -- a piece of a pod cut at midnight (allocation_pieces.sql) tells only what its own day
        -- and the days beside it know: the pod-wide sample count grows with every later day
        'kube-state-metrics ' || namespace || '/' || pod || ' uid ' || uid || ': Running samples '
            || 'every ' || scrape_interval_s || ' s' AS evidence_cut_head,
        'start from ' || coalesce(start_source, 'scrape_grid')
            || CASE WHEN first_running_ts > start_ts
                THEN ' (start-up ' || date_diff('second', start_ts, first_running_ts)
                    || ' s to the first Running scrape)'
                ELSE '' END AS evidence_cut_start,
        'end from ' || coalesce(end_source, 'scrape_grid') AS evidence_cut_end,
        coalesce('; DRA ' || dra_claims, '') AS evidence_cut_tail
    FROM joined
)

SELECT * FROM final
WHERE end_ts > start_ts
