"""``--realistic`` planted scenarios: many incidents of every kind and decoys near each rule's
threshold (issue #15 item 1). On the benchmark size (``--days 7 --nodes hpc=8,k8s=12,shared=6
--step 60``) that is >= 20 incidents and >= 10 decoys per kind.

Incidents (truth/incidents.csv, computed with the rules of docs/detectors.md): the base
scenarios (drain and cordon missed, partial gangs evicted or completed late) on every shared node
and day, a partial gang across midnight, idle notebooks (one across midnight) and a 2-node Slurm
job with one wholly idle node. Decoys (world.json ``decoys``, each with ``imitates`` and
``why_not_an_incident``): handovers 0-90 s apart, a pod Succeeded just before 20:00 that lingers
while Slurm starts on its GPUs, gangs whose pods start within ~3 minutes, a partial admission
with ``minCount``, a notebook at 0 % for 20-28 minutes and one at 6-10 % for hours.
"""

import math
from dataclasses import replace

from simulator.arrivals import Arrival
from simulator.config import DAY, HOUR, MINUTE
from simulator.k8s_jobs import JOB_TTL_SECONDS, PYTORCH_IMAGE, STREAM_BY_NS, K8sBatch, K8sSide
from simulator.k8s_model import AttemptPlan, PodPlan
from simulator.planted import Planter, _arrival
from simulator.realistic import IDLE_MIN_SECONDS
from simulator.records import Incident, Profile
from simulator.rng import k8s_uid, short_hex, stream
from simulator.scheduling import Placement, place
from simulator.slurm_jobs import SlurmBatch, SlurmSide
from simulator.slurm_rows import RecordPlan, Shape, StepPlan
from simulator.timefmt import iso_utc, weekday
from simulator.world import NAMESPACE_BY_NAME, SLURM_USERS, Node, World

MORNING = ("drain_missed", "morning_handover")
EVENING = ("cordon_missed", "evening_handover")
GANG_SPREAD = 190  # quick gangs: last pod at most ~3 min after the first (grace: 300 s)


class RealisticPlanter(Planter):
    def __init__(self, world: World, slurm: SlurmSide, k8s: K8sSide, gen_start: int,
                 unlabelled: tuple[str, ...]) -> None:
        self.unlabelled = frozenset(unlabelled)
        self.real_rng = stream(world.config.seed, "planted-realistic")
        super().__init__(world, slurm, k8s, gen_start)

    # ------------------------------------------------------------------ schedule

    def reservations(self) -> dict[str, dict[str, list[tuple[int, int]]]]:
        out: dict[str, dict[str, list[tuple[int, int]]]] = {"slurm": {}, "kubernetes": {}}
        for a in self.schedule:
            node = str(a.param("node", ""))
            day = a.time - a.time % DAY
            if a.kind in MORNING:
                out["slurm"].setdefault(node, []).append((day + 3 * HOUR + 30 * MINUTE,
                                                          day + 9 * HOUR + 30 * MINUTE))
                out["kubernetes"].setdefault(node, []).append((day + 8 * HOUR,
                                                               day + 10 * HOUR + 30 * MINUTE))
            elif a.kind in EVENING:
                out["kubernetes"].setdefault(node, []).append((day + 16 * HOUR,
                                                               day + 22 * HOUR))
                out["slurm"].setdefault(node, []).append((day + 20 * HOUR,
                                                          day + 23 * HOUR + 30 * MINUTE))
        return out

    def _schedule(self) -> list[Arrival]:
        cfg = self.world.config
        out: list[Arrival] = [Arrival(self.gen_start + 60, "planted", 0, "inference")]
        for d in range(cfg.days):
            day = self.w0 + d * DAY
            if weekday(day) < 5:  # shared nodes change hands on weekdays only
                for i, node in enumerate(self.shared):
                    morning, evening = MORNING[(d + i) % 2], EVENING[(d + i + 1) % 2]
                    at = (4 * HOUR + 30 * MINUTE if morning == "drain_missed"
                          else 3 * HOUR + 50 * MINUTE)
                    out.append(_arrival(day + at, morning, node=node.name))
                    out.append(_arrival(day + 16 * HOUR + 30 * MINUTE, evening, node=node.name))
            out.append(_arrival(day + 11 * HOUR, "partial_gang", variant="evicted"))
            out.append(_arrival(day + 15 * HOUR, "partial_gang", variant="late"))
            out.append(_arrival(day + 19 * HOUR, "partial_gang", variant="late"))
            out.append(_arrival(day + 23 * HOUR + 40 * MINUTE, "partial_gang",
                                variant="evicted" if d % 2 else "late"))
            out.append(_arrival(day + 12 * HOUR + 30 * MINUTE, "quick_gang"))
            out.append(_arrival(day + 17 * HOUR, "min_count_gang"))
            for at in (10 * HOUR, 16 * HOUR + 10 * MINUTE, 22 * HOUR + 20 * MINUTE):
                out.append(_arrival(day + at, "notebook", variant="idle"))
            out.append(_arrival(day + 9 * HOUR, "notebook", variant="pause"))
            out.append(_arrival(day + 14 * HOUR, "notebook", variant="low"))
            out.append(_arrival(day + 13 * HOUR, "multi_node_idle"))
            if d % 3 == 1 or cfg.days == 1:
                out.append(_arrival(day + 13 * HOUR + 20 * MINUTE, "preemption"))
        out.sort()
        return out

    def _realize(self, arrival: Arrival) -> K8sBatch:
        kind = arrival.kind
        node = self.world.node(str(arrival.param("node"))) if arrival.param("node") else None
        if kind == "morning_handover" and node is not None:
            return self.morning_handover(arrival.time, node)
        if kind == "evening_handover" and node is not None:
            return self.evening_handover(arrival.time, node)
        if kind == "notebook":
            return self.notebook(arrival.time, str(arrival.param("variant")))
        if kind == "quick_gang":
            return self.gang_decoy(arrival.time, min_count=False)
        if kind == "min_count_gang":
            return self.gang_decoy(arrival.time, min_count=True)
        if kind == "multi_node_idle":
            return self.multi_node_idle(arrival.time)
        return super()._realize(arrival)

    def inference(self, at: int, restart: int) -> K8sBatch:
        batch = super().inference(at, restart)
        for decoy in self.record.decoys:  # the base world's warm-up decoy
            decoy.setdefault("imitates", "idle_allocation")
        return batch

    def _decoy(self, imitates: str, **fields: object) -> None:
        self.record.decoys.append({"imitates": imitates, **fields})

    # ------------------------------------------------------------------ double_scheduled decoys

    def morning_handover(self, at: int, node: Node) -> K8sBatch:
        """The Slurm job ends at 08:00:00, the pod starts 0-90 s later on the same GPUs."""
        day = at - at % DAY
        handover = day + 8 * HOUR
        gap = self.real_rng.randint(0, 90)
        indices = (0, 1, 2, 3)
        self.slurm.view.commit(node, indices, handover)
        user = next(u for u in SLURM_USERS if u.name == "bob")
        slurm = self.slurm.planted_job(
            placement=Placement(node, indices), submit=at, start=day + 4 * HOUR, end=handover,
            user=user, account="ml-research", name="nightly-finetune", timelimit_min=300)
        batch = self._vision_pod(handover - 30, node, indices[:2], handover + gap,
                                 handover + 2 * HOUR, label="alice",
                                 scheduled=handover + max(0, gap - 2))
        batch.slurm.append(slurm)
        job_id = slurm.records[0][1][0].job_id if slurm.records else ""
        pod = batch.plans[0].attempts[0].pods[0]
        self._decoy("double_scheduled", kind="handover_gap", node=node.name,
                    gpu_uuids=[node.gpu_uuids[i] for i in indices[:2]], at=iso_utc(handover),
                    gap_seconds=gap, slurm_job=job_id, pod=f"team-vision/{pod.name}",
                    why_not_an_incident=f"the pod starts {gap} s after the Slurm job ended")
        return batch

    def evening_handover(self, at: int, node: Node) -> K8sBatch:
        """A pod Succeeds 0-90 s before 20:00 and lingers (Succeeded, not deleted) for its
        Job's TTL while Slurm starts a job on its GPUs at 20:00."""
        day = at - at % DAY
        handover = day + 20 * HOUR
        gap = self.real_rng.randint(0, 90)
        indices = (0, 1, 2, 3)
        batch = self._vision_pod(at, node, indices, at + 20, handover - gap, label="")
        job_end = handover + 3 * HOUR
        self.slurm.view.commit(node, indices[:2], job_end)
        user = next(u for u in SLURM_USERS if u.name == "dave")
        slurm = self.slurm.planted_job(
            placement=Placement(node, indices[:2]), submit=handover - 2 * MINUTE,
            start=handover, end=job_end, user=user, account="physics", name="md-sim",
            timelimit_min=240)
        batch.slurm.append(slurm)
        job_id = slurm.records[0][1][0].job_id if slurm.records else ""
        pod = batch.plans[0].attempts[0].pods[0]
        self._decoy("double_scheduled", kind="lingering_succeeded_pod", node=node.name,
                    gpu_uuids=[node.gpu_uuids[i] for i in indices[:2]], at=iso_utc(handover),
                    gap_seconds=gap, slurm_job=job_id, pod=f"team-vision/{pod.name}",
                    why_not_an_incident=f"the pod Succeeded {gap} s before the Slurm job "
                                        f"started; it lingers until its Job's TTL "
                                        f"({JOB_TTL_SECONDS} s) but holds no GPU")
        return batch

    # ------------------------------------------------------------------ partial_gang decoys

    def gang_decoy(self, at: int, *, min_count: bool) -> K8sBatch:
        """A 4-pod gang whose pods start within ~3 minutes (below the 300 s grace), or one
        admitted partially with ``minCount`` 3 (Kueue sets the Job's parallelism to 3)."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["team-llm"]
        spec = STREAM_BY_NS["team-llm"]
        gpus, count = 2, min(4, len(k8s.h100_nodes))
        admitted_pods = count - 1 if min_count else count
        job, job_uid, workload, wl_uid = k8s.job_identity(ns, spec.prefix)
        admitted, placements = k8s.place_pods(ns, admitted_pods, gpus, at + 2, 0)
        pods = k8s.run_pods(ns, job, 0, placements, admitted)
        if not min_count:
            first = admitted + 10
            offsets = [0, *sorted(self.real_rng.randint(20, GANG_SPREAD)
                                  for _ in pods[1:])]
            pods = [replace(p, scheduled=first + o - 5, running=first + o)
                    for p, o in zip(pods, offsets, strict=True)]
        ready = max(p.running or admitted for p in pods)
        end = ready + 2 * HOUR
        pods = k8s.finish_pods(pods, end, "Succeeded", end + JOB_TTL_SECONDS)
        k8s.commit(pods)
        attempt = AttemptPlan(admitted=admitted, pods=tuple(pods), ready=ready, ended=end)
        plan = k8s.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job, at,
                                 count, gpus, spec.container, PYTORCH_IMAGE, (attempt,),
                                 owner_label="grace", min_count=count - 1 if min_count else None)
        if min_count:
            plan = replace(plan, admitted_count=admitted_pods)
            self._decoy("partial_gang", kind="partial_admission_min_count",
                        workload=plan.key, pods_wanted=count, min_count=count - 1,
                        admitted=admitted_pods, at=iso_utc(admitted),
                        why_not_an_incident=f"Kueue admitted {admitted_pods} of {count} pods "
                                            "(minCount) and set the Job's parallelism to "
                                            f"{admitted_pods}; all of them ran")
        else:
            spread = ready - min(p.running or ready for p in pods)
            self._decoy("partial_gang", kind="quick_gang", workload=plan.key, pods=count,
                        at=iso_utc(admitted), start_spread_seconds=spread,
                        pods_ready_after_admission_seconds=ready - admitted,
                        why_not_an_incident=f"all pods ran within {spread} s of the first "
                                            "(below gang_grace_seconds 300)")
        return K8sBatch(plans=[plan])

    # ------------------------------------------------------------------ idle_allocation

    def notebook(self, at: int, variant: str) -> K8sBatch:
        """A 1-GPU notebook on a node whose exporter has pod labels: ``idle`` (3 h at ~0 %, an
        incident), ``pause`` (0 % for 20-28 min then busy) or ``low`` (6-10 % for 4 h)."""
        k8s = self.k8s
        ns = NAMESPACE_BY_NAME["research"]
        owner = self.rng.choice(("bob", ""))
        nodes = [n for n in k8s.h100_nodes if n.name not in self.unlabelled] or k8s.h100_nodes
        admitted, placements = place(k8s.view, nodes, 1, 1, at + 2, k8s.place_rng)
        p = placements[0]
        running = self._align(admitted + 20)
        seed = self.rng.getrandbits(31)
        pause = 0
        if variant == "idle":
            profile, hours = Profile("idle", seed), 3 * HOUR
        elif variant == "pause":  # whole scrapes only, below the idle minimum
            pause = (self.real_rng.randint(20, 28) * MINUTE) // self.step * self.step
            pause = min(pause, IDLE_MIN_SECONDS - self.step)
            profile, hours = Profile("warmup", seed, running + pause), 2 * HOUR
        else:
            profile, hours = Profile("low_steady", seed, running), 4 * HOUR
        end = running + hours
        name = k8s.next_name(ns.name, "notebook")
        pod_uid = k8s_uid(k8s.seed, "pod", ns.name, name)
        pod = PodPlan(
            name=name, uid=pod_uid, node=p.node, gpu_indices=p.gpu_indices, created=at,
            scheduled=admitted + 1, running=running, finished=end, final_phase="Succeeded",
            deleted=end + 5, profile=profile, pod_number=k8s.next_pod_number(),
        )
        k8s.view.commit(p.node, p.gpu_indices, end)
        workload = f"pod-{name}-{short_hex(k8s.seed, 'wl', ns.name, name)}"
        attempt = AttemptPlan(admitted=admitted, pods=(pod,), ready=running + 5, ended=end)
        plan = k8s.workload_plan(ns, workload, k8s_uid(k8s.seed, "workload", ns.name, workload),
                                 "Pod", name, pod_uid, "<none>", "<none>", at, 1, 1, "notebook",
                                 "quay.io/jupyter/pytorch-notebook:cuda12-latest", (attempt,),
                                 owner_label=owner)
        batch = K8sBatch(plans=[plan])
        uuid = p.node.gpu_uuids[p.gpu_indices[0]]
        start, stop = max(running, self.w0), min(end, self.w1)
        if variant == "idle" and stop - start >= IDLE_MIN_SECONDS:
            batch.incidents.append(Incident(
                kind="idle_allocation", node=p.node.name, gpu_uuids=(uuid,), start=start,
                end=stop, gpu_seconds=stop - start, slurm_job="",
                k8s_workload=f"{ns.name}/{workload}",
                detail=f"pod {ns.name}/{name} held 1 GPU below 5% busy for its whole run"))
        elif variant == "pause":
            self._decoy("idle_allocation", kind="short_zero_phase", node=p.node.name,
                        gpu_uuids=[uuid], pod=f"{ns.name}/{name}", at=iso_utc(running),
                        until=iso_utc(running + pause),
                        why_not_an_incident=f"0-3% for {pause // 60} min only (the rule needs "
                                            f"{IDLE_MIN_SECONDS // 60})")
        elif variant == "low":
            self._decoy("idle_allocation", kind="low_but_busy", node=p.node.name,
                        gpu_uuids=[uuid], pod=f"{ns.name}/{name}", at=iso_utc(running),
                        until=iso_utc(end),
                        why_not_an_incident="6-10% busy for hours: above the 5% threshold")
        return batch

    def multi_node_idle(self, at: int) -> K8sBatch:
        """A 2-node Slurm job whose second node's GPUs stay at ~0 % for the whole run."""
        slurm = self.slurm
        hpc = [n for n in self.world.nodes if n.pool == "slurm"]
        model = max(("a100", "h100"), key=lambda m: sum(1 for n in hpc if n.gpu_model == m))
        nodes = [n for n in hpc if n.gpu_model == model]
        gpn = min(n.gpu_count for n in nodes)
        duration = 2 * HOUR + self.real_rng.randint(0, 60) * MINUTE
        sched, placements = place(slurm.view, nodes, gpn, 2, at + 30, slurm.place_rng,
                                  duration=duration + 5 * MINUTE, owner="slurm")
        start = self._align(sched + 5)
        end = start + duration // self.step * self.step
        for p in placements:
            slurm.view.commit(p.node, p.gpu_indices, end)
        user = next(u for u in SLURM_USERS if u.name == "erin")
        job_id = slurm._take_id()  # the planted jobs share Slurm's id sequence
        plan = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name="ddp-train", user=user,
            account="ml-research", partition="gpu", qos="normal", submit=at, eligible=at,
            start=start, end=end, state="COMPLETED", exit_code="0:0", derived_exit_code="0:0",
            timelimit_min=math.ceil(duration / 60) + 60, placements=tuple(placements),
            shape=Shape(8 * gpn, 64 * 1024 * gpn, gpn, model, True,
                        gres_type=slurm.mix.gres.whole_override(model)),
            flags="SchedBackfill,StartRecieved",
            steps=(StepPlan("batch", "batch", start, end, "COMPLETED", "0:0",
                            first_node_only=True),
                   StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
                   StepPlan("0", "torchrun", start + 3, end - 2, "COMPLETED", "0:0")),
            profile=Profile("hpc", job_id), outcome="completed",
        )
        sb = SlurmBatch([], [])
        sb.add(plan, self.w0, self.w1, slurm.cluster)
        sb.jobs += 1
        idle = placements[-1].node
        sb.holders = [replace(h, profile=Profile("idle", job_id)) if h.node is idle else h
                      for h in sb.holders]
        batch = K8sBatch(slurm=[sb])
        lo, hi = max(start, self.w0), min(end, self.w1)
        if hi - lo >= IDLE_MIN_SECONDS:
            uuids = tuple(idle.gpu_uuids[i] for i in placements[-1].gpu_indices)
            batch.incidents.append(Incident(
                kind="idle_allocation", node=idle.name, gpu_uuids=uuids, start=lo, end=hi,
                gpu_seconds=len(uuids) * (hi - lo), slurm_job=str(job_id), k8s_workload="",
                detail=f"Slurm job {job_id}: node {idle.name} (1 of 2 nodes) held {len(uuids)} "
                       "GPUs below 5% busy for the whole run"))
        return batch
