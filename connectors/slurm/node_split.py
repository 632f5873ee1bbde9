"""The GPUs of each Slurm run per node: sacct keeps only the job's total, split here evenly over
the expanded node list (replaced by ``scontrol show job -d`` counts where a snapshot was loaded)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from connectors.slurm.records import NODE_ALLOCATIONS_SCHEMA


def allocations_per_node(
    runs: pl.DataFrame,
    node_models: Mapping[str, str] | None = None,
    *,
    include_cpu_only: bool = False,
) -> pl.DataFrame:
    """One row per (run, node) with the GPUs the run held on that node.

    Slurm's accounting keeps only the job's total (``AllocTRES`` ``gres/gpu=N``), not the split per
    node. The split is even over the *expanded* node list: ``N // nodes`` each, and the remainder
    ``N % nodes`` one more on the first nodes in hostlist order (hostlists are sorted). Example:
    5 GPUs on ``gpu-[01-02]`` → gpu-01: 3, gpu-02: 2. ``AllocNodes`` is not used; the hostlist is.
    ``gpus_source`` says which: ``single_node`` (the total, exact) or ``even_split`` (an estimate;
    ``models/sql/stg_slurm_allocations.sql`` replaces it with the counts of an ``scontrol show
    job -d`` snapshot where one was loaded, see docs/slurm.md).

    ``gpu_model``: the run's single typed GPU key (``gres/gpu:a100``), else ``node_models[node]``
    when given, else ``""``.

    Runs without nodes (never started: ``None assigned``) give no rows. Runs without GPUs give no
    rows unless ``include_cpu_only`` (then with ``gpus`` 0).
    """
    frame = runs.select(
        "run_key", "cluster", "job_id", "job_id_raw", "nodes", "alloc_gpus", "alloc_gpu_types",
        "start", "end",
    )
    if not include_cpu_only:
        frame = frame.filter(pl.col("alloc_gpus") > 0)
    frame = frame.filter(pl.col("nodes").list.len() > 0)
    n = pl.col("nodes").list.len()
    models = pl.col("alloc_gpu_types").list.eval(pl.element().struct.field("model")).list.unique()
    single = pl.when(models.list.len() == 1).then(models.list.first())
    exploded = frame.with_columns(
        pl.int_ranges(0, n, dtype=pl.Int64).alias("node_index"),
        n.cast(pl.Int64).alias("_count"),
        single.alias("_single"),
    ).explode(["nodes", "node_index"])
    gpus_total = pl.col("alloc_gpus").fill_null(0)
    count = pl.col("_count")
    per_node = (gpus_total // count) + (pl.col("node_index") < (gpus_total % count)).cast(pl.Int64)
    node_model = (
        pl.col("nodes").replace_strict(dict(node_models), default=None, return_dtype=pl.String)
        if node_models else pl.lit(None, dtype=pl.String)
    )  # fmt: skip
    out = (
        exploded.with_columns(
            pl.col("nodes").alias("node"),
            per_node.alias("gpus"),
            pl.coalesce("_single", node_model, pl.lit("")).alias("gpu_model"),
            pl.when(count == 1).then(pl.lit("single_node")).otherwise(pl.lit("even_split"))
            .alias("gpus_source"),
        )
        .select(list(NODE_ALLOCATIONS_SCHEMA))
    )
    return out.cast(NODE_ALLOCATIONS_SCHEMA)
