"""Planted scenarios: the mistakes the ledger must find and the decoys it must not flag.

Mistakes (truth/incidents.csv): a Slurm job that overruns the 08:00 handover of a shared node
while a pod starts on its GPUs (drain missed); a pod that overruns 20:00 while a Slurm job starts
on its GPUs (cordon missed); gang jobs whose pods start only partly; notebooks idle for hours.
Decoys (world.json ``decoys``): a clean handover (the Slurm job ends exactly when the pod
starts) and an inference pod restart with a 20-minute warm-up at low GPU use.
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from simulator.arrivals import Arrival
from simulator.config import DAY, HOUR, MINUTE
from simulator.k8s_jobs import (
    DEPLOYMENTS,
    JOB_TTL_SECONDS,
    PYTORCH_IMAGE,
    STREAM_BY_NS,
    K8sBatch,
    K8sSide,
)
from simulator.k8s_model import AttemptPlan, PodPlan
from simulator.records import Incident, Profile
from simulator.rng import k8s_uid, pod_suffix, short_hex, stream
from simulator.scheduling import NoPlacement, Placement, place
from simulator.slurm_jobs import SlurmSide
from simulator.timefmt import iso_utc, weekday
from simulator.world import NAMESPACE_BY_NAME, SLURM_USERS, Node, World

PODS_READY_TIMEOUT = 20 * MINUTE  # waitForPodsReady.timeout (below the 30-min idle rule)
REQUEUE_BACKOFF = 60  # waitForPodsReady.requeuingStrategy.backoffBaseSeconds
NOTEBOOK_HOURS = 3
WARMUP = 20 * MINUTE
MAX_PLANTED_SHARED_NODES = 4


@dataclass
class Plantings:
    """What was planted, for world.json."""

    decoys: list[dict[str, object]] = field(default_factory=list)
    late_cordons: list[tuple[str, int, int]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class Planter:
    def __init__(self, world: World, slurm: SlurmSide, k8s: K8sSide, gen_start: int) -> None:
        cfg = world.config
        self.world = world
        self.slurm = slurm
        self.k8s = k8s
        self.gen_start = gen_start
        self.w0, self.w1 = cfg.window_start, cfg.window_end
        self.step = cfg.step_seconds
        self.rng = stream(cfg.seed, "planted")
        self.shared = [n for n in world.nodes if n.pool == "shared"]
        self.record = Plantings()
        self.warmup_day = min(1, cfg.days - 1)
        self.schedule = self._schedule()

    # ------------------------------------------------------------------ schedule

    def arrivals(self) -> Iterator[Arrival]:
        return iter(self.schedule)

    def reservations(self) -> dict[str, dict[str, list[tuple[int, int]]]]:
        """view -> node -> periods the ordinary schedulers must leave free, so that each
        shared-node scenario happens exactly as planted (and nothing else collides)."""
        out: dict[str, dict[str, list[tuple[int, int]]]] = {"slurm": {}, "kubernetes": {}}
        for a in self.schedule:
            node = str(a.param("node", ""))
            day = a.time - a.time % DAY
            if a.kind in ("drain_missed", "clean_handover"):
                out["slurm"].setdefault(node, []).append((day + 3 * HOUR + 30 * MINUTE,
                                                          day + 9 * HOUR + 30 * MINUTE))
                out["kubernetes"].setdefault(node, []).append((day + 8 * HOUR,
                                                               day + 10 * HOUR + 30 * MINUTE))
            elif a.kind == "cordon_missed":
                out["kubernetes"].setdefault(node, []).append((day + 16 * HOUR,
                                                               day + 22 * HOUR))
                out["slurm"].setdefault(node, []).append((day + 20 * HOUR,
                                                          day + 23 * HOUR + 30 * MINUTE))
        return out

    def _schedule(self) -> list[Arrival]:
        cfg = self.world.config
        out: list[Arrival] = [Arrival(self.gen_start + 60, "planted", 0, "inference")]
        decoy_done = False
        for d in range(cfg.days):
            day = self.w0 + d * DAY
            if weekday(day) < 5:
                taken: set[int] = set()
                for i, node in enumerate(self.shared[:MAX_PLANTED_SHARED_NODES]):
                    if (d + i) % 5 == 1:
                        out.append(_arrival(day + 4 * HOUR + 30 * MINUTE, "drain_missed",
                                            node=node.name))
                        taken.add(i)
                    if (d + 2 * i) % 5 == 3:
                        out.append(_arrival(day + 16 * HOUR + 30 * MINUTE, "cordon_missed",
                                            node=node.name))
                if not decoy_done:
                    free = [i for i in range(len(self.shared)) if i not in taken]
                    if free:
                        out.append(_arrival(day + 3 * HOUR + 50 * MINUTE, "clean_handover",
                                            node=self.shared[free[0]].name))
                        decoy_done = True
                notebooks = max(1, len(self.k8s.h100_nodes) // 8)
                for k in range(notebooks):
                    out.append(_arrival(day + 9 * HOUR + 58 * MINUTE + k * 60, "idle_notebook",
                                        n=k))
            if d % 2 == 0:
                variant = "evicted" if d % 4 == 0 else "late"
                out.append(_arrival(day + 11 * HOUR, "partial_gang", variant=variant))
            if d % 3 == 1 or cfg.days == 1:
                out.append(_arrival(day + 13 * HOUR, "preemption"))
        out.sort()
        return out

    def realize(self, arrival: Arrival) -> K8sBatch:
        try:
            return self._realize(arrival)
        except NoPlacement:
            self.record.skipped.append(f"{arrival.kind} {iso_utc(arrival.time)}: no GPUs free")
            return K8sBatch()

    def _realize(self, arrival: Arrival) -> K8sBatch:
        kind = arrival.kind
        if kind == "inference":
            restart = self.w0 + self.warmup_day * DAY + 10 * HOUR
            return self.inference(arrival.time, restart)
        node = self.world.node(str(arrival.param("node"))) if arrival.param("node") else None
        if kind == "drain_missed" and node is not None:
            return self.drain_missed(arrival.time, node)
        if kind == "cordon_missed" and node is not None:
            return self.cordon_missed(arrival.time, node)
        if kind == "clean_handover" and node is not None:
            return self.clean_handover(arrival.time, node)
        if kind == "idle_notebook":
            return self.idle_notebook(arrival.time)
        if kind == "partial_gang":
            return self.partial_gang(arrival.time, str(arrival.param("variant")))
        if kind == "preemption":
            return self.preemption(arrival.time)
        msg = f"expected a planted scenario kind, found {kind!r}"
        raise ValueError(msg)

    # ------------------------------------------------------------------ helpers

    def _align(self, t: int) -> int:
        """The first DCGM sample time at or after ``t``."""
        return self.w0 + math.ceil((t - self.w0) / self.step) * self.step

    def _vision_pod(self, created: int, node: Node, indices: tuple[int, ...], running: int,
                    end: int, *, label: str, scheduled: int | None = None) -> K8sBatch:
        """A team-vision Job with one pod pinned to ``indices`` on a shared node."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["team-vision"]
        spec = STREAM_BY_NS["team-vision"]
        job, job_uid, workload, wl_uid = k8s.job_identity(ns, spec.prefix)
        admitted = min(running - 5, created + 10)
        pods = k8s.run_pods(ns, job, 0, [Placement(node, indices)], admitted)
        bound = scheduled if scheduled is not None else min(admitted + 2, running)
        pods = [replace(p, scheduled=bound, running=running) for p in pods]
        pods = k8s.finish_pods(pods, end, "Succeeded", end + JOB_TTL_SECONDS)
        k8s.commit(pods)
        attempt = AttemptPlan(admitted=admitted, pods=tuple(pods), ready=running, ended=end)
        plan = k8s.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job, created,
                                 1, len(indices), spec.container, PYTORCH_IMAGE, (attempt,),
                                 owner_label=label)
        return K8sBatch(plans=[plan])

    # ------------------------------------------------------------------ shared-node scenarios

    def drain_missed(self, at: int, node: Node) -> K8sBatch:
        """A Slurm job started at night runs past 08:00; a pod starts on two of its GPUs.
        The node is reserved for this in both views, so nothing else collides."""
        day = at - at % DAY
        handover = day + 8 * HOUR
        indices = (0, 1, 2, 3)
        start = at + 60
        end = handover + self.rng.randint(50 * MINUTE, 80 * MINUTE)
        self.slurm.view.commit(node, indices, end)
        self.k8s.view.block(node, indices[2:], end)
        user = next(u for u in SLURM_USERS if u.name == "erin")
        slurm = self.slurm.planted_job(
            placement=Placement(node, indices), submit=at, start=start, end=end, user=user,
            account="ml-research", name="long-eval", timelimit_min=math.ceil((end - start) / 60)
            + 60)
        batch = self._vision_pod(handover - 10, node, indices[:2], handover + 30,
                                 handover + 2 * HOUR, label="alice")
        batch.slurm.append(slurm)
        return batch

    def cordon_missed(self, at: int, node: Node) -> K8sBatch:
        """A pod started in the afternoon runs past 20:00 (the node is cordoned late); Slurm
        starts a job on two of its GPUs at 20:00."""
        day = at - at % DAY
        handover = day + 20 * HOUR
        indices = (0, 1, 2, 3)
        start = at + 20
        end = handover + self.rng.randint(60 * MINUTE, 100 * MINUTE)
        batch = self._vision_pod(at, node, indices, start + 20, end, label="")
        self.record.late_cordons.append((node.name, handover, end))
        overlap = indices[:2]
        job_start = handover + 5
        job_end = job_start + 3 * HOUR
        self.slurm.view.commit(node, overlap, job_end)
        self.slurm.view.block(node, indices[2:], end)
        user = next(u for u in SLURM_USERS if u.name == "dave")
        batch.slurm.append(self.slurm.planted_job(
            placement=Placement(node, overlap), submit=handover - 2 * MINUTE, start=job_start,
            end=job_end, user=user, account="physics", name="md-sim", timelimit_min=240))
        return batch

    def clean_handover(self, at: int, node: Node) -> K8sBatch:
        """Decoy: the Slurm job ends at 08:00:00 exactly and the pod starts at 08:00:00."""
        day = at - at % DAY
        handover = day + 8 * HOUR
        start = day + 4 * HOUR
        indices = (0, 1, 2, 3)
        self.slurm.view.commit(node, indices, handover)
        user = next(u for u in SLURM_USERS if u.name == "bob")
        slurm = self.slurm.planted_job(
            placement=Placement(node, indices), submit=at, start=start, end=handover, user=user,
            account="ml-research", name="nightly-finetune", timelimit_min=300)
        batch = self._vision_pod(handover - 30, node, indices[:2], handover,
                                 handover + 2 * HOUR, label="alice", scheduled=handover)
        batch.slurm.append(slurm)
        job_id = slurm.records[0][1][0].job_id if slurm.records else ""
        pod = batch.plans[0].attempts[0].pods[0]
        self.record.decoys.append({
            "kind": "clean_handover", "node": node.name,
            "gpu_uuids": [node.gpu_uuids[i] for i in indices[:2]],
            "at": iso_utc(handover), "slurm_job": job_id,
            "pod": f"team-vision/{pod.name}",
            "why_not_an_incident": "the Slurm job ends exactly when the pod starts",
        })
        return batch

    # ------------------------------------------------------------------ kubernetes scenarios

    def idle_notebook(self, at: int) -> K8sBatch:
        """A notebook pod that holds a GPU for three hours at ~0 % (idle_allocation)."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["research"]
        owner = self.rng.choice(("bob", ""))
        admitted, placements = place(k8s.view, k8s.h100_nodes, 1, 1, at + 2, k8s.place_rng)
        p = placements[0]
        running = self._align(admitted + 20)
        end = running + NOTEBOOK_HOURS * HOUR
        name = k8s.next_name(ns.name, "notebook")
        pod_uid = k8s_uid(k8s.seed, "pod", ns.name, name)
        pod = PodPlan(
            name=name, uid=pod_uid, node=p.node, gpu_indices=p.gpu_indices, created=at,
            scheduled=admitted + 1, running=running, finished=end, final_phase="Succeeded",
            deleted=end + 5, profile=Profile("idle", self.rng.getrandbits(31)),
            pod_number=k8s.next_pod_number(),
        )
        k8s.view.commit(p.node, p.gpu_indices, end)
        workload = f"pod-{name}-{short_hex(k8s.seed, 'wl', ns.name, name)}"
        attempt = AttemptPlan(admitted=admitted, pods=(pod,), ready=running + 5, ended=end)
        plan = k8s.workload_plan(ns, workload, k8s_uid(k8s.seed, "workload", ns.name, workload),
                                 "Pod", name, pod_uid, "<none>", "<none>", at, 1, 1, "notebook",
                                 "quay.io/jupyter/pytorch-notebook:cuda12-latest", (attempt,),
                                 owner_label=owner)
        batch = K8sBatch(plans=[plan])
        start, stop = max(running, self.w0), min(end, self.w1)
        if stop - start >= 30 * MINUTE:
            batch.incidents.append(Incident(
                kind="idle_allocation", node=p.node.name, gpu_uuids=(p.node.gpu_uuids[
                    p.gpu_indices[0]],), start=start, end=stop, gpu_seconds=stop - start,
                slurm_job="", k8s_workload=f"{ns.name}/{workload}",
                detail=f"pod {ns.name}/{name} held 1 GPU below 5% busy for its whole run",
            ))
        return batch

    def partial_gang(self, at: int, variant: str) -> K8sBatch:
        """A 2-GPU x 4-pod gang of which only 3 pods start: evicted by PodsReadyTimeout after
        20 minutes (``evicted``) or completed when the 4th pod starts late (``late``)."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["team-llm"]
        spec = STREAM_BY_NS["team-llm"]
        gpus = 2
        started = min(3, len(k8s.h100_nodes))
        count = started + 1
        duration = 2 * HOUR
        job, job_uid, workload, wl_uid = k8s.job_identity(ns, spec.prefix)
        admitted, placements = k8s.place_pods(ns, started, gpus, at + 2, 0)
        early = k8s.run_pods(ns, job, 0, placements, admitted)
        for p in early:  # hold them at least until the timeout before placing the last pod
            k8s.view.commit(p.node, p.gpu_indices, admitted + PODS_READY_TIMEOUT)
        late_start = None
        if variant == "late":
            try:
                sched, late_place = place(k8s.view, k8s.h100_nodes, gpus, 1,
                                          admitted + 12 * MINUTE, k8s.place_rng)
            except NoPlacement:
                sched, late_place = admitted + DAY, []
            if sched + 20 < admitted + PODS_READY_TIMEOUT - MINUTE:
                late_start = sched + 20
        attempts: list[AttemptPlan] = []
        key = f"{ns.name}/{workload}"
        held = [(p.node, p.gpu_indices, p.running) for p in early]
        if late_start is not None:
            last = PodPlan(
                name=f"{job}-{started}-{_suffix(k8s, ns.name, job, 0, started)}",
                uid=k8s_uid(k8s.seed, "pod", ns.name, job, started), node=late_place[0].node,
                gpu_indices=late_place[0].gpu_indices, created=admitted + 1, scheduled=sched,
                running=late_start, finished=None, final_phase="", deleted=None,
                profile=Profile("gang_wait", self.rng.getrandbits(31), late_start),
                pod_number=k8s.next_pod_number(),
            )
            early = [replace(p, profile=Profile("gang_wait", p.profile.seed, late_start))
                     for p in early]
            end = late_start + duration
            pods = k8s.finish_pods([*early, last], end, "Succeeded", end + JOB_TTL_SECONDS)
            k8s.commit(pods)
            attempts.append(AttemptPlan(admitted=admitted, pods=tuple(pods), ready=late_start,
                                        ended=end))
            cut = late_start
            detail = (f"{started}/{count} pods running until the last pod started "
                      f"{(late_start - admitted) // 60} min after admission")
        else:
            evicted = admitted + PODS_READY_TIMEOUT
            early = [replace(p, profile=Profile("gang_wait", p.profile.seed, None))
                     for p in early]
            stuck = PodPlan(
                name=f"{job}-{started}-{_suffix(k8s, ns.name, job, 0, started)}",
                uid=k8s_uid(k8s.seed, "pod", ns.name, job, started), node=None,
                gpu_indices=(), created=admitted + 1, scheduled=None, running=None,
                finished=None, final_phase="", deleted=evicted + 2, profile=Profile("idle", 0),
                pod_number=k8s.next_pod_number(),
            )
            first = k8s.finish_pods(early, evicted, "Failed", evicted + 30)
            k8s.commit(first)
            requeue_at = evicted + REQUEUE_BACKOFF + self.rng.randint(0, 6)
            message = f"Exceeded the PodsReady timeout {key}"
            attempts.append(AttemptPlan(
                admitted=admitted, pods=(*first, stuck), ready=None, ended=evicted,
                evict_reason="PodsReadyTimeout", evict_message=message, requeue_at=requeue_at,
                outcome="evicted_pods_ready_timeout"))
            try:
                again, placements2 = k8s.place_pods(ns, count, gpus, requeue_at + 2, 0)
            except NoPlacement:  # stays pending after the eviction
                again, placements2 = None, []
            if again is not None:
                second = k8s.run_pods(ns, job, 1, placements2, again)
                ready = max(p.running or again for p in second)
                end = ready + duration
                second = k8s.finish_pods(second, end, "Succeeded", end + JOB_TTL_SECONDS)
                k8s.commit(second)
                attempts.append(AttemptPlan(admitted=again, pods=tuple(second), ready=ready,
                                            ended=end))
            cut = evicted
            detail = (f"{started}/{count} pods running; workload evicted by PodsReadyTimeout "
                      f"after {PODS_READY_TIMEOUT // 60} min")
        plan = k8s.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job, at,
                                 count, gpus, spec.container, PYTORCH_IMAGE, tuple(attempts),
                                 owner_label="grace")
        batch = K8sBatch(plans=[plan])
        # wasted: GPUs held by the running pods until all run (or the eviction), in the window
        stop = min(cut, self.w1)
        spans = [(n, ix, max(r, self.w0)) for n, ix, r in held if r is not None]
        waste = sum(len(ix) * max(0, stop - r) for _, ix, r in spans)
        if waste > 0:
            batch.incidents.append(Incident(
                kind="partial_gang", node=";".join(sorted({n.name for n, _, _ in spans})),
                gpu_uuids=tuple(n.gpu_uuids[i] for n, ix, _ in spans for i in ix),
                start=min(r for _, _, r in spans), end=stop, gpu_seconds=waste,
                slurm_job="", k8s_workload=key, detail=detail,
            ))
        return batch

    def preemption(self, at: int) -> K8sBatch:
        """An inference scale-up preempts a borrowing team-llm workload (Evicted: Preempted);
        the victim is requeued and admitted again later."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["team-llm"]
        spec = STREAM_BY_NS["team-llm"]
        gpus = min(8, min(n.gpu_count for n in k8s.h100_nodes))
        duration = 5 * HOUR
        job, job_uid, workload, wl_uid = k8s.job_identity(ns, spec.prefix)
        admitted, placements = k8s.place_pods(ns, 1, gpus, at + 2, 0)
        pods = k8s.run_pods(ns, job, 0, placements, admitted)
        running = pods[0].running or admitted
        preempt_at = running + 90 * MINUTE
        evicted = preempt_at - 2
        p = placements[0]
        # the preemptor: one more replica of the LLM server, on the victim's first GPU
        server = k8s.deployment_pod(
            DEPLOYMENTS[0][0], preempt_at - 5, p.node, p.gpu_indices[:1], preempt_at + 20,
            preempt_at + 4 * HOUR, Profile("infer", self.rng.getrandbits(31)),
            deleted=preempt_at + 4 * HOUR + 5, admitted=preempt_at - 1, scheduled=preempt_at + 1)
        message = (f"Preempted to accommodate a workload (UID: {server.uid}, JobUID: "
                   f"{server.owner_uid}) due to reclamation within the cohort")
        first = k8s.finish_pods(pods, preempt_at, "Failed", preempt_at + 30)
        k8s.commit(first)
        k8s.view.commit(p.node, p.gpu_indices[:1], preempt_at + 4 * HOUR)
        attempts = [AttemptPlan(admitted=admitted, pods=tuple(first), ready=running,
                                ended=evicted, evict_reason="Preempted", evict_message=message,
                                requeue_at=evicted, outcome="evicted_preempted")]
        try:
            again, placements2 = k8s.place_pods(ns, 1, gpus, preempt_at + MINUTE, 0)
        except NoPlacement:  # stays pending after the preemption
            victim = k8s.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job,
                                       at, 1, gpus, spec.container, PYTORCH_IMAGE,
                                       tuple(attempts), owner_label="bob")
            return K8sBatch(plans=[victim, server])
        second = k8s.run_pods(ns, job, 1, placements2, again)
        ready = max(x.running or again for x in second)
        end = ready + duration
        second = k8s.finish_pods(second, end, "Succeeded", end + JOB_TTL_SECONDS)
        k8s.commit(second)
        attempts.append(AttemptPlan(admitted=again, pods=tuple(second), ready=ready, ended=end))
        victim = k8s.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job, at, 1,
                                   gpus, spec.container, PYTORCH_IMAGE, tuple(attempts),
                                   owner_label="bob")
        return K8sBatch(plans=[victim, server])

    def inference(self, at: int, restart: int) -> K8sBatch:
        """Boot the inference Deployments; replica 0 of the LLM server is restarted at
        ``restart`` and warms up for 20 minutes at low GPU use (a decoy)."""
        k8s = self.k8s
        batch = k8s.boot_inference(at)
        first = batch.plans[0]
        old = first.attempts[0].pods[0]
        if old.node is None or not self.w0 <= restart < self.w1:
            return batch
        stop = restart - 20
        old_pod = replace(old, finished=stop, final_phase="Succeeded", deleted=stop + 1)
        batch.plans[0] = replace(first, attempts=(replace(
            first.attempts[0], pods=(old_pod,), ended=stop),))
        new = k8s.deployment_pod(
            DEPLOYMENTS[0][0], stop + 1, old.node, old.gpu_indices, restart, None,
            Profile("warmup", self.rng.getrandbits(31), restart + WARMUP))
        batch.plans.append(new)
        self.record.decoys.append({
            "kind": "warmup", "node": old.node.name,
            "gpu_uuids": [old.node.gpu_uuids[i] for i in old.gpu_indices],
            "at": iso_utc(restart), "until": iso_utc(restart + WARMUP),
            "pod": f"inference/{new.attempts[0].pods[0].name}",
            "why_not_an_incident": "below 5% busy for 20 minutes only (the rule needs 30)",
        })
        return batch


def _arrival(time: int, kind: str, **params: object) -> Arrival:
    return Arrival(time, "planted", 0, kind, tuple(sorted(params.items())))


def _suffix(k8s: K8sSide, namespace: str, job: str, attempt: int, index: int) -> str:
    return pod_suffix(k8s.seed, namespace, job, attempt, index)
