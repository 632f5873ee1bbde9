"""The Slurm side: jobs of the mix placed on the Slurm view and turned into sacct records.

Job ids are handed out in submit order; each kind (arrays, het jobs, requeues, ...) is realized
the way Slurm 22.05 records it (see tests/fixtures/real_slurm).
"""

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from simulator.arrivals import Arrival, merge, poisson
from simulator.config import HOUR, MINUTE
from simulator.records import Holder, Profile
from simulator.rng import stream
from simulator.sacct_writer import SacctRow
from simulator.scheduling import MAX_WAIT, NoPlacement, Placement, View, place
from simulator.slurm_mix import COVERAGE, PROGRAMS, JobMix, JobSpec
from simulator.slurm_rows import RecordPlan, Shape, StepPlan, emit
from simulator.world import BRIDGE_ACCOUNT, BRIDGE_USER, SlurmUser, World

FIRST_JOB_ID = 24001
REQUEUE_BEGIN_DELAY = 121  # seconds between requeue and eligibility (slurm-lab.md)


@dataclass
class SlurmBatch:
    """What one arrival produced on the Slurm side.

    ``records`` are (order time, rows of one record). sacct lists records in the order the
    accounting DB created them: at submit, but an array task when it starts and the run after a
    requeue at the requeue (see job 2 and array 11 in tests/fixtures/real_slurm).
    """

    records: list[tuple[int, tuple[SacctRow, ...]]]
    holders: list[Holder]
    plans: list[RecordPlan] = field(default_factory=list)  # every record, for scontrol
    jobs: int = 0  # distinct job ids printed
    runs: int = 0  # records that started inside the window

    def add(self, plan: RecordPlan, w0: int, w1: int, cluster: str,
            order_time: int | None = None) -> None:
        out = emit(plan, w0, w1, cluster)
        self.plans.append(plan)
        if out.rows:
            self.records.append((plan.submit if order_time is None else order_time, out.rows))
        self.holders.extend(out.holders)
        self.runs += int(out.started_in_window)


class SlurmSide:
    def __init__(self, world: World, view: View, gen_start: int) -> None:
        cfg = world.config
        self.world = world
        self.view = view
        self.w0, self.w1 = cfg.window_start, cfg.window_end
        self.gen_start = gen_start
        self.cluster = cfg.cluster
        self.rng = stream(cfg.seed, "slurm-spec")
        self.place_rng = stream(cfg.seed, "slurm-place")
        self.next_id = FIRST_JOB_ID
        self.mix = JobMix(world)
        self.hpc = self.mix.hpc
        self.shared = self.mix.shared
        self.coverage_done = 0

    # ------------------------------------------------------------------ arrivals

    def arrivals(self) -> Iterator[Arrival]:
        cfg = self.world.config
        hpc_gpus = sum(n.gpu_count for n in self.hpc)
        shared_gpus = sum(n.gpu_count for n in self.shared)
        mean = self.mix.mean_gpu_seconds()
        hpc_rate = cfg.load * hpc_gpus / mean
        # shared nodes belong to Slurm ~64 % of a week; jobs there are smaller
        shared_rate = cfg.load * 0.64 * shared_gpus / (3.0 * 3 * HOUR)
        rng_hpc = stream(cfg.seed, "slurm-arrivals-hpc")
        rng_shared = stream(cfg.seed, "slurm-arrivals-shared")
        return merge(
            poisson(rng_hpc, self.gen_start, self.w1, hpc_rate, "slurm", self.mix.kinds()),
            poisson(rng_shared, self.gen_start, self.w1, shared_rate, "slurm-shared",
                    _forever("shared")),
        )

    # ------------------------------------------------------------------ realization

    def realize(self, arrival: Arrival) -> SlurmBatch:
        kind = arrival.kind
        if arrival.stream == "slurm" and arrival.time >= self.w0 and \
                self.coverage_done < len(COVERAGE):
            kind = COVERAGE[self.coverage_done]
            self.coverage_done += 1
        spec = self.mix.sample(kind, arrival.time, self.rng)
        batch = SlurmBatch([], [])
        if kind == "array":
            self._array(spec, batch)
        elif kind == "het":
            self._het(spec, batch)
        elif kind == "requeue":
            self._requeue(spec, batch)
        elif kind == "cancel_pending":
            self._cancel_pending(spec, batch)
        else:
            self._single(spec, batch)
        return batch

    def _take_id(self) -> int:
        job_id = self.next_id
        self.next_id += 1
        return job_id

    def _nodes_for(self, spec: JobSpec) -> list:
        if spec.partition == "shared":
            return self.shared
        return self.mix.by_model[spec.shape.model]

    def _place(self, spec: JobSpec, earliest: int) -> tuple[int, list[Placement]]:
        bound = spec.timelimit_min * MINUTE + 120
        return place(self.view, self._nodes_for(spec), spec.shape.gpus_per_node, spec.nodes,
                     earliest, self.place_rng, duration=bound, owner="slurm")

    def _given_up(self, spec: JobSpec, job_id: str, raw: str, submit: int,
                  eligible: int | str, reason: str = "Resources") -> RecordPlan:
        """A job no node could start within MAX_WAIT: its user cancels it while pending."""
        return RecordPlan(
            job_id=job_id, job_id_raw=raw, name=spec.name, user=spec.user, account=spec.account,
            partition=spec.partition, qos=spec.qos, submit=submit, eligible=eligible,
            start=None, end=submit + MAX_WAIT, state=f"CANCELLED by {spec.user.uid}",
            exit_code="0:0", derived_exit_code="0:0", timelimit_min=spec.timelimit_min,
            placements=(), shape=spec.shape, reason=reason, pending_reason=reason, flags="",
            wckey=spec.wckey, outcome="cancelled",
        )

    def _commit(self, placements: list[Placement], until: int) -> None:
        for p in placements:
            self.view.commit(p.node, p.gpu_indices, until)

    def _profile(self, spec: JobSpec, rng: random.Random) -> Profile:
        kind = "io" if spec.account == "ops" or rng.random() < 0.15 else "hpc"
        return Profile(kind, rng.getrandbits(31))

    def _outcome(self, spec: JobSpec, start: int, rng: random.Random) -> tuple[int, str, str, str]:
        """(end, state, exit code, outcome) of a started job of this kind."""
        d = spec.duration
        kind = spec.kind
        if kind == "fail_exit":
            return start + rng.randint(30, max(31, d // 4)), "FAILED", "1:0", "failed"
        if kind == "fail_signal":
            return start + rng.randint(60, max(61, d // 3)), "FAILED", "0:9", "failed"
        if kind == "timeout":
            return start + spec.timelimit_min * MINUTE + rng.randint(5, 90), "TIMEOUT", "0:0", \
                "timeout"
        if kind == "node_fail":
            return start + int(d * rng.uniform(0.2, 0.8)), "NODE_FAIL", "0:0", "node_fail"
        if kind == "cancel_running":
            uid = spec.user.uid if rng.random() < 0.8 else 0
            return start + int(d * rng.uniform(0.1, 0.7)), f"CANCELLED by {uid}", "0:15", \
                "cancelled"
        return start + d, "COMPLETED", "0:0", "completed"

    def _steps(self, spec: JobSpec, start: int, end: int, state: str, rng: random.Random,
               with_srun: bool) -> tuple[StepPlan, ...]:
        batch_state, batch_exit, step_state, step_exit = {
            "COMPLETED": ("COMPLETED", "0:0", "COMPLETED", "0:0"),
            "FAILED 1:0": ("FAILED", "1:0", "FAILED", "1:0"),
            "FAILED 0:9": ("CANCELLED", "0:9", "CANCELLED", "0:9"),
            "TIMEOUT": ("CANCELLED", "0:15", "CANCELLED", "0:15"),
            "NODE_FAIL": ("NODE_FAIL", "0:0", "NODE_FAIL", "0:0"),
            "CANCELLED": ("CANCELLED", "0:15", "CANCELLED", "0:15"),
            "REQUEUED": ("CANCELLED", "0:15", "CANCELLED", "0:15"),
        }[state]
        extern_state = "NODE_FAIL" if state == "NODE_FAIL" else "COMPLETED"
        steps = [
            StepPlan("batch", "batch", start, end, batch_state, batch_exit, first_node_only=True),
            StepPlan("extern", "extern", start, end, extern_state, "0:0"),
        ]
        if with_srun and end - start > 10:
            s0 = start + min(3, (end - start) // 4)
            steps.append(StepPlan("0", rng.choice(PROGRAMS), s0, max(s0 + 1, end - 2),
                                  step_state, step_exit))
        return tuple(steps)

    def _single(self, spec: JobSpec, batch: SlurmBatch, *, job_id: int | None = None) -> None:
        rng = self.rng
        job_id = self._take_id() if job_id is None else job_id
        try:
            start, placements = self._place(spec, spec.submit)
        except NoPlacement:
            batch.add(self._given_up(spec, str(job_id), str(job_id), spec.submit, spec.submit),
                      self.w0, self.w1, self.cluster)
            batch.jobs += 1
            return
        end, state, exit_code, outcome = self._outcome(spec, start, rng)
        self._commit(placements, end)
        state_key = state if state in ("COMPLETED", "TIMEOUT", "NODE_FAIL") else (
            "CANCELLED" if state.startswith("CANCELLED") else f"{state} {exit_code}")
        derived = "0:0"
        if spec.kind == "pipeline":
            steps = self._pipeline_steps(start, end)
            derived = "3:0"
        else:
            steps = self._steps(spec, start, end, state_key, rng,
                                with_srun=spec.nodes > 1 or rng.random() < 0.6)
        plan = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name=spec.name, user=spec.user,
            account=spec.account, partition=spec.partition, qos=spec.qos, submit=spec.submit,
            eligible=spec.submit, start=start, end=end, state=state, exit_code=exit_code,
            derived_exit_code=derived, timelimit_min=spec.timelimit_min,
            placements=tuple(placements), shape=spec.shape,
            flags=_flags(spec.submit, start), wckey=spec.wckey, steps=steps,
            profile=self._profile(spec, rng), outcome=outcome,
            pending_reason="Resources" if rng.random() < 0.6 else "Priority",
        )
        batch.add(plan, self.w0, self.w1, self.cluster)
        batch.jobs += 1

    @staticmethod
    def _pipeline_steps(start: int, end: int) -> tuple[StepPlan, ...]:
        """preprocess / train / evaluate (exits 3) / report: job COMPLETED, DerivedExitCode 3:0."""
        span = max(8, end - start)
        cuts = [start + span * k // 10 for k in (0, 1, 8, 9, 10)]
        return (
            StepPlan("batch", "batch", start, end, "COMPLETED", "0:0", first_node_only=True),
            StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
            StepPlan("0", "preprocess", cuts[0] + 1, cuts[1], "COMPLETED", "0:0"),
            StepPlan("1", "train", cuts[1] + 1, cuts[2], "COMPLETED", "0:0"),
            StepPlan("2", "evaluate", cuts[2] + 1, cuts[3], "FAILED", "3:0"),
            StepPlan("3", "report", cuts[3] + 1, max(cuts[3] + 2, cuts[4] - 1), "COMPLETED",
                     "0:0"),
        )

    def _array(self, spec: JobSpec, batch: SlurmBatch) -> None:
        rng = self.rng
        tasks = rng.randint(3, 6)
        limit = rng.choice((2, 3))
        array_id = self._take_id()
        raw_ids = [self._take_id() for _ in range(tasks - 1)] + [array_id]
        ends: list[int] = []
        failing = min(2, tasks - 1)
        for i in range(tasks):
            throttled = i >= limit
            eligible = ends[i - limit] if throttled else spec.submit
            task = replace(spec, duration=max(300, int(spec.duration * rng.uniform(0.5, 1.2))))
            try:
                start, placements = self._place(task, eligible)
            except NoPlacement:
                batch.add(self._given_up(spec, f"{array_id}_{i}", str(raw_ids[i]), spec.submit,
                                         eligible), self.w0, self.w1, self.cluster)
                ends.append(eligible)
                continue
            if i == failing:
                end, state, exit_code, outcome = start + rng.randint(60, 600), "FAILED", "2:0", \
                    "failed"
            else:
                end, state, exit_code, outcome = start + task.duration, "COMPLETED", "0:0", \
                    "completed"
            self._commit(placements, end)
            ends.append(end)
            job_id = f"{array_id}_{i}"
            plan = RecordPlan(
                job_id=job_id, job_id_raw=str(raw_ids[i]), name=spec.name, user=spec.user,
                account=spec.account, partition=spec.partition, qos=spec.qos,
                submit=spec.submit, eligible=eligible, start=start, end=end, state=state,
                exit_code=exit_code, derived_exit_code="0:0", timelimit_min=spec.timelimit_min,
                placements=tuple(placements), shape=spec.shape,
                reason="JobArrayTaskLimit" if throttled else "None",
                pending_reason="JobArrayTaskLimit" if throttled else "Resources",
                flags=_flags(eligible, start), wckey=spec.wckey,
                steps=(
                    StepPlan("batch", "batch", start, end,
                             "FAILED" if state == "FAILED" else "COMPLETED", exit_code,
                             first_node_only=True),
                    StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
                ),
                profile=self._profile(spec, rng), outcome=outcome,
            )
            batch.add(plan, self.w0, self.w1, self.cluster, order_time=start)
        batch.jobs += 1

    def _het(self, spec: JobSpec, batch: SlurmBatch) -> None:
        """A GPU component and a CPU component, started together (``15+0``/``15+1``)."""
        rng = self.rng
        het_id = self._take_id()
        second_raw = self._take_id()
        try:
            start, placements = self._place(spec, spec.submit)
        except NoPlacement:
            for offset, raw in ((0, het_id), (1, second_raw)):
                batch.add(self._given_up(spec, f"{het_id}+{offset}", str(raw), spec.submit,
                                         spec.submit), self.w0, self.w1, self.cluster)
            batch.jobs += 1
            return
        end = start + spec.duration
        self._commit(placements, end)
        cpu_node = rng.choice(self.hpc)
        cpu_shape = Shape(8, 16 * 1024, 0, spec.shape.model, False)
        s0 = start + 2
        common = {
            "name": spec.name, "user": spec.user, "account": spec.account, "qos": spec.qos,
            "submit": spec.submit, "eligible": spec.submit, "start": start, "end": end,
            "state": "COMPLETED", "exit_code": "0:0", "derived_exit_code": "0:0",
            "timelimit_min": spec.timelimit_min, "flags": _flags(spec.submit, start),
            "wckey": spec.wckey, "outcome": "completed",
        }
        batch.add(RecordPlan(
            job_id=f"{het_id}+0", job_id_raw=str(het_id), partition=spec.partition,
            placements=tuple(placements), shape=spec.shape, profile=self._profile(spec, rng),
            steps=(
                StepPlan("batch", "batch", start, end, "COMPLETED", "0:0", first_node_only=True),
                StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
                StepPlan("0", "torchrun", s0, end - 1, "COMPLETED", "0:0"),
            ),
            **common,
        ), self.w0, self.w1, self.cluster)
        batch.add(RecordPlan(
            job_id=f"{het_id}+1", job_id_raw=str(second_raw), partition="cpu",
            placements=(Placement(cpu_node, ()),), shape=cpu_shape, profile=None,
            steps=(
                StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
                StepPlan("0", "data-loader", s0, end - 1, "COMPLETED", "0:0"),
            ),
            **common,
        ), self.w0, self.w1, self.cluster)
        batch.jobs += 1

    def _requeue(self, spec: JobSpec, batch: SlurmBatch) -> None:
        """Two records with one JobID: REQUEUED, then the run that completes (Submit reset)."""
        rng = self.rng
        job_id = self._take_id()
        try:
            start1, placements1 = self._place(spec, spec.submit)
        except NoPlacement:
            batch.add(self._given_up(spec, str(job_id), str(job_id), spec.submit, spec.submit),
                      self.w0, self.w1, self.cluster)
            batch.jobs += 1
            return
        requeued_at = start1 + int(spec.duration * rng.uniform(0.2, 0.6))
        self._commit(placements1, requeued_at)
        profile = self._profile(spec, rng)
        base = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name=spec.name, user=spec.user,
            account=spec.account, partition=spec.partition, qos=spec.qos, submit=spec.submit,
            eligible=spec.submit, start=start1, end=requeued_at, state="REQUEUED",
            exit_code="0:0", derived_exit_code="0:0", timelimit_min=spec.timelimit_min,
            placements=tuple(placements1), shape=spec.shape, flags=_flags(spec.submit, start1),
            wckey=spec.wckey,
            steps=self._steps(spec, start1, requeued_at, "REQUEUED", rng, with_srun=False),
            profile=profile, outcome="requeued",
        )
        batch.add(base, self.w0, self.w1, self.cluster)
        eligible = requeued_at + REQUEUE_BEGIN_DELAY
        try:
            start2, placements2 = self._place(spec, eligible)
        except NoPlacement:
            batch.add(self._given_up(spec, str(job_id), str(job_id), requeued_at, eligible,
                                     reason="BeginTime"), self.w0, self.w1, self.cluster)
            batch.jobs += 1
            return
        end2 = start2 + spec.duration
        self._commit(placements2, end2)
        # the run after a requeue: Reason BeginTime and an .extern CANCELLED with an empty
        # ExitCode (real capture, job 2 in tests/fixtures/real_slurm)
        steps = tuple(
            replace(s, state="CANCELLED", exit_code="") if s.suffix == "extern" else s
            for s in self._steps(spec, start2, end2, "COMPLETED", rng, with_srun=False))
        batch.add(replace(
            base, submit=requeued_at, eligible=eligible, start=start2, end=end2,
            state="COMPLETED", placements=tuple(placements2), flags=_flags(eligible, start2),
            steps=steps, outcome="completed", reason="BeginTime", pending_reason="BeginTime",
            restarts=1,
        ), self.w0, self.w1, self.cluster)
        batch.jobs += 1

    def _cancel_pending(self, spec: JobSpec, batch: SlurmBatch) -> None:
        rng = self.rng
        job_id = self._take_id()
        reason = rng.choice(("JobHeldUser", "Dependency", "BeginTime"))
        eligible: int | str = "Unknown"
        if reason == "BeginTime":
            eligible = spec.submit + HOUR
        cancelled = spec.submit + rng.randint(10 * MINUTE, 50 * MINUTE)
        plan = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name=spec.name, user=spec.user,
            account=spec.account, partition=spec.partition, qos=spec.qos, submit=spec.submit,
            eligible=eligible, start=None, end=cancelled, state=f"CANCELLED by {spec.user.uid}",
            exit_code="0:0", derived_exit_code="0:0", timelimit_min=spec.timelimit_min,
            placements=(), shape=spec.shape, reason=reason, pending_reason=reason, flags="",
            wckey=spec.wckey, outcome="cancelled",
        )
        batch.add(plan, self.w0, self.w1, self.cluster)
        batch.jobs += 1

    # ------------------------------------------------------------------ used by other sides

    def bridge_job(self, *, pod_key: str, pod_name: str, placement: Placement, submit: int,
                   start: int, end: int, gpus_cpus_mem: tuple[int, int, int],
                   gres_type: str = "") -> SlurmBatch:
        """slurm-bridge's representative job for a pod on a shared node (not charged in Slurm);
        `gres_type`: the device class of its DRA path (``gres/gpu:gpu.nvidia.com=N``)."""
        gpus, cpus, mem_gb = gpus_cpus_mem
        job_id = self._take_id()
        model = placement.node.gpu_model
        shape = Shape(cpus, mem_gb * 1024, gpus, model, True,
                      gres_type=gres_type or self.mix.gres.whole_override(model))
        limit = max(5, math.ceil((end - start) * 1.5 / MINUTE))
        plan = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name=pod_name, user=BRIDGE_USER,
            account=BRIDGE_ACCOUNT, partition="shared", qos="normal", submit=submit,
            eligible=submit, start=start, end=end, state="COMPLETED", exit_code="0:0",
            derived_exit_code="0:0", timelimit_min=limit, placements=(placement,), shape=shape,
            flags=_flags(submit, start), admin_comment='{"pods":["' + pod_key + '"]}',
            steps=(
                StepPlan("batch", "batch", start, end, "COMPLETED", "0:0", first_node_only=True),
                StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
            ),
            profile=Profile("train", 0), charged=False, outcome="bridge_representative",
        )
        batch = SlurmBatch([], [])
        batch.add(plan, self.w0, self.w1, self.cluster)
        batch.jobs += 1
        return batch

    def planted_job(self, *, placement: Placement, submit: int, start: int, end: int,
                    user: SlurmUser, account: str, name: str, timelimit_min: int,
                    state: str = "COMPLETED") -> SlurmBatch:
        """A job on a shared node at times chosen by a planted scenario (a mistake or a decoy)."""
        gpus = len(placement.gpu_indices)
        model = placement.node.gpu_model
        shape = Shape(8 * gpus, 64 * 1024 * gpus, gpus, model, True,
                      gres_type=self.mix.gres.whole_override(model))
        job_id = self._take_id()
        plan = RecordPlan(
            job_id=str(job_id), job_id_raw=str(job_id), name=name, user=user, account=account,
            partition="shared", qos="normal", submit=submit, eligible=submit, start=start,
            end=end, state=state, exit_code="0:0", derived_exit_code="0:0",
            timelimit_min=timelimit_min, placements=(placement,), shape=shape,
            flags=_flags(submit, start),
            steps=(
                StepPlan("batch", "batch", start, end, "COMPLETED", "0:0", first_node_only=True),
                StepPlan("extern", "extern", start, end, "COMPLETED", "0:0"),
                StepPlan("0", "python", start + 3, end - 2, "COMPLETED", "0:0"),
            ),
            profile=Profile("hpc", job_id), outcome="completed",
        )
        batch = SlurmBatch([], [])
        batch.add(plan, self.w0, self.w1, self.cluster)
        batch.jobs += 1
        return batch


def _flags(eligible: int, start: int) -> str:
    return "SchedMain,StartRecieved" if start - eligible < 30 else "SchedBackfill,StartRecieved"


def _forever(kind: str) -> Iterator[str]:
    while True:
        yield kind

