"""TRES strings (``AllocTRES``, ``ReqTRES``) as Polars expressions.

``billing=16,cpu=4,gres/gpu:a100=1,gres/gpu=1,mem=8G,node=1``:

- the GPU count is the **untyped** ``gres/gpu=N``. Typed keys ``gres/gpu:TYPE=N`` repeat the same
  GPUs by model and are never added on top. Only when no untyped key exists are the typed ones
  summed (a DB that tracks only typed TRES);
- ``gres/gpumem`` and ``gres/gpuutil`` (and ``gres/shard``, ``gres/mps``) are not GPUs;
- the typed keys give the model(s): ``alloc_gpu_types`` = ``[{model: "a100", gpus: 1}]``; every
  typed key is kept, a MIG profile type too (``gres/gpu:1g.10gb=2``: ``model`` ``1g.10gb``, two
  MIG instances; what a type means is ``connectors.gpu_sharing.slurm_gpu_type``);
- ``gres/shard=N`` and ``gres/mps=N`` are Slurm's shards and MPS units of shared GPUs
  (docs/shared-gpus.md): ``alloc_shards``, ``alloc_mps``;
- memory carries Slurm's 1024-based unit letters (``8G``, ``2000M``, ``204800M`` with
  ``--noconvert``, ``1.50T``); a bare number is MB (TRES memory is counted in MB). → bytes;
- the order of the keys is not relied on.

A TRES string must be empty or ``name=number[unit]`` items separated by commas; anything else is
reported so the line can be rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

_NUM = r"\d+(?:\.\d+)?[KMGTPE]?"
TRES_VALID_RE = rf"^(?:[^=,]+={_NUM}(?:,[^=,]+={_NUM})*)?$"
TRES_EXPECTED = "expected name=count items separated by commas (billing=1,cpu=2,gres/gpu=1,…)"

GPU_TYPE_DTYPE = pl.Struct({"model": pl.String, "gpus": pl.Int64})
GPU_TYPES_DTYPE = pl.List(GPU_TYPE_DTYPE)

_UNIT_BYTES = {
    "": 1 << 20,  # TRES mem is counted in MB
    "K": 1 << 10,
    "M": 1 << 20,
    "G": 1 << 30,
    "T": 1 << 40,
    "P": 1 << 50,
    "E": 1 << 60,
}


@dataclass(frozen=True)
class TresExprs:
    gpus: pl.Expr
    gpu_types: pl.Expr
    mem_bytes: pl.Expr
    billing: pl.Expr
    bad: pl.Expr
    shards: pl.Expr  # gres/shard=N, null when absent
    mps: pl.Expr  # gres/mps=N, null when absent


def _key_int(c: pl.Expr, key: str) -> pl.Expr:
    return c.str.extract(rf"(?:^|,){key}=(\d+)(?:,|$)", 1).cast(pl.Int64)


def tres_exprs(col: str) -> TresExprs:
    c = pl.col(col)
    untyped = _key_int(c, "gres/gpu")
    typed_items = c.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=\d+")
    gpu_types = typed_items.list.eval(
        pl.element()
        .str.extract_groups(r"gres/gpu:([^=,]+)=(\d+)")
        .struct.rename_fields(["model", "gpus"])
        .struct.with_fields(pl.field("gpus").cast(pl.Int64))
    ).cast(GPU_TYPES_DTYPE)
    typed_sum = gpu_types.list.eval(pl.element().struct.field("gpus")).list.sum()
    has_typed = typed_items.list.len() > 0
    gpus = (
        pl.when(untyped.is_not_null())
        .then(untyped)
        .when(has_typed)
        .then(typed_sum)
        .when(c.is_not_null())
        .then(pl.lit(0, dtype=pl.Int64))
    )
    mem = c.str.extract_groups(r"(?:^|,)mem=(\d+(?:\.\d+)?)([KMGTPE]?)(?:,|$)")
    factor = mem.struct.field("2").replace_strict(_UNIT_BYTES, default=None, return_dtype=pl.Int64)
    mem_bytes = (mem.struct.field("1").cast(pl.Float64) * factor).round(0).cast(pl.Int64)
    bad = ~c.str.contains(TRES_VALID_RE) & c.is_not_null()
    return TresExprs(
        gpus=gpus, gpu_types=gpu_types, mem_bytes=mem_bytes, billing=_key_int(c, "billing"),
        bad=bad, shards=_key_int(c, "gres/shard"), mps=_key_int(c, "gres/mps"),
    )


def gpu_count(tres: str | None) -> int | None:
    """The GPU count of one TRES string (same rule as :func:`tres_exprs`), for small uses."""
    if tres is None:
        return None
    untyped = None
    typed = 0
    for item in filter(None, tres.split(",")):
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            untyped = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return untyped if untyped is not None else typed
