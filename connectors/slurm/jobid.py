"""sacct job ids (``JobID`` and ``JobIDRaw``), vectorized.

``JobID`` shapes (Slurm 22.05):

- plain ``123``;
- array task ``123_4`` (``array_job_id`` 123, ``array_task_id`` 4) and the not-yet-started rest of
  an array ``123_[5-9%2]`` (``array_task_range`` ``5-9%2``);
- het job component ``123+0`` (``het_job_id`` 123, ``het_offset`` 0);
- steps: ``123.batch``, ``123.extern``, ``123.interactive``, ``123.TBD``, ``123.0``,
  ``123_4.batch``, ``15+1.0`` (a step id with a ``+N`` suffix, as newer Slurm prints for steps
  spanning het components, is accepted too).

``JobIDRaw`` is the database's own id: ``123`` or ``123.batch``. For array tasks and het
components it is NOT derivable from ``JobID`` (task ``6_5`` of array 6 may be raw 6 because the
last task reuses the array's id, tasks ``6_0``… get fresh ids; het component ``15+1`` is raw 16),
so it is read, never computed. A row is a step when its ``JobID`` has a step part;
``JobIDRaw`` must have the same step part.

The parsing uses only cheap string kernels (find, slice, to_integer) plus one anchored regex test
per column, so it runs at a few hundred nanoseconds per row.
"""

from __future__ import annotations

import polars as pl

_STEP = r"(?:[A-Za-z]+|\d+)(?:\+\d+)?"
JOBID_RE = rf"^\d+(?:_\d+|_\[[^\]\s]+\]|\+\d+)?(?:\.{_STEP})?$"
#: A JobID of an allocation row (no step part).
ALLOC_ID_RE = r"^\d+(?:_\d+|_\[[^\]\s]+\]|\+\d+)?$"

JOBID_EXPECTED = "expected 123, 123_4, 123_[5-9%2], 123+0 with an optional .step (.batch, .0, …)"
JOBIDRAW_EXPECTED = "expected 123 or 123.step with the same step part as JobID"

#: Columns of :func:`jobid_frame` (plus :func:`array_het_columns`'s with ``array_het=True``).
JOBID_COLUMNS = ("job_id", "step_id", "job_id_raw", "is_step", "_bad_JobID", "_bad_JobIDRaw")


def jobid_frame(frame: pl.DataFrame, job_id: str = "JobID", job_id_raw: str = "JobIDRaw", *,
                array_het: bool = True) -> pl.DataFrame:
    """Parsed id columns (see :data:`JOBID_COLUMNS`) for the rows of ``frame``.

    ``job_id`` is the parent's JobID text (without the step part), ``job_id_raw`` the parent's
    JobIDRaw as Int64, ``step_id`` the step part (null for allocation rows). With
    ``array_het=False`` (step rows) the array/het columns are left null.
    """
    j, r = pl.col(job_id), pl.col(job_id_raw)
    s1 = frame.lazy().select(
        j.alias("_j"),
        r.alias("_r"),
        j.str.find(".", literal=True).alias("_dot"),
        r.str.find(".", literal=True).alias("_rdot"),
        j.str.contains(JOBID_RE).fill_null(False).alias("_jok"),
    )
    s2 = s1.select(
        pl.col("_j").str.slice(0, pl.col("_dot")).alias("job_id"),
        pl.when(pl.col("_dot").is_not_null())
        .then(pl.col("_j").str.slice(pl.col("_dot") + 1))
        .alias("step_id"),
        pl.col("_r").str.slice(0, pl.col("_rdot")).str.to_integer(strict=False).alias("job_id_raw"),
        pl.when(pl.col("_rdot").is_not_null())
        .then(pl.col("_r").str.slice(pl.col("_rdot") + 1))
        .alias("_raw_step"),
        "_jok",
    )
    s3 = s2
    same_step = pl.col("step_id").eq_missing(pl.col("_raw_step"))
    out = s3.select(
        "job_id", "step_id", "job_id_raw",
        pl.col("step_id").is_not_null().alias("is_step"),
        (~pl.col("_jok")).alias("_bad_JobID"),
        # a JobIDRaw is valid when its id part is a number and its step part is JobID's
        (pl.col("job_id_raw").is_null() | (pl.col("_jok") & ~same_step)).alias("_bad_JobIDRaw"),
    ).collect()
    return array_het_columns(out) if array_het else out


def array_het_columns(frame: pl.DataFrame, job_id: str = "job_id") -> pl.DataFrame:
    """Add ``array_job_id``, ``array_task_id``, ``array_task_range``, ``het_job_id`` and
    ``het_offset`` from a column of (valid, step-less) JobID texts."""
    if not bool(frame.select(pl.col(job_id).str.contains(r"[_+]").any()).item()):
        return frame.with_columns(
            pl.lit(None, dtype=pl.Int64).alias("array_job_id"),
            pl.lit(None, dtype=pl.Int64).alias("array_task_id"),
            pl.lit(None, dtype=pl.String).alias("array_task_range"),
            pl.lit(None, dtype=pl.Int64).alias("het_job_id"),
            pl.lit(None, dtype=pl.Int64).alias("het_offset"),
        )
    parent = pl.col(job_id)
    cut = pl.coalesce("_us", "_plus")
    base = parent.str.slice(0, cut).str.to_integer(strict=False)
    tail = parent.str.slice(cut + 1)
    is_arr = pl.col("_us").is_not_null()
    is_het = pl.col("_plus").is_not_null()
    is_range = is_arr & tail.str.starts_with("[")
    return (
        frame.lazy()
        .with_columns(parent.str.find("_", literal=True).alias("_us"),
                      parent.str.find("+", literal=True).alias("_plus"))
        .with_columns(
            pl.when(is_arr).then(base).alias("array_job_id"),
            pl.when(is_arr & ~is_range).then(tail.str.to_integer(strict=False))
            .alias("array_task_id"),
            pl.when(is_range).then(tail.str.strip_prefix("[").str.strip_suffix("]"))
            .alias("array_task_range"),
            pl.when(is_het).then(base).alias("het_job_id"),
            pl.when(is_het).then(tail.str.to_integer(strict=False)).alias("het_offset"),
        )
        .drop("_us", "_plus")
        .collect()
    )
