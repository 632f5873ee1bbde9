"""The Kubernetes side: Kueue-managed batch Jobs per namespace, inference Deployments, and
slurm-bridge pods that Slurm places on shared nodes at night.

Every workload is planned whole when it arrives (all attempts, pods and times), on the
Kubernetes view of the GPUs (slurm-bridge pods: on the Slurm view).
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from simulator.arrivals import Arrival, log_uniform, merge, poisson
from simulator.config import DAY, HOUR, MINUTE
from simulator.dra import DEVICE_CLASS, chosen
from simulator.k8s_model import JOB_TTL_SECONDS, AttemptPlan, PodPlan, WorkloadPlan
from simulator.records import Incident, Profile
from simulator.rng import k8s_uid, pod_suffix, short_hex, stream
from simulator.scheduling import MAX_WAIT, NoPlacement, Placement, View, place
from simulator.slurm_jobs import SlurmBatch, SlurmSide
from simulator.world import KUEUE_FLAVORS, NAMESPACE_BY_NAME, Namespace, Node, World

PYTORCH_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
SERVING_IMAGE = "nvcr.io/nvidia/tritonserver:24.05-py3"
FAILURE_RATE = 0.06


@dataclass(frozen=True)
class BatchStream:
    """A namespace's stream of batch Jobs."""

    namespace: str
    prefix: str
    share: float  # of the H100 pool (team-vision: of the shared A100s in the day)
    pods: tuple[int, ...]
    gpus: tuple[int, ...]
    min_duration: int
    max_duration: int
    container: str


BATCH_STREAMS = (
    BatchStream("team-llm", "llm-train", 0.5, (1, 1, 2, 4), (2, 4, 8), 1 * HOUR, 12 * HOUR,
                "trainer"),
    BatchStream("research", "research-job", 0.3, (1,), (1, 2, 4), 1 * HOUR, 8 * HOUR, "worker"),
    BatchStream("sandbox", "sandbox-test", 0.2, (1,), (1, 2), 30 * MINUTE, 4 * HOUR, "main"),
    BatchStream("team-vision", "vit-finetune", 0.6, (1, 2), (1, 2, 4), 20 * MINUTE, 4 * HOUR,
                "trainer"),
)
STREAM_BY_NS = {s.namespace: s for s in BATCH_STREAMS}
DEPLOYMENTS = (("model-server-llama", 2), ("model-server-embed", 1))


def _log_uniform_mean(low: int, high: int) -> float:
    return (high - low) / math.log(high / low)


@dataclass
class K8sBatch:
    plans: list[WorkloadPlan] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    slurm: list[SlurmBatch] = field(default_factory=list)


class K8sSide:
    def __init__(self, world: World, k8s_view: View, slurm_view: View, slurm: SlurmSide,
                 gen_start: int) -> None:
        cfg = world.config
        self.world = world
        self.seed = cfg.seed
        self.view = k8s_view
        self.slurm_view = slurm_view
        self.slurm = slurm
        self.gen_start = gen_start
        self.w0, self.w1 = cfg.window_start, cfg.window_end
        self.rng = stream(cfg.seed, "k8s-spec")
        self.place_rng = stream(cfg.seed, "k8s-place")
        self.h100_nodes = [n for n in world.nodes if n.pool == "kubernetes"]
        self.shared_nodes = [n for n in world.nodes if n.pool == "shared"]
        self.counters: dict[str, int] = {}
        self.pod_numbers = 0
        self.deployment_pods: dict[str, list[tuple[Node, tuple[int, ...]]]] = {}

    # ------------------------------------------------------------------ arrivals

    def arrivals(self) -> Iterator[Arrival]:
        cfg = self.world.config
        h100 = sum(n.gpu_count for n in self.h100_nodes)
        shared = sum(n.gpu_count for n in self.shared_nodes)
        inference = sum(replicas for _, replicas in DEPLOYMENTS)
        streams = []
        for spec in BATCH_STREAMS:
            mean_pods = sum(spec.pods) / len(spec.pods)
            mean_gpus = sum(spec.gpus) / len(spec.gpus)
            mean = mean_pods * mean_gpus * _log_uniform_mean(spec.min_duration,
                                                            spec.max_duration)
            if spec.namespace == "team-vision":
                capacity = shared * 60 / 168
            else:
                capacity = max(1, h100 - inference)
            rate = cfg.load * spec.share * capacity / mean
            rng = stream(cfg.seed, f"k8s-arrivals-{spec.namespace}")
            streams.append(poisson(rng, self.gen_start, self.w1, rate, f"k8s-{spec.namespace}",
                                   _forever(spec.namespace)))
        bridge_rate = 0.15 * shared * 108 / 168 / (1.5 * _log_uniform_mean(30 * MINUTE, 3 * HOUR))
        streams.append(poisson(stream(cfg.seed, "k8s-arrivals-bridge"), self.gen_start, self.w1,
                               bridge_rate, "k8s-bridge", _forever("bridge")))
        return merge(*streams)

    # ------------------------------------------------------------------ naming

    def next_name(self, namespace: str, prefix: str) -> str:
        key = f"{namespace}/{prefix}"
        n = self.counters.get(key, 0) + 1
        self.counters[key] = n
        return f"{prefix}-{n:06d}"

    def next_pod_number(self) -> int:
        self.pod_numbers += 1
        return self.pod_numbers

    # ------------------------------------------------------------------ realization

    def realize(self, arrival: Arrival) -> K8sBatch:
        if arrival.kind == "bridge":
            return self.bridge_pod(arrival.time)
        spec = STREAM_BY_NS[arrival.kind]
        rng = self.rng
        ns = NAMESPACE_BY_NAME[spec.namespace]
        pods = min(rng.choice(spec.pods), max(1, len(self._nodes_for(ns)) - 1))
        gpus = rng.choice(spec.gpus)
        while pods * gpus > 16:  # a gang takes at most two full nodes
            gpus //= 2
        duration = log_uniform(rng, spec.min_duration, spec.max_duration)
        fail = rng.random() < FAILURE_RATE
        plan = self.batch_job(ns, spec, arrival.time, pods, gpus, duration, fail=fail)
        return K8sBatch(plans=[plan])

    def _nodes_for(self, ns: Namespace) -> list[Node]:
        return self.shared_nodes if ns.flavor_model == "a100" else self.h100_nodes

    def place_pods(self, ns: Namespace, pods: int, gpus: int, earliest: int,
                   bound: int) -> tuple[int, list[Placement]]:
        owner = "kubernetes" if ns.flavor_model == "a100" else ""
        return place(self.view, self._nodes_for(ns), gpus, pods, earliest, self.place_rng,
                     duration=bound, owner=owner)

    def job_identity(self, ns: Namespace, spec_prefix: str) -> tuple[str, str, str, str]:
        """(job name, job uid, workload name, workload uid) of a new batch Job."""
        job = self.next_name(ns.name, spec_prefix)
        job_uid = k8s_uid(self.seed, "job", ns.name, job)
        workload = f"job-{job}-{short_hex(self.seed, 'wl', ns.name, job)}"
        return job, job_uid, workload, k8s_uid(self.seed, "workload", ns.name, workload)

    def run_pods(self, ns: Namespace, job: str, attempt_no: int, placements: list[Placement],
                 admitted: int, profile_kind: str = "train") -> list[PodPlan]:
        """Pods of one admission, created right after it and running 8-45 s later."""
        rng = self.rng
        out = []
        for i, p in enumerate(placements):
            name = f"{job}-{i}-{pod_suffix(self.seed, ns.name, job, attempt_no, i)}"
            running = admitted + rng.randint(8, 45)
            out.append(PodPlan(
                name=name, uid=k8s_uid(self.seed, "pod", ns.name, name), node=p.node,
                gpu_indices=p.gpu_indices, created=admitted + 1,
                scheduled=admitted + 2 + i % 3, running=running, finished=None,
                final_phase="", deleted=None,
                profile=Profile(profile_kind, rng.getrandbits(31)),
                pod_number=self.next_pod_number(),
            ))
        return out

    @staticmethod
    def finish_pods(pods: list[PodPlan], end: int, phase: str, deleted: int) -> list[PodPlan]:
        return [replace(p, finished=max(end, (p.running or end) + 1), final_phase=phase,
                        deleted=deleted) for p in pods]

    def commit(self, pods: list[PodPlan], view: View | None = None) -> None:
        target = view or self.view
        for p in pods:
            if p.node is not None:
                until = p.finished if p.finished is not None else self.w1 + 2 * DAY
                target.commit(p.node, p.gpu_indices, until)

    def batch_job(self, ns: Namespace, spec: BatchStream, created: int, pods: int, gpus: int,
                  duration: int, *, fail: bool = False) -> WorkloadPlan:
        rng = self.rng
        job, job_uid, workload, wl_uid = self.job_identity(ns, spec.prefix)
        owner_label = rng.choice(ns.owners)
        try:
            admitted, placements = self.place_pods(ns, pods, gpus, created + 2,
                                                   duration + 2 * MINUTE)
        except NoPlacement:  # never admitted: the user deletes the Job after MAX_WAIT
            plan = self.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job,
                                      created, pods, gpus, spec.container, PYTORCH_IMAGE, (),
                                      owner_label=owner_label)
            return replace(plan, deleted=created + MAX_WAIT)
        running = self.run_pods(ns, job, 0, placements, admitted)
        ready = max(p.running or admitted for p in running)
        if fail:
            end = ready + int(duration * rng.uniform(0.1, 0.6))
            phase, outcome = "Failed", "failed"
        else:
            end = ready + duration
            phase, outcome = "Succeeded", "succeeded"
        finished = self.finish_pods(running, end, phase, end + JOB_TTL_SECONDS)
        self.commit(finished)
        attempt = AttemptPlan(admitted=admitted, pods=tuple(finished), ready=ready, ended=end,
                              outcome=outcome)
        # some gangs allow partial admission (podSets[].minCount); all of them got every pod
        min_count = pods - 1 if pods > 1 and rng.random() < 0.25 else None
        return self.workload_plan(ns, workload, wl_uid, "Job", job, job_uid, "Job", job,
                                  created, pods, gpus, spec.container, PYTORCH_IMAGE,
                                  (attempt,), owner_label=owner_label, min_count=min_count)

    def workload_plan(self, ns: Namespace, workload: str, wl_uid: str, owner_kind: str,
                      owner_name: str, owner_uid: str, pod_owner_kind: str, pod_owner_name: str,
                      created: int, count: int, gpus: int, container: str, image: str,
                      attempts: tuple[AttemptPlan, ...], *, owner_label: str = "",
                      min_count: int | None = None, managed: bool = True,
                      view: str = "kubernetes") -> WorkloadPlan:
        return WorkloadPlan(
            namespace=ns, name=workload, uid=wl_uid, owner_kind=owner_kind,
            owner_name=owner_name, owner_uid=owner_uid, pod_owner_kind=pod_owner_kind,
            pod_owner_name=pod_owner_name, created=created, count=count, gpus_per_pod=gpus,
            cpus_per_pod=8 * gpus, mem_gb_per_pod=64 * gpus,
            flavor=KUEUE_FLAVORS[ns.flavor_model if managed else "a100"], container=container,
            image=image, owner_label=owner_label, attempts=attempts, min_count=min_count,
            managed_by_kueue=managed, view=view,
        )

    # ------------------------------------------------------------------ slurm-bridge

    def bridge_pod(self, created: int) -> K8sBatch:
        """A pod that slurm-bridge hands to Slurm: Slurm places a representative job on a shared
        node while Slurm owns it; the pod runs exactly the representative job's time."""
        rng = self.rng
        ns = NAMESPACE_BY_NAME["research"]
        gpus = rng.choice((1, 2))
        duration = log_uniform(rng, 30 * MINUTE, 3 * HOUR)
        try:
            start, placements = place(self.slurm_view, self.shared_nodes, gpus, 1, created + 5,
                                      self.place_rng, duration=duration + 5 * MINUTE,
                                      owner="slurm")
        except NoPlacement:
            return K8sBatch()
        p = placements[0]
        job = self.next_name(ns.name, "bridge-eval")
        name = f"{job}-0-{pod_suffix(self.seed, ns.name, job)}"
        end = start + duration
        pod = PodPlan(
            name=name, uid=k8s_uid(self.seed, "pod", ns.name, name), node=p.node,
            gpu_indices=p.gpu_indices, created=created, scheduled=start - 1, running=start,
            finished=end, final_phase="Succeeded", deleted=end + JOB_TTL_SECONDS,
            profile=Profile("train", rng.getrandbits(31)), pod_number=self.next_pod_number(),
        )
        self.slurm_view.commit(p.node, p.gpu_indices, end)
        attempt = AttemptPlan(admitted=start - 1, pods=(pod,), ready=start, ended=end)
        plan = self.workload_plan(ns, job, k8s_uid(self.seed, "job", ns.name, job), "", job,
                                  k8s_uid(self.seed, "job", ns.name, job), "Job", job, created,
                                  1, gpus, "eval", PYTORCH_IMAGE, (attempt,),
                                  owner_label=rng.choice(("bob", "")), managed=False,
                                  view="slurm")
        rep = self.slurm.bridge_job(pod_key=f"{ns.name}/{name}", pod_name=name, placement=p,
                                    submit=created + 2, start=start, end=end,
                                    gpus_cpus_mem=(gpus, 8 * gpus, 64 * gpus),
                                    gres_type=DEVICE_CLASS if chosen(self.world.config,
                                                                     ns.name, job) else "")
        return K8sBatch(plans=[plan], slurm=[rep])

    # ------------------------------------------------------------------ inference

    def deployment_pod(self, deployment: str, created: int, node: Node,
                       indices: tuple[int, ...], running: int, finished: int | None,
                       profile: Profile, *, deleted: int | None = None,
                       admitted: int | None = None, scheduled: int | None = None) -> WorkloadPlan:
        ns = NAMESPACE_BY_NAME["inference"]
        rs = f"{deployment}-{short_hex(self.seed, 'rs', deployment, length=10)}"
        name = f"{rs}-{pod_suffix(self.seed, 'deploy', deployment, created)}"
        pod_uid = k8s_uid(self.seed, "pod", ns.name, name)
        pod = PodPlan(
            name=name, uid=pod_uid, node=node, gpu_indices=indices, created=created,
            scheduled=created + 2 if scheduled is None else scheduled, running=running,
            finished=finished,
            final_phase="Succeeded" if finished is not None else "",
            deleted=deleted, profile=profile, pod_number=self.next_pod_number(),
        )
        attempt = AttemptPlan(admitted=created + 1 if admitted is None else admitted, pods=(pod,),
                              ready=running + 5,
                              ended=None if finished is None else finished)
        workload = f"pod-{name}-{short_hex(self.seed, 'wl', ns.name, name)}"
        return self.workload_plan(ns, workload, k8s_uid(self.seed, "workload", ns.name, workload),
                                  "Pod", name, pod_uid, "ReplicaSet", rs, created, 1, 1,
                                  "server", SERVING_IMAGE, (attempt,))

    def boot_inference(self, at: int) -> K8sBatch:
        """The inference Deployments, running from before the window to after it."""
        batch = K8sBatch()
        rng = self.rng
        for deployment, replicas in DEPLOYMENTS:
            for r in range(replicas):
                created = at + 30 * r
                start, placements = place(self.view, self.h100_nodes, 1, 1, created + 2,
                                          self.place_rng)
                p = placements[0]
                self.view.commit(p.node, p.gpu_indices, self.w1 + 2 * DAY)
                self.deployment_pods.setdefault(deployment, []).append((p.node, p.gpu_indices))
                batch.plans.append(self.deployment_pod(
                    deployment, start - 2, p.node, p.gpu_indices, start + rng.randint(20, 60),
                    None, Profile("infer", rng.getrandbits(31))))
        return batch


def _forever(kind: str) -> Iterator[str]:
    while True:
        yield kind

