"""The identity rule of docs/contracts.md, applied per charged UTC day.

Each attribute (person, team, cost centre) comes from the first candidate row, in precedence
order, that gives it; none gives it -> ``unattributed``.
"""

from dataclasses import dataclass
from datetime import date

from simulator.world import ACCOUNT_PARENTS, IdentityRow

UNATTRIBUTED = "unattributed"


@dataclass(frozen=True)
class SlurmOwner:
    user: str
    account: str

    def candidates(self) -> list[tuple[str, str]]:
        out = [("slurm_user", self.user), ("slurm_account", self.account)]
        parent = ACCOUNT_PARENTS.get(self.account, "")
        while parent:
            out.append(("slurm_account", parent))
            parent = ACCOUNT_PARENTS.get(parent, "")
        return out


@dataclass(frozen=True)
class PodOwner:
    namespace: str
    service_account: str
    labels: tuple[tuple[str, str], ...]  # kube-state-metrics label names without ``label_``
    local_queue: str  # "" when the pod is not managed by Kueue
    cluster_queue: str

    def candidates(self) -> list[tuple[str, str]]:
        out = [("pod_label", f"{k}={v}") for k, v in sorted(self.labels)]
        out.append(("k8s_service_account", f"{self.namespace}/{self.service_account}"))
        out.append(("k8s_namespace", self.namespace))
        if self.local_queue:
            out.append(("kueue_queue", f"{self.namespace}/{self.local_queue}"))
        if self.cluster_queue:
            out.append(("kueue_queue", self.cluster_queue))
        return out


Owner = SlurmOwner | PodOwner
Identity = tuple[str, str, str]  # person, team, cost_centre


class Resolver:
    """Resolves owners to (person, team, cost_centre) for a day; small cache by (owner, day)."""

    def __init__(self, rows: tuple[IdentityRow, ...]) -> None:
        self._rows: dict[tuple[str, str], list[IdentityRow]] = {}
        for row in rows:
            self._rows.setdefault((row.source_kind, row.key), []).append(row)
        self._cache: dict[tuple[Owner, date], Identity] = {}

    def resolve(self, owner: Owner, day: date) -> Identity:
        key = (owner, day)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        found = ["", "", ""]
        for candidate in owner.candidates():
            for row in self._rows.get(candidate, ()):
                if not row.applies(day):
                    continue
                for i, value in enumerate((row.person, row.team, row.cost_centre)):
                    if value and not found[i]:
                        found[i] = value
        result = (found[0] or UNATTRIBUTED, found[1] or UNATTRIBUTED, found[2] or UNATTRIBUTED)
        if len(self._cache) > 50_000:  # keep memory flat in year-long worlds
            self._cache.clear()
        self._cache[key] = result
        return result
