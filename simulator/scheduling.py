"""Placement on GPUs with one free-time array per scheduler ("view").

Each view remembers, per GPU, when it is free again. Jobs are placed in submit order at the
earliest time their GPUs are free, so a view never overlaps itself. Shared nodes belong to
Kubernetes on weekdays 08-20 UTC and to Slurm otherwise; each scheduler keeps its own view, so
only planted mistakes put both schedulers on the same GPU at the same time.
"""

import random
from dataclasses import dataclass

from simulator.config import DAY, HOUR
from simulator.world import Node

K8S_DAY_START = 8 * HOUR
K8S_DAY_END = 20 * HOUR
SAMPLE_NODES = 24  # large pools are searched on a random sample of this many nodes
MAX_WAIT = 3 * DAY  # a job that cannot start within this is given up by its user


class NoPlacement(RuntimeError):
    """No node can start the request within ``MAX_WAIT``."""


def shared_owner(ts: int) -> str:
    """Who owns the shared nodes at ``ts``: ``kubernetes`` (weekdays 08-20 UTC) or ``slurm``."""
    day = ts - ts % DAY
    weekday = ((day // DAY) + 3) % 7  # 1970-01-01 was a Thursday
    if weekday < 5 and K8S_DAY_START <= ts - day < K8S_DAY_END:
        return "kubernetes"
    return "slurm"


def _next_boundary(ts: int) -> int:
    day = ts - ts % DAY
    for edge in (day + K8S_DAY_START, day + K8S_DAY_END, day + DAY + K8S_DAY_START):
        if edge > ts:
            return edge
    return day + DAY + K8S_DAY_START  # unreachable, keeps the type checker calm


def window_end(ts: int) -> int:
    """The end of the ownership period that contains ``ts``."""
    owner = shared_owner(ts)
    edge = _next_boundary(ts)
    while shared_owner(edge) == owner:
        edge = _next_boundary(edge)
    return edge


def handovers(start: int, end: int) -> list[tuple[int, str]]:
    """Every change of owner in ``(start, end)``: (time, new owner)."""
    out = []
    t = start
    while True:
        t = window_end(t)
        if t >= end:
            return out
        out.append((t, shared_owner(t)))


def fit_in_window(t: int, duration: int, owner: str) -> int | None:
    """Earliest start >= t such that ``[start, start+duration)`` lies in one period of ``owner``."""
    s = t
    for _ in range(40):
        if shared_owner(s) != owner:
            s = window_end(s)
            continue
        stop = window_end(s)
        if s + duration <= stop:
            return s
        s = stop
    return None


@dataclass(frozen=True)
class Placement:
    node: Node
    gpu_indices: tuple[int, ...]


class View:
    """One scheduler's belief of when each GPU is free again."""

    def __init__(self, name: str, nodes: list[Node],
                 reservations: dict[str, list[tuple[int, int]]] | None = None) -> None:
        self.name = name
        self.free_at: dict[str, list[int]] = {n.name: [0] * n.gpu_count for n in nodes}
        # node -> [start, end) periods kept free of ordinary work for planted scenarios
        self.reservations = reservations or {}

    def ready_time(self, node: Node, gpus: int) -> int:
        """Earliest time ``gpus`` GPUs of ``node`` are free."""
        return sorted(self.free_at[node.name])[gpus - 1]

    def pick(self, node: Node, gpus: int, start: int) -> tuple[int, ...]:
        """The lowest-numbered ``gpus`` GPUs free at ``start`` (CUDA device order)."""
        free = [i for i, t in enumerate(self.free_at[node.name]) if t <= start]
        if len(free) < gpus:
            msg = f"expected {gpus} free GPUs on {node.name} at {start}, found {len(free)}"
            raise RuntimeError(msg)
        return tuple(free[:gpus])

    def commit(self, node: Node, indices: tuple[int, ...], until: int) -> None:
        row = self.free_at[node.name]
        for i in indices:
            row[i] = max(row[i], until)

    def block(self, node: Node, indices: tuple[int, ...], until: int) -> None:
        """Keep GPUs away from this view until ``until`` (used around planted mistakes)."""
        self.commit(node, indices, until)


def _avoid_reservations(view: View, node: Node, t: int, duration: int, owner: str) -> int | None:
    """Push ``t`` past reserved periods (and into an ownership window on shared nodes)."""
    periods = view.reservations.get(node.name, ())
    for _ in range(50):
        moved = False
        for start, end in periods:
            if t < end and t + duration > start:
                t, moved = end, True
        if node.pool == "shared" and owner:
            fitted = fit_in_window(t, duration, owner)
            if fitted is None:
                return None
            moved = moved or fitted != t
            t = fitted
        if not moved:
            return t
    return None


def candidates(nodes: list[Node], rng: random.Random) -> list[Node]:
    """All nodes of a small pool; a random run of ``SAMPLE_NODES`` nodes of a large one."""
    if len(nodes) <= SAMPLE_NODES:
        return nodes
    first = rng.randrange(len(nodes))
    picked = nodes[first:first + SAMPLE_NODES]
    return picked + nodes[:SAMPLE_NODES - len(picked)]


def place(view: View, nodes: list[Node], gpus_per_node: int, n_nodes: int, earliest: int,
          rng: random.Random, duration: int = 0, owner: str = "") -> tuple[int, list[Placement]]:
    """Earliest start for ``n_nodes`` x ``gpus_per_node`` GPUs on distinct nodes.

    On shared nodes the whole ``[start, start+duration)`` must fall into one period of ``owner``.
    Nodes that could only start it after ``MAX_WAIT`` are skipped (a GPU promised that far
    ahead would sit idle until then); ``NoPlacement`` when too few nodes remain.
    """
    options: list[tuple[int, int, Node]] = []
    for order, node in enumerate(candidates(nodes, rng)):
        if node.gpu_count < gpus_per_node:
            continue
        t = max(earliest, view.ready_time(node, gpus_per_node))
        if node.pool == "shared":
            fitted = _avoid_reservations(view, node, t, duration, owner)
            if fitted is None:
                continue
            t = fitted
        if t - earliest > MAX_WAIT:
            continue
        options.append((t, order, node))
    if len(options) < n_nodes:
        msg = (f"expected {n_nodes} node(s) with {gpus_per_node} GPUs free within "
               f"{MAX_WAIT // DAY} days in view {view.name}, found {len(options)}")
        raise NoPlacement(msg)
    options.sort(key=lambda o: (o[0], o[1]))
    chosen = options[:n_nodes]
    start = max(t for t, _, _ in chosen)
    placements = [Placement(node, view.pick(node, gpus_per_node, start))
                  for _, _, node in sorted(chosen, key=lambda o: o[2].name)]
    return start, placements
