"""Build small sacct dumps for tests, in the shapes Slurm 22.05 prints.

``dump(rows)`` writes a header and one line per row dict (missing fields empty). Defaults follow
the contract's extraction (``SACCT_FIELDS``, unit separator, epoch times).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from connectors.slurm.fields import SACCT_FIELDS

US = "\x1f"
#: The simulator's / classic plain -P order: JobName third.
CLASSIC_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User",
    *(f for f in SACCT_FIELDS if f not in {"JobID", "JobIDRaw", "JobName", "User"}),
)

T0 = 1_796_017_424  # 2026-11-30T05:43:44Z

ALLOC: dict[str, str] = {
    "JobID": "100", "JobIDRaw": "100", "User": "alice", "UID": "20001", "Account": "physics",
    "Partition": "gpu", "QOS": "normal", "State": "COMPLETED", "ExitCode": "0:0",
    "DerivedExitCode": "0:0", "Submit": str(T0), "Eligible": str(T0), "Start": str(T0 + 5),
    "End": str(T0 + 65), "Elapsed": "00:01:00", "ElapsedRaw": "60", "TimelimitRaw": "5",
    "AllocCPUS": "2", "AllocNodes": "1", "NodeList": "a100-01",
    "AllocTRES": "billing=12,cpu=2,gres/gpu:a100=1,gres/gpu=1,mem=2000M,node=1",
    "ReqTRES": "billing=11,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1",
    "Cluster": "gpulab", "Reservation": "", "Reason": "None", "Flags": "SchedMain,StartRecieved",
    "WCKey": "", "JobName": "train", "AdminComment": "",
}

STEP_BLANK = ("User", "UID", "Partition", "QOS", "DerivedExitCode", "TimelimitRaw", "ReqTRES",
              "Reason", "Flags", "AdminComment")


def alloc(**over: str) -> dict[str, str]:
    return {**ALLOC, **over}


def step(parent: Mapping[str, str], step_id: str, raw_step: str | None = None,
         **over: str) -> dict[str, str]:
    """A step row of ``parent`` (``.batch`` etc.), with the fields sacct leaves empty on steps."""
    row = {**parent, **dict.fromkeys(STEP_BLANK, "")}
    row["JobID"] = f"{parent['JobID']}.{step_id}"
    row["JobIDRaw"] = f"{parent['JobIDRaw']}.{raw_step or step_id}"
    row["JobName"] = step_id if not step_id.isdigit() else "python"
    row["AllocTRES"] = parent["AllocTRES"].replace("billing=12,", "")
    row.update(over)
    return row


def line(row: Mapping[str, str], fields: Sequence[str] = SACCT_FIELDS, sep: str = US) -> str:
    return sep.join(row.get(f, "") for f in fields)


def dump(rows: Iterable[Mapping[str, str] | str], fields: Sequence[str] = SACCT_FIELDS,
         sep: str = US) -> str:
    """Header + lines; a ``str`` item is written as it is (for malformed lines)."""
    out = [sep.join(fields)]
    for r in rows:
        out.append(r if isinstance(r, str) else line(r, fields, sep))
    return "\n".join(out) + "\n"


#: ``sacct --format=ALL`` of Slurm 22.05.8, in the order it prints them (109 fields; the header of
#: tests/fixtures/real_slurm/format-all/sacct-format-all-P.txt).
FORMAT_ALL_FIELDS: tuple[str, ...] = (
    "Account", "AdminComment", "AllocCPUS", "AllocNodes", "AllocTRES", "AssocID", "AveCPU",
    "AveCPUFreq", "AveDiskRead", "AveDiskWrite", "AvePages", "AveRSS", "AveVMSize", "BlockID",
    "Cluster", "Comment", "Constraints", "ConsumedEnergy", "ConsumedEnergyRaw", "Container",
    "CPUTime", "CPUTimeRAW", "DBIndex", "DerivedExitCode", "Elapsed", "ElapsedRaw", "Eligible",
    "End", "ExitCode", "Flags", "GID", "Group", "JobID", "JobIDRaw", "JobName", "Layout",
    "MaxDiskRead", "MaxDiskReadNode", "MaxDiskReadTask", "MaxDiskWrite", "MaxDiskWriteNode",
    "MaxDiskWriteTask", "MaxPages", "MaxPagesNode", "MaxPagesTask", "MaxRSS", "MaxRSSNode",
    "MaxRSSTask", "MaxVMSize", "MaxVMSizeNode", "MaxVMSizeTask", "McsLabel", "MinCPU",
    "MinCPUNode", "MinCPUTask", "NCPUS", "NNodes", "NodeList", "NTasks", "Partition", "Priority",
    "QOS", "QOSRAW", "Reason", "ReqCPUFreq", "ReqCPUFreqGov", "ReqCPUFreqMax", "ReqCPUFreqMin",
    "ReqCPUS", "ReqMem", "ReqNodes", "ReqTRES", "Reservation", "ReservationId", "Reserved",
    "ResvCPU", "ResvCPURAW", "Start", "State", "Submit", "SubmitLine", "Suspended",
    "SystemComment", "SystemCPU", "Timelimit", "TimelimitRaw", "TotalCPU", "TRESUsageInAve",
    "TRESUsageInMax", "TRESUsageInMaxNode", "TRESUsageInMaxTask", "TRESUsageInMin",
    "TRESUsageInMinNode", "TRESUsageInMinTask", "TRESUsageInTot", "TRESUsageOutAve",
    "TRESUsageOutMax", "TRESUsageOutMaxNode", "TRESUsageOutMaxTask", "TRESUsageOutMin",
    "TRESUsageOutMinNode", "TRESUsageOutMinTask", "TRESUsageOutTot", "UID", "User", "UserCPU",
    "WCKey", "WCKeyID", "WorkDir",
)


def alloc_all(**over: str) -> dict[str, str]:
    """An allocation row of a ``--format=ALL`` dump: :func:`alloc` plus the other fields as a
    finished 22.05 job prints them (values from the real capture)."""
    row = alloc(
        NCPUS=ALLOC["AllocCPUS"], NNodes=ALLOC["AllocNodes"], AssocID="7", CPUTime="00:02:00",
        CPUTimeRAW="120", DBIndex="24", GID="20001", Group="alice", Priority="1", QOSRAW="1",
        ReqCPUS="1", ReqMem="1000M", ReqNodes="1", Reserved="00:00:00", ResvCPU="00:00:00",
        ResvCPURAW="0", Suspended="00:00:00", SystemCPU="00:00.002", Timelimit="00:05:00",
        TotalCPU="00:00.005", UserCPU="00:00.003", WCKeyID="0", ConsumedEnergy="0",
        ConsumedEnergyRaw="0", ReqCPUFreq="Unknown", ReqCPUFreqGov="Unknown",
        ReqCPUFreqMax="Unknown", ReqCPUFreqMin="Unknown", WorkDir="/home/alice",
        SubmitLine="sbatch -A physics -p gpu --gres=gpu:a100:1 -J train job.sh",
    )
    row.update(over)
    return row
