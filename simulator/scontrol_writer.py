"""Periodic ``scontrol --all --details show job`` snapshots, one file per collection.

A site's cron (docs/slurm.md) saves ``TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show
job`` as ``slurm/scontrol-YYYYMMDDTHHMMSSZ.txt``; here every ``every`` seconds of the window, each
file holding the Slurm jobs RUNNING with GPUs at that instant (a run covers ``[start, end)``), in
the multi-line form of Slurm 22.05 (real capture:
tests/fixtures/real_slurm/scontrol-show-job-d-running-gpu.txt). Other jobs (pending, finished,
CPU-only) are left out: they carry no GPU indices. The snapshot time is exactly the collection
time, so a job's ``StartTime + RunTime`` dates the file as the reader expects.

Streaming: a run is filed under the snapshots it covers when it is planned, and a snapshot is
written as soon as the simulation has passed its time (no later arrival can start before it).
"""

import math
from collections.abc import Callable, Iterator
from pathlib import Path

from simulator.outputs import open_output
from simulator.scheduling import Placement
from simulator.slurm_rows import RecordPlan, tres
from simulator.timefmt import compress_hostlist, elapsed, iso_utc

SNAPSHOT_GLOB = "slurm/scontrol-*.txt"
NO_JOBS = "No jobs in the system"  # what scontrol prints when it holds no job
FIRST_PRIORITY = 4_294_901_760  # priority/basic: the first job's priority, then one less each


def snapshot_name(at: int) -> str:
    """``slurm/scontrol-20260105T000000Z.txt``: the cron's name (docs/slurm.md)."""
    return f"slurm/scontrol-{iso_utc(at).replace('-', '').replace(':', '')}Z.txt"


def holds_gpus(plan: RecordPlan) -> bool:
    return plan.start is not None and bool(plan.placements) and plan.shape.gpus_per_node > 0


class ScontrolSnapshots:
    """Files each GPU run under the snapshots it is RUNNING at and writes them in time order."""

    def __init__(self, out_dir: Path, w0: int, w1: int, every: int) -> None:
        self.out_dir = out_dir
        self.w0, self.every = w0, every
        self.times = list(range(w0, w1, every)) if every > 0 else []
        self.written = 0  # snapshots before this index are on disk
        self.pending: dict[int, list[RecordPlan]] = {}
        self.job_blocks = 0
        # --shared-gpus: the shared-GPU jobs' blocks RUNNING at a time (their ids come last)
        self.extra_blocks: Callable[[int], list[list[str]]] | None = None

    def add(self, plan: RecordPlan) -> None:
        if not holds_gpus(plan) or not self.times:
            return
        assert plan.start is not None  # holds_gpus
        first = max(0, math.ceil((plan.start - self.w0) / self.every))
        for k in range(first, len(self.times)):
            if self.times[k] >= plan.end:
                break
            if k < self.written:
                msg = (f"expected runs to start after the snapshots already written, found "
                       f"{plan.job_id} starting at {iso_utc(plan.start)}, before "
                       f"{iso_utc(self.times[self.written - 1])}")
                raise RuntimeError(msg)
            self.pending.setdefault(k, []).append(plan)

    def flush(self, before: int | None) -> None:
        """Write every snapshot taken before ``before`` (None: all that are left)."""
        while self.written < len(self.times) and (before is None
                                                  or self.times[self.written] < before):
            at = self.times[self.written]
            plans = sorted(self.pending.pop(self.written, []), key=lambda p: int(p.job_id_raw))
            extra = self.extra_blocks(at) if self.extra_blocks is not None else []
            with open_output(self.out_dir / snapshot_name(at), compress=False) as fh:
                if not plans and not extra:
                    fh.write(NO_JOBS + "\n")
                for plan in plans:
                    fh.writelines(line + "\n" for line in job_block(plan, at))
                    self.job_blocks += 1
                for block in extra:
                    fh.writelines(line + "\n" for line in block)
                    self.job_blocks += 1
            self.written += 1

    @property
    def files(self) -> int:
        return self.written


def job_block(plan: RecordPlan, at: int) -> Iterator[str]:
    """One job as ``scontrol show job -d`` prints it while RUNNING at ``at`` (epoch times)."""
    assert plan.start is not None
    raw = int(plan.job_id_raw)
    nodes = len(plan.placements)
    shape = plan.shape
    cpus = shape.cpus_per_node * nodes
    user = f"{plan.user.name}({plan.user.uid})"
    limit = plan.timelimit_min * 60
    eligible = plan.eligible
    first_node = plan.placements[0].node.slurm_node
    log = f"/home/{plan.user.name}/slurm-{_pattern_id(plan)}.out"
    gpus_typed = f"gpu:{shape.type_name}:{shape.gpus_per_node}"
    scheduler = "Backfill" if "SchedBackfill" in plan.flags else "Main"
    yield f"JobId={raw}{_id_fields(plan)} JobName={plan.name}"
    yield f"   UserId={user} GroupId={user} MCS_label=N/A"
    yield (f"   Priority={max(1, FIRST_PRIORITY - raw)} Nice=0 Account={plan.account} "
           f"QOS={plan.qos}")
    yield "   JobState=RUNNING Reason=None Dependency=(null)"
    yield f"   Requeue=1 Restarts={plan.restarts} BatchFlag=1 Reboot=0 ExitCode=0:0"
    yield "   DerivedExitCode=0:0"
    yield f"   RunTime={elapsed(at - plan.start)} TimeLimit={elapsed(limit)} TimeMin=N/A"
    yield f"   SubmitTime={plan.submit} EligibleTime={eligible}"
    yield f"   AccrueTime={eligible}"
    yield f"   StartTime={plan.start} EndTime={plan.start + limit} Deadline=N/A"
    yield (f"   SuspendTime=None SecsPreSuspend=0 LastSchedEval={plan.start} "
           f"Scheduler={scheduler}")
    yield f"   Partition={plan.partition} AllocNode:Sid=login-01:{10_000 + raw % 50_000}"
    yield "   ReqNodeList=(null) ExcNodeList=(null)"
    yield f"   NodeList={compress_hostlist([p.node.slurm_node for p in plan.placements])}"
    yield f"   BatchHost={first_node}"
    yield (f"   NumNodes={nodes} NumCPUs={cpus} NumTasks={nodes} "
           f"CPUs/Task={shape.cpus_per_node} ReqB:S:C:T=0:0:*:*")
    yield f"   TRES={_tres(plan, nodes)}"
    yield "   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*"
    yield f"   JOB_GRES=gpu:{shape.type_name}:{shape.gpus_per_node * nodes}"
    yield from _node_lines(plan)
    yield (f"   MinCPUsNode={shape.cpus_per_node} MinMemoryNode={_mem(shape.mem_mb_per_node)} "
           "MinTmpDiskNode=0")
    yield "   Features=(null) DelayBoot=00:00:00"
    yield "   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)"
    yield f"   Command=/home/{plan.user.name}/jobs/{_pattern_id(plan)}.sbatch"
    yield f"   WorkDir=/home/{plan.user.name}"
    if plan.admin_comment:
        yield f"   AdminComment={plan.admin_comment}"
    yield f"   StdErr={log}"
    yield "   StdIn=/dev/null"
    yield f"   StdOut={log}"
    yield "   Power="
    typed = gpus_typed if shape.typed_request else f"gpu:{shape.gpus_per_node}"
    yield f"   TresPerNode=gres:{typed}"
    yield "   "
    yield ""


def _id_fields(plan: RecordPlan) -> str:
    """``ArrayJobId=… ArrayTaskId=…`` or ``HetJobId=… HetJobOffset=…`` after JobId."""
    if "_" in plan.job_id:
        array, task = plan.job_id.split("_", 1)
        return f" ArrayJobId={array} ArrayTaskId={task}"
    if "+" in plan.job_id:
        het, offset = plan.job_id.split("+", 1)
        return f" HetJobId={het} HetJobOffset={offset}"
    return ""


def _pattern_id(plan: RecordPlan) -> str:
    """sbatch's default output name: ``%A_%a`` for array tasks, else ``%j``."""
    return plan.job_id if "_" in plan.job_id else plan.job_id_raw


def _tres(plan: RecordPlan, nodes: int) -> str:
    """scontrol's TRES: in TRES id order (cpu, mem, node, billing, gres), memory converted."""
    items = tres(plan.shape, nodes, billing=True, typed=True)
    return ",".join(f"{name}={_mem(value) if name == 'mem' else value}"
                    for name, value in items)


def _mem(megabytes: int) -> str:
    """Slurm's exact unit conversion: ``4000M``, ``65536`` → ``64G``."""
    value, units = megabytes, "MGTP"
    step = 0
    while value and value % 1024 == 0 and step < len(units) - 1:
        value //= 1024
        step += 1
    return f"{value}{units[step]}"


def _node_lines(plan: RecordPlan) -> Iterator[str]:
    """``Nodes=… CPU_IDs=… Mem=… GRES=gpu:MODEL:N(IDX:…)``; consecutive nodes with the same
    allocation share one line (a hostlist), as scontrol groups them."""
    groups: list[tuple[str, list[str]]] = []
    for p in sorted(plan.placements, key=lambda p: p.node.name):
        detail = (f"CPU_IDs={_cpu_ids(p, plan.shape.cpus_per_node)} "
                  f"Mem={plan.shape.mem_mb_per_node} "
                  f"GRES=gpu:{plan.shape.type_name}:{len(p.gpu_indices)}"
                  f"(IDX:{_bit_list(p.gpu_indices)})")
        if groups and groups[-1][0] == detail:
            groups[-1][1].append(p.node.slurm_node)
        else:
            groups.append((detail, [p.node.slurm_node]))
    for detail, names in groups:
        yield f"     Nodes={compress_hostlist(names)} {detail}"


def _cpu_ids(p: Placement, cpus: int) -> str:
    """The cores next to the job's GPUs (each GPU owns an equal slice of the node's cores),
    then the lowest others if the job asked for more."""
    node = p.node
    per_gpu = node.cpus // node.gpu_count
    near = [c for i in sorted(p.gpu_indices) for c in range(i * per_gpu, (i + 1) * per_gpu)]
    share = math.ceil(cpus / max(1, len(p.gpu_indices)))
    chosen = [c for k, c in enumerate(near) if k % per_gpu < share][:cpus]
    taken = set(chosen)
    rest = [c for c in range(node.cpus) if c not in taken]
    chosen += rest[:max(0, min(cpus, node.cpus) - len(chosen))]
    return _bit_list(tuple(chosen))


def _bit_list(values: tuple[int, ...] | list[int]) -> str:
    """Slurm's bit-list form: ``0-3,8,10-11``."""
    out: list[str] = []
    ordered = sorted(values)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)
