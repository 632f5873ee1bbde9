"""``--shared-gpus``: the Slurm side of shared GPUs as Slurm 22.05 prints it.

Shapes follow the suite's real Slurm captures (tests/fixtures/slurm/sharing/: MIG types as GRES
types, shards): sacct ``AllocTRES`` ``billing=…,cpu=…,gres/gpu:1g.10gb=1,gres/gpu=1,…`` and
``gres/shard=2``; ``scontrol show job -d`` ``GRES=gpu:1g.10gb:1(IDX:3)`` (IDX counts the
node's gpu GRES devices, every MIG instance one) and ``GRES=shard(CNT:2)`` (22.05 does not say
which GPU shards are on: world.json and the truth do); ``scontrol -o show node``: slurm_nodes.py.
With ``--autodetect-gpu-types`` the MIG types are AutoDetect=nvml's
(``nvidia_h100_80gb_hbm3_1g.10gb``).
"""

from collections.abc import Iterator

from simulator.autodetect import LEGACY, GresNames
from simulator.sacct_writer import SacctRow, Tres
from simulator.scontrol_writer import _bit_list, _mem
from simulator.sharing_plan import SharedHolder
from simulator.timefmt import elapsed

TIMELIMIT_MIN = 8 * 60
MEM_MB_PER_UNIT = 16_000


def _cpus(h: SharedHolder) -> int:
    return 2 * (h.instance.slices if h.instance is not None else h.units)


def _alloc(h: SharedHolder, *, billing: bool, gres: bool = True,
           names: GresNames = LEGACY) -> Tres:
    cpus = _cpus(h)
    items: list[tuple[str, int]] = [("cpu", cpus), ("mem", MEM_MB_PER_UNIT * h.units),
                                    ("node", 1)]
    if billing:
        items.append(("billing", cpus + 10 * h.units))
    if gres and h.instance is not None:
        items += [("gres/gpu", h.units),
                  (f"gres/gpu:{names.mig(h.node.node.gpu_model, h.instance.profile)}", h.units)]
    elif gres:
        items.append(("gres/shard", h.units))
    return tuple(items)


def sacct_rows(h: SharedHolder, w1: int, cluster: str,
               names: GresNames = LEGACY) -> tuple[SacctRow, ...]:
    """The job, batch and extern rows sacct prints at ``w1`` for a started job."""
    running = h.end > w1
    end: int | str = "Unknown" if running else h.end
    seconds = (w1 if running else h.end) - h.start
    state = "RUNNING" if running else "COMPLETED"
    partition = h.node.node.slurm_partition
    job = SacctRow(
        job_id=h.source_key, job_id_raw=h.source_key, job_name=h.name, user=h.user,
        uid=str(h.uid), account=h.account, partition=partition, qos="normal", state=state,
        exit_code="0:0", derived_exit_code="0:0", submit=h.submit, eligible=h.submit,
        start=h.start, end=end, elapsed_seconds=seconds, timelimit_raw=str(TIMELIMIT_MIN),
        alloc_cpus=str(_cpus(h)), alloc_nodes="1", node_list=h.node.name,
        alloc_tres=_alloc(h, billing=True, names=names),
        req_tres=_alloc(h, billing=True, names=names),
        cluster=cluster, reservation="", reason="None", flags="SchedMain,StartRecieved",
        wckey="", admin_comment="")
    rows = [job]
    for step, billing in (("batch", False), ("extern", True)):
        rows.append(SacctRow(
            job_id=f"{h.source_key}.{step}", job_id_raw=f"{h.source_key}.{step}",
            job_name=step, user="", uid="", account=h.account, partition="", qos="",
            state=state, exit_code="0:0", derived_exit_code="", submit=h.start,
            eligible=h.start, start=h.start, end=end, elapsed_seconds=seconds,
            timelimit_raw="", alloc_cpus=str(_cpus(h)), alloc_nodes="1",
            node_list=h.node.name, alloc_tres=_alloc(h, billing=billing, names=names),
            req_tres=(),
            cluster=cluster, reservation="", reason="", flags="", wckey="", admin_comment=""))
    return tuple(rows)


def _cpu_ids(h: SharedHolder) -> str:
    node = h.node.node
    first = (h.instance.slurm_idx if h.instance is not None else h.gpu * 4) * 2
    return _bit_list([(first + k) % node.cpus for k in range(_cpus(h))])


def job_block(h: SharedHolder, at: int, names: GresNames = LEGACY) -> Iterator[str]:
    """``scontrol --all --details show job`` of a RUNNING shared-GPU job (epoch times)."""
    raw = h.job_id
    user = f"{h.user}({h.uid})"
    limit = TIMELIMIT_MIN * 60
    cpus = _cpus(h)
    mem = MEM_MB_PER_UNIT * h.units
    if h.instance is not None:
        gres = f"gpu:{names.mig(h.node.node.gpu_model, h.instance.profile)}:{h.units}"
        detail = f"{gres}(IDX:{h.instance.slurm_idx})"
    else:
        gres = f"shard:{h.units}"
        detail = f"shard(CNT:{h.units})"
    tres = ",".join(f"{k}={_mem(v) if k == 'mem' else v}"
                    for k, v in _alloc(h, billing=True, names=names))
    log = f"/home/{h.user}/slurm-{raw}.out"
    yield f"JobId={raw} JobName={h.name}"
    yield f"   UserId={user} GroupId={user} MCS_label=N/A"
    yield f"   Priority={max(1, 4_294_901_760 - raw)} Nice=0 Account={h.account} QOS=normal"
    yield "   JobState=RUNNING Reason=None Dependency=(null)"
    yield "   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0"
    yield "   DerivedExitCode=0:0"
    yield f"   RunTime={elapsed(at - h.start)} TimeLimit={elapsed(limit)} TimeMin=N/A"
    yield f"   SubmitTime={h.submit} EligibleTime={h.submit}"
    yield f"   AccrueTime={h.submit}"
    yield f"   StartTime={h.start} EndTime={h.start + limit} Deadline=N/A"
    yield f"   SuspendTime=None SecsPreSuspend=0 LastSchedEval={h.start} Scheduler=Main"
    yield (f"   Partition={h.node.node.slurm_partition} "
           f"AllocNode:Sid=login-01:{10_000 + raw % 50_000}")
    yield "   ReqNodeList=(null) ExcNodeList=(null)"
    yield f"   NodeList={h.node.name}"
    yield f"   BatchHost={h.node.name}"
    yield f"   NumNodes=1 NumCPUs={cpus} NumTasks=1 CPUs/Task={cpus} ReqB:S:C:T=0:0:*:*"
    yield f"   TRES={tres}"
    yield "   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*"
    yield f"   JOB_GRES={gres}"
    yield f"     Nodes={h.node.name} CPU_IDs={_cpu_ids(h)} Mem={mem} GRES={detail}"
    yield f"   MinCPUsNode={cpus} MinMemoryNode={_mem(mem)} MinTmpDiskNode=0"
    yield "   Features=(null) DelayBoot=00:00:00"
    yield "   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)"
    yield f"   Command=/home/{h.user}/jobs/{raw}.sbatch"
    yield f"   WorkDir=/home/{h.user}"
    yield f"   StdErr={log}"
    yield "   StdIn=/dev/null"
    yield f"   StdOut={log}"
    yield "   Power="
    yield f"   TresPerNode=gres:{gres}"
    yield "   "
    yield ""
