"""sreport's GPU reports for the window, as Slurm's hourly rollup would have them.

* ``sreport -P -t seconds -T gres/gpu cluster utilization start=... end=...``
* ``sreport -P -t seconds -T gres/gpu cluster AccountUtilizationByUser start=... end=...``

Allocated = GPU-seconds of every Slurm allocation clipped to the window (slurm-bridge
representative jobs included). Down = shared nodes' GPU-seconds while they are drained for
Kubernetes, minus time Slurm jobs still held GPUs there (allocation wins in the rollup).
Reported = Slurm GPUs x window length; Idle = the rest. Banner and header text as Slurm 22.05
prints them (sreport runs with ``TZ=UTC``).
"""

import itertools
from pathlib import Path

from simulator.outputs import open_output
from simulator.records import Holder
from simulator.scheduling import handovers, shared_owner
from simulator.timefmt import iso_utc
from simulator.world import (
    ACCOUNT_PARENTS,
    BRIDGE_USER,
    ROOT_USER,
    SLURM_USERS,
    Node,
)

RULE = "-" * 80


def k8s_periods(w0: int, w1: int) -> list[tuple[int, int]]:
    """The periods in ``[w0, w1)`` in which Kubernetes owns the shared nodes."""
    edges = [w0, *(t for t, _ in handovers(w0, w1)), w1]
    return [(a, b) for a, b in itertools.pairwise(edges)
            if b > a and shared_owner(a) == "kubernetes"]


class SreportAccumulator:
    def __init__(self, w0: int, w1: int) -> None:
        self.w0, self.w1 = w0, w1
        self.by_assoc: dict[tuple[str, str], int] = {}
        self.allocated = 0
        self.alloc_in_k8s_time = 0
        self._k8s_periods = k8s_periods(w0, w1)

    def add(self, h: Holder) -> None:
        if h.domain != "slurm":
            return
        start, end = max(h.start, self.w0), min(h.end, self.w1)
        if end <= start:
            return
        seconds = h.gpus * (end - start)
        self.allocated += seconds
        key = (h.account, h.user)
        self.by_assoc[key] = self.by_assoc.get(key, 0) + seconds
        if h.node.pool == "shared":
            for a, b in self._k8s_periods:
                overlap = min(end, b) - max(start, a)
                if overlap > 0:
                    self.alloc_in_k8s_time += h.gpus * overlap

    def write(self, out_dir: Path, cluster: str, nodes: tuple[Node, ...]) -> dict[str, int]:
        w0, w1 = self.w0, self.w1
        span = w1 - w0
        slurm_gpus = sum(n.gpu_count for n in nodes if n.in_slurm)
        shared_gpus = sum(n.gpu_count for n in nodes if n.pool == "shared")
        drained = shared_gpus * sum(b - a for a, b in self._k8s_periods)
        down = max(0, drained - self.alloc_in_k8s_time)
        reported = slurm_gpus * span
        idle = reported - self.allocated - down
        banner_times = f"{iso_utc(w0)} - {iso_utc(w1 - 1)}"
        with open_output(out_dir / "cluster-utilization.txt", compress=False) as fh:
            fh.write(f"{RULE}\nCluster Utilization {banner_times}\n"
                     f"Usage reported in TRES Seconds\n{RULE}\n")
            fh.write("Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported\n")
            fh.write(f"{cluster}|gres/gpu|{self.allocated}|{down}|0|{idle}|0|{reported}\n")
        with open_output(out_dir / "account-utilization-by-user.txt", compress=False) as fh:
            fh.write(f"{RULE}\nCluster/Account/User Utilization {banner_times} ({span} secs)\n"
                     f"Usage reported in TRES Seconds\n{RULE}\n")
            fh.write("Cluster|Account|Login|Proper Name|TRES Name|Used\n")
            for account, login, proper, used in self._tree_rows():
                fh.write(f"{cluster}|{account}|{login}|{proper}|gres/gpu|{used}\n")
        return {"allocated": self.allocated, "down": down, "idle": idle, "reported": reported}

    def _tree_rows(self) -> list[tuple[str, str, str, int]]:
        """root, then each account's users before its sub-accounts, names in order (the
        hierarchical order sreport prints). Associations without usage are not printed (the
        real report has no ``root|root`` row)."""
        users_by_account: dict[str, list[tuple[str, str]]] = {"root": [(ROOT_USER.name,
                                                                         ROOT_USER.proper_name)]}
        for user in (*SLURM_USERS, BRIDGE_USER):
            for account in user.accounts:
                users_by_account.setdefault(account, []).append((user.name, user.proper_name))
        children: dict[str, list[str]] = {"root": []}
        for account, parent in ACCOUNT_PARENTS.items():
            children.setdefault(parent or "root", []).append(account)

        def subtree_total(account: str) -> int:
            total = sum(self.by_assoc.get((account, u), 0)
                        for u, _ in users_by_account.get(account, []))
            return total + sum(subtree_total(c) for c in children.get(account, []))

        rows: list[tuple[str, str, str, int]] = []

        def visit(account: str) -> None:
            total = subtree_total(account)
            if not total and account != "root":
                return
            rows.append((account, "", "", total))
            for login, proper in sorted(users_by_account.get(account, [])):
                used = self.by_assoc.get((account, login), 0)
                if used:
                    rows.append((account, login, proper, used))
            for child in sorted(children.get(account, [])):
                visit(child)

        visit("root")
        return rows
