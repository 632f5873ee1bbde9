"""The optional pyslurm backend (``pip install gpuledger[slurm-native]``).

PyPI carries pyslurm only for Slurm 25.11 and it must match the site's Slurm, so this backend is
optional; ``sacct`` text is the main path. It renders what pyslurm returns as the same lines the
sacct extraction prints (``SACCT_FIELDS``, unit separator, epoch times) and hands them to
:func:`connectors.slurm.parse.parse_sacct`, so both backends produce identical typed frames and
share every parsing rule.
"""

import importlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from connectors.errors import SourceError
from connectors.slurm.fields import SACCT_FIELDS, UNIT_SEPARATOR
from connectors.slurm.parse import SacctParse, parse_sacct


def _epoch(value: Any) -> str:
    """pyslurm gives times as epoch ints (0/None when unknown) or datetimes."""
    if value in (None, 0, ""):
        return "Unknown"
    if isinstance(value, datetime):
        value = value.replace(tzinfo=value.tzinfo or UTC).timestamp()
    return str(int(value))


def _alloc_tres(job: Any) -> str:
    """The job's allocated TRES as ``name=count,…``; pyslurm versions name it differently."""
    for attribute in ("tres_alloc_str", "alloc_tres", "tres_allocated"):
        value = getattr(job, attribute, None)
        if value is None:
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        if hasattr(value, "as_dict"):
            return ",".join(f"{k}={v}" for k, v in sorted(value.as_dict().items()))
    msg = (
        "expected this pyslurm to expose a job's allocated TRES (tres_alloc_str or "
        f"tres_allocated), found none on {type(job).__name__}: use the sacct backend"
    )
    raise SourceError(msg)


def _exit(code: Any, signal: Any) -> str:
    return f"{int(code or 0)}:{int(signal or 0)}"


def job_lines(jobs: Iterable[Any], cluster_default: str = "") -> list[str]:
    """sacct-format lines (header first) for pyslurm ``db.Job`` objects and their steps."""
    lines = [UNIT_SEPARATOR.join(SACCT_FIELDS)]
    for job in jobs:
        tres = _alloc_tres(job)
        job_id = str(job.id)
        if getattr(job, "array_id", None) not in (None, 0) and job.array_task_id is not None:
            job_id = f"{job.array_id}_{job.array_task_id}"
        start, end = _epoch(job.start_time), _epoch(job.end_time)
        row = {
            "JobID": job_id,
            "JobIDRaw": str(job.id),
            "User": job.user_name or "",
            "UID": str(job.user_id if job.user_id is not None else ""),
            "Account": job.account or "",
            "Partition": job.partition or "",
            "QOS": job.qos or "",
            "State": job.state or "",
            "ExitCode": _exit(job.exit_code, job.exit_code_signal),
            "DerivedExitCode": _exit(job.derived_exit_code, job.derived_exit_code_signal),
            "Submit": _epoch(job.submit_time),
            "Eligible": _epoch(job.eligible_time),
            "Start": start,
            "End": end,
            "ElapsedRaw": str(int(job.elapsed_time or 0)),
            "AllocCPUS": str(job.cpus or 0),
            "AllocNodes": str(job.num_nodes or 0),
            "NodeList": job.nodelist or "None assigned",
            "AllocTRES": tres,
            "Cluster": job.cluster or cluster_default,
            "Reservation": job.reservation or "",
            "WCKey": job.wckey or "",
            "JobName": job.name or "",
            "AdminComment": job.admin_comment or "",
        }
        lines.append(UNIT_SEPARATOR.join(row.get(f, "") for f in SACCT_FIELDS))
        for step in (getattr(job, "steps", None) or {}).values():
            step_row = {
                "JobID": f"{job_id}.{step.id}",
                "JobIDRaw": f"{job.id}.{step.id}",
                "Account": job.account or "",
                "State": step.state or "",
                "ExitCode": _exit(getattr(step, "exit_code", 0),
                                  getattr(step, "exit_code_signal", 0)),
                "Submit": _epoch(job.submit_time),
                "Start": _epoch(step.start_time),
                "End": _epoch(step.end_time),
                "ElapsedRaw": str(int(getattr(step, "elapsed_time", 0) or 0)),
                "NodeList": getattr(step, "nodelist", "") or "None assigned",
                "Cluster": job.cluster or cluster_default,
                "JobName": getattr(step, "name", "") or "",
            }
            lines.append(UNIT_SEPARATOR.join(step_row.get(f, "") for f in SACCT_FIELDS))
    return lines


class PySlurmSource:
    """Read a window from slurmdbd through pyslurm; raises ``SourceError`` if it is absent."""

    def __init__(self) -> None:
        try:
            self.pyslurm = importlib.import_module("pyslurm")
        except ImportError as exc:
            msg = (
                "expected the optional pyslurm package (gpuledger[slurm-native], built for this "
                "site's Slurm), found none: use the sacct backend"
            )
            raise SourceError(msg) from exc

    def window(self, start: datetime, end: datetime) -> SacctParse:
        db = self.pyslurm.db
        jobs = db.Jobs.load(db.JobFilter(start_time=start, end_time=end, clusters="all"))
        text = "\n".join(job_lines(jobs)) + "\n"
        return parse_sacct(text, source_file=f"pyslurm {start:%F %T}..{end:%F %T}")
