"""The GPUs of each Slurm run per node: sacct keeps only the job's total, split here evenly over
the expanded node list (replaced by ``scontrol show job -d`` counts where a snapshot was loaded).

Shared GPUs (docs/shared-gpus.md) are pieces of their own: a run's MIG instances (a typed key
naming a MIG profile, ``gres/gpu:1g.10gb=2``), shards (``gres/shard=N``) and MPS units
(``gres/mps=N``) each get their own rows, with ``sharing``, ``slice_profile`` and ``gpus`` =
instances / shards / MPS units. A run mixing whole GPUs and MIG instances, or two MIG profiles,
gets one row per (node, sharing, profile): ``gres/gpu=2,gres/gpu:1g.10gb=1,gres/gpu:a100=1`` is one
whole a100 and one 1g.10gb instance, never two whole GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.gpu_sharing import MIG, MPS, SHARD, slurm_gpu_type
from connectors.slurm.records import NODE_ALLOCATIONS_SCHEMA

_PIECE_SCHEMA: SchemaDict = {
    "_run": pl.Int64, "_piece": pl.Int64, "sharing": pl.String, "slice_profile": pl.String,
    "_model": pl.String, "_units": pl.Int64,
}


def allocations_per_node(
    runs: pl.DataFrame,
    node_models: Mapping[str, str] | None = None,
    *,
    include_cpu_only: bool = False,
) -> pl.DataFrame:
    """One row per (run, node, sharing, MIG profile) with the GPUs the run held on that node.

    Slurm's accounting keeps only the job's total (``AllocTRES`` ``gres/gpu=N``), not the split per
    node. The split is even over the *expanded* node list: ``N // nodes`` each, and the remainder
    ``N % nodes`` one more on the first nodes in hostlist order (hostlists are sorted). Example:
    5 GPUs on ``gpu-[01-02]`` → gpu-01: 3, gpu-02: 2. ``AllocNodes`` is not used; the hostlist is.
    ``gpus_source`` says which: ``single_node`` (the total, exact) or ``even_split`` (an estimate;
    ``models/sql/stg_slurm_allocations.sql`` replaces it with the counts of an ``scontrol show
    job -d`` snapshot where one was loaded, see docs/slurm.md).

    Whole GPUs are ``gres/gpu=N`` less the MIG instances among the typed keys; their
    ``gpu_model`` is the run's single non-MIG typed key (``gres/gpu:a100``), else
    ``node_models[node]`` when given, else ``""``. MIG rows (``sharing`` ``mig``) take the
    profile's model prefix (``a100`` of ``a100_3g.20gb``) else the node's; shard and MPS rows the
    node's. Each piece is split over the nodes like whole GPUs.

    Runs without nodes (never started: ``None assigned``) give no rows. Runs without GPUs,
    shards or MPS units give no rows unless ``include_cpu_only`` (then one row per node with
    ``gpus`` 0).
    """
    frame = runs.select(
        "run_key", "cluster", "job_id", "job_id_raw", "nodes", "alloc_gpus", "alloc_gpu_types",
        *(c for c in ("alloc_shards", "alloc_mps") if c in runs.columns),
        "start", "end",
    ).with_row_index("_run").with_columns(pl.col("_run").cast(pl.Int64))
    frame = frame.filter(pl.col("nodes").list.len() > 0)
    pieces = _pieces(frame, include_cpu_only=include_cpu_only)
    n = pl.col("nodes").list.len()
    exploded = (
        frame.drop("alloc_gpus", "alloc_gpu_types")
        .join(pieces, on="_run", how="inner")
        .sort("_run", "_piece", maintain_order=True)
        .with_columns(pl.int_ranges(0, n, dtype=pl.Int64).alias("node_index"),
                      n.cast(pl.Int64).alias("_count"))
        .explode(["nodes", "node_index"])
    )
    total = pl.col("_units")
    count = pl.col("_count")
    per_node = (total // count) + (pl.col("node_index") < (total % count)).cast(pl.Int64)
    node_model = (
        pl.col("nodes").replace_strict(dict(node_models), default=None, return_dtype=pl.String)
        if node_models else pl.lit(None, dtype=pl.String)
    )
    out = exploded.with_columns(
        pl.col("nodes").alias("node"),
        per_node.alias("gpus"),
        pl.coalesce("_model", node_model, pl.lit("")).alias("gpu_model"),
        pl.when(count == 1).then(pl.lit("single_node")).otherwise(pl.lit("even_split"))
        .alias("gpus_source"),
    ).select(list(NODE_ALLOCATIONS_SCHEMA))
    return out.cast(pl.Schema(NODE_ALLOCATIONS_SCHEMA))


def _pieces(frame: pl.DataFrame, *, include_cpu_only: bool) -> pl.DataFrame:
    """(run, piece order, sharing, profile, model, units) of each run: whole GPUs first, then
    MIG profiles in the order of the typed keys, shards, MPS units."""
    typed = (
        frame.select("_run", pl.col("alloc_gpu_types").alias("_t"))
        .explode("_t")
        .filter(pl.col("_t").is_not_null())
        .select("_run", pl.col("_t").struct.field("model").alias("_type"),
                pl.col("_t").struct.field("gpus").alias("_n"))
        .with_row_index("_order")
    )
    meaning = {t: slurm_gpu_type(t) for t in typed["_type"].unique().to_list()}
    is_mig = {t: s.sharing == MIG for t, s in meaning.items()}
    typed = typed.with_columns(
        pl.col("_type").replace_strict(is_mig, default=False, return_dtype=pl.Boolean)
        .alias("_mig"),
        pl.col("_type").replace_strict({t: s.slice_profile for t, s in meaning.items()},
                                       default=None, return_dtype=pl.String)
        .alias("slice_profile"),
        pl.col("_type").replace_strict({t: s.model for t, s in meaning.items()}, default=None,
                                       return_dtype=pl.String).alias("_model"),
    )
    mig = (
        typed.filter(pl.col("_mig"))
        .group_by("_run", "slice_profile", maintain_order=True)
        .agg(pl.col("_n").sum().alias("_units"), pl.col("_model").drop_nulls().first(),
             pl.col("_order").min())
        .sort("_order")
        .with_columns(pl.lit(MIG).alias("sharing"),
                      (pl.int_range(pl.len()).over("_run") + 1).cast(pl.Int64).alias("_piece"))
    )
    mig_units = mig.group_by("_run").agg(pl.col("_units").sum().alias("_mig_units"))
    whole_models = (
        typed.filter(~pl.col("_mig")).group_by("_run")
        .agg(pl.col("_type").unique().alias("_models"))
        .select("_run", pl.when(pl.col("_models").list.len() == 1)
                .then(pl.col("_models").list.first()).alias("_model"))
    )
    whole = (
        frame.select("_run", "alloc_gpus")
        .join(mig_units, on="_run", how="left")
        .join(whole_models, on="_run", how="left")
        .select("_run", pl.lit(0, dtype=pl.Int64).alias("_piece"),
                pl.lit(None, dtype=pl.String).alias("sharing"),
                pl.lit(None, dtype=pl.String).alias("slice_profile"), "_model",
                (pl.col("alloc_gpus").fill_null(0) - pl.col("_mig_units").fill_null(0))
                .clip(lower_bound=0).alias("_units"))
    )
    shared = [
        frame.select("_run", pl.lit(order, dtype=pl.Int64).alias("_piece"),
                     pl.lit(mode).alias("sharing"), pl.lit(None, dtype=pl.String)
                     .alias("slice_profile"), pl.lit(None, dtype=pl.String).alias("_model"),
                     pl.col(column).fill_null(0).alias("_units"))
        for order, (mode, column) in enumerate(((SHARD, "alloc_shards"), (MPS, "alloc_mps")),
                                               start=1000)
        if column in frame.columns
    ]
    pieces = pl.concat(
        [p.select(list(_PIECE_SCHEMA)).cast(pl.Schema(_PIECE_SCHEMA))
         for p in (whole, mig.select(list(_PIECE_SCHEMA)), *shared)]
    ).filter(pl.col("_units") > 0)
    if include_cpu_only:
        bare = whole.filter(~pl.col("_run").is_in(pieces["_run"].implode()))
        bare = bare.select(list(_PIECE_SCHEMA)).cast(pl.Schema(_PIECE_SCHEMA))
        pieces = pl.concat([pieces, bare])
    return pieces
