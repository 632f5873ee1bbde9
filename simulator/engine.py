"""``simulate()``: one pass over every arrival in submit order, writing each output as it goes.

Memory stays flat as the world grows: jobs are generated in submit order and written at once,
the schedulers keep one free-time per GPU, truth is aggregated in small dicts, and the metrics
sweep keeps only what is alive around the current scrape.
"""

import heapq
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from simulator.arrivals import merge
from simulator.config import DAY, HOUR, MINUTE, SimConfig
from simulator.dra import SNAPSHOT_GLOB as DRA_SNAPSHOT_GLOB
from simulator.dra import DraRun
from simulator.identity import Resolver
from simulator.k8s_jobs import K8sBatch, K8sSide
from simulator.k8s_model import WorkloadPlan, holders, kueue_events, pod_records
from simulator.ksm_jobs import job_object
from simulator.kueue_json import WorkloadWriter
from simulator.kueue_snapshots import SNAPSHOT_GLOB as KUEUE_SNAPSHOT_GLOB
from simulator.kueue_snapshots import KueueSnapshots
from simulator.openmetrics import Irregularities, MetricsSweep
from simulator.outputs import open_output
from simulator.planted import Planter
from simulator.planted_real import RealisticPlanter
from simulator.pod_shapes import PodShapes
from simulator.realistic import (
    fqdn_some,
    realistic_irregularities,
    split_by_gaps,
    with_realistic_profile,
    workload_deleted,
)
from simulator.records import Holder
from simulator.sacct_writer import SacctRow, SacctWriter
from simulator.scheduling import View
from simulator.scontrol_writer import SNAPSHOT_GLOB, ScontrolSnapshots
from simulator.scrape_shapes import ScrapeShapes, unlabelled_nodes
from simulator.sharing_run import SHARED_ALLOCATIONS, SharingRun
from simulator.site_file import write_site_file
from simulator.slinky import agents, pod_record, truth_holder, with_agent_labels, world_block
from simulator.slurm_jobs import SlurmBatch, SlurmSide
from simulator.slurm_nodes import SHOW_NODE, write_show_node
from simulator.sreport_writer import SreportAccumulator
from simulator.timefmt import day_of, iso_z
from simulator.truth import DoubleScheduleDetector, TruthWriter
from simulator.world import (
    World,
    build_world,
)
from simulator.world_files import write_static_files, write_world_json

Progress = Callable[[str], None]
WARMUP = DAY  # the world starts a day early so the window opens on a busy cluster

OUTPUT_FILES = (
    "world.json", "gpuledger.toml", "nodes.csv", "identity_map.csv", "accounts.csv",
    "rate_card.csv",
    "sacct/sacct-P.txt", "sacct/sacct-unitsep-epoch.txt", "sacct/sacct-P.txt.gz",
    "sacct/sacct-unitsep-epoch.txt.gz", "sreport/cluster-utilization.txt",
    "sreport/account-utilization-by-user.txt", "prometheus/metrics.om",
    "prometheus/metrics.om.gz", "kueue/workloads.json", "kueue/workloads.json.gz",
    "truth/gpu_seconds_daily.csv", "truth/gpu_seconds_priced.csv",
    "truth/allocations.csv", "truth/allocations.csv.gz", "truth/incidents.csv",
    "truth/gpu_busy_seconds.csv", "truth/undetectable_incidents.csv",
    # --shared-gpus only
    SHARED_ALLOCATIONS, "truth/physical_gpu_seconds_daily.csv",
    # --shared-gpus, --slinky-nodes, --autodetect-gpu-types
    SHOW_NODE,
)
#: outputs named by time: one `scontrol show job -d` snapshot per collection
OUTPUT_PATTERNS = (SNAPSHOT_GLOB, KUEUE_SNAPSHOT_GLOB, DRA_SNAPSHOT_GLOB)


def is_output_file(name: str) -> bool:
    """Whether ``name`` (relative to the world folder, ``/``-separated) is a simulator output."""
    return name in OUTPUT_FILES or any(fnmatch(name, p) for p in OUTPUT_PATTERNS)


@dataclass(frozen=True)
class SimSummary:
    out_dir: str
    window_start: str
    window_end: str
    gpus: int
    slurm_jobs: int
    slurm_records_started: int
    sacct_rows: int
    pods: int
    workloads: int
    allocations: int
    incidents: dict[str, int]
    gpu_hours: dict[str, float]
    sreport: dict[str, int]
    metrics_samples: int
    scontrol: dict[str, int] = field(default_factory=dict)  # snapshots, job blocks in them
    files: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        inc = ", ".join(f"{k}={v}" for k, v in sorted(self.incidents.items())) or "none"
        hours = ", ".join(f"{k}={v:.1f}" for k, v in sorted(self.gpu_hours.items()))
        return (f"world {self.window_start} .. {self.window_end} in {self.out_dir}: "
                f"{self.gpus} GPUs, {self.slurm_jobs} Slurm jobs ({self.sacct_rows} sacct rows), "
                f"{self.pods} pods, {self.workloads} workloads, incidents: {inc}; "
                f"GPU-hours {hours}; {self.metrics_samples} metric samples")


def default_irregularities(world: World) -> Irregularities:
    cfg = world.config
    w0 = cfg.window_start
    k8s = [n.name for n in world.nodes if n.pool == "kubernetes"]
    # without honorLabels every Kubernetes scrape has exported_* labels: nothing drifts
    exported = cfg.dcgm_label_style == "exported" or not cfg.honor_labels
    if not cfg.irregularities:
        return Irregularities(exported_everywhere=exported)
    day = w0 + min(1, cfg.days - 1) * DAY
    drift_nodes: tuple[str, ...] = ()
    drift_from = None
    if cfg.dcgm_label_style == "drift" and not exported:
        drift_nodes = tuple(k8s)
        drift_from = w0 + (cfg.days // 2) * DAY + 12 * HOUR
    return Irregularities(
        exporter_outages=((k8s[-1], day + 3 * HOUR, day + 3 * HOUR + 45 * MINUTE),),
        kueue_restart=(day + 14 * HOUR, day + 14 * HOUR + 2 * MINUTE),
        label_drift_nodes=drift_nodes, label_drift_from=drift_from,
        exported_everywhere=exported,
    )


def _clean(out_dir: Path) -> None:
    for name in OUTPUT_FILES:
        path = out_dir / name
        if path.is_file():
            path.unlink()
    for pattern in OUTPUT_PATTERNS:  # snapshots of an earlier window must not stay behind
        for path in sorted(out_dir.glob(pattern)):
            path.unlink()


def _last_activity(plan: WorkloadPlan) -> int | None:
    """When the workload was last active (None: still active, or pending, at the end)."""
    if not plan.attempts or plan.attempts[-1].evict_reason:
        return plan.deleted  # pending after its last admission (if any)
    last = plan.created
    for attempt in plan.attempts:
        for pod in attempt.pods:
            end = pod.deleted if pod.deleted is not None else pod.finished
            if end is None:
                return None
            last = max(last, end)
        if attempt.ended is None:
            return None
        last = max(last, attempt.ended)
    return last


class _Run:
    """The writers and counters of one simulation."""

    def __init__(self, world: World, out_dir: Path, tmp: Path) -> None:
        cfg = world.config
        self.world = world
        self.w0, self.w1 = cfg.window_start, cfg.window_end
        self.sacct = SacctWriter(out_dir / "sacct", cfg.sacct_timezone, cfg.gzip_sacct)
        self.workloads = WorkloadWriter(out_dir / "kueue" / "workloads.json", tmp, cfg.gzip_all)
        self.truth = TruthWriter(out_dir / "truth", Resolver(world.identity_rows), self.w0,
                                 self.w1, cfg.gzip_all,
                                 frozenset(unlabelled_nodes(cfg, world.nodes)))
        self.sreport = SreportAccumulator(self.w0, self.w1)
        self.detector = DoubleScheduleDetector(self.w0, self.w1)
        self.scontrol = ScontrolSnapshots(out_dir, self.w0, self.w1, cfg.scontrol_every)
        self.irregular = default_irregularities(world)
        self.realistic = cfg.realistic
        if cfg.realistic:
            self.irregular = realistic_irregularities(cfg, world.nodes, self.irregular)
        self.kueue_snapshots = KueueSnapshots(out_dir, tmp, self.w0, self.w1,
                                              cfg.kueue_snapshot_every)
        self.pod_shapes = PodShapes(cfg.seed, cfg.init_container_gpus, cfg.kueue_labels)
        self.layouts: dict[str, int] = {}  # init-container layout -> pods (world.json)
        self.sharing = (SharingRun(world, self.w0 - WARMUP) if world.sharing is not None
                        else None)
        self.shapes = ScrapeShapes.from_config(cfg, unlabelled_nodes(cfg, world.nodes),
                                               fqdn_some(cfg, world.nodes))
        # --slinky-nodes: the slurmd pods holding the Slinky nodes' GPUs, by node
        self.agents = agents(world) if cfg.slinky else ()
        self.agent_by_node = {a.node.name: a for a in self.agents}
        # --dra-pods: the workloads holding GPUs through ResourceClaims (simulator/dra.py)
        self.dra = DraRun(cfg, self.shapes.host) if cfg.dra else None
        self.sweep: MetricsSweep | None = None
        if cfg.metrics:
            name = "metrics.om.gz" if cfg.gzip_om else "metrics.om"
            self.sweep = MetricsSweep(
                nodes=world.nodes, cluster_queues=world.cluster_queues, w0=self.w0,
                w1=self.w1, step=cfg.step_seconds, out_path=out_dir / "prometheus" / name,
                tmp_dir=tmp, gzip=cfg.gzip_om, busy_path=out_dir / "truth" /
                "gpu_busy_seconds.csv", irregular=self.irregular, seed=cfg.seed,
                shapes=self.shapes, init_containers=cfg.init_container_gpus > 0,
                jobs=cfg.realistic,
                sharing=self.sharing.metrics if self.sharing is not None else None,
                agents={a.node.name: a.dcgm for a in self.agents}, dra=cfg.dra)
        self.slurm_jobs = 0
        self.slurm_started = 0
        self.pods = 0
        # sacct records wait here until no later arrival can create an earlier one
        self.pending_rows: list[tuple[int, int, tuple[SacctRow, ...]]] = []
        self.seq = 0

    def flush_sacct(self, before: int | None) -> None:
        while self.pending_rows and (before is None or self.pending_rows[0][0] < before):
            for row in heapq.heappop(self.pending_rows)[2]:
                self.sacct.write(row)

    def start_agents(self) -> None:
        """The slurmd pods: kube-state-metrics series and charged-nothing truth rows."""
        for a in self.agents:
            self.truth.add_holder(truth_holder(a, self.w0, self.w1))
            if self.sweep is not None:
                self.sweep.add_pod(pod_record(a, self.w0))

    def holder(self, h: Holder, now: int) -> None:
        if self.agent_by_node:
            h = with_agent_labels(h, self.agent_by_node)
        if self.realistic:
            h = with_realistic_profile(h, self.world.config.step_seconds)
        self.truth.add_holder(h)
        self.sreport.add(h)
        if self.sweep is not None:
            self.sweep.add_holder(h)
        for incident in self.detector.add(h, now):
            self.truth.add_incident(incident)

    def slurm(self, batch: SlurmBatch, now: int) -> None:
        for order_time, rows in batch.records:
            self.seq += 1
            heapq.heappush(self.pending_rows, (order_time, self.seq, rows))
        if batch.records:
            self.slurm_jobs += batch.jobs
        self.slurm_started += batch.runs
        for plan in batch.plans:
            self.scontrol.add(plan)
        for h in batch.holders:
            self.holder(h, now)

    def k8s(self, batch: K8sBatch, now: int) -> None:
        plans = list(map(self.pod_shapes.apply, batch.plans))
        picked = self.dra.take_all(plans) if self.dra is not None else {}
        for plan in plans:
            if self.realistic:
                plan = workload_deleted(plan)
                job = job_object(plan)
                if job is not None and self.sweep is not None and self.sweep.jobs is not None:
                    self.sweep.jobs.add(job)
            self.kueue_snapshots.add(plan)
            dra = picked.get(plan.uid)
            last = _last_activity(plan)
            exists = plan.deleted is None or plan.deleted >= self.w1
            in_window = plan.created < self.w1 and exists and (last is None or last >= self.w0)
            if plan.managed_by_kueue and in_window:
                self.workloads.add(plan, self.w1)
            for pod in pod_records(plan):
                if dra:
                    pod = DraRun.pod_record(dra, pod)
                if pod.created < self.w1 and (pod.deleted is None or pod.deleted > self.w0):
                    self.pods += 1
                    if pod.containers:
                        kind = ("gpu_sidecar" if any(c.kind == "sidecar" for c in pod.containers)
                                else "gpu_init_only")
                        self.layouts[kind] = self.layouts.get(kind, 0) + 1
                if self.sweep is not None:
                    self.sweep.add_pod(pod)
            if self.sweep is not None:
                self.sweep.add_events(kueue_events(plan))
            for h in holders(plan, self.w1):
                self.holder(DraRun.holder(dra, h) if dra else h, now)
        for incident in batch.incidents:
            pieces = ([incident] if not self.realistic else
                      split_by_gaps(incident, self.irregular.exporter_outages))
            for piece in pieces:
                self.truth.add_incident(piece)
        for slurm_batch in batch.slurm:
            self.slurm(slurm_batch, now)


def simulate(config: SimConfig, out_dir: Path, progress: Progress | None = None) -> SimSummary:
    """Write one simulated world into ``out_dir`` (see docs/contracts.md for the layout)."""
    say = progress or (lambda _msg: None)
    world = build_world(config)
    unlabelled_nodes(config, world.nodes)  # refuse unknown node names before writing anything
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir)
    tmp = out_dir / ".simulate-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        summary = _simulate(world, out_dir, tmp, say)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary


def _simulate(world: World, out_dir: Path, tmp: Path, say: Progress) -> SimSummary:
    cfg = world.config
    w0, w1 = cfg.window_start, cfg.window_end
    gen_start = w0 - WARMUP
    write_static_files(world, out_dir)
    slurm_view = View("slurm", [n for n in world.nodes if n.in_slurm])
    k8s_view = View("kubernetes", [n for n in world.nodes if n.in_kubernetes])
    slurm = SlurmSide(world, slurm_view, gen_start)
    k8s = K8sSide(world, k8s_view, slurm_view, slurm, gen_start)
    planter = (RealisticPlanter(world, slurm, k8s, gen_start, unlabelled_nodes(cfg, world.nodes))
               if cfg.realistic else Planter(world, slurm, k8s, gen_start))
    reserved = planter.reservations()
    slurm_view.reservations = reserved["slurm"]
    k8s_view.reservations = reserved["kubernetes"]
    run = _Run(world, out_dir, tmp)
    run.start_agents()
    if run.sharing is not None:
        run.sharing.start(run)
    say(f"simulating {cfg.days} day(s) from {cfg.start.isoformat()} on "
        f"{sum(n.gpu_count for n in world.nodes)} GPUs ({cfg.nodes.describe()}), "
        f"metrics {'every ' + str(cfg.step_seconds) + ' s' if cfg.metrics else 'off'}")
    next_report = w0 + DAY
    for arrival in merge(slurm.arrivals(), k8s.arrivals(), planter.arrivals()):
        now = arrival.time
        run.flush_sacct(now)
        run.scontrol.flush(now)
        if run.sweep is not None:
            run.sweep.advance(now)
        while now >= next_report and next_report <= w1:
            say(f"  {day_of(next_report - 1).isoformat()} done: {run.slurm_jobs} Slurm jobs, "
                f"{run.pods} pods, {run.sacct.rows} sacct rows")
            next_report += DAY
        if arrival.stream.startswith("slurm"):
            run.slurm(slurm.realize(arrival), now)
        elif arrival.stream.startswith("k8s"):
            run.k8s(k8s.realize(arrival), now)
        else:
            batch = planter.realize(arrival)
            run.k8s(batch, now)
            if run.sweep is not None:
                for node, planned, actual in planter.record.late_cordons:
                    run.sweep.irregular_late(node, planned, actual)
    samples = 0
    if run.sweep is not None:
        say("  writing the OpenMetrics file")
        samples = run.sweep.finish()
    else:
        with open_output(out_dir / "truth" / "gpu_busy_seconds.csv", compress=False) as fh:
            fh.write("gpu_uuid,day,busy_seconds\n")
    run.flush_sacct(None)
    run.scontrol.flush(None)
    run.sacct.close()
    run.workloads.close()
    run.kueue_snapshots.close()
    if run.dra is not None:
        run.dra.write(out_dir, w0, w1, world.nodes)
    incidents = run.truth.close()
    sreport = run.sreport.write(out_dir / "sreport", cfg.cluster, world.nodes)
    write_site_file(cfg, out_dir, scontrol_written=run.scontrol.files > 0,
                    kueue_snapshots_written=run.kueue_snapshots.files > 0,
                    dra_snapshots_written=run.dra is not None and run.dra.counts["snapshots"] > 0)
    gpu_hours = {k: round(v / 3600, 3) for k, v in sorted(run.truth.gpu_seconds_by_domain.items())}
    files = tuple(sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*")
                         if p.is_file() and is_output_file(p.relative_to(out_dir).as_posix())))
    summary = SimSummary(
        out_dir=str(out_dir), window_start=iso_z(w0), window_end=iso_z(w1),
        gpus=sum(n.gpu_count for n in world.nodes), slurm_jobs=run.slurm_jobs,
        slurm_records_started=run.slurm_started, sacct_rows=run.sacct.rows, pods=run.pods,
        workloads=run.workloads.items, allocations=run.truth.allocation_rows,
        incidents=dict(sorted(incidents.items())), gpu_hours=gpu_hours, sreport=sreport,
        metrics_samples=samples,
        scontrol={"snapshots": run.scontrol.files, "job_blocks": run.scontrol.job_blocks},
        files=(*files, "world.json"),
    )
    if run.sharing is not None:
        run.sharing.write(out_dir)
    hosts = {n.name: run.shapes.host(n) for n in world.nodes}
    if run.sharing is not None or cfg.slinky or cfg.autodetect_gpu_types:
        write_show_node(world, out_dir, run.agents, hosts)
    write_world_json(world, run.irregular, planter.record, asdict(summary), out_dir,
                     run.layouts, run.sharing.world_block() if run.sharing is not None else None,
                     world_block(cfg, run.agents, hosts) if cfg.slinky else None,
                     run.dra.world_block() if run.dra is not None else None)
    say(summary.describe())
    return summary


