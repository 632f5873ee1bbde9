"""``kueue/snapshots/workloads-YYYYmmddTHHMMSSZ.json``: the Workloads as the Kubernetes API lists
them at each snapshot time (``--kueue-snapshot-every``), the way a sensor polling
``kubectl get workloads -A -o json`` keeps them. A Workload deleted before a snapshot (its Job
garbage-collected, ``realistic.workload_deleted``) is absent from it and from every later one.
The names carry their UTC time (``connectors/kubernetes/kube_api.snapshot_files``)."""

from datetime import UTC, datetime
from pathlib import Path

from simulator.k8s_model import WorkloadPlan
from simulator.kueue_json import WorkloadWriter

SNAPSHOT_DIR = "kueue/snapshots"
SNAPSHOT_GLOB = f"{SNAPSHOT_DIR}/workloads-*.json"


def snapshot_name(ts: int) -> str:
    return f"workloads-{datetime.fromtimestamp(ts, UTC).strftime('%Y%m%dT%H%M%SZ')}.json"


class KueueSnapshots:
    """Keeps every Kueue-managed plan, writes the snapshots at the end."""

    def __init__(self, out_dir: Path, tmp: Path, w0: int, w1: int, every: int) -> None:
        self.dir = out_dir / SNAPSHOT_DIR
        self.tmp = tmp
        self.times = list(range(w0 + every, w1, every)) if every else []
        self.plans: list[WorkloadPlan] = []
        self.files = 0

    def add(self, plan: WorkloadPlan) -> None:
        if not (self.times and plan.managed_by_kueue and plan.created < self.times[-1]):
            return
        if plan.deleted is None or plan.deleted > self.times[0]:
            self.plans.append(plan)

    def close(self) -> None:
        if not self.times:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        for ts in self.times:
            writer = WorkloadWriter(self.dir / snapshot_name(ts), self.tmp)
            for plan in self.plans:
                if plan.created <= ts and (plan.deleted is None or plan.deleted > ts):
                    writer.add(plan, ts)
            writer.close()
            self.files += 1
