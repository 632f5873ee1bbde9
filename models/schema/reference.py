"""Reference data: nodes and their GPUs, node names, identities, Slurm accounts, the rate card."""

from models.schema.core import Table

NODES = Table(
    "nodes",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pool", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_count", "INTEGER"),
        ("gpu_index", "INTEGER"),
        ("gpu_uuid", "VARCHAR"),
        ("slurm_partition", "VARCHAR"),
    ),
    key=("cluster", "node", "gpu_index"),
    doc="GPU inventory: one row per GPU, as of now (the open rows of node_inventory; a node "
    "the nodes file lists has the file's rows, with UUIDs; a node only a source knows has "
    "gpu_uuid NULL).",
)

SLURM_NODE_PODS = Table(
    "slurm_node_pods",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("pod_namespace", "VARCHAR"),
        ("pod_name", "VARCHAR"),
        ("k8s_node", "VARCHAR"),
        ("first_seen", "TIMESTAMP"),
        ("last_seen", "TIMESTAMP"),
    ),
    key=("cluster", "node", "pod_namespace", "pod_name"),
    doc="Slurm nodes that are Slinky slurmd pods, as `scontrol show node` Comment= names them "
    "({\"namespace\":…,\"podName\":…,\"node\":…}, slurm-operator docs/usage/topology.md): "
    "which pod a Slurm NodeName is (models/sql/slurm_agent_pods.sql), and the reads that "
    "showed it.",
)

NODE_INVENTORY = Table(
    "node_inventory",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("gpu_model", "VARCHAR"),
        ("gpu_count", "INTEGER"),
        ("pool", "VARCHAR"),
        ("slurm_partition", "VARCHAR"),
        ("gpu_product", "VARCHAR"),
        ("source", "VARCHAR"),
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("cluster", "node", "gpu_model", "valid_from"),
    doc="GPU nodes over time: one row per cluster, node and GPU model for each span in which "
    "its count, pool and partitions stayed the same; valid_to NULL = still so. pool is slurm "
    "(scontrol only), kubernetes (kube-state-metrics only) or shared (both); source says who "
    "decided: scontrol, ksm, scontrol+ksm or nodes_file (the site's file overrides the sources "
    "per node). A change closes the row (valid_to = when it was seen) and opens a new one; a "
    "re-read with nothing changed changes nothing (gpuledger/ingest/reference.py).",
)

NODE_GPU_SLICES = Table(
    "node_gpu_slices",
    (
        ("cluster", "VARCHAR"),
        ("node", "VARCHAR"),
        ("sharing", "VARCHAR"),  # mig, time_slicing, mps, shard
        ("slice_profile", "VARCHAR"),  # MIG profile (1g.10gb); NULL for the other modes
        ("units", "INTEGER"),  # capacity: instances of the profile, replicas, shards, MPS units
        ("physical_gpus", "INTEGER"),
        ("units_per_gpu", "INTEGER"),  # replicas/shards/MPS units per GPU; MIG: the profile's
        ("gpu_slices", "INTEGER"),  # MIG: compute slices per physical GPU (7, or 4 on A30)
        ("mig_config", "VARCHAR"),  # nvidia.com/mig.config
        ("source", "VARCHAR"),  # ksm, scontrol
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("cluster", "node", "sharing", "slice_profile", "source", "valid_from"),
    doc="Shared GPUs on a node over time (docs/shared-gpus.md): one row per sharing mode and MIG "
    "profile with its capacity, from kube-state-metrics (GPU Feature Discovery node labels, "
    "kube_node_status_capacity) or scontrol (Gres=). Effective-dated like node_inventory: a "
    "change (a MIG layout changed mid-day) closes the row and opens a new one.",
)

IDENTITY_CANDIDATES = Table(
    "identity_candidates",
    (
        ("source", "VARCHAR"),
        ("cluster", "VARCHAR"),
        ("source_kind", "VARCHAR"),
        ("key", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("evidence", "VARCHAR"),
        ("valid_from", "TIMESTAMP"),
        ("valid_to", "TIMESTAMP"),
    ),
    key=("source", "cluster", "source_kind", "key", "valid_from"),
    doc="Owners the sources name, used where identity_map names none: slurm_assoc (sacctmgr: "
    "a Slurm user is its own person, an account its team) and namespace_labels "
    "(kube_namespace_labels with the site's namespace_labels keys). Effective-dated like "
    "node_inventory; the first row of a key is valid from the start (valid_from NULL).",
)

IDENTITY_MAP = Table(
    "identity_map",
    (
        ("source_kind", "VARCHAR"),
        ("key", "VARCHAR"),
        ("person", "VARCHAR"),
        ("team", "VARCHAR"),
        ("cost_centre", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
    ),
    key=("source_kind", "key", "valid_from"),
    doc="Raw identity keys to person, team, cost centre (see docs/contracts.md).",
)

SLURM_ACCOUNTS = Table(
    "slurm_accounts",
    (("account", "VARCHAR"), ("parent", "VARCHAR")),
    key=("account",),
    doc="The Slurm account tree.",
)

RATE_CARD = Table(
    "rate_card",
    (
        ("gpu_model", "VARCHAR"),
        ("domain", "VARCHAR"),
        ("qos", "VARCHAR"),
        ("valid_from", "DATE"),
        ("valid_to", "DATE"),
        ("rate_per_gpu_hour", "DECIMAL(18,6)"),
        ("currency", "VARCHAR"),
    ),
    key=("gpu_model", "domain", "qos", "valid_from"),
    doc="Effective-dated GPU-hour rates; empty domain or qos means any.",
)

NODE_ALIASES = Table(
    "node_aliases",
    (
        ("alias", "VARCHAR"),
        ("canonical", "VARCHAR"),
    ),
    key=("alias",),
    doc="The site's node name aliases (raw name as a source prints it -> canonical name), "
    "from the config's node_aliases; the first rule of gpuledger/ingest/nodenames.py.",
)

NODE_NAMES = Table(
    "node_names",
    (
        ("raw", "VARCHAR"),
        ("canonical", "VARCHAR"),
        ("rule", "VARCHAR"),
        ("source", "VARCHAR"),
        ("first_seen_at", "TIMESTAMP"),
    ),
    key=("raw",),
    doc="Every node name a source printed, once, with the canonical name every table uses "
    "and the rule that decided it (alias, short_name, as_is, kept_whole).",
)
