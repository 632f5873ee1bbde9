-- slurm_agent_pods
-- Grain: one row per GPU allocation interval (k8s_pod_allocations row) of a Slinky slurm-operator
--   slurmd pod: the pod through which Slurm holds a Kubernetes node's GPUs (docs/accounting.md,
--   "Slurm inside Kubernetes").
-- Parameters: none.
-- A slurmd pod is a pod owned by a NodeSet (kube_pod_owner owner_kind, always exported) or
--   labelled app.kubernetes.io/name=slurmd (slurm-operator internal/builder/labels/labels.go:
--   WorkerApp; kube-state-metrics exports the label only where allow-listed).
-- slurm_node_names: the names Slurm may call the node in the pod, best first:
--   nodeset.slinky.slurm.net/pod-hostname (set by the NodeSet controller: the Slurm node name,
--   api/v1beta1/well_known.go), the NodeName whose `scontrol show node` Comment= names this pod
--   (slurm_node_pods: {"namespace":…,"podName":…,"node":…}, docs/usage/topology.md), the pod
--   name (StatefulSet
--   mode without a hostname: GetSlurmNodeName), and the Kubernetes node's name and its short
--   name (DaemonSet mode and hostNetwork: GetDaemonSetPodHostname cuts the domain).
WITH pods AS (
    SELECT *
    FROM k8s_pod_allocations
    WHERE owner_kind = 'NodeSet'
        OR json_extract_string(labels, '$.app_kubernetes_io_name') = 'slurmd'
)

SELECT
    p.cluster,
    p.namespace,
    p.pod,
    p.uid,
    p.node,
    p.gpus,
    p.gpu_resource,
    p.sharing,
    p.slice_profile,
    p.start_ts,
    p.end_ts,
    list_distinct(list_filter(list_concat(
        [json_extract_string(p.labels, '$.nodeset_slinky_slurm_net_pod_hostname')],
        coalesce(c.slurm_nodes, []),
        [p.pod, p.node, split_part(p.node, '.', 1)]
    ), x -> coalesce(x, '') <> '')) AS slurm_node_names
FROM pods AS p
LEFT JOIN (
    SELECT pod_namespace, pod_name, list_sort(list(DISTINCT node)) AS slurm_nodes
    FROM slurm_node_pods
    GROUP BY pod_namespace, pod_name
) AS c ON c.pod_namespace = p.namespace AND c.pod_name = p.pod
WHERE p.end_ts > p.start_ts
