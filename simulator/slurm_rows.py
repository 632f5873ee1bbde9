"""Turns one Slurm job record (one run of one job id) into sacct rows and GPU holders.

A record is planned with its real times; ``emit`` then prints it as sacct would at the window's
end: later starts are PENDING, later ends are RUNNING with ``End=Unknown``, and step rows have an
empty User/UID/Partition/QOS/Timelimit/Reason/Flags but keep Account (see slurm-lab.md).
"""

from dataclasses import dataclass

from simulator.identity import SlurmOwner
from simulator.records import Holder, Profile
from simulator.sacct_writer import SacctRow, Tres
from simulator.scheduling import Placement
from simulator.timefmt import compress_hostlist
from simulator.world import SlurmUser

NOT_ASSIGNED = "None assigned"


@dataclass(frozen=True)
class Shape:
    """What a record holds on each node (GPUs of one model) plus its extra non-GPU TRES."""

    cpus_per_node: int
    mem_mb_per_node: int
    gpus_per_node: int
    model: str
    typed_request: bool
    extra_gres: tuple[tuple[str, int], ...] = ()
    gres_type: str = ""  # the GRES type Slurm prints ("": the model; --autodetect-gpu-types)

    @property
    def type_name(self) -> str:
        return self.gres_type or self.model


def tres(shape: Shape, nodes: int, *, billing: bool, typed: bool, req: bool = False) -> Tres:
    gpus = shape.gpus_per_node * nodes
    cpus = nodes if req and not shape.typed_request and gpus else shape.cpus_per_node * nodes
    items: list[tuple[str, int]] = [
        ("cpu", cpus), ("mem", shape.mem_mb_per_node * nodes), ("node", nodes),
    ]
    if billing:
        items.append(("billing", cpus + 10 * gpus))
    if gpus:
        items.append(("gres/gpu", gpus))
        if typed:
            items.append((f"gres/gpu:{shape.type_name}", gpus))
        items.extend((name, value * nodes) for name, value in shape.extra_gres)
    return tuple(items)


@dataclass(frozen=True)
class StepPlan:
    suffix: str  # batch | extern | 0 | 1 ...
    name: str
    start: int
    end: int
    state: str
    exit_code: str
    first_node_only: bool = False  # the batch step runs on the first node


@dataclass(frozen=True)
class RecordPlan:
    job_id: str
    job_id_raw: str
    name: str
    user: SlurmUser
    account: str
    partition: str
    qos: str
    submit: int
    eligible: int | str
    start: int | None  # None: never started (cancelled while pending)
    end: int  # the real end, or the cancel time of a never-started job
    state: str
    exit_code: str
    derived_exit_code: str
    timelimit_min: int
    placements: tuple[Placement, ...]
    shape: Shape
    reason: str = "None"
    pending_reason: str = "Resources"
    flags: str = "SchedMain,StartRecieved"
    wckey: str = ""
    admin_comment: str = ""
    steps: tuple[StepPlan, ...] = ()
    profile: Profile | None = None
    charged: bool = True
    outcome: str = "completed"
    source_key: str = ""  # defaults to job_id
    restarts: int = 0  # requeues before this run (scontrol's Restarts=)


@dataclass(frozen=True)
class Emitted:
    rows: tuple[SacctRow, ...]
    holders: tuple[Holder, ...]
    printed: bool  # the record appears in the window's sacct output
    started_in_window: bool


def emit(plan: RecordPlan, w0: int, w1: int, cluster: str) -> Emitted:
    """The rows sacct prints for this record at ``w1`` and the GPU holders inside ``[w0, w1)``."""
    if plan.submit >= w1 or (plan.start is None and plan.end < w0):
        return Emitted((), (), printed=False, started_in_window=False)
    if plan.start is not None and plan.end <= w0:
        return Emitted((), (), printed=False, started_in_window=False)
    if plan.start is None:
        return Emitted((_never_started(plan, w1, cluster),), (), True, False)
    if plan.start >= w1:
        return Emitted((_pending(plan, cluster),), (), True, False)
    running = plan.end > w1
    rows = [_job_row(plan, w1, cluster, running)]
    for step in plan.steps:
        if step.start >= w1:
            continue
        rows.append(_step_row(plan, step, w1, cluster))
    return Emitted(tuple(rows), _holders(plan, w1), True, True)


def _common(plan: RecordPlan, cluster: str) -> dict[str, object]:
    return {
        "job_id": plan.job_id, "job_id_raw": plan.job_id_raw, "job_name": plan.name,
        "user": plan.user.name, "uid": str(plan.user.uid), "account": plan.account,
        "partition": plan.partition, "qos": plan.qos, "derived_exit_code": plan.derived_exit_code,
        "submit": plan.submit, "timelimit_raw": str(plan.timelimit_min), "cluster": cluster,
        "reservation": "", "wckey": plan.wckey, "admin_comment": plan.admin_comment,
        "req_tres": tres(plan.shape, max(1, len(plan.placements)), billing=True,
                         typed=plan.shape.typed_request, req=True),
    }


def _requested_cpus(plan: RecordPlan) -> str:
    """With no AllocTRES, sacct's AllocCPUS falls back to the cpu count of ReqTRES."""
    req = tres(plan.shape, max(1, len(plan.placements)), billing=False, typed=False, req=True)
    return str(dict(req)["cpu"])


def _never_started(plan: RecordPlan, w1: int, cluster: str) -> SacctRow:
    """Cancelled while pending: Start = End = the cancel time (real capture, job 4 in
    tests/fixtures/real_slurm), or still PENDING when sacct runs."""
    pending = plan.end >= w1
    return SacctRow(
        **_common(plan, cluster),
        state="PENDING" if pending else plan.state,
        exit_code="0:0", eligible=plan.eligible, start="Unknown" if pending else plan.end,
        end="Unknown" if pending else plan.end, elapsed_seconds=0,
        alloc_cpus=_requested_cpus(plan), alloc_nodes="0", node_list=NOT_ASSIGNED,
        alloc_tres=(), reason=plan.pending_reason, flags="" if pending else "StartRecieved",
    )


def _pending(plan: RecordPlan, cluster: str) -> SacctRow:
    return SacctRow(
        **_common(plan, cluster),
        state="PENDING", exit_code="0:0", eligible=plan.eligible, start="Unknown",
        end="Unknown", elapsed_seconds=0, alloc_cpus=_requested_cpus(plan),
        alloc_nodes="0", node_list=NOT_ASSIGNED, alloc_tres=(), reason=plan.pending_reason,
        flags="",
    )


def _job_row(plan: RecordPlan, w1: int, cluster: str, running: bool) -> SacctRow:
    assert plan.start is not None
    nodes = len(plan.placements)
    end = w1 if running else plan.end
    return SacctRow(
        **_common(plan, cluster),
        state="RUNNING" if running else plan.state,
        exit_code="0:0" if running else plan.exit_code,
        eligible=plan.eligible, start=plan.start, end="Unknown" if running else plan.end,
        elapsed_seconds=end - plan.start, alloc_cpus=str(plan.shape.cpus_per_node * nodes),
        alloc_nodes=str(nodes),
        node_list=compress_hostlist([p.node.slurm_node for p in plan.placements]),
        alloc_tres=tres(plan.shape, nodes, billing=True, typed=True),
        reason=plan.reason, flags=plan.flags,
    )


def _step_row(plan: RecordPlan, step: StepPlan, w1: int, cluster: str) -> SacctRow:
    placements = plan.placements[:1] if step.first_node_only else plan.placements
    nodes = len(placements)
    running = step.end > w1
    end = w1 if running else step.end
    billing = step.suffix == "extern"
    return SacctRow(
        job_id=f"{plan.job_id}.{step.suffix}", job_id_raw=f"{plan.job_id_raw}.{step.suffix}",
        job_name=step.name, user="", uid="", account=plan.account, partition="", qos="",
        state="RUNNING" if running else step.state,
        exit_code="0:0" if running else step.exit_code, derived_exit_code="",
        submit=step.start, eligible=step.start, start=step.start,
        end="Unknown" if running else step.end, elapsed_seconds=end - step.start,
        timelimit_raw="", alloc_cpus=str(plan.shape.cpus_per_node * nodes),
        alloc_nodes=str(nodes),
        node_list=compress_hostlist([p.node.slurm_node for p in placements]),
        alloc_tres=tres(plan.shape, nodes, billing=billing, typed=True), req_tres=(),
        cluster=cluster, reservation="", reason="", flags="", wckey="", admin_comment="",
    )


def _holders(plan: RecordPlan, w1: int) -> tuple[Holder, ...]:
    assert plan.start is not None
    if not plan.shape.gpus_per_node or plan.profile is None:
        return ()
    running = plan.end > w1
    owner = SlurmOwner(plan.user.name, plan.account)
    dcgm = (("hpc_job", plan.job_id_raw),) if plan.charged else ()
    return tuple(
        Holder(
            domain="slurm", source_key=plan.source_key or plan.job_id, name=plan.name,
            node=p.node, gpu_indices=p.gpu_indices, start=plan.start, end=plan.end,
            owner=owner, outcome="running" if running else plan.outcome, charged=plan.charged,
            profile=plan.profile, view="slurm", dcgm=dcgm, account=plan.account,
            user=plan.user.name, qos=plan.qos, gpu_model=plan.shape.gres_type,
        )
        for p in plan.placements
    )
