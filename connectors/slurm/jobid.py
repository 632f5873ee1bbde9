"""sacct job ids (``JobID`` and ``JobIDRaw``) as Polars expressions.

``JobID`` shapes (Slurm 22.05):

- plain ``123``;
- array task ``123_4`` (``array_job_id`` 123, ``array_task_id`` 4) and the not-yet-started rest of
  an array ``123_[5-9%2]`` (``array_task_range`` ``5-9%2``);
- het job component ``123+0`` (``het_job_id`` 123, ``het_offset`` 0);
- steps: ``123.batch``, ``123.extern``, ``123.interactive``, ``123.TBD``, ``123.0``,
  ``123_4.batch``, ``15+1.0``, and a step over several het components ``15+0.0+1``.

``JobIDRaw`` is the database's own id: ``123`` or ``123.batch``. For array tasks and het components
it is NOT derivable from ``JobID`` (task ``6_5`` of array 6 may be raw 6 because the last task reuses
the array's id, tasks ``6_0``… get fresh ids; het component ``15+1`` is raw 16), so it is read, never
computed. A row is a step when its ``JobID`` has a step part; ``JobIDRaw`` must agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

_STEP = r"(?:[A-Za-z]+|\d+)(?:\+\d+)?"
JOBID_RE = rf"^(\d+)(?:_(\d+)|_\[([^\]\s]+)\]|\+(\d+))?(?:\.({_STEP}))?$"
JOBIDRAW_RE = rf"^(\d+)(?:\.({_STEP}))?$"

JOBID_EXPECTED = "expected 123, 123_4, 123_[5-9%2], 123+0 with an optional .step (.batch, .0, …)"
JOBIDRAW_EXPECTED = "expected 123 or 123.step"


@dataclass(frozen=True)
class JobIdExprs:
    parent_job_id: pl.Expr  # JobID text without the step part
    step_id: pl.Expr  # "batch", "0", "0+1" …; null for an allocation row
    array_job_id: pl.Expr
    array_task_id: pl.Expr
    array_task_range: pl.Expr
    het_job_id: pl.Expr
    het_offset: pl.Expr
    job_id_raw: pl.Expr  # Int64, the allocation's raw id (also for steps)
    raw_step_id: pl.Expr
    is_step: pl.Expr
    bad_job_id: pl.Expr
    bad_job_id_raw: pl.Expr  # malformed, or its step part differs from JobID's


def jobid_exprs(job_id: str, job_id_raw: str) -> JobIdExprs:
    j = pl.col(job_id).str.extract_groups(JOBID_RE)
    r = pl.col(job_id_raw).str.extract_groups(JOBIDRAW_RE)
    base = j.struct.field("1").cast(pl.Int64)
    task = j.struct.field("2").cast(pl.Int64)
    rng = j.struct.field("3")
    het = j.struct.field("4").cast(pl.Int64)
    step = j.struct.field("5")
    raw = r.struct.field("1").cast(pl.Int64)
    raw_step = r.struct.field("2")
    is_array = task.is_not_null() | rng.is_not_null()
    parent = pl.col(job_id).str.split(".").list.first()
    bad_job_id = base.is_null()
    step_mismatch = (step.fill_null("") != raw_step.fill_null("")) & ~bad_job_id
    return JobIdExprs(
        parent_job_id=parent,
        step_id=step,
        array_job_id=pl.when(is_array).then(base),
        array_task_id=task,
        array_task_range=rng,
        het_job_id=pl.when(het.is_not_null()).then(base),
        het_offset=het,
        job_id_raw=raw,
        raw_step_id=raw_step,
        is_step=step.is_not_null(),
        bad_job_id=bad_job_id,
        bad_job_id_raw=raw.is_null() | step_mismatch,
    )
