"""``scontrol show job -d`` (multi-line form) → the GPU indices each job holds on each node.

sacct knows how many GPUs a job had, never which ones (the indices are not in slurmdbd); the
live job state does. With ``-d`` each job that holds resources prints one line per group of
nodes with the same allocation (``src/api/job_info.c``; real 22.05 output in
``tests/fixtures/real_slurm/scontrol-show-job-d-running-gpu.txt``)::

    JobId=19 JobName=long-train
       JobState=RUNNING Reason=None Dependency=(null)
       RunTime=00:00:06 TimeLimit=00:10:00 TimeMin=N/A
       StartTime=2026-11-30T05:54:47 EndTime=2026-11-30T06:04:47 Deadline=N/A
       JOB_GRES=gpu:a100:2
         Nodes=a100-01 CPU_IDs=0-3 Mem=4000 GRES=gpu:a100:2(IDX:0-1)

- ``Nodes=`` is a hostlist: every node of ``gpu-[01-02]`` got the same indices.
- ``GRES=`` lists the job's GRES on those nodes, comma separated: ``gpu:a100:2(IDX:0-1,4)``,
  ``gpu:2(IDX:0-1)`` (untyped), ``gpu:a100(CNT:2)`` (a count without indices: no row); other GRES
  (``gpumem``, …) are ignored. Older releases' ``GRES_IDX=`` is read too.
- Shared GPUs (docs/shared-gpus.md; real 22.05 output of MIG, shard and MPS jobs in
  ``tests/fixtures/slurm/sharing/``): a MIG-typed ``gpu:1g.10gb:2(IDX:0-1)`` gives rows with
  ``sharing`` ``mig`` and the profile, the index being the MIG instance's GRES index (not the
  physical GPU's); on a node with several types an untyped job shows the others as
  ``gpu:a100_3g.20gb:0(IDX:)`` (none). ``mps:50(IDX:0)``: 50 MPS units on GPU 0. ``shard(CNT:2)``:
  22.05 does not say which GPU the shards are on, so no row. Slurm 23.11.2 and later print a
  shared GRES's units per GPU of the node instead (``mps:50(0/100,50/100)``: 50 of GPU 1's 100;
  ``shard:2(2/4,0/4)``; ``src/stepmgr/gres_stepmgr.c``, tests/fixtures/slurm/autodetect/): MPS
  units become rows as above, shards still give none.
- GPU types as AutoDetect=nvml names them (``gpu:nvidia_h100_80gb_hbm3:2(IDX:0-1)`` whole,
  ``gpu:nvidia_a100_1c.3g.20gb:1(IDX:4)`` a MIG compute instance): ``slurm_gpu_type``.
- Line 1: ``JobId=`` (sacct's JobIDRaw), then ``ArrayJobId=``/``ArrayTaskId=`` (sacct's JobID
  ``A_T``) or ``HetJobId=``/``HetJobOffset=`` (``H+O``), then ``JobName=`` (free text, ignored).
- Times: epoch seconds under ``SLURM_TIME_FORMAT=%s`` (the live command), else naive local time
  of the scontrol process (``timezone``); ``Unknown``/``None`` mean no time. ``EndTime`` of a job
  still running is its time-limit projection, so ``end`` is kept only for finished states.
- Jobs are separated by blank lines. A block that cannot be read (bad job id, time, hostlist or
  GRES; a missing JobState/StartTime line) is rejected whole, with its line and field; the other
  blocks load.

``--oneliner`` keeps the node lines too (its line end is a space), but then free text such as
``JobName`` or ``Command`` shares the line with them; the multi-line form is what we read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from connectors.errors import Reject
from connectors.gpu_sharing import MIG, MPS, slurm_gpu_type
from connectors.slurm.commands import CommandRunner
from connectors.slurm.fields import SACCT_ENVIRONMENT
from connectors.slurm.hostlist import HostlistError, expand_hostlist
from connectors.slurm.records import SCONTROL_GPU_INDICES_SCHEMA
from connectors.slurm.timefmt import TIME_EXPECTED, check_timezone, time_frame

SOURCE = "scontrol"
#: Epoch times, no local-time ambiguity: the same environment as the sacct extraction.
SCONTROL_ENVIRONMENT: dict[str, str] = dict(SACCT_ENVIRONMENT)

#: What scontrol prints when the controller holds no job at all.
NO_JOBS = "No jobs in the system"
#: States after which EndTime is when the job ended (before it, the time-limit projection).
FINISHED_STATES = frozenset({
    "COMPLETED", "COMPLETING", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",
})

_NODE_LINE = re.compile(r"^Nodes=(?P<nodes>\S+)(?: |$)")
# GRES= (or 22.05's older GRES_IDX=) anywhere after Nodes=: a later release may print more fields
_NODE_GRES = re.compile(r" (?P<key>GRES|GRES_IDX)=(?P<gres>\S*)")
_GRES_ENTRY = re.compile(
    r"^(?P<name>[A-Za-z0-9_]+)(?::(?P<mid>[^():,]+(?::[^():,]+)?))?"
    r"(?:\((?:(?P<kind>IDX|CNT):(?P<spec>[^()]*)|(?P<per_gpu>\d+/\d+(?:,\d+/\d+)*))\))?$"
)
_INDEX_LIST = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")
_INT = re.compile(r"^\d+$")
_TASK_RANGE = re.compile(r"^[0-9,\-]+(?:%\d+)?$")  # 22.05 prints a pending rest as 0-3%2
MAX_GPU_INDEX = 4096  # a node with more GPUs than this is a typo in the input, not a node
#: (GPU index, model, sharing, MIG profile, units) one job holds on a node
_Held = tuple[int, str | None, str | None, str | None, int | None]
#: (line, node, *_Held)
_Gpu = tuple[int, str, int, str | None, str | None, str | None, int | None]


class _BadBlock(Exception):
    """A job block that cannot be read: where and why (becomes a Reject)."""

    def __init__(self, line_no: int, field_name: str, reason: str, raw: str) -> None:
        super().__init__(reason)
        self.line_no, self.field_name, self.reason, self.raw = line_no, field_name, reason, raw


@dataclass(frozen=True)
class ScontrolParse:
    """One snapshot: GPU index rows, rejected blocks, and what was read."""

    gpus: pl.DataFrame  # SCONTROL_GPU_INDICES_SCHEMA
    rejects: list[Reject]
    jobs: int  # job blocks read, rejected ones included
    lines_read: int
    observed_at: datetime | None  # null only when no job holds GPUs


@dataclass
class _Job:
    """The fields of one job block that the rows need (times still as printed)."""

    first_line: int
    raw_first: str
    job_id: str
    job_id_raw: int
    state: str | None = None
    state_line: tuple[int, str] | None = None
    start_text: str | None = None
    end_text: str | None = None
    time_line: tuple[int, str] = (0, "")
    run_seconds: int | None = None
    #: (line, node, GPU index, model, sharing, MIG profile, units) of every GPU the node
    #: lines name
    gpus: list[_Gpu] = field(default_factory=list)


def scontrol_command() -> list[str]:
    """Every job (hidden partitions too) with its per-node detail; run with
    :data:`SCONTROL_ENVIRONMENT`."""
    return ["scontrol", "--all", "--details", "show", "job"]


def fetch_scontrol_jobs(runner: CommandRunner, *, now: datetime | None = None) -> ScontrolParse:
    """Run :func:`scontrol_command` (locally or through the runner's prefix) and parse it.

    The snapshot is dated when the command started (UTC, whole seconds). A failing command
    raises ``SourceError`` (from the runner) and nothing is parsed.
    """
    started = _utc_naive(now or datetime.now(UTC)).replace(microsecond=0)
    text = runner.run(scontrol_command(), SCONTROL_ENVIRONMENT)
    return parse_scontrol_jobs(text, source_file=f"scontrol {started:%Y-%m-%dT%H:%M:%S}",
                               timezone="UTC", observed_at=started)


def parse_scontrol_jobs(text: str, *, source_file: str, timezone: str = "UTC",
                        observed_at: datetime | None = None) -> ScontrolParse:
    """Parse ``scontrol show job -d`` output into one row per (job, node, GPU index).

    ``observed_at`` is when the snapshot was taken (naive means UTC). Without it, it is read from
    the snapshot itself: a running job's StartTime + RunTime is the time scontrol printed it
    (else the latest start or end in the snapshot).
    """
    check_timezone(timezone)
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rejects: list[Reject] = []
    jobs: list[_Job] = []
    blocks = 0
    for kind, numbered in _blocks(lines):
        if kind == "stray":
            no, raw = numbered[0]
            reason = f"expected a job block starting with JobId=, found {raw.strip()!r}"
            rejects.append(Reject(SOURCE, source_file, no, "JobId", reason, raw))
            continue
        blocks += 1
        try:
            jobs.append(_read_block(numbered))
        except _BadBlock as bad:
            rejects.append(Reject(SOURCE, source_file, bad.line_no, bad.field_name, bad.reason,
                                  bad.raw))
    timed = _with_times(jobs, timezone, source_file, rejects)
    when = _utc_naive(observed_at) if observed_at is not None else _snapshot_time(timed)
    rows = [
        (job.job_id, job.job_id_raw, node, index, model, sharing, profile, units, start,
         end if job.state in FINISHED_STATES else None, job.state, when, source_file, line_no)
        for job, start, end in timed
        for line_no, node, index, model, sharing, profile, units in job.gpus
    ]
    frame = pl.DataFrame(rows, schema=SCONTROL_GPU_INDICES_SCHEMA, orient="row")
    rejects.sort(key=lambda r: r.line_no)
    return ScontrolParse(frame, rejects, blocks, len(lines), when)


def _utc_naive(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _blocks(lines: list[str]) -> Iterator[tuple[str, list[tuple[int, str]]]]:
    """("job", its numbered lines) per ``JobId=`` block; ("stray", lines) for text between
    blocks that belongs to none (a blank line ends a block)."""
    current: list[tuple[int, str]] = []
    stray: list[tuple[int, str]] = []
    for no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("JobId="):
            if current:
                yield "job", current
            if stray:
                yield "stray", stray
                stray = []
            current = [(no, line)]
        elif not stripped:
            if current:
                yield "job", current
                current = []
            if stray:
                yield "stray", stray
                stray = []
        elif current:
            current.append((no, line))
        elif stripped != NO_JOBS:
            stray.append((no, line))
    if current:
        yield "job", current
    if stray:
        yield "stray", stray


def _read_block(numbered: list[tuple[int, str]]) -> _Job:
    first_no, first = numbered[0]
    job = _job_ids(first_no, first)
    for no, line in numbered[1:]:
        s = line.strip()
        if s.startswith("JobState=") and job.state is None:
            job.state = s.split(None, 1)[0].removeprefix("JobState=")
            job.state_line = (no, line)
        elif s.startswith("RunTime=") and job.run_seconds is None:
            job.run_seconds = _duration(s.split(None, 1)[0].removeprefix("RunTime="))
        elif s.startswith("StartTime=") and job.start_text is None:
            m = re.match(r"^StartTime=(\S*)(?: EndTime=(\S*))?", s)
            assert m is not None  # the prefix matched
            job.start_text, job.end_text = m.group(1), m.group(2) or ""
            job.time_line = (no, line)
        elif s.startswith("Nodes="):
            job.gpus.extend(_node_line(no, line, s))
    if job.state is None:
        raise _BadBlock(first_no, "JobState", "expected a JobState= line in the job's block, "
                        "found none (a cut snapshot?)", first)
    if job.start_text is None:
        raise _BadBlock(first_no, "StartTime", "expected a StartTime= line in the job's block, "
                        "found none (a cut snapshot?)", first)
    return job


def _job_ids(no: int, line: str) -> _Job:
    """sacct's JobID and JobIDRaw from line 1: ``JobId=… [ArrayJobId=… ArrayTaskId=…] JobName=``."""
    head = line.strip().split(" JobName=", 1)[0]
    pairs = dict(tok.split("=", 1) for tok in head.split() if "=" in tok)
    raw = pairs.get("JobId", "")
    if not _INT.match(raw):
        raise _BadBlock(no, "JobId", f"expected a numeric JobId, found {raw!r}", line)
    job_id = raw
    if "ArrayJobId" in pairs:
        array, task = pairs["ArrayJobId"], pairs.get("ArrayTaskId", "")
        if not _INT.match(array) or not _TASK_RANGE.match(task):
            raise _BadBlock(no, "ArrayTaskId", "expected ArrayJobId=N ArrayTaskId=M (or a range "
                            f"such as 5-9), found {array!r} and {task!r}", line)
        if _INT.match(task):
            job_id = f"{array}_{task}"
        else:  # the pending rest of an array, as sacct prints it: 123_[5-9%2]
            throttle = pairs.get("ArrayTaskThrottle", "")
            if "%" not in task and _INT.match(throttle):
                task = f"{task}%{throttle}"
            job_id = f"{array}_[{task}]"
    elif "HetJobId" in pairs:
        het, offset = pairs["HetJobId"], pairs.get("HetJobOffset", "")
        if not _INT.match(het) or not _INT.match(offset):
            raise _BadBlock(no, "HetJobOffset", "expected HetJobId=N HetJobOffset=M, found "
                            f"{het!r} and {offset!r}", line)
        job_id = f"{het}+{offset}"
    return _Job(first_line=no, raw_first=line, job_id=job_id, job_id_raw=int(raw))


def _duration(text: str) -> int | None:
    m = _DURATION.match(text)
    if m is None:
        return None
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def _node_line(no: int, line: str, stripped: str) -> list[_Gpu]:
    """(line, node, index, model, sharing, profile, units) for the GPUs of one ``Nodes=…
    GRES=…`` line."""
    m = _NODE_LINE.match(stripped)
    if m is None:
        raise _BadBlock(no, "Nodes", "expected '  Nodes=HOSTLIST CPU_IDs=… Mem=… GRES=…', "
                        f"found {stripped!r}", line)
    g = _NODE_GRES.search(stripped, m.end() - 1)
    gres = g.group("gres") if g else ""
    indices = _gpu_indices(no, line, gres, g.group("key") if g else "GRES")
    if not indices:
        return []
    try:
        nodes = expand_hostlist(m.group("nodes"))
    except HostlistError as exc:
        raise _BadBlock(no, "Nodes", str(exc), line) from exc
    if not nodes:
        raise _BadBlock(no, "Nodes", "expected the nodes holding the GPUs, found "
                        f"{m.group('nodes')!r}", line)
    return [(no, node, *held) for node in nodes for held in indices]


def _split_entries(gres: str) -> list[str]:
    """``gpu:a100:2(IDX:0-1,4),shard:0`` → the entries (commas inside parentheses stay)."""
    entries: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in gres:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            entries.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    entries.append("".join(cur))
    return entries


def _gpu_indices(no: int, line: str, gres: str, key: str) -> list[_Held]:
    """(index, model, sharing, profile, units) of the ``gpu`` and ``mps`` entries of a GRES
    value (docs/shared-gpus.md): a MIG-typed ``gpu:1g.10gb:1(IDX:3)`` is MIG instance 3 (its
    GRES index), ``mps:50(IDX:0)`` 50 MPS units on GPU 0. Other GRES are skipped, and so are
    shards: 22.05 prints them without a GPU (``shard(CNT:2)``)."""
    if gres in ("", "(null)", "N/A"):
        return []
    found: dict[int, _Held] = {}
    for entry in _split_entries(gres):
        m = _GRES_ENTRY.match(entry)
        if m is None:
            raise _BadBlock(no, key, "expected GRES entries like gpu:a100:2(IDX:0-1), found "
                            f"{entry!r} in {gres!r}", line)
        name = m.group("name")
        if m.group("per_gpu") is not None:  # 23.11.2+: a shared GRES's units per GPU
            if name == "gpu":
                raise _BadBlock(no, key, "expected GPU indices (IDX:…) for a gpu entry, found "
                                f"units per GPU in {entry!r}", line)
            if name == MPS:  # shards: no row, as with CNT:
                for held in _mps_per_gpu(no, line, m.group("per_gpu"), m.group("mid"), entry,
                                         key):
                    found.setdefault(held[0], held)
            continue
        if name not in ("gpu", MPS) or m.group("kind") != "IDX" or m.group("spec") == "N/A":
            # another GRES, or GPUs without indices (CNT:, or IDX:N/A when none is bound):
            # nothing to place, and no count to check against
            continue
        model, count = _type_and_count(m.group("mid"))
        if count == 0 and m.group("spec") == "":
            continue  # 22.05 on a MIG node: gpu:a100_3g.20gb:0(IDX:) = none of that type
        indices = _index_list(no, line, m.group("spec"), entry, key)
        if name == MPS:
            # MPS units of one GPU (Slurm gives a job one MPS GPU per node); over several the
            # split is not printed
            units = count if len(indices) == 1 else None
            for index in indices:
                found.setdefault(index, (index, None, MPS, None, units))
            continue
        if count is not None and count != len(indices):
            raise _BadBlock(no, key, f"expected {count} GPU indices in {entry!r}, found "
                            f"{len(indices)}", line)
        meaning = slurm_gpu_type(model) if model else None
        mig = meaning is not None and meaning.sharing == MIG
        for index in indices:
            found.setdefault(index, (index, model, MIG if mig else None,
                                     meaning.slice_profile if mig and meaning else None, 1))
    return [found[i] for i in sorted(found)]


def _mps_per_gpu(no: int, line: str, per_gpu: str, mid: str | None, entry: str,
                 key: str) -> list[_Held]:
    """``mps:50(0/100,50/100)`` (Slurm 23.11.2+: held/available per GPU, in GRES index order) →
    a row per GPU holding units; the units must add up to the entry's count."""
    held = [int(pair.split("/", 1)[0]) for pair in per_gpu.split(",")]
    if len(held) > MAX_GPU_INDEX + 1:
        raise _BadBlock(no, key, f"expected at most {MAX_GPU_INDEX + 1} GPUs in {entry!r}, "
                        f"found {len(held)}", line)
    _, count = _type_and_count(mid)
    if count is not None and count != sum(held):
        raise _BadBlock(no, key, f"expected MPS units adding up to {count} in {entry!r}, found "
                        f"{sum(held)}", line)
    return [(index, None, MPS, None, units) for index, units in enumerate(held) if units > 0]


def _type_and_count(mid: str | None) -> tuple[str | None, int | None]:
    """``a100:2`` → (a100, 2); ``2`` → (None, 2); ``a100`` (older releases) → (a100, None)."""
    if not mid:
        return None, None
    parts = mid.split(":")
    if len(parts) == 2:
        return parts[0], int(parts[1]) if _INT.match(parts[1]) else None
    return (None, int(parts[0])) if _INT.match(parts[0]) else (parts[0], None)


def _index_list(no: int, line: str, spec: str, entry: str, key: str) -> list[int]:
    """Slurm's bit list ``0-1,4,6-7`` → [0, 1, 4, 6, 7]; ``N/A`` → []."""
    if spec == "N/A":
        return []
    if not _INDEX_LIST.match(spec):
        raise _BadBlock(no, key, f"expected GPU indices like 0-1,4 in {entry!r}, found {spec!r}",
                        line)
    out: list[int] = []
    for part in spec.split(","):
        lo_s, _, hi_s = part.partition("-")
        lo, hi = int(lo_s), int(hi_s or lo_s)
        if hi < lo or hi > MAX_GPU_INDEX:
            raise _BadBlock(no, key, f"expected ascending GPU indices up to {MAX_GPU_INDEX} in "
                            f"{entry!r}, found {part!r}", line)
        out.extend(range(lo, hi + 1))
    return out


_Timed = tuple[_Job, datetime | None, datetime | None]


def _with_times(jobs: list[_Job], timezone: str, source_file: str,
                rejects: list[Reject]) -> list[_Timed]:
    """Each job with its UTC start and end; a job whose times cannot be read is rejected."""
    if not jobs:
        return []
    raw = pl.DataFrame({"StartTime": [j.start_text for j in jobs],
                        "EndTime": [j.end_text for j in jobs]}, schema={
                            "StartTime": pl.String, "EndTime": pl.String})
    times = time_frame(raw, ["StartTime", "EndTime"], timezone).to_dicts()
    out = []
    for job, t in zip(jobs, times, strict=True):
        problem = _time_problem(job, t, timezone)
        if problem is not None:
            no, line = job.time_line
            rejects.append(Reject(SOURCE, source_file, no, problem[0], problem[1], line))
            continue
        out.append((job, t["starttime"], t["endtime"]))
    return out


def _time_problem(job: _Job, t: dict[str, Any], timezone: str) -> tuple[str, str] | None:
    for name, text in (("StartTime", job.start_text), ("EndTime", job.end_text)):
        if t[f"_bad_{name}"]:
            return name, f"{TIME_EXPECTED}, found {text!r}"
        if t[f"_later_{name}"] is not None:
            return name, (f"expected an unambiguous time, found {text!r}, which occurs twice in "
                          f"{timezone} (collect with SLURM_TIME_FORMAT=%s)")
    if job.gpus and t["starttime"] is None:
        return "StartTime", ("expected the start time of a job holding GPUs, found "
                             f"{job.start_text!r}")
    return None


def _snapshot_time(timed: list[_Timed]) -> datetime | None:
    """When scontrol printed the snapshot: RunTime counts up to that instant for running jobs."""
    running = [start + timedelta(seconds=job.run_seconds) for job, start, _ in timed
               if job.state == "RUNNING" and start is not None and job.run_seconds is not None]
    if running:
        return max(running)
    seen = [t for job, start, end in timed
            for t in (start, end if job.state in FINISHED_STATES else None) if t is not None]
    return max(seen) if seen else None
