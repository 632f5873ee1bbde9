"""``--shared-gpus``: who holds which slice, replica or shard when, and each holder's physical
share (docs/shared-gpus.md, "The charging rule"), exact in ``fractions.Fraction``.

Every unit (a MIG instance, a time-slicing replica, a pair of shards) runs a back-to-back
sequence of holders with gaps, drawn from its own seeded stream, so the plan does not depend on
the whole-GPU world. Pods are inference replicas and notebooks (not Kueue-managed); Slurm jobs
run on MIG types and shards. On every weekday one planted conflict puts a pod on a MIG instance
a Slurm job holds on ``gpu-mig-shr-01``.
"""

from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import pairwise

from simulator.config import DAY, HOUR, MINUTE, SimConfig
from simulator.identity import Owner, PodOwner, SlurmOwner
from simulator.records import Incident, Profile
from simulator.rng import k8s_uid, pod_suffix, stream
from simulator.sharing_world import GPU_SLICES, MigInstance, SharedNode, SharingWorld
from simulator.timefmt import day_of

FIRST_JOB_ID = 900_001  # apart from the whole-GPU world's ids (24001 …)
SLURM_USERS = (("alice", 1001, "physics"), ("bob", 1002, "ml-research"),
               ("erin", 1005, "ml-research"), ("dave", 1004, "physics"))
# (namespace, service account, owner label, kind)
POD_KINDS = (("inference", "model-server", "", "inference"),
             ("research", "default", "bob", "notebook"),
             ("sandbox", "default", "", "notebook"))
CONFLICT_AT, CONFLICT_FOR = 14 * HOUR, 45 * MINUTE  # the planted pod's start and length
CONFLICT_JOB = (13 * HOUR + 30 * MINUTE, 15 * HOUR + 30 * MINUTE)  # the Slurm job it meets


@dataclass(frozen=True)
class SharedHolder:
    """One holder of shared units on one physical GPU for ``[start, end)``."""

    domain: str  # slurm | kubernetes
    source_key: str  # sacct JobID or namespace/pod
    name: str  # job name or pod name
    node: SharedNode
    gpu: int
    sharing: str
    instance: MigInstance | None
    units: int  # instances, replicas or shards
    start: int
    end: int
    owner: Owner
    profile: Profile
    job_id: int = 0
    user: str = ""
    uid: int = 0
    account: str = ""
    namespace: str = ""
    service_account: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    submit: int = 0

    @property
    def slice_profile(self) -> str:
        return self.instance.profile if self.instance is not None else ""

    @property
    def gpu_uuid(self) -> str:
        return self.node.node.gpu_uuids[self.gpu]

    @property
    def dcgm(self) -> tuple[tuple[str, str], ...]:
        if self.domain == "slurm":
            return (("hpc_job", str(self.job_id)),)
        container = "server" if self.profile.kind == "infer" else "notebook"
        return (("container", container), ("namespace", self.namespace),
                ("pod", self.name))


Segment = tuple[int, int, Fraction]  # [lo, hi) at a constant share of the physical GPU


@dataclass(frozen=True)
class SharingPlan:
    holders: tuple[SharedHolder, ...]
    segments: dict[int, tuple[Segment, ...]]  # holder position -> its shares
    incidents: tuple[Incident, ...]
    conflicts: tuple[dict[str, object], ...]  # for world.json


def _weekday_conflicts(cfg: SimConfig) -> list[int]:
    days = []
    for k in range(cfg.days):
        day = cfg.window_start + k * DAY
        if day_of(day).weekday() < 5:
            days.append(day)
    return days


class _Planner:
    def __init__(self, cfg: SimConfig, sharing: SharingWorld, gen_start: int,
                 ksm_scrapes: tuple[int, int]) -> None:
        self.cfg = cfg
        self.sharing = sharing
        self.gen_start, self.gen_end = gen_start, cfg.window_end
        self.first_scrape, self.pods_until = ksm_scrapes
        self.holders: list[SharedHolder] = []
        self.next_job = FIRST_JOB_ID
        self.pods = 0

    def job(self, node: SharedNode, gpu: int, inst: MigInstance | None, units: int,
            start: int, end: int, rng_pick: int) -> SharedHolder:
        user, uid, account = SLURM_USERS[rng_pick % len(SLURM_USERS)]
        job_id = self.next_job
        self.next_job += 1
        kind = "shard" if inst is None else "mig"
        name = f"{kind}-{inst.profile if inst else f'{units}sh'}-{job_id % 1000:03d}"
        return SharedHolder(
            domain="slurm", source_key=str(job_id), name=name, node=node, gpu=gpu,
            sharing=node.sharing, instance=inst, units=units, start=start, end=end,
            owner=SlurmOwner(user, account), profile=Profile("hpc", job_id), job_id=job_id,
            user=user, uid=uid, account=account, submit=start - 30 - rng_pick % 300)

    def pod(self, node: SharedNode, gpu: int, inst: MigInstance | None, start: int, end: int,
            rng_pick: int) -> SharedHolder:
        namespace, sa, owner_label, kind = POD_KINDS[rng_pick % len(POD_KINDS)]
        self.pods += 1
        what = inst.profile.replace(".", "-") if inst else "ts"
        if kind == "inference":
            deploy = f"embed-{what}"
            name = (f"{deploy}-{pod_suffix(self.cfg.seed, 'rs', deploy, length=10)}-"
                    f"{pod_suffix(self.cfg.seed, 'shared-pod', self.pods)}")
        else:
            name = f"nb-{what}-{self.pods:05d}"
        labels = (("owner", owner_label),) if owner_label else ()
        labels = (*labels, ("app", "embed" if kind == "inference" else "notebook"))
        return SharedHolder(
            domain="kubernetes", source_key=f"{namespace}/{name}", name=name, node=node,
            gpu=gpu, sharing=node.sharing, instance=inst, units=1, start=start, end=end,
            owner=PodOwner(namespace, sa, tuple(sorted(labels)), "", ""),
            profile=Profile("infer" if kind == "inference" else "train", self.pods),
            namespace=namespace, service_account=sa, labels=tuple(sorted(labels)),
            submit=start - 30)

    def sequence(self, key: str, blocked: list[tuple[int, int]],
                 pods: bool = False) -> list[tuple[int, int, int]]:
        """(start, end, pick) of one unit's holders: 1-7 h long, 10 min-4 h apart, never inside
        a blocked interval; a pod unit's holders as ``_seen`` moves them."""
        rng = stream(self.cfg.seed, f"shared-gpus/{key}")
        t = self.gen_start + rng.randrange(0, 4 * HOUR)
        out = []
        until = self.pods_until + 1 if pods else self.gen_end
        while t < until:
            length = rng.randrange(1 * HOUR, 7 * HOUR, MINUTE)
            pick = rng.randrange(1_000_000)
            end = t + length
            clash = [b for b in blocked if t < b[1] and end > b[0]]
            if clash:
                end = clash[0][0]
                if end - t >= 30 * MINUTE:
                    out.append((t, end, pick))
                t = clash[0][1] + rng.randrange(5 * MINUTE, 30 * MINUTE, MINUTE)
                continue
            out.append((*self._seen(t, end), pick) if pods else (t, end, pick))
            t = end + rng.randrange(10 * MINUTE, 4 * HOUR, MINUTE)
        return out

    def _seen(self, start: int, end: int) -> tuple[int, int]:
        """A pod's (start, end) moved so that the window's kube-state-metrics scrapes show each
        end of it inside the window (docs/kubernetes.md "Pod boundaries"): the metrics file has
        no scrape before the window's start or after its end, where a real reader has two.
        A pod running at the window's start started at it (truth in the window is the same);
        one ending before the first scrape ends at the window's start; one ending after the
        last scrape runs on past the window (no pod starts after it: ``until``)."""
        w0, w1 = self.cfg.window_start, self.gen_end
        if self.pods_until < end < w1:
            end += w1 - self.pods_until
        if start < w0 < end:
            if end <= self.first_scrape:
                end = w0
            else:
                start = w0
        return start, end

    def plan(self) -> SharingPlan:
        conflict_days = _weekday_conflicts(self.cfg)
        incidents: list[Incident] = []
        conflicts: list[dict[str, object]] = []
        for node in self.sharing.nodes:
            if node.sharing == "mig":
                self._mig(node, conflict_days, incidents, conflicts)
            else:
                for gpu in range(node.node.gpu_count):
                    slots = node.replicas if node.sharing == "time_slicing" else 3
                    for r in range(slots):
                        pods = node.sharing == "time_slicing"
                        for t0, t1, pick in self.sequence(f"{node.name}/{gpu}/{r}", [], pods):
                            if node.sharing == "time_slicing":
                                self.holders.append(self.pod(node, gpu, None, t0, t1, pick))
                            else:  # 2 or 4 shards; three holders fit in 8
                                units = (4 if pick % 3 == 0 else 2) if r == 0 else 2
                                self.holders.append(self.job(node, gpu, None, units, t0, t1,
                                                             pick))
        holders, renamed = _renumber(self.holders)
        incidents = [replace(i, slurm_job=renamed[i.slurm_job],
                             detail=i.detail.replace(f"job {i.slurm_job} ",
                                                     f"job {renamed[i.slurm_job]} "))
                     for i in incidents]
        conflicts = [{**c, "slurm_job": renamed[str(c["slurm_job"])]} for c in conflicts]
        return SharingPlan(holders, physical_segments(holders), tuple(incidents),
                           tuple(conflicts))

    def _mig(self, node: SharedNode, conflict_days: list[int], incidents: list[Incident],
             conflicts: list[dict[str, object]]) -> None:
        target = next((i for i in node.instances if i.owner == "slurm" and i.gpu == 0), None)
        if node.node.pool != "shared":
            target = None
        for inst in node.instances:
            blocked = ([(d + CONFLICT_JOB[0] - 10 * MINUTE, d + CONFLICT_JOB[1] + 10 * MINUTE)
                        for d in conflict_days] if inst == target else [])
            for t0, t1, pick in self.sequence(f"{node.name}/{inst.gpu}/{inst.gi_id}", blocked,
                                              inst.owner == "kubernetes"):
                if inst.owner == "slurm":
                    self.holders.append(self.job(node, inst.gpu, inst, 1, t0, t1, pick))
                else:
                    self.holders.append(self.pod(node, inst.gpu, inst, t0, t1, pick))
            if inst != target:
                continue
            for d in conflict_days:
                job = self.job(node, inst.gpu, inst, 1, d + CONFLICT_JOB[0],
                               d + CONFLICT_JOB[1], d // DAY)
                pod = self.pod(node, inst.gpu, inst, d + CONFLICT_AT,
                               d + CONFLICT_AT + CONFLICT_FOR, 0)  # pick 0: inference
                self.holders.extend((job, pod))
                # the instance's fraction of the GPU for the time both held it (the rule of
                # docs/detectors.md for a MIG instance held twice), to the GPU-second
                slices = int(inst.profile.split("g.", 1)[0])
                seconds = round(Fraction(CONFLICT_FOR * slices, GPU_SLICES))
                incidents.append(Incident(
                    kind="double_scheduled", node=node.name, gpu_uuids=(job.gpu_uuid,),
                    start=pod.start, end=pod.end, gpu_seconds=seconds,
                    slurm_job=job.source_key, k8s_workload=pod.source_key,
                    detail=(f"Slurm job {job.source_key} and pod {pod.source_key} held MIG "
                            f"instance GPU_I_ID={inst.gi_id} ({inst.profile}) of GPU index "
                            f"{inst.gpu} at the same time")))
                conflicts.append({"node": node.name, "gpu_uuid": job.gpu_uuid,
                                  "gpu_index": inst.gpu, "gpu_instance": inst.gi_id,
                                  "slice_profile": inst.profile, "slurm_job": job.source_key,
                                  "pod": pod.source_key, "start": pod.start, "end": pod.end})


def _renumber(holders: list[SharedHolder]) -> tuple[tuple[SharedHolder, ...], dict[str, str]]:
    """Job ids in submit order, as slurmctld hands them out."""
    jobs = sorted((h for h in holders if h.domain == "slurm"),
                  key=lambda h: (h.submit, h.node.name, h.gpu, h.start, h.job_id))
    ids = {h.job_id: FIRST_JOB_ID + k for k, h in enumerate(jobs)}
    out = []
    for h in holders:
        if h.domain == "slurm":
            new = ids[h.job_id]
            h = replace(h, job_id=new, source_key=str(new),
                        name=f"{h.name.rsplit('-', 1)[0]}-{new % 1000:03d}")
        out.append(h)
    return tuple(out), {str(old): str(new) for old, new in ids.items()}


def physical_segments(holders: tuple[SharedHolder, ...]) -> dict[int, tuple[Segment, ...]]:
    """Each holder's share of its physical GPU over time: MIG ``units × slices / 7``; time
    slicing and shards split each second among the holders present, by units."""
    out: dict[int, tuple[Segment, ...]] = {}
    pooled: dict[tuple[str, int], list[int]] = {}
    for k, h in enumerate(holders):
        if h.instance is not None:
            out[k] = ((h.start, h.end, Fraction(h.units * h.instance.slices, GPU_SLICES)),)
        else:
            pooled.setdefault((h.node.name, h.gpu), []).append(k)
    for members in pooled.values():
        cuts = sorted({t for k in members for t in (holders[k].start, holders[k].end)})
        pieces: dict[int, list[Segment]] = {k: [] for k in members}
        for lo, hi in pairwise(cuts):
            present = [k for k in members if holders[k].start <= lo and holders[k].end >= hi]
            total = sum(holders[k].units for k in present)
            for k in present:
                share = Fraction(holders[k].units, total)
                run = pieces[k]
                if run and run[-1][1] == lo and run[-1][2] == share:
                    run[-1] = (run[-1][0], hi, share)
                else:
                    run.append((lo, hi, share))
        for k, run in pieces.items():
            out[k] = tuple(run)
    return out


def plan_sharing(cfg: SimConfig, sharing: SharingWorld, gen_start: int,
                 ksm_scrapes: tuple[int, int]) -> SharingPlan:
    """``ksm_scrapes``: the window's first and last kube-state-metrics scrape (``_seen``)."""
    return _Planner(cfg, sharing, gen_start, ksm_scrapes).plan()


def pod_uid(seed: int, h: SharedHolder) -> str:
    return k8s_uid(seed, "shared-pod", h.namespace, h.name)
