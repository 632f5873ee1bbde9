"""The Slurm job mix: which kinds of jobs arrive, with what shape, names and durations.

Every kind the connectors must survive appears early in each world (``COVERAGE``), then kinds
are drawn at random with ``RANDOM_KINDS`` weights.
"""

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from simulator.arrivals import log_uniform
from simulator.autodetect import GresNames
from simulator.config import HOUR, MINUTE
from simulator.rng import stream
from simulator.slurm_rows import Shape
from simulator.world import SLURM_USERS, SlurmUser, World

COVERAGE = (
    "pipe_name", "multinode", "array", "het", "pipeline", "requeue", "fail_exit",
    "fail_signal", "timeout", "node_fail", "cancel_running", "cancel_pending", "unicode_name",
    "quote_name", "gpumem", "multipipe_name", "untyped", "gpu_long",
)
RANDOM_KINDS = (
    ("plain", 46), ("untyped", 8), ("multinode", 8), ("array", 6), ("het", 2), ("pipeline", 3),
    ("requeue", 2), ("fail_exit", 4), ("fail_signal", 1), ("timeout", 4), ("node_fail", 1),
    ("cancel_running", 4), ("cancel_pending", 3), ("gpumem", 3), ("gpu_long", 2),
)
SPECIAL_NAMES = {
    "pipe_name": "train|resnet50",
    "multipipe_name": "sweep|lr=3e-4|bs=64",
    "unicode_name": "モデル学習-ü-🚀",
    # the accounting DB stores double quotes as backticks (slurm-lab.md)
    "quote_name": 'eval, "v2" run'.replace('"', "`"),
}
NAMES_BY_ACCOUNT = {
    "physics": ("lattice-qcd", "md-sim", "cfd-run", "nbody"),
    "ml-research": ("train-resnet50", "llm-pretrain", "finetune", "eval-sweep", "diffusion"),
    "ops": ("ops-burn-in", "gpu-healthcheck", "nccl-test"),
}
PROGRAMS = ("python", "torchrun", "pw.x", "lmp", "all_reduce_perf")


@dataclass(frozen=True)
class JobSpec:
    kind: str
    submit: int
    user: SlurmUser
    account: str
    partition: str
    qos: str
    name: str
    shape: Shape
    nodes: int
    duration: int
    timelimit_min: int
    wckey: str


class JobMix:
    """Draws job specs for the Slurm partitions of one world."""

    def __init__(self, world: World) -> None:
        self.seed = world.config.seed
        self.hpc = [n for n in world.nodes if n.pool == "slurm"]
        self.shared = [n for n in world.nodes if n.pool == "shared"]
        self.by_model = {m: [n for n in self.hpc if n.gpu_model == m] for m in ("a100", "h100")}
        self.models = tuple(m for m in ("a100", "h100") if self.by_model[m])
        self.gres = GresNames(world.config.autodetect_gpu_types)

    def kinds(self) -> Iterator[str]:
        names = [k for k, _ in RANDOM_KINDS]
        weights = [w for _, w in RANDOM_KINDS]
        rng = stream(self.seed, "slurm-kinds")
        while True:
            yield rng.choices(names, weights)[0]

    def mean_gpu_seconds(self) -> float:
        """Mean GPU-seconds of a random job, estimated once from a private stream."""
        rng = stream(self.seed, "slurm-calibration")
        total = 0.0
        samples = 3000
        names = [k for k, _ in RANDOM_KINDS]
        weights = [w for _, w in RANDOM_KINDS]
        for _ in range(samples):
            spec = self.sample(rng.choices(names, weights)[0], 0, rng)
            factor = 4.0 if spec.kind == "array" else 1.0
            total += spec.shape.gpus_per_node * spec.nodes * spec.duration * factor
        return total / samples

    def user_and_account(self, rng: random.Random, account: str = "") -> tuple[SlurmUser, str]:
        if account:
            users = [u for u in SLURM_USERS if account in u.accounts]
            return rng.choice(users), account
        user = rng.choices(SLURM_USERS, (5, 5, 2, 3, 3, 1))[0]
        if len(user.accounts) > 1 and rng.random() < 0.35:
            return user, user.accounts[1]
        return user, user.accounts[0]

    def sample(self, kind: str, submit: int, rng: random.Random) -> JobSpec:
        user, account = self.user_and_account(rng)
        partition = "gpu"
        model = self.models[0]
        if len(self.models) > 1 and rng.random() < 0.3:
            model = "h100"
        if kind == "shared":
            partition, model = "shared", "a100"
        nodes_of_model = self.shared if partition == "shared" else self.by_model[model]
        node_gpus = min(n.gpu_count for n in nodes_of_model)
        per_node = min(node_gpus, rng.choices((1, 2, 4, 8), (3, 3, 2, 1.5))[0])
        nodes = 1
        if kind == "multinode" and len(nodes_of_model) >= 2:
            nodes = rng.randint(2, min(4, len(nodes_of_model)))
            per_node = node_gpus if rng.random() < 0.6 else max(1, node_gpus // 2)
        cpus_per_gpu = rng.choice((4, 8, 16))
        node = nodes_of_model[0]
        cpus_per_gpu = min(cpus_per_gpu, node.cpus // node.gpu_count)
        mem_gb_per_gpu = rng.choice((32, 64, 96))
        typed = kind != "untyped" and rng.random() < 0.85
        extra: tuple[tuple[str, int], ...] = ()
        if kind == "gpumem":
            extra = (("gres/gpumem", 81920 * per_node), ("gres/gpuutil", 100 * per_node))
        shape = Shape(cpus_per_gpu * per_node, mem_gb_per_gpu * 1024 * per_node, per_node, model,
                      typed, extra, self.gres.whole_override(model))
        if partition == "shared":
            duration = log_uniform(rng, 20 * MINUTE, 8 * HOUR)
        elif kind == "gpu_long":
            duration = rng.randint(26 * HOUR, 40 * HOUR)
        else:
            duration = log_uniform(rng, 20 * MINUTE, 16 * HOUR)
        limit = max(5, math.ceil(duration * rng.uniform(1.2, 2.0) / MINUTE))
        if kind == "timeout":
            limit = max(5, math.ceil(duration / MINUTE))
        qos = "normal"
        if kind == "gpu_long":
            qos = "gpu-long"
        elif model == "h100" and account == "ml-research" and rng.random() < 0.5:
            qos = "high"
        name = SPECIAL_NAMES.get(kind) or rng.choice(NAMES_BY_ACCOUNT.get(account, ("job",)))
        wckey = "lattice" if account == "physics" and rng.random() < 0.2 else ""
        return JobSpec(kind, submit, user, account, partition, qos, name, shape, nodes,
                       duration, limit, wckey)
