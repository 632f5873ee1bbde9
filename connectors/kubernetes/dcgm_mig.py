"""MIG instances as devices of their parent GPU in the daily busy seconds.

dcgm-exporter reports each MIG instance as its own series under the parent's ``UUID`` with
``GPU_I_ID`` and ``GPU_I_PROFILE`` (``3g.40gb``: 3 of the GPU's compute slices). A busy fraction
is per device, so adding the instances of one GPU would count a 7-way split A100 as up to seven
GPUs. ``gpu_busy_daily`` therefore has one row per instance (``device_kind = 'mig_instance'``,
``mig_slices`` its slices) and, per parent GPU and day, one derived row (``device_kind =
'mig_parent'``, ``gpu_instance`` null) weighted by slices:

* ``busy_seconds = sum(busy_i x slices_i) / T`` with ``T`` the GPU's compute slices (7; 4 on an
  A30; more if more were seen at one instant), so an unconfigured slice counts as idle and the
  parent's busy fraction never exceeds 1;
* ``covered_seconds = sum(covered_i x slices_i) / S`` with ``S`` the most slices that reported at
  one instant: seconds of the day the configured slices were measured (so ``busy <= covered``);
* no parent row where the exporter reported the GPU as a whole that day (``-d g+i``, or the GPU
  left MIG mode): that row is the parent's own measurement.
"""

from __future__ import annotations

import re

import polars as pl

_SLICES = re.compile(r"(?:^|\.)(\d+)g\.")  # 1g.10gb, 1g.10gb+me, 1c.3g.40gb (compute instance)
MODEL_SLICES = (("A30", 4),)  # compute slices of a MIG-capable GPU; every other model has 7
DEFAULT_SLICES = 7


def profile_slices(profile: str | None) -> int | None:
    """Compute slices of a GPU instance profile (``3g.40gb`` -> 3); None if unreadable."""
    if not profile:
        return None
    match = _SLICES.search(profile)
    return int(match.group(1)) if match else None


def model_slices(model: str | None) -> int:
    for needle, slices in MODEL_SLICES:
        if model and needle in model:
            return slices
    return DEFAULT_SLICES


def slices_expr(profile: pl.Expr) -> pl.Expr:
    return profile.map_elements(profile_slices, return_dtype=pl.Int32, skip_nulls=True)


def with_mig_parents(daily: pl.DataFrame, per_ts: pl.DataFrame,
                     warnings: list[str]) -> pl.DataFrame:
    """`daily` (one row per device and day) with device_kind, mig_slices and the parent rows.

    `per_ts` has one row per device and timestamp: gpu_uuid, gpu_instance,
    gpu_instance_profile, gpu_model, ts.
    """
    is_mig = pl.col("gpu_instance").is_not_null()
    daily = daily.with_columns(
        device_kind=pl.when(is_mig).then(pl.lit("mig_instance")).otherwise(pl.lit("gpu")),
        mig_slices=pl.when(is_mig).then(slices_expr(pl.col("gpu_instance_profile"))),
    )
    instances = daily.filter(is_mig)
    if instances.height == 0:
        return daily
    unknown = instances.filter(pl.col("mig_slices").is_null())
    if unknown.height:
        gpus = unknown["gpu_uuid"].unique().sort().to_list()
        warnings.append(
            f"MIG instances without a readable GPU_I_PROFILE on {len(gpus)} GPU(s) (e.g. "
            f"{gpus[:3]}): no parent-GPU busy seconds for those GPU-days (slices unknown)"
        )
    whole = daily.filter(~is_mig).select("gpu_uuid", "day").unique()
    both = instances.select("gpu_uuid", "day").unique().join(whole, on=["gpu_uuid", "day"])
    if both.height:
        warnings.append(
            f"{both.height} GPU-day(s) with whole-GPU and MIG-instance samples (e.g. "
            f"{both.sort('gpu_uuid', 'day').row(0)}): the whole-GPU row is the parent figure, "
            "none derived from the instances"
        )
    skip = pl.concat([unknown.select("gpu_uuid", "day"), both]).unique()
    instances = instances.join(skip, on=["gpu_uuid", "day"], how="anti")
    if instances.height == 0:
        return daily
    at_once = (
        per_ts.filter(pl.col("gpu_instance").is_not_null())
        .with_columns(_s=slices_expr(pl.col("gpu_instance_profile")),
                      day=pl.col("ts").dt.date())
        .unique(["gpu_uuid", "gpu_instance", "ts"])
        .group_by("gpu_uuid", "day", "ts").agg(pl.col("_s").sum(), pl.col("gpu_model").first())
        .group_by("gpu_uuid", "day").agg(pl.col("_s").max().alias("_seen"),
                                         pl.col("gpu_model").drop_nulls().first())
    )
    models = at_once["gpu_model"].to_list()
    at_once = at_once.with_columns(
        _model=pl.Series([model_slices(m) for m in models], dtype=pl.Int32))
    # sums in one order whatever order the rows came in (reads by GPU group give the same bits)
    weighted = instances.sort("gpu_uuid", "day", "gpu_instance").with_columns(
        _b=pl.col("busy_seconds") * pl.col("mig_slices"),
        _c=pl.col("covered_seconds") * pl.col("mig_slices"),
    )
    parents = weighted.group_by("gpu_uuid", "day", maintain_order=True).agg(
        pl.col("node").drop_nulls().first(),
        pl.col("_b").sum(), pl.col("_c").sum(),
        pl.col("samples").sum(),
        pl.col("scrape_interval_s").min(),
    ).join(at_once, on=["gpu_uuid", "day"], how="left").with_columns(
        _total=pl.max_horizontal("_model", "_seen"),
    ).select(
        "gpu_uuid",
        pl.lit(None, dtype=pl.String).alias("gpu_instance"),
        "node", "day",
        (pl.col("_b") / pl.col("_total")).alias("busy_seconds"),
        (pl.col("_c") / pl.col("_seen")).alias("covered_seconds"),
        "samples", "scrape_interval_s",
        pl.lit(None, dtype=pl.String).alias("gpu_instance_profile"),
        pl.lit("mig_parent").alias("device_kind"),
        pl.col("_total").cast(pl.Int32).alias("mig_slices"),
    )
    return pl.concat([daily, parents.select(daily.columns)], how="vertical_relaxed")
