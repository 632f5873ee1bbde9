"""One batch of sacct lines (a piece of the dump, cut at line ends) → its runs, steps, rejects
and allocation line numbers; both drivers (:func:`connectors.slurm.parse.parse_sacct`,
:func:`connectors.slurm.sacct_stream.iter_sacct_batches`) parse through :func:`parse_piece`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from connectors.errors import Reject
from connectors.slurm.bridge import bridge_pods
from connectors.slurm.jobid import ALLOC_ID_RE, array_het_columns
from connectors.slurm.records import RUNS_SCHEMA, STEPS_SCHEMA
from connectors.slurm.run_keys import RUN_KEY
from connectors.slurm.sacct_bytes import SOURCE, fast_split, read_piece
from connectors.slurm.sacct_typing import raw_frame, typed_checked
from connectors.slurm.sanity import DEFAULT_LIMITS, SanityLimits, check_limits
from connectors.slurm.separators import choose_placements, placement_candidates, split_lines


@dataclass
class Batch:
    runs: pl.DataFrame
    steps: pl.DataFrame
    rejects: list[Reject]
    blank_lines: int
    lines: int
    alloc_lines: pl.Series  # line numbers of allocation lines, loaded or rejected


def parse_piece(piece: bytes, first_line: int, header: list[str | None], present: set[str],
                sep: str, timezone: str, source_file: str, n_lines: int | None = None,
                limits: SanityLimits = DEFAULT_LIMITS) -> Batch:
    """Parse the lines of ``piece`` (``first_line`` is the number of its first line).

    Every line has the header's field count (the usual case): Polars' CSV reader splits them and
    a rejected line's text is the fields joined again. Otherwise the lines are read one per row and
    split with the odd ones set apart (:func:`_parse_batch`).
    """
    split = fast_split(piece, sep, len(header), first_line, n_lines)
    if split is None:
        lines, bad_utf8 = read_piece(piece, first_line, source_file)
        batch = _parse_batch(lines, header, present, sep, timezone, source_file, limits)
        batch.rejects.extend(bad_utf8)
        batch.lines += len(bad_utf8)
        return batch
    n = len(header)

    def text_of(line_nos: list[int]) -> dict[int, str]:
        wanted = pl.Series(line_nos, dtype=pl.Int64).implode()
        return dict(
            split.lazy().filter(pl.col("line_no").is_in(wanted))
            .select("line_no", pl.concat_str([f"f{i}" for i in range(n)], separator=sep))
            .collect().iter_rows()
        )

    return _typed_batch(split, header, present, timezone, source_file, [], 0, split.height,
                        None, text_of, limits)


def _parse_batch(body: pl.DataFrame, header: list[str | None], present: set[str], sep: str,
                 timezone: str, source_file: str,
                 limits: SanityLimits = DEFAULT_LIMITS) -> Batch:
    """Split, validate and type one batch of lines (``line_no``, ``line``)."""
    rejects: list[Reject] = []
    n = len(header)
    split, fits = split_lines(body, sep, n)
    blank = (body["line"] == "").fill_null(False)
    blank_lines = int(blank.sum())
    odd_jobids: pl.Series | None = None
    if not fits.all():
        odd = body.filter(~fits & ~blank).with_columns(pl.col("line_no").cast(pl.Int64))
        # allocation lines among them (JobID without a step part), for the steps' anchors
        jobid_at = header.index("JobID")
        odd_jobids = odd.filter(
            pl.col("line").str.split(sep).list.get(jobid_at, null_on_oob=True)
            .str.contains(ALLOC_ID_RE).fill_null(False)
        )["line_no"]
        split = split.filter(fits)
        raw_of: dict[int, str] = dict(odd.select("line_no", "line").iter_rows())
        cands, meta, odd_rejects = placement_candidates(odd, header, sep, source_file)
        rejects.extend(odd_rejects)
        chosen, choose_rejects = choose_placements(cands, meta, header, present, timezone,
                                                   source_file, raw_of)
        rejects.extend(choose_rejects)
        if chosen.height:
            split = pl.concat([split, chosen], how="vertical").sort("line_no")

    def text_of(line_nos: list[int]) -> dict[int, str]:
        wanted = pl.Series(line_nos, dtype=pl.Int64).implode()
        return dict(
            body.select(pl.col("line_no").cast(pl.Int64), "line")
            .filter(pl.col("line_no").is_in(wanted))
            .iter_rows()
        )

    return _typed_batch(split, header, present, timezone, source_file, rejects, blank_lines,
                        body.height, odd_jobids, text_of, limits)


def _typed_batch(split: pl.DataFrame, header: list[str | None], present: set[str], timezone: str,
                 source_file: str, rejects: list[Reject], blank_lines: int, lines: int,
                 odd_jobids: pl.Series | None,
                 text_of: Callable[[list[int]], dict[int, str]],
                 limits: SanityLimits = DEFAULT_LIMITS) -> Batch:
    """Type and validate split lines (``line_no``, ``f0`` …) into a batch's runs and steps;
    allocation lines that break a sanity limit (:mod:`connectors.slurm.sanity`) are rejected."""
    raw = raw_frame(split, header)
    del split
    alloc_lines = [raw["line_no"].filter(raw["JobID"].str.contains(ALLOC_ID_RE).fill_null(False))]
    if odd_jobids is not None:
        alloc_lines.append(odd_jobids)
    typed = typed_checked(raw, header, present, timezone, source_file, text_of, rejects)
    del raw
    typed, insane = check_limits(typed, limits, present, source=SOURCE, source_file=source_file,
                                 text_of=text_of)
    rejects.extend(insane)
    lf = typed.lazy()
    runs = lf.filter(~pl.col("is_step")).select(
        [c for c in RUNS_SCHEMA if c in typed.columns]
    ).with_columns(RUN_KEY.alias("run_key")).collect()
    runs = array_het_columns(runs).with_columns(bridge_pods(runs["admin_comment"]))
    steps = lf.filter(pl.col("is_step")).select(
        *(c for c in _STEP_SOURCE_COLUMNS if c in typed.columns)
    ).collect()
    return Batch(runs, steps, rejects, blank_lines, lines,
                 pl.concat([a.cast(pl.Int64) for a in alloc_lines]))


_STEP_SOURCE_COLUMNS = (
    "cluster", "job_id", "job_id_text", "job_id_raw", "step_id", "job_name", "account", "state",
    "cancelled_by_uid", "exit_code", "exit_signal", "start", "end", "elapsed_s", "alloc_cpus",
    "alloc_nodes", "nodelist", "nodes", "alloc_tres", "alloc_gpus", "alloc_gpu_types",
    "alloc_mem_bytes", "line_no",
)


def final_frames(runs: pl.DataFrame, steps: pl.DataFrame, step_keys: pl.Series,
                 source_file: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Runs (keys already numbered) and steps (with their run keys) in their final schemas."""
    runs = runs.with_columns(pl.lit(source_file).alias("source_file")).select(
        list(RUNS_SCHEMA)
    ).cast(pl.Schema(RUNS_SCHEMA))
    steps = steps.with_columns(step_keys).lazy().select(
        "run_key", "cluster", "job_id", pl.col("job_id_text").alias("step_job_id"), "job_id_raw",
        "step_id", pl.col("job_name").alias("step_name"),
        *(c for c in STEPS_SCHEMA if c in steps.columns and c not in {
            "run_key", "cluster", "job_id", "job_id_raw", "step_id"}),
        pl.lit(source_file).alias("source_file"),
    ).select(list(STEPS_SCHEMA)).cast(pl.Schema(STEPS_SCHEMA)).collect()
    return runs, steps
