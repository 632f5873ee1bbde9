"""The OpenMetrics backfill file (dcgm-exporter, kube-state-metrics, Kueue) and the per-GPU busy
truth, written by one time-ordered sweep over the scrape grid.

The sweep runs behind the generator: a scrape at ``t`` is written only once every arrival
before ``t`` has been generated (all of an arrival's events happen at or after it), so only the
holders, pods and events alive around ``t`` are kept in memory.

Each metric family is written to its own part file and the parts are joined at the end (an
OpenMetrics family must be contiguous); series are time-ordered, interleaved between series.
Timestamps are seconds, counters are declared without ``_total``, the file ends with ``# EOF``.
"""

import heapq
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from simulator.config import DAY
from simulator.dra import CLAIM_INFO, claim_info_lines
from simulator.ksm_jobs import KsmJobs, with_job_label
from simulator.metric_families import families
from simulator.outputs import open_output
from simulator.pod_shapes import init_container_lines
from simulator.records import Holder, KueueEvent, PodRecord
from simulator.scheduling import shared_owner
from simulator.scrape_shapes import ScrapeShapes
from simulator.sharing_metrics import EXTRA_FAMILIES, SharingMetrics
from simulator.timefmt import day_of
from simulator.utilization import busy_milli, gpu_util_percent
from simulator.world import COHORT, ClusterQueue, Node

KUEUE_BUCKETS = (1.0, *(2.5 * 2**i for i in range(13)))  # 1, 2.5, 5, ... 10240
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def scrape_offsets(step: int) -> tuple[int, int]:
    """Seconds after the dcgm-exporter scrape at which kube-state-metrics and Kueue are
    scraped (different targets are scraped at different moments of each interval)."""
    return min(10, step // 3), min(20, 2 * step // 3)


FLUSH_STEPS, FLUSH_LINES = 96, 150_000  # buffered scrapes per write (bounds memory)

@dataclass(frozen=True)
class Irregularities:
    """Deliberate faults of the default world (all recorded in world.json)."""

    exporter_outages: tuple[tuple[str, int, int], ...] = ()  # node, [start, end)
    kueue_restart: tuple[int, int] | None = None  # controller down [start, end)
    label_drift_nodes: tuple[str, ...] = ()
    label_drift_from: int | None = None
    exported_everywhere: bool = False  # --dcgm-label-style exported
    late_cordons: tuple[tuple[str, int, int], ...] = ()  # node, planned, actual
    ksm_clock_skew: int = 0  # --realistic: the API server's clock ahead of Slurm's (seconds)


HISTOGRAMS = frozenset({"kueue_admission_wait_time_seconds"})


def _series_key(line: str) -> str:
    return line[:line.rindex("}") + 1]


def _histogram_key(line: str) -> str:
    """The histogram's labels without ``le``: one MetricPoint's lines stay together."""
    start = line.index('cluster_queue="')
    return line[start:line.index('"', start + 15)]


def _fmt_ratio(milli: int) -> str:
    if milli <= 0:
        return "0"
    if milli >= 1000:
        return "1"
    return f"0.{milli:03d}"


def _le(bound: float) -> str:
    return repr(float(bound))


@dataclass
class _ActivePod:
    pod: PodRecord
    base: str  # namespace, pod, uid labels
    phase: str = ""


@dataclass
class _KueueState:
    pending: dict[tuple[str, str], int] = field(default_factory=dict)
    active: dict[str, int] = field(default_factory=dict)
    usage: dict[tuple[str, str], int] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    evicted: dict[tuple[str, str], int] = field(default_factory=dict)
    hist: dict[str, list[int]] = field(default_factory=dict)  # buckets..., count
    hist_sum: dict[str, float] = field(default_factory=dict)


class MetricsSweep:
    def __init__(self, *, nodes: tuple[Node, ...], cluster_queues: tuple[ClusterQueue, ...],
                 w0: int, w1: int, step: int, out_path: Path, tmp_dir: Path, gzip: bool,
                 busy_path: Path, irregular: Irregularities, seed: int,
                 shapes: ScrapeShapes | None = None, init_containers: bool = False,
                 jobs: bool = False, sharing: "SharingMetrics | None" = None,
                 agents: dict[str, tuple[tuple[str, str], ...]] | None = None,
                 dra: bool = False) -> None:
        self.nodes = nodes
        # Kubernetes nodes, with the Slinky ones (--slinky-nodes): their slurmd pods' labels
        self.k8s_nodes = [n for n in nodes if n.in_kubernetes or n.slinky]
        self._agents = agents or {}
        self.cluster_queues = cluster_queues
        self.w0, self.w1, self.step = w0, w1, step
        self.ksm_offset, self.kueue_offset = scrape_offsets(step)
        self.out_path, self.tmp_dir, self.gzip = out_path, tmp_dir, gzip
        self.irregular = irregular
        self.shapes = shapes = shapes or ScrapeShapes()
        self.seed = seed
        self.families = families(shapes, init_containers, jobs, dra)
        self.sharing = sharing
        if sharing is not None:  # --shared-gpus: node allocatable and GFD labels
            at = [name for name, _, _ in self.families].index("kube_node_status_capacity") + 1
            self.families[at:at] = EXTRA_FAMILIES
        self.jobs = KsmJobs(shapes._workload("namespace")) if jobs else None
        self.util_family = shapes.naming.util
        self.ratio_family = shapes.naming.ratio
        self.ksm_target, self.kueue_target = shapes.ksm_target, shapes.kueue_target
        self.k = 0  # next scrape index
        self.seq = 0
        self.holder_heap: list[tuple[int, int, Holder]] = []
        self.pod_heap: list[tuple[int, int, PodRecord]] = []
        self.event_heap: list[tuple[int, int, KueueEvent]] = []
        self.active: dict[str, list[Holder]] = {n.name: [] for n in nodes}
        self.pods: list[_ActivePod] = []
        self.kueue = _KueueState()
        self.restarted = False
        self.parts: dict[str, TextIO] = {}
        self.buffers: dict[str, list[str]] = {name: [] for name, _, _ in self.families}
        for name, _, _ in self.families:
            self.parts[name] = open_output(tmp_dir / f"{name}.part", compress=False)
        self.samples = 0
        self.flushed = 0
        self.busy_out = open_output(busy_path, compress=False)
        self.busy_out.write("gpu_uuid,day,busy_seconds\n")
        self.busy: dict[str, int] = {}  # uuid -> milli-seconds in the current day
        self.busy_day = w0
        self._gpu_labels = {n.name: shapes.dcgm_base(n) for n in nodes}
        self._outage: dict[str, list[tuple[int, int]]] = {}
        for node_name, a, b in irregular.exporter_outages:
            self._outage.setdefault(node_name, []).append((a, b))
        self._drift_nodes = set(irregular.label_drift_nodes)
        self._late = {(node, planned): actual for node, planned, actual in irregular.late_cordons}

    # ------------------------------------------------------------------ input

    def add_holder(self, h: Holder) -> None:
        if not h.dcgm or h.end <= self.w0 or h.start >= self.w1:
            return
        self.seq += 1
        heapq.heappush(self.holder_heap, (h.start, self.seq, h))

    def add_pod(self, p: PodRecord) -> None:
        if p.created >= self.w1 or (p.deleted is not None and p.deleted <= self.w0):
            return
        self.seq += 1
        heapq.heappush(self.pod_heap, (p.created, self.seq, p))

    def add_events(self, events: list[KueueEvent]) -> None:
        for e in events:
            self.seq += 1
            heapq.heappush(self.event_heap, (e.time, self.seq, e))

    def irregular_late(self, node: str, planned: int, actual: int) -> None:
        """A shared node cordoned late (known once the planted scenario is generated)."""
        self._late[(node, planned)] = actual

    # ------------------------------------------------------------------ sweep

    def advance(self, until: int) -> None:
        """Write every scrape whose last target (Kueue) is scraped before ``until``."""
        while True:
            ts = self.w0 + self.k * self.step
            if ts >= self.w1 or ts + self.kueue_offset >= until:
                return
            self._scrape_dcgm(ts)
            self._scrape_ksm(ts + self.ksm_offset)
            self._scrape_kueue(ts + self.kueue_offset)
            self.k += 1
            if self.k % FLUSH_STEPS == 0 or self.samples - self.flushed > FLUSH_LINES:
                self._flush_buffers()

    def _emit(self, family: str, line: str) -> None:
        self.buffers[family].append(line)
        self.samples += 1

    def _flush_buffers(self) -> None:
        """Write the buffered scrapes series by series: each series becomes one run of
        time-ordered lines per flush (allowed in a backfill file), which gzip compresses far
        better than one line per series per scrape. Histogram points stay whole."""
        for name, lines in self.buffers.items():
            if not lines:
                continue
            key = _histogram_key if name in HISTOGRAMS else _series_key
            lines.sort(key=key)  # stable: time order within a series is kept
            self.parts[name].write("".join(lines))
            lines.clear()
        self.flushed = self.samples

    # ------------------------------------------------------------------ dcgm

    def _exported(self, node: Node, ts: int) -> bool:
        if node.pool == "slurm" and not node.slinky:
            return False
        if not self.shapes.honor_labels:
            return True
        if self.irregular.exported_everywhere:
            return True
        start = self.irregular.label_drift_from
        return node.name in self._drift_nodes and start is not None and ts >= start

    def _scrape_dcgm(self, ts: int) -> None:
        if ts >= self.busy_day + DAY:
            self._flush_busy()
        while self.holder_heap and self.holder_heap[0][0] <= ts:
            _, _, h = heapq.heappop(self.holder_heap)
            self.active[h.node.name].append(h)
        util, ratio_name = self.util_family, self.ratio_family
        util_lines = self.buffers[util]
        ratio_lines = self.buffers[ratio_name] if ratio_name is not None else []
        per_sample = 1 if ratio_name is None else 2
        step = self.step
        for node in self.nodes:
            holders = self.active[node.name]
            if holders:
                holders[:] = [h for h in holders if h.end > ts]
            silent = any(a <= ts < b for a, b in self._outage.get(node.name, ()))
            exported = self._exported(node, ts)
            target = self.shapes.dcgm_target(node, exported)
            base = self._gpu_labels[node.name]
            by_gpu: dict[int, list[Holder]] = {}
            also: dict[int, list[Holder]] = {}  # a shared DRA claim's other GPUs: named only
            for h in holders:
                for i in h.gpu_indices:
                    by_gpu.setdefault(i, []).append(h)
                for i in h.dcgm_also:
                    also.setdefault(i, []).append(h)
            for i, uuid in enumerate(node.gpu_uuids):
                owners = by_gpu.get(i)
                if not owners:
                    if not silent:
                        agent = self._agents.get(node.name)  # a Slinky node: its slurmd pod
                        labels = (f"{base[i]},{target}" if agent is None else f"{base[i]},"
                                  f"{self.shapes.dcgm_workload(node, agent, exported)},{target}")
                        util_lines.append(f"{util}{{{labels}}} 0 {ts}\n")
                        if ratio_name is not None:
                            ratio_lines.append(f"{ratio_name}{{{labels}}} 0 {ts}\n")
                        self.samples += per_sample
                    continue
                milli = min(1000, sum(busy_milli(h.profile, i, ts) for h in owners))
                self.busy[uuid] = self.busy.get(uuid, 0) + milli * step
                if silent:
                    continue
                pct = gpu_util_percent(milli)
                ratio = _fmt_ratio(milli)
                named = owners + also[i] if i in also else owners
                for labels in self.shapes.holder_series(node, i, named, exported, base[i],
                                                        target):
                    util_lines.append(f"{util}{{{labels}}} {pct} {ts}\n")
                    if ratio_name is not None:
                        ratio_lines.append(f"{ratio_name}{{{labels}}} {ratio} {ts}\n")
                    self.samples += per_sample
        if self.sharing is not None:
            self.sharing.dcgm(self, ts)

    def _flush_busy(self) -> None:
        day = day_of(self.busy_day).isoformat()
        for node in self.nodes:
            for uuid in node.gpu_uuids:
                value = self.busy.get(uuid, 0)
                if value:
                    q, r = divmod(value, 1000)
                    self.busy_out.write(f"{uuid},{day},{q}.{r:03d}\n")
        self.busy.clear()
        self.busy_day += DAY

    # ------------------------------------------------------------------ kube-state-metrics

    def _scrape_ksm(self, ts: int) -> None:
        target = self.ksm_target
        for node in self.k8s_nodes:
            name = self.shapes.host(node)
            labels = f'node="{name}",resource="nvidia_com_gpu",unit="integer",{target}'
            self._emit("kube_node_status_capacity",
                       f"kube_node_status_capacity{{{labels}}} {node.gpu_count} {ts}\n")
            cordoned = 0
            if node.pool == "shared" and shared_owner(ts) == "slurm":
                cordoned = 1
                handover = ts - (ts - 20 * 3600) % DAY  # last 20:00 UTC at or before ts
                actual = self._late.get((node.name, handover))
                if actual is not None and ts < actual:
                    cordoned = 0
            self._emit("kube_node_spec_unschedulable",
                       f'kube_node_spec_unschedulable{{node="{name}",{target}}} '
                       f"{cordoned} {ts}\n")
        if self.sharing is not None:
            self.sharing.ksm(self, ts)
        while self.pod_heap and self.pod_heap[0][0] <= ts:
            _, _, p = heapq.heappop(self.pod_heap)
            self.pods.append(_ActivePod(p, self.shapes.pod_key(p.namespace, p.name, p.uid)))
        if self.pods:
            self.pods[:] = [a for a in self.pods if a.pod.deleted is None or a.pod.deleted > ts]
        for a in self.pods:
            self._pod_lines(a, ts)
        if self.jobs is not None:
            self.jobs.scrape(ts, target, self._emit)

    def _pod_lines(self, a: _ActivePod, ts: int) -> None:
        p = a.pod
        scheduled = p.scheduled is not None and ts >= p.scheduled and p.node is not None
        node = self.shapes.host(p.node) if scheduled and p.node is not None else ""
        host_ip = p.node.host_ip if scheduled and p.node is not None else ""
        pod_ip = p.node.pod_ip(p.pod_number) if scheduled and p.node is not None else ""
        base = a.base
        target = self.ksm_target
        self._emit("kube_pod_info",
                   f'kube_pod_info{{{base},host_ip="{host_ip}",pod_ip="{pod_ip}",node="{node}",'
                   f'created_by_kind="{p.owner_kind}",created_by_name="{p.owner_name}",'
                   f'priority_class="",host_network="false",{target}}} 1 {ts}\n')
        pod_labels = p.labels if self.jobs is None else with_job_label(p.labels, p.owner_kind,
                                                                        p.owner_name)
        labels = "".join(f',label_{k}="{v}"' for k, v in pod_labels)
        self._emit("kube_pod_labels", f"kube_pod_labels{{{base}{labels},{target}}} 1 {ts}\n")
        self._emit("kube_pod_service_account",
                   f'kube_pod_service_account{{{base},service_account="{p.service_account}",'
                   f"{target}}} 1 {ts}\n")
        controller = "true" if p.owner_kind != "<none>" else "<none>"
        self._emit("kube_pod_owner",
                   f'kube_pod_owner{{{base},owner_kind="{p.owner_kind}",'
                   f'owner_name="{p.owner_name}",owner_is_controller="{controller}",'
                   f"{target}}} 1 {ts}\n")
        if p.finished is not None and ts >= p.finished:
            phase = p.final_phase or "Failed"
        elif p.running is not None and ts >= p.running:
            phase = "Running"
        else:
            phase = "Pending"
        for candidate in PHASES:
            self._emit("kube_pod_status_phase",
                       f'kube_pod_status_phase{{{base},phase="{candidate}",{target}}} '
                       f"{1 if candidate == phase else 0} {ts}\n")
        if p.containers:
            for family, line in init_container_lines(self.shapes, p, base, node, target,
                                                     ts, scheduled, self.seed):
                self._emit(family, line)
        elif p.gpu_resource:  # a DRA pod requests none (simulator/dra.py)
            self._emit("kube_pod_container_resource_requests",
                       f"kube_pod_container_resource_requests{{{base},"
                       f'{self.shapes.container(p.container)},node="{node}",'
                       f'resource="{p.gpu_resource}",unit="integer",{target}}} {p.gpus} {ts}\n')
        for line in claim_info_lines(p, base, target, ts):
            self._emit(CLAIM_INFO, line)
        if scheduled and p.scheduled is not None:
            # at the Running start: the truth charges Running time (docs/accounting.md) and the
            # simulator has no image-pull phase in this metric (docs/simulator-shapes.md)
            started = p.running if p.running is not None else p.scheduled + 1
            started += self.irregular.ksm_clock_skew
            if ts >= started:  # set once the kubelet admitted the pod
                self._emit("kube_pod_start_time",
                           f"kube_pod_start_time{{{base},{target}}} {started} {ts}\n")
        if p.finished is not None and ts >= p.finished:
            self._emit("kube_pod_completion_time",
                       f"kube_pod_completion_time{{{base},{target}}} "
                       f"{p.finished + self.irregular.ksm_clock_skew} {ts}\n")

    # ------------------------------------------------------------------ kueue

    def _reset_counters(self) -> None:
        k = self.kueue
        k.admitted.clear()
        k.evicted.clear()
        k.hist.clear()
        k.hist_sum.clear()
        self.restarted = True

    def _apply(self, e: KueueEvent) -> None:
        k = self.kueue
        cq = e.cluster_queue
        if e.kind == "pending":
            if e.status_from:
                k.pending[(cq, e.status_from)] = k.pending.get((cq, e.status_from), 0) - 1
            if e.status_to:
                k.pending[(cq, e.status_to)] = k.pending.get((cq, e.status_to), 0) + 1
        elif e.kind == "admit":
            k.admitted[cq] = k.admitted.get(cq, 0) + 1
            k.active[cq] = k.active.get(cq, 0) + 1
            k.usage[(cq, e.flavor)] = k.usage.get((cq, e.flavor), 0) + e.gpus
            buckets = k.hist.setdefault(cq, [0] * (len(KUEUE_BUCKETS) + 1))
            for j, bound in enumerate(KUEUE_BUCKETS):
                if e.wait <= bound:
                    buckets[j] += 1
            buckets[-1] += 1
            k.hist_sum[cq] = k.hist_sum.get(cq, 0.0) + e.wait
        elif e.kind in ("evict", "finish"):
            k.active[cq] = k.active.get(cq, 0) - 1
            k.usage[(cq, e.flavor)] = k.usage.get((cq, e.flavor), 0) - e.gpus
            if e.kind == "evict":
                key = (cq, e.reason)
                k.evicted[key] = k.evicted.get(key, 0) + 1

    def _scrape_kueue(self, ts: int) -> None:
        restart = self.irregular.kueue_restart
        while self.event_heap and self.event_heap[0][0] <= ts:
            t, _, e = heapq.heappop(self.event_heap)
            if restart is not None and not self.restarted and t >= restart[0]:
                self._reset_counters()
            self._apply(e)
        if restart is not None and not self.restarted and ts >= restart[0]:
            self._reset_counters()
        if restart is not None and restart[0] <= ts < restart[1]:
            return  # the controller is down: nothing is scraped
        k = self.kueue
        target = self.kueue_target
        for cq in self.cluster_queues:
            name = cq.name
            for status in ("active", "inadmissible"):
                self._emit("kueue_pending_workloads",
                           f'kueue_pending_workloads{{cluster_queue="{name}",status="{status}",'
                           f"{target}}} {k.pending.get((name, status), 0)} {ts}\n")
            if name in k.admitted:
                self._emit("kueue_admitted_workloads",
                           f'kueue_admitted_workloads_total{{cluster_queue="{name}",'
                           f"{target}}} {k.admitted[name]} {ts}\n")
            for (q, reason), n in sorted(k.evicted.items()):
                if q == name:
                    self._emit("kueue_evicted_workloads",
                               f'kueue_evicted_workloads_total{{cluster_queue="{name}",'
                               f'reason="{reason}",{target}}} {n} {ts}\n')
            buckets = k.hist.get(name)
            if buckets is not None:
                fam = "kueue_admission_wait_time_seconds"
                for j, bound in enumerate(KUEUE_BUCKETS):
                    self._emit(fam, f'{fam}_bucket{{cluster_queue="{name}",le="{_le(bound)}",'
                                    f"{target}}} {buckets[j]} {ts}\n")
                self._emit(fam, f'{fam}_bucket{{cluster_queue="{name}",le="+Inf",'
                                f"{target}}} {buckets[-1]} {ts}\n")
                self._emit(fam, f'{fam}_count{{cluster_queue="{name}",{target}}} '
                                f"{buckets[-1]} {ts}\n")
                total = k.hist_sum[name]
                text = str(int(total)) if float(total).is_integer() else repr(total)
                self._emit(fam, f'{fam}_sum{{cluster_queue="{name}",{target}}} '
                                f"{text} {ts}\n")
            self._emit("kueue_admitted_active_workloads",
                       f'kueue_admitted_active_workloads{{cluster_queue="{name}",'
                       f"{target}}} {k.active.get(name, 0)} {ts}\n")
            for flavor, quota in sorted(cq.nominal.items()):
                labels = (f'cohort="{COHORT}",cluster_queue="{name}",flavor="{flavor}",'
                          f'resource="nvidia.com/gpu",{target}')
                self._emit("kueue_cluster_queue_resource_usage",
                           f"kueue_cluster_queue_resource_usage{{{labels}}} "
                           f"{k.usage.get((name, flavor), 0)} {ts}\n")
                self._emit("kueue_cluster_queue_nominal_quota",
                           f"kueue_cluster_queue_nominal_quota{{{labels}}} {quota} {ts}\n")

    # ------------------------------------------------------------------ finish

    def finish(self) -> int:
        """Write the remaining scrapes, join the family parts; returns the sample count."""
        self.advance(self.w1 + DAY)
        self._flush_buffers()
        while self.busy_day < self.w1:
            self._flush_busy()
        self.busy_out.close()
        for part in self.parts.values():
            part.close()
        with open_output(self.out_path, self.gzip) as out:
            for name, kind, help_text in self.families:
                out.write(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
                part_path = self.tmp_dir / f"{name}.part"
                with part_path.open(encoding="utf-8") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
                part_path.unlink()
            out.write("# EOF\n")
        return self.samples
