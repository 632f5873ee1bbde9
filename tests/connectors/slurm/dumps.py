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
)  # fmt: skip

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
}  # fmt: skip

STEP_BLANK = ("User", "UID", "Partition", "QOS", "DerivedExitCode", "TimelimitRaw", "ReqTRES",
              "Reason", "Flags", "AdminComment")  # fmt: skip


def alloc(**over: str) -> dict[str, str]:
    return {**ALLOC, **over}


def step(parent: Mapping[str, str], step_id: str, raw_step: str | None = None,
         **over: str) -> dict[str, str]:  # fmt: skip
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
         sep: str = US) -> str:  # fmt: skip
    """Header + lines; a ``str`` item is written as it is (for malformed lines)."""
    out = [sep.join(fields)]
    for r in rows:
        out.append(r if isinstance(r, str) else line(r, fields, sep))
    return "\n".join(out) + "\n"
