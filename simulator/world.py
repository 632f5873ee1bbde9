"""The static world: nodes and GPUs, people, Slurm accounts and users, Kubernetes namespaces and
Kueue queues, the identity map and the rate card.

Identities are fixed (they do not grow with ``--nodes``); the inventory does.
"""

import math
from dataclasses import astuple, dataclass
from datetime import date
from typing import TYPE_CHECKING

from simulator.config import SimConfig
from simulator.rng import gpu_uuid
from simulator.timefmt import add_days

if TYPE_CHECKING:
    from simulator.sharing_world import SharingWorld

GPU_MODEL_NAMES = {"a100": "NVIDIA A100-SXM4-80GB", "h100": "NVIDIA H100 80GB HBM3"}
KUEUE_FLAVORS = {"a100": "a100-80gb", "h100": "h100-80gb"}
COHORT = "gpu-cohort"


@dataclass(frozen=True)
class Node:
    name: str
    pool: str  # slurm | kubernetes | shared
    number: int  # position over all nodes, for addresses
    gpu_model: str
    gpu_count: int
    gpu_uuids: tuple[str, ...]
    slurm_partition: str  # "" for Kubernetes-only nodes
    cpus: int
    mem_gb: int
    # --slinky-nodes: a Slurm node run inside Kubernetes by a Slinky slurmd pod (simulator/
    # slinky.py); ``slurm_name`` is its Slurm node name where that is not ``name`` (StatefulSet)
    slinky: bool = False
    slurm_name: str = ""

    @property
    def slurm_node(self) -> str:
        """The name Slurm (sacct, scontrol) gives the node."""
        return self.slurm_name or self.name

    @property
    def host_ip(self) -> str:
        return f"10.0.{self.number // 250}.{self.number % 250 + 10}"

    def pod_ip(self, n: int) -> str:
        return f"10.42.{self.number % 250}.{n % 250 + 2}"

    @property
    def in_kubernetes(self) -> bool:
        return self.pool in ("kubernetes", "shared")

    @property
    def in_slurm(self) -> bool:
        return self.pool in ("slurm", "shared")


@dataclass(frozen=True)
class SlurmUser:
    name: str
    uid: int
    accounts: tuple[str, ...]  # the first one is the default account
    proper_name: str  # passwd gecos as sreport prints it under "Proper Name"


@dataclass(frozen=True)
class Namespace:
    name: str
    local_queue: str
    cluster_queue: str
    flavor_model: str  # the GPU model its training jobs ask for
    service_account: str
    owners: tuple[str, ...]  # values of the pod label ``owner``; "" means no label


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    nominal: dict[str, int]  # flavor -> nominal GPU quota


@dataclass(frozen=True)
class IdentityRow:
    source_kind: str
    key: str
    person: str
    team: str
    cost_centre: str
    valid_from: date | None
    valid_to: date | None

    def applies(self, day: date) -> bool:
        if self.valid_from is not None and day < self.valid_from:
            return False
        return not (self.valid_to is not None and day >= self.valid_to)


@dataclass(frozen=True)
class RateRow:
    gpu_model: str
    domain: str
    qos: str
    valid_from: date | None
    valid_to: date | None
    rate: str
    currency: str


# Slurm account tree below the implicit root (accounts.csv lists these; sreport adds root).
ACCOUNT_PARENTS: dict[str, str] = {
    "research": "",
    "physics": "research",
    "ml-research": "research",
    "ops": "",
    "kubernetes": "",
}

SLURM_USERS: tuple[SlurmUser, ...] = (
    SlurmUser("alice", 1001, ("physics", "ml-research"), ""),
    SlurmUser("bob", 1002, ("ml-research",), ""),
    SlurmUser("carol", 1003, ("ops",), ""),
    SlurmUser("dave", 1004, ("physics",), ""),
    SlurmUser("erin", 1005, ("ml-research", "physics"), ""),
    SlurmUser("frank", 1006, ("ops",), ""),
)
ROOT_USER = SlurmUser("root", 0, ("root",), "root")
BRIDGE_USER = SlurmUser("slurm", 64030, ("kubernetes",), "")
BRIDGE_ACCOUNT = "kubernetes"

NAMESPACES: tuple[Namespace, ...] = (
    Namespace("inference", "lq-inference", "cq-inference", "h100", "model-server", ("",)),
    Namespace("research", "lq-research", "cq-research", "h100", "default", ("bob", "")),
    Namespace("sandbox", "lq-sandbox", "cq-sandbox", "h100", "default", ("",)),
    Namespace("team-llm", "lq-llm", "cq-training", "h100", "trainer", ("bob", "grace")),
    Namespace("team-vision", "lq-vision", "cq-training", "a100", "trainer", ("alice", "")),
)
NAMESPACE_BY_NAME = {ns.name: ns for ns in NAMESPACES}


@dataclass(frozen=True)
class World:
    config: SimConfig
    nodes: tuple[Node, ...]
    identity_rows: tuple[IdentityRow, ...]
    rate_rows: tuple[RateRow, ...]
    cluster_queues: tuple[ClusterQueue, ...]
    identity_change_day: date | None  # the day erin's mapping changes (inside the window)
    sharing: "SharingWorld | None" = None  # --shared-gpus: the shared-GPU nodes

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        msg = f"expected a node named like gpu-hpc-01, found {name!r}"
        raise KeyError(msg)


def _node_names(prefix: str, count: int) -> list[str]:
    width = max(2, len(str(count)))
    return [f"{prefix}-{i:0{width}d}" for i in range(1, count + 1)]


def build_nodes(config: SimConfig) -> tuple[Node, ...]:
    seed = config.seed
    nodes: list[Node] = []
    a100_hpc = max(1, math.ceil(config.nodes.hpc * 2 / 3)) if config.nodes.hpc > 1 else 1

    def add(name: str, pool: str, model: str, count: int, partition: str) -> None:
        cpus, mem = (128, 1024) if model == "a100" else (96, 2048)
        uuids = tuple(gpu_uuid(seed, name, i) for i in range(count))
        nodes.append(Node(name, pool, len(nodes), model, count, uuids, partition, cpus, mem))

    for i, name in enumerate(_node_names("gpu-hpc", config.nodes.hpc)):
        if i < a100_hpc:
            add(name, "slurm", "a100", 8, "gpu")
        else:
            add(name, "slurm", "h100", 4, "gpu")
    for name in _node_names("gpu-k8s", config.nodes.k8s):
        add(name, "kubernetes", "h100", 8, "")
    for name in _node_names("gpu-shr", config.nodes.shared):
        add(name, "shared", "a100", 8, "shared")
    if config.slinky:
        from simulator.slinky import with_slinky_nodes  # it builds Nodes of this module

        return with_slinky_nodes(config, tuple(nodes))
    return tuple(nodes)


def identity_change_day(config: SimConfig) -> date | None:
    """A day strictly inside the window on which one mapping row changes (None for 1-day worlds)."""
    if config.days < 2:
        return None
    return add_days(config.start, max(1, config.days // 2))


def build_identity_rows(change: date | None) -> tuple[IdentityRow, ...]:
    def row(kind: str, key: str, person: str = "", team: str = "", cc: str = "",
            valid_from: date | None = None, valid_to: date | None = None) -> IdentityRow:
        return IdentityRow(kind, key, person, team, cc, valid_from, valid_to)

    rows = [
        # Slurm users; frank is deliberately missing (and his account ops is unmapped)
        row("slurm_user", "alice", "alice", "physics", "CC-PHY-100"),
        row("slurm_user", "bob", "bob", "ml", "CC-ML-200"),
        row("slurm_user", "carol", "carol", "ops", "CC-OPS-300"),
        row("slurm_user", "dave", "dave"),  # team and cost centre come from his account
        # Slurm accounts; ops and kubernetes are deliberately unmapped
        row("slurm_account", "ml-research", "", "ml", "CC-ML-200"),
        row("slurm_account", "physics", "", "physics", "CC-PHY-100"),
        row("slurm_account", "research", "", "research", "CC-RES-400"),
        # Kubernetes namespaces; sandbox is deliberately unmapped
        row("k8s_namespace", "inference", "", "inference", "CC-INF-700"),
        row("k8s_namespace", "research", "", "research", "CC-RES-400"),
        row("k8s_namespace", "team-llm", "", "llm", "CC-LLM-500"),
        row("k8s_namespace", "team-vision", "", "vision", "CC-VIS-600"),
        row("k8s_service_account", "team-vision/trainer", "heidi"),
        row("kueue_queue", "cq-research", "", "research", "CC-RES-400"),
        row("kueue_queue", "team-llm/lq-llm", "", "llm", "CC-LLM-500"),
        # pod labels name people (alice and bob also use Slurm)
        row("pod_label", "owner=alice", "alice"),
        row("pod_label", "owner=bob", "bob"),
        row("pod_label", "owner=grace", "grace"),
    ]
    if change is None:
        rows.append(row("slurm_user", "erin", "erin", "ml", "CC-ML-200"))
    else:  # erin moves from ml to physics inside the window
        rows.append(row("slurm_user", "erin", "erin", "ml", "CC-ML-200", valid_to=change))
        rows.append(row("slurm_user", "erin", "erin", "physics", "CC-PHY-100", valid_from=change))
    rows.sort(key=lambda r: (r.source_kind, r.key, r.valid_from or date.min))
    return tuple(rows)


def build_rate_rows(config: SimConfig) -> tuple[RateRow, ...]:
    change = add_days(config.start, max(1, config.days // 2)) if config.days >= 2 else None
    rows = [
        RateRow("a100", "slurm", "", None, change, "2.50", "EUR"),
        RateRow("h100", "slurm", "", None, None, "4.00", "EUR"),
        RateRow("h100", "slurm", "high", None, None, "5.00", "EUR"),
        RateRow("a100", "kubernetes", "", None, None, "2.90", "EUR"),
        RateRow("h100", "kubernetes", "", None, None, "4.40", "EUR"),
    ]
    if change is not None:  # the A100 Slurm price rises inside the window
        rows.insert(1, RateRow("a100", "slurm", "", change, None, "2.75", "EUR"))
    if config.autodetect_gpu_types:
        # AutoDetect=nvml's type names (nvidia_a100-sxm4-80gb …) are the model of a Slurm run
        # typed by them: a row per name as printed, at its model's price; the short names stay
        # for runs without a type (shards: the node's model)
        from simulator.autodetect import GresNames

        names = GresNames(autodetect=True)
        rows += [RateRow(names.whole(r.gpu_model), *astuple(r)[1:]) for r in rows
                 if r.domain == "slurm"]
    return tuple(rows)


def build_cluster_queues(nodes: tuple[Node, ...]) -> tuple[ClusterQueue, ...]:
    h100 = sum(n.gpu_count for n in nodes if n.pool == "kubernetes")
    a100 = sum(n.gpu_count for n in nodes if n.pool == "shared")
    inference = max(4, h100 // 8)
    research = max(2, h100 // 8)
    sandbox = max(1, h100 // 16)
    training = max(1, h100 - inference - research - sandbox)
    return (
        ClusterQueue("cq-inference", {"h100-80gb": inference}),
        ClusterQueue("cq-research", {"h100-80gb": research}),
        ClusterQueue("cq-sandbox", {"h100-80gb": sandbox}),
        ClusterQueue("cq-training", {"a100-80gb": a100, "h100-80gb": training}),
    )


def build_world(config: SimConfig) -> World:
    from simulator.sharing_world import build_sharing  # it builds Nodes of this module

    nodes = build_nodes(config)
    change = identity_change_day(config)
    return World(
        config=config,
        nodes=nodes,
        identity_rows=build_identity_rows(change),
        rate_rows=build_rate_rows(config),
        cluster_queues=build_cluster_queues(nodes),
        identity_change_day=change,
        sharing=build_sharing(config.seed, len(nodes)) if config.shared_gpus else None,
    )
