"""Ground truth: allocations, GPU-seconds per (UTC day, domain, identity), incidents.

Charging follows docs/contracts.md: GPUs x seconds held, clipped at UTC day bounds and at the
window; every requeued run is charged; the slurm-bridge representative job is not charged (its
pod is, in domain ``kubernetes``); both sides of a double-scheduled GPU are charged.
"""

import csv
from fractions import Fraction
from pathlib import Path

from simulator.identity import Resolver
from simulator.outputs import open_output
from simulator.records import Holder, Incident
from simulator.timefmt import day_of, days_in, iso_utc

ALLOCATION_COLUMNS = ("domain", "source_key", "name", "node", "gpus", "gpu_uuids", "start",
                      "end", "person", "team", "cost_centre", "outcome", "charged")
DAILY_COLUMNS = ("day", "domain", "person", "team", "cost_centre", "gpu_seconds")
# What a rate card prices: the daily figures split by GPU model and QOS (empty for pods).
PRICED_COLUMNS = ("day", "domain", "person", "team", "cost_centre", "gpu_model", "qos",
                  "gpu_seconds")
INCIDENT_COLUMNS = ("kind", "node", "gpu_uuids", "start", "end", "gpu_seconds", "slurm_job",
                    "k8s_workload", "detail")
# Double-schedulings no rule of docs/detectors.md can see: on a node whose dcgm-exporter has no
# pod labels (the pod's GPUs are unknown) while the node never holds more GPUs than it has.
UNDETECTABLE_COLUMNS = (*INCIDENT_COLUMNS, "why")
UNDETECTABLE_FILE = "undetectable_incidents.csv"
# --shared-gpus (docs/shared-gpus.md, "The charging rule"): the physical share per identity
PHYSICAL_COLUMNS = ("day", "domain", "person", "team", "cost_centre", "physical_gpu_seconds")
PHYSICAL_FILE = "physical_gpu_seconds_daily.csv"
# the node-level rule drops overcommits no longer than the scrape tolerance (one interval)
NODE_LEVEL_TOLERANCE = 60


def milli_text(value: Fraction) -> str:
    """Seconds to the millisecond (half to even), as DECIMAL(…, 3) prints them."""
    q, r = divmod(round(value * 1000), 1000)
    return f"{q}.{r:03d}"


class TruthWriter:
    def __init__(self, truth_dir: Path, resolver: Resolver, w0: int, w1: int,
                 gzip_allocations: bool, unlabelled: frozenset[str] = frozenset()) -> None:
        self.dir = truth_dir
        # nodes whose exporter has no pod labels: their charged holders, to tell which
        # double-schedulings there the node-level rule can see (None: no such node)
        self.unlabelled = unlabelled
        self.on_unlabelled: dict[str, list[tuple[int, int, int]]] = {n: [] for n in unlabelled}
        self.capacity: dict[str, int] = {}
        self.resolver = resolver
        self.w0, self.w1 = w0, w1
        name = "allocations.csv.gz" if gzip_allocations else "allocations.csv"
        self.allocations_path = truth_dir / name
        self._alloc = open_output(self.allocations_path, gzip_allocations)
        self._alloc_csv = csv.writer(self._alloc, lineterminator="\n")
        self._alloc_csv.writerow(ALLOCATION_COLUMNS)
        self.daily: dict[tuple[str, str, str, str, str], int] = {}
        self.priced: dict[tuple[str, ...], int] = {}
        self.incidents: list[Incident] = []
        self.gpu_seconds_by_domain: dict[str, int] = {"slurm": 0, "kubernetes": 0}
        self.allocation_rows = 0
        # --shared-gpus: physical GPU-seconds per (day, domain, identity), exact; None: off
        self.physical: dict[tuple[str, str, str, str, str], Fraction] | None = None

    def add_holder(self, h: Holder) -> None:
        if h.start >= self.w1 or h.end <= self.w0 or h.end <= h.start:
            return
        first_day = day_of(max(h.start, self.w0))
        person, team, cc = self.resolver.resolve(h.owner, first_day)
        self._alloc_csv.writerow((
            h.domain, h.source_key, h.name, h.node.name, h.gpus, ";".join(h.gpu_uuids),
            iso_utc(h.start), iso_utc(min(h.end, self.w1)), person, team, cc, h.outcome,
            "true" if h.charged else "false",
        ))
        self.allocation_rows += 1
        if not h.charged:
            return
        if h.node.name in self.on_unlabelled:
            self.on_unlabelled[h.node.name].append((h.start, h.end, h.gpus))
            self.capacity[h.node.name] = h.node.gpu_count
        for day, lo, hi in days_in(max(h.start, self.w0), min(h.end, self.w1)):
            person, team, cc = self.resolver.resolve(h.owner, day)
            key = (day.isoformat(), h.domain, person, team, cc)
            seconds = h.gpus * (hi - lo)
            self.daily[key] = self.daily.get(key, 0) + seconds
            priced = (*key, h.gpu_model or h.node.gpu_model, h.qos)
            self.priced[priced] = self.priced.get(priced, 0) + seconds
            self.gpu_seconds_by_domain[h.domain] += seconds
            if self.physical is not None and not h.units:  # a whole GPU is all physical
                self.physical[key] = self.physical.get(key, Fraction(0)) + seconds

    def add_physical(self, h: Holder, segments: tuple[tuple[int, int, Fraction], ...]) -> None:
        """A shared holder's physical share, ``[lo, hi)`` at a share each, per UTC day."""
        if self.physical is None or not h.charged:
            return
        for lo, hi, share in segments:
            for day, a, b in days_in(max(lo, self.w0), min(hi, self.w1)):
                person, team, cc = self.resolver.resolve(h.owner, day)
                key = (day.isoformat(), h.domain, person, team, cc)
                self.physical[key] = self.physical.get(key, Fraction(0)) + share * (b - a)

    def add_incident(self, incident: Incident) -> None:
        start, end = max(incident.start, self.w0), min(incident.end, self.w1)
        if end <= start:
            return
        self.incidents.append(incident)

    def _overcommitted_seconds(self, node: str, start: int, end: int) -> int:
        """Seconds of [start, end) in which the node's holders hold more GPUs than it has."""
        events: dict[int, int] = {}
        for s, e, gpus in self.on_unlabelled[node]:
            if s < end and e > start:
                events[max(s, start)] = events.get(max(s, start), 0) + gpus
                events[min(e, end)] = events.get(min(e, end), 0) - gpus
        held, over, last = 0, 0, start
        for t in sorted(events):
            if held > self.capacity.get(node, 0):
                over += t - last
            held, last = held + events[t], t
        return over

    def undetectable(self) -> list[Incident]:
        return [i for i in self.incidents
                if i.kind == "double_scheduled" and i.node in self.unlabelled
                and self._overcommitted_seconds(i.node, i.start, i.end) <= NODE_LEVEL_TOLERANCE]

    def close(self) -> dict[str, int]:
        self._alloc.close()
        hidden = self.undetectable()
        if self.unlabelled:
            with open_output(self.dir / UNDETECTABLE_FILE, compress=False) as fh:
                out = csv.writer(fh, lineterminator="\n")
                out.writerow(UNDETECTABLE_COLUMNS)
                for inc in sorted(hidden, key=lambda i: (i.kind, i.start, i.node)):
                    out.writerow((inc.kind, inc.node, ";".join(inc.gpu_uuids), iso_utc(inc.start),
                                  iso_utc(inc.end), inc.gpu_seconds, inc.slurm_job,
                                  inc.k8s_workload, inc.detail,
                                  "the node's dcgm-exporter has no pod labels (the pod's GPUs are "
                                  "unknown) and the node never held more GPUs than it has"))
        self.incidents = [i for i in self.incidents if i not in hidden]
        with open_output(self.dir / "gpu_seconds_daily.csv", compress=False) as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(DAILY_COLUMNS)
            for key in sorted(self.daily):
                out.writerow((*key, self.daily[key]))
        with open_output(self.dir / "gpu_seconds_priced.csv", compress=False) as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(PRICED_COLUMNS)
            for key in sorted(self.priced):
                out.writerow((*key, self.priced[key]))
        if self.physical is not None:
            with open_output(self.dir / PHYSICAL_FILE, compress=False) as fh:
                out = csv.writer(fh, lineterminator="\n")
                out.writerow(PHYSICAL_COLUMNS)
                for key in sorted(self.physical):
                    out.writerow((*key, milli_text(self.physical[key])))
        with open_output(self.dir / "incidents.csv", compress=False) as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(INCIDENT_COLUMNS)
            for inc in sorted(self.incidents, key=lambda i: (i.kind, i.start, i.node)):
                out.writerow((inc.kind, inc.node, ";".join(inc.gpu_uuids), iso_utc(inc.start),
                              iso_utc(inc.end), inc.gpu_seconds, inc.slurm_job,
                              inc.k8s_workload, inc.detail))
        counts: dict[str, int] = {}
        for inc in self.incidents:
            counts[inc.kind] = counts.get(inc.kind, 0) + 1
        return counts


class DoubleScheduleDetector:
    """Finds GPUs on shared nodes held by both schedulers at once, as holders are generated.

    Holders arrive in submit order and start at or after their arrival, so a holder that ended
    before the current arrival can never overlap a later one: the lists stay short.
    """

    def __init__(self, w0: int, w1: int) -> None:
        self.w0, self.w1 = w0, w1
        self.recent: dict[tuple[str, str], list[Holder]] = {}

    def add(self, h: Holder, now: int) -> list[Incident]:
        if h.node.pool != "shared" or not h.charged:
            return []
        other_view = "kubernetes" if h.view == "slurm" else "slurm"
        found = []
        others = self.recent.get((h.node.name, other_view), [])
        others[:] = [o for o in others if o.end > now]
        for o in others:
            start, end = max(h.start, o.start, self.w0), min(h.end, o.end, self.w1)
            common = sorted(set(h.gpu_indices) & set(o.gpu_indices))
            if end <= start or not common:
                continue
            slurm_h, k8s_h = (h, o) if h.view == "slurm" else (o, h)
            namespace = k8s_h.source_key.split("/", 1)[0]
            found.append(Incident(
                kind="double_scheduled", node=h.node.name,
                gpu_uuids=tuple(h.node.gpu_uuids[i] for i in common), start=start, end=end,
                gpu_seconds=len(common) * (end - start), slurm_job=slurm_h.source_key,
                k8s_workload=f"{namespace}/{k8s_h.name}",
                detail=f"Slurm job {slurm_h.source_key} and pod {k8s_h.source_key} held "
                       f"GPU index {','.join(str(i) for i in common)} at the same time",
            ))
        mine = self.recent.setdefault((h.node.name, h.view), [])
        mine[:] = [o for o in mine if o.end > now]
        mine.append(h)
        return found
