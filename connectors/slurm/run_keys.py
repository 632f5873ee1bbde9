"""Run keys of sacct allocation rows and the run each step belongs to.

Run keys (requeues)
-------------------
With ``--duplicates`` a requeued job has one allocation row per run, all with the same JobID and
JobIDRaw. Slurm resets ``Submit`` at each requeue, so ``run_key = {cluster}:{job_id_raw}:{submit}``
(submit as epoch seconds; ``none`` when Submit is Unknown) is stable across re-ingests of
overlapping windows. If several rows of one dump still share a key (a requeue within the same
second as the submit), they are ordered by start, then end (nulls last), then line number; the first
keeps the plain key and the n-th (n ≥ 2) gets ``#n`` appended (``gpulab:20:1796017424#2``). This is
deterministic and does not depend on the order of the lines, only on the rows' own times.

Steps carry the ``run_key`` of their run: sacct prints each run's steps right after its allocation
row, so a step belongs to the allocation line right above it when that line has the same cluster
and JobIDRaw. If that allocation line was rejected, the step gets no run (null: no guessing, since
an earlier run of a requeued job has the same JobIDRaw). For a dump whose lines were reordered
(the line above belongs to another job, or there is none) the run is looked up by (cluster,
JobIDRaw): the nearest allocation row above, else below; null when the dump has none.
"""

from __future__ import annotations

import polars as pl

#: ``{cluster}:{job_id_raw}:{submit epoch seconds | none}``; a dump without JobIDRaw has the JobID
#: text where the id cannot be derived (``123_4``, ``123+1``: connectors.slurm.header)
RUN_KEY = pl.concat_str([
    pl.col("cluster"), pl.lit(":"),
    pl.coalesce(pl.col("job_id_raw").cast(pl.String), pl.col("job_id")), pl.lit(":"),
    pl.col("submit").dt.epoch("s").cast(pl.String).fill_null("none"),
])


def dedupe_run_keys(out: pl.DataFrame) -> pl.DataFrame:
    """Number rows that share a base ``run_key`` (see the module docstring for ``#n``)."""
    dup = out["run_key"].is_duplicated()
    if not dup.any():
        return out
    ranked = (
        out.with_row_index("_i")
        .filter(dup)
        .sort(["run_key", "start", "end", "line_no"], nulls_last=True)
        .with_columns(pl.int_range(pl.len()).over("run_key").alias("_n"))
        .select(
            "_i",
            pl.when(pl.col("_n") == 0).then(pl.col("run_key"))
            .otherwise(pl.format("{}#{}", pl.col("run_key"), pl.col("_n") + 1))
            .alias("_key"),
        )
    )
    return (
        out.with_row_index("_i")
        .join(ranked, on="_i", how="left", maintain_order="left")
        .with_columns(pl.coalesce("_key", "run_key").alias("run_key"))
        .drop("_i", "_key")
    )


def step_anchor_keys(steps: pl.DataFrame, runs: pl.DataFrame, alloc_lines: pl.Series,
                     n_lines: int, offset: int = 0) -> tuple[pl.Series, pl.Series]:
    """(run key through each step's anchor or null, steps that need the look-up).

    Line numbers minus ``offset`` index dense arrays of ``n_lines + 2`` slots.
    """
    size = n_lines + 2
    run_lines = runs["line_no"].cast(pl.Int64) - offset
    row_of_line = pl.Series("_r", [None] * 0, dtype=pl.Int64).extend_constant(None, size)
    row_of_line = row_of_line.scatter(run_lines, pl.int_range(0, runs.height, eager=True))
    is_alloc = pl.zeros(size, dtype=pl.Boolean, eager=True).scatter(
        alloc_lines.cast(pl.Int64) - offset, True
    )
    last_alloc = pl.select(
        pl.when(is_alloc).then(pl.int_range(0, size, dtype=pl.Int64)).forward_fill()
    ).to_series()
    anchor = last_alloc.gather(steps["line_no"].cast(pl.Int64) - offset)
    run_row = row_of_line.gather(anchor)
    run_raw = runs["job_id_raw"].gather(run_row)
    same = (
        (runs["cluster"].gather(run_row) == steps["cluster"])
        & run_raw.eq_missing(steps["job_id_raw"])
        # no JobIDRaw (an array task or het component of a dump without it): the JobID tells
        & (run_raw.is_not_null() | (runs["job_id"].gather(run_row) == steps["job_id"]))
    ).fill_null(False)
    keys = pl.select(pl.when(same).then(runs["run_key"].gather(run_row))).to_series()
    look_up = anchor.is_null() | (run_row.is_not_null() & ~same)
    return keys.alias("run_key"), look_up


def step_run_keys(steps: pl.DataFrame, runs: pl.DataFrame, alloc_lines: pl.Series,
                  n_lines: int) -> pl.Series:
    """The run of each step (see the module docstring).

    ``alloc_lines``: line numbers of every allocation line, loaded or rejected. A step's anchor
    is the last allocation line above it. Anchor loaded with the step's cluster and JobIDRaw →
    its run. Anchor rejected → no run (no guessing). No anchor, or an anchor of another job (a
    reordered dump) → the run is looked up by (cluster, job_id_raw): nearest allocation row
    above, else below. Line numbers index dense arrays, so the usual case is gathers only.
    """
    if steps.height == 0:
        return pl.Series("run_key", [], dtype=pl.String)
    keys, look_up = step_anchor_keys(steps, runs, alloc_lines, n_lines)
    if not look_up.any():
        return keys
    # a reordered dump: look the allocation up by (cluster, job_id_raw), above then below
    job = pl.coalesce(pl.col("job_id_raw").cast(pl.String), "job_id").alias("_job")
    probe = steps.select("line_no", "cluster", job).with_row_index("_i")
    lost = probe.filter(look_up).sort("line_no")
    by_key = runs.select("line_no", "cluster", job, "run_key").sort("line_no")
    by = ["cluster", "_job"]
    back = lost.join_asof(by_key, on="line_no", by=by, strategy="backward")
    ahead = lost.join_asof(by_key, on="line_no", by=by, strategy="forward")
    found = back.select("_i", pl.coalesce(back["run_key"], ahead["run_key"]).alias("_found"))
    return (
        probe.with_columns(keys.alias("run_key"))
        .join(found, on="_i", how="left", maintain_order="left")
        .select(pl.coalesce("run_key", "_found").alias("run_key"))
        .to_series()
    )
