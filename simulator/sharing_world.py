"""``--shared-gpus`` (issue #16 item 6): the nodes whose GPUs are shared, and their layouts.

A fixed set, next to the world's whole-GPU nodes (they never enter the whole-GPU schedulers):

* MIG (H100 80GB, mixed layout): ``gpu-mig-k8s-01`` (Kubernetes, mixed strategy),
  ``gpu-mig-hpc-01`` (Slurm, GRES types ``1g.10gb`` …) and ``gpu-mig-shr-01``, whose instances
  both schedulers hand out (each instance belongs to one of them; one planted conflict per
  weekday puts both on one instance);
* time-slicing: ``gpu-ts-k8s-01``/``-02`` (A100 × 4, ``nvidia.com/gpu.replicas=4``);
* Slurm shards: ``gpu-shard-hpc-01``/``-02`` (A100 × 4, 8 shards per GPU).

H100 80GB MIG profiles (NVIDIA MIG user guide, "Supported MIG Profiles"): 1g.10gb (7 per GPU),
1g.20gb (4), 2g.20gb (3), 3g.40gb (2), 4g.40gb (1), 7g.80gb (1); 7 compute slices per GPU.
GPU instance ids follow nvidia-smi's numbering on an H100 (a full GPU is 0, 1g.10gb instances
7-13, as in dcgm-exporter issue #512; tests/fixtures/expositions).
"""

from dataclasses import dataclass

from simulator.rng import gpu_uuid
from simulator.world import Node

GPU_SLICES = 7  # compute slices of an H100 / A100
TS_REPLICAS = 4
SHARDS_PER_GPU = 8
MIG_CONFIG = "gpuledger-mixed"  # the nvidia.com/mig.config a mig-parted ConfigMap names

# (profile, GPU instance id) per physical GPU; the Slurm-only node has a 7g.80gb on GPU 7
_SEVEN_1G = tuple(("1g.10gb", 7 + k) for k in range(7))
_LAYOUT_K8S = (
    *(_SEVEN_1G,) * 4,
    (("3g.40gb", 1), ("3g.40gb", 2)),
    (("3g.40gb", 1), ("3g.40gb", 2)),
    (("4g.40gb", 1), ("2g.20gb", 5), ("1g.10gb", 13)),
    (("1g.20gb", 3), ("1g.20gb", 4), ("1g.20gb", 5), ("1g.20gb", 6)),
)
_LAYOUT_HPC = (*_LAYOUT_K8S[:7], (("7g.80gb", 0),))


def compute_slices(profile: str) -> int:
    return int(profile.split("g.", 1)[0])


@dataclass(frozen=True)
class MigInstance:
    gpu: int  # physical GPU index on the node
    gi_id: int  # GPU_I_ID
    profile: str
    slurm_idx: int  # the instance's index among the node's gpu GRES devices (scontrol IDX)
    owner: str  # the scheduler handing it out: slurm | kubernetes

    @property
    def slices(self) -> int:
        return compute_slices(self.profile)

    @property
    def k8s_resource(self) -> str:
        """The KSM resource name: nvidia.com/mig-1g.10gb -> nvidia_com_mig_1g_10gb."""
        return "nvidia_com_mig_" + self.profile.replace(".", "_")


@dataclass(frozen=True)
class SharedNode:
    node: Node
    sharing: str  # mig | time_slicing | shard
    instances: tuple[MigInstance, ...] = ()
    replicas: int = 0  # time-slicing replicas per GPU
    shards: int = 0  # Slurm shards per GPU

    @property
    def name(self) -> str:
        return self.node.name

    def profiles(self) -> dict[str, int]:
        """MIG profile -> instances on the node, in profile order."""
        out: dict[str, int] = {}
        for inst in sorted(self.instances, key=lambda i: (i.slices, i.profile)):
            out[inst.profile] = out.get(inst.profile, 0) + 1
        return out


@dataclass(frozen=True)
class SharingWorld:
    nodes: tuple[SharedNode, ...]

    def node(self, name: str) -> SharedNode:
        return next(n for n in self.nodes if n.name == name)


def _owner(pool: str, gpu: int, k: int, profile: str) -> str:
    """Who hands out an instance; on the shared node the instances of each GPU alternate."""
    if pool != "shared":
        return pool
    if profile == "4g.40gb":
        return "slurm"
    return "kubernetes" if k % 2 == 0 else "slurm"


def _mig_node(node: Node, layout: tuple[tuple[tuple[str, int], ...], ...]) -> SharedNode:
    pool = {"kubernetes": "kubernetes", "slurm": "slurm"}.get(node.pool, "shared")
    instances = []
    for gpu, parts in enumerate(layout):
        for k, (profile, gi_id) in enumerate(parts):
            instances.append(MigInstance(gpu, gi_id, profile, len(instances),
                                         _owner(pool, gpu, k, profile)))
    return SharedNode(node, "mig", tuple(instances))


def build_sharing(seed: int, first_number: int) -> SharingWorld:
    """The shared-GPU nodes; ``first_number`` continues the world's node numbering (addresses)."""
    specs = (
        ("gpu-mig-k8s-01", "kubernetes", "h100", 8, "", "mig"),
        ("gpu-mig-hpc-01", "slurm", "h100", 8, "mig", "mig"),
        ("gpu-mig-shr-01", "shared", "h100", 8, "mig", "mig"),
        ("gpu-ts-k8s-01", "kubernetes", "a100", 4, "", "time_slicing"),
        ("gpu-ts-k8s-02", "kubernetes", "a100", 4, "", "time_slicing"),
        ("gpu-shard-hpc-01", "slurm", "a100", 4, "shard", "shard"),
        ("gpu-shard-hpc-02", "slurm", "a100", 4, "shard", "shard"),
    )
    out = []
    for k, (name, pool, model, count, partition, sharing) in enumerate(specs):
        cpus, mem = (128, 1024) if model == "a100" else (96, 2048)
        uuids = tuple(gpu_uuid(seed, name, i) for i in range(count))
        node = Node(name, pool, first_number + k, model, count, uuids, partition, cpus, mem)
        if sharing == "mig":
            out.append(_mig_node(node, _LAYOUT_HPC if pool == "slurm" else _LAYOUT_K8S))
        elif sharing == "time_slicing":
            out.append(SharedNode(node, sharing, replicas=TS_REPLICAS))
        else:
            out.append(SharedNode(node, sharing, shards=SHARDS_PER_GPU))
    return SharingWorld(tuple(out))
