-- stg_slurm_allocations
-- Grain: one row per (Slurm run, node) that held GPUs, before day splitting.
-- Parameters: none (reads slurm_runs, slurm_node_allocations, slurm_gpu_indices and, for
--   shards and MPS units, gpu_utilization: the GPUs whose series carry the run's hpc_job).
-- Columns: the common staging layout shared with stg_kubernetes_allocations (see models/build.py),
--   plus gpus_source (Slurm only): where the row's GPU count comes from.
-- node: the node name Slurm gives, except where it is a Slinky slurmd pod's (the temp view
--   slurm_agent_pods): there the Kubernetes node the pod ran on, whose GPUs the run held.
-- A run still going (end null) is charged up to observed_until, the end of the sacct query that
-- saw it. slurm-bridge representative jobs (bridge_pods not empty) are flagged is_bridge: they are
-- the same workload as their pods and are charged once, in the kubernetes domain.
--
-- GPUs per node (docs/slurm.md). sacct keeps only a run's total; slurm_node_allocations holds the
-- split made when sacct was loaded: 'single_node' (the total, exact) or 'even_split' (the total
-- over the nodes, remainder one each to the first nodes in hostlist order: an estimate). Here, at
-- build time, a multi-node run takes each node's count from an `scontrol show job -d` snapshot
-- of it (slurm_gpu_indices) instead: gpus_source 'scontrol'. Done here rather than at load so the
-- ledger is the same whichever of sacct and scontrol was loaded first. A snapshot stands for the
-- run when it shows the run's job (JobIDRaw; the JobID text where the dump had no JobIDRaw) with
-- the run's StartTime, names only nodes of the run, and its GPUs add up to sacct's total; of
-- several, the latest. A node of the run the snapshot does not name held no GPU. The evidence
-- says which source the row used, and how an even split spread its remainder.
WITH runs AS (
    SELECT * FROM slurm_runs
),

per_node AS (
    SELECT *, count(*) OVER (PARTITION BY run_key) AS run_nodes
    FROM slurm_node_allocations
),

multi_node AS (
    SELECT run_key, job_id_raw, job_id, start, nodes, alloc_gpus
    FROM runs
    WHERE start IS NOT NULL AND len(nodes) > 1
),

snapshot_gpus AS (
    -- the snapshot rows of multi-node runs: equi-joins on (JobIDRaw or JobID text, StartTime)
    SELECT m.run_key, m.alloc_gpus, m.nodes, g.observed_at, g.node, g.gpu_index, g.source_file,
           g.line_no
    FROM multi_node AS m
    INNER JOIN slurm_gpu_indices AS g ON g.job_id_raw = m.job_id_raw AND g.start = m.start
    UNION ALL
    SELECT m.run_key, m.alloc_gpus, m.nodes, g.observed_at, g.node, g.gpu_index, g.source_file,
           g.line_no
    FROM multi_node AS m
    INNER JOIN slurm_gpu_indices AS g ON g.job_id = m.job_id AND g.start = m.start
    WHERE m.job_id_raw IS NULL
),

run_snapshot_nodes AS (
    -- one row per (run, snapshot, node): the GPUs the snapshot shows there
    SELECT
        run_key,
        observed_at,
        node,
        any_value(alloc_gpus) AS alloc_gpus,
        list_contains(any_value(nodes), node) AS node_of_run,
        count(DISTINCT gpu_index) AS gpus,
        array_to_string(list_sort(list(DISTINCT gpu_index)), ',') AS gpu_indices,
        min(source_file) AS source_file,
        min(line_no) AS line_no
    FROM snapshot_gpus
    GROUP BY run_key, observed_at, node
),

run_snapshots AS (
    -- each snapshot of a run: its total, and whether it can stand for the run
    SELECT
        run_key,
        observed_at,
        sum(gpus) AS gpus,
        any_value(alloc_gpus) AS alloc_gpus,
        bool_and(coalesce(node_of_run, FALSE)) AS nodes_of_run,
        arg_min(source_file, line_no) AS source_file,
        min(line_no) AS line_no
    FROM run_snapshot_nodes
    GROUP BY run_key, observed_at
),

chosen AS (
    SELECT run_key, max(observed_at) AS observed_at,
           arg_max(source_file, observed_at) AS source_file,
           arg_max(line_no, observed_at) AS line_no
    FROM run_snapshots
    WHERE nodes_of_run AND gpus = alloc_gpus
    GROUP BY run_key
),

unusable AS (
    -- runs whose snapshots all disagree with sacct: the latest one, for the evidence
    SELECT
        run_key,
        arg_max(gpus, observed_at) AS gpus,
        arg_max(nodes_of_run, observed_at) AS nodes_of_run,
        arg_max(source_file, observed_at) AS source_file,
        arg_max(line_no, observed_at) AS line_no
    FROM run_snapshots
    WHERE run_key NOT IN (SELECT run_key FROM chosen)
    GROUP BY run_key
),

chosen_nodes AS (
    SELECT c.run_key, s.node, s.gpus, s.gpu_indices, s.source_file, s.line_no
    FROM chosen AS c
    INNER JOIN run_snapshot_nodes AS s USING (run_key, observed_at)
),

split AS (
    SELECT
        n.*,
        CASE
            WHEN n.run_nodes = 1 THEN 'single_node'
            WHEN c.run_key IS NOT NULL THEN 'scontrol'
            ELSE 'even_split'
        END AS split_source,
        CASE WHEN c.run_key IS NOT NULL THEN coalesce(k.gpus, 0) ELSE n.gpus END AS node_gpus,
        k.gpu_indices,
        coalesce(k.source_file, c.source_file) AS snapshot_file,
        coalesce(k.line_no, c.line_no) AS snapshot_line,
        u.run_key IS NOT NULL AS has_unusable,
        u.gpus AS unusable_gpus,
        u.nodes_of_run AS unusable_nodes_of_run,
        u.source_file AS unusable_file,
        u.line_no AS unusable_line
    FROM per_node AS n
    LEFT JOIN chosen AS c USING (run_key)
    LEFT JOIN chosen_nodes AS k ON k.run_key = n.run_key AND k.node = n.node
    LEFT JOIN unusable AS u ON u.run_key = n.run_key
),

agent_nodes AS (
    -- Slurm inside Kubernetes (Slinky slurm-operator): a Slurm node that is a slurmd pod's name
    -- holds the GPUs of the Kubernetes node the pod runs on (slurm_agent_pods.sql); of several
    -- pods by that name, the one whose interval overlaps the run most
    SELECT
        n.run_key,
        n.node AS slurm_node,
        arg_max(a.node, date_diff('second', greatest(a.start_ts, r.start),
                                  least(a.end_ts, coalesce(r."end", r.observed_until)))) AS node,
        arg_max(a.namespace || '/' || a.pod,
                date_diff('second', greatest(a.start_ts, r.start),
                          least(a.end_ts, coalesce(r."end", r.observed_until)))) AS agent_pod
    FROM split AS n
    INNER JOIN runs AS r USING (run_key)
    INNER JOIN (
        SELECT node, namespace, pod, start_ts, end_ts, unnest(slurm_node_names) AS slurm_node
        FROM slurm_agent_pods
    ) AS a
        ON a.slurm_node = n.node AND a.start_ts < coalesce(r."end", r.observed_until)
        AND a.end_ts > r.start
    WHERE r.start IS NOT NULL
    GROUP BY n.run_key, n.node
),

shared_gpus AS (
    -- which physical GPUs a run's shards, MPS units or MIG instances are on: sacct and scontrol
    -- do not say (scontrol -d prints GRES=shard(CNT:2), and a MIG type's IDX numbers MIG
    -- devices); dcgm-exporter's series of those GPUs carry the run's JobIDRaw (hpc_job).
    -- docs/shared-gpus.md: time-shared GPUs split per GPU, the invariant checked per GPU
    SELECT n.run_key, n.node, list_sort(list(DISTINCT u.gpu_uuid)) AS gpu_uuids
    FROM split AS n
    INNER JOIN runs AS r USING (run_key)
    LEFT JOIN agent_nodes AS an ON an.run_key = n.run_key AND an.slurm_node = n.node
    INNER JOIN gpu_utilization AS u
        ON u.node = coalesce(an.node, n.node) AND u.hpc_job = CAST(r.job_id_raw AS VARCHAR)
        AND u.bucket_start >= r.start AND u.bucket_start < coalesce(r."end", r.observed_until)
    WHERE n.sharing IN ('shard', 'mps', 'mig') AND r.start IS NOT NULL
    GROUP BY ALL
),

final AS (
    SELECT
        'slurm' AS domain,
        r.cluster,
        -- a run holding whole GPUs and MIG instances (or two profiles) on a node has a row of
        -- each; the second and later add '#<mode>:<profile>' (docs/shared-gpus.md)
        CASE WHEN row_number() OVER (
                PARTITION BY r.run_key, n.node
                ORDER BY n.sharing IS NOT NULL, n.sharing, n.slice_profile) > 1
            THEN r.run_key || '#' || n.sharing || ':' || coalesce(n.slice_profile, '')
            ELSE r.run_key END AS source_key,
        r.job_id,
        r.job_name AS name,
        coalesce(an.node, n.node) AS node,
        n.gpu_model,
        n.node_gpus AS gpus,
        sg.gpu_uuids,
        n.sharing,
        n.slice_profile,
        r.start AS start_ts,
        coalesce(r."end", r.observed_until) AS end_ts,
        r."user" AS slurm_user,
        r.account AS slurm_account,
        r.partition AS pool,
        r.qos,
        CAST(NULL AS VARCHAR) AS k8s_namespace,
        CAST(NULL AS VARCHAR) AS k8s_service_account,
        CAST(NULL AS VARCHAR) AS kueue_queue,
        CAST(NULL AS VARCHAR) AS kueue_cluster_queue,
        CAST(NULL AS VARCHAR[]) AS pod_labels,
        CASE
            WHEN r."end" IS NULL THEN 'running'
            WHEN r.state = 'COMPLETED' THEN 'completed'
            WHEN r.state = 'REQUEUED' THEN 'requeued'
            WHEN r.state = 'PREEMPTED' THEN 'preempted'
            WHEN r.state = 'TIMEOUT' THEN 'timeout'
            WHEN r.state = 'NODE_FAIL' THEN 'node_fail'
            WHEN r.state = 'CANCELLED' THEN 'cancelled'
            WHEN r.state IN ('FAILED', 'OUT_OF_MEMORY', 'BOOT_FAIL', 'DEADLINE') THEN 'failed'
            ELSE lower(r.state)
        END AS outcome,
        len(r.bridge_pods) > 0 AS is_bridge,
        n.split_source AS gpus_source,
        r.source_file || ':' || r.line_no || CASE n.split_source
            WHEN 'single_node' THEN ''
            WHEN 'scontrol' THEN
                '; GPUs per node from scontrol ' || n.snapshot_file || ':' || n.snapshot_line
                || ': ' || n.node_gpus || ' of the run''s ' || r.alloc_gpus
                || coalesce(' (indices ' || n.gpu_indices || ')', '')
            ELSE
                '; GPUs per node estimated: ' || r.alloc_gpus || ' GPUs split evenly over '
                || n.run_nodes || ' nodes, ' || (r.alloc_gpus // n.run_nodes) || ' each'
                || CASE WHEN r.alloc_gpus % n.run_nodes > 0
                    THEN ' and 1 more on the first ' || (r.alloc_gpus % n.run_nodes)
                        || ' in hostlist order'
                    ELSE '' END
                || CASE WHEN n.has_unusable
                    THEN ' (scontrol ' || n.unusable_file || ':' || n.unusable_line
                        || CASE WHEN NOT n.unusable_nodes_of_run
                            THEN ' names other nodes: not used)'
                            ELSE ' shows ' || n.unusable_gpus || ' GPUs, sacct '
                                || r.alloc_gpus || ': not used)' END
                    ELSE ' (no scontrol snapshot of the run)' END
        END
        || CASE WHEN an.node IS NOT NULL AND an.node <> n.node
            THEN '; Slurm node ' || n.node || ' is slurmd pod ' || an.agent_pod || ' on '
                || an.node
            ELSE '' END AS evidence
    FROM split AS n
    INNER JOIN runs AS r USING (run_key)
    LEFT JOIN agent_nodes AS an ON an.run_key = n.run_key AND an.slurm_node = n.node
    LEFT JOIN shared_gpus AS sg ON sg.run_key = n.run_key AND sg.node = n.node
    WHERE r.start IS NOT NULL
)

SELECT * FROM final
WHERE end_ts > start_ts
