"""Which utilization samples stand for a GPU: one spelling, one field, per GPU and instant/day.

Three decisions, in this order, on normalised samples (``dcgm.py``); the rules are written down in
docs/kubernetes.md ("GPU utilization metrics"):

1. **One spelling per GPU and instant** (``dcgm_names.VARIANTS``): the best-ranked spelling of a
   field wins where two have a sample for the same GPU (MIG instance) and timestamp.
2. **GPU_UTIL never measures a MIG device** (dcgm-exporter#216, #430: it reads 0 there):
   ``DCGM_FI_DEV_GPU_UTIL`` of a MIG instance, or of a GPU at an instant one of its instances
   reports, is not used; where ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` has no sample for that device
   and instant it is rejected (kept in the rejects with the reason), never read as idle.
3. **Profiling field stuck at 0** (dcgm-exporter#662, NVIDIA/DCGM#303): per whole GPU and UTC
   day, if every ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` sample is exactly 0 while
   ``DCGM_FI_DEV_GPU_UTIL`` reads at least ``STUCK_UTIL_LEVEL`` on at least ``STUCK_MIN_BUSY``
   of its samples and on at least ``STUCK_SHARE`` of them, the profiling samples of that GPU-day
   are rejected and ``DCGM_FI_DEV_GPU_UTIL`` stands for the whole day (with a warning naming the
   GPU and node). Otherwise the profiling field wins wherever it has a sample and GPU_UTIL fills
   only the instants without one. A day is the unit, and the callers always read whole UTC days,
   so the choice does not depend on how a period is split into reads.
"""

from __future__ import annotations

import polars as pl

from connectors.kubernetes.dcgm_names import FALLBACK, PREFERRED

STUCK_UTIL_LEVEL = 0.10  # GPU_UTIL >= 10 % ...
STUCK_MIN_BUSY = 5  # ... on at least 5 samples ...
STUCK_SHARE = 0.05  # ... and at least 5 % of the GPU-day's GPU_UTIL samples

MIG_UTIL_REASON = ("expected DCGM_FI_PROF_GR_ENGINE_ACTIVE for a MIG device, found only "
                   "DCGM_FI_DEV_GPU_UTIL (not measured under MIG, dcgm-exporter#216)")
STUCK_REASON = ("expected DCGM_FI_PROF_GR_ENGINE_ACTIVE above 0 while DCGM_FI_DEV_GPU_UTIL reads "
                "busy, found 0 all day (dcgm-exporter#662); DCGM_FI_DEV_GPU_UTIL used instead")

DEVICE = ["gpu_uuid", "gpu_instance"]


def choose_samples(
    samples: pl.DataFrame, warnings: list[str],
) -> tuple[pl.DataFrame, list[tuple[pl.DataFrame, str]]]:
    """The samples that stand for each GPU, and the rejected ones as (rows, reason) pairs.

    `samples` has at least ts, value, gpu_uuid, gpu_instance, node, metric (the family),
    variant (the spelling) and rank. Superseded samples (another spelling or the profiling field
    at the same instant) are dropped without a reject: the instant is measured by the winner.
    """
    rejected: list[tuple[pl.DataFrame, str]] = []
    if samples.height == 0:
        return samples, rejected
    samples = _one_spelling(samples, warnings)
    samples, mig = _no_util_on_mig(samples, warnings)
    if mig.height:
        rejected.append((mig, MIG_UTIL_REASON))
    samples, stuck = _stuck_profiling(samples, warnings)
    if stuck.height:
        rejected.append((stuck, STUCK_REASON))
    return _fill(samples, warnings), rejected


def _one_spelling(samples: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    key = [*DEVICE, "ts", "metric"]
    best = pl.col("rank").min().over(key)
    marked = samples.with_columns(_best=best)
    lost = marked.filter(pl.col("rank") != pl.col("_best"))
    if lost.height:
        for (variant,), part in lost.group_by(["variant"], maintain_order=True):
            winners = sorted(set(marked.filter(pl.col("metric") == part["metric"][0])
                                 .filter(pl.col("rank") == pl.col("_best"))["variant"]))
            warnings.append(
                f"{variant}: {part.height} samples at instants where {'/'.join(winners)} also "
                f"has one for the same GPU ({part['gpu_uuid'].n_unique()} GPU(s)); counted once, "
                "from the latter"
            )
    for (variant,), part in samples.group_by(["variant"], maintain_order=True):
        if variant not in (PREFERRED, FALLBACK):
            warnings.append(
                f"{variant}: read as {part['metric'][0]} for {part['gpu_uuid'].n_unique()} "
                "GPU(s) (older or lower-cased dcgm-exporter names)"
            )
    return marked.filter(pl.col("rank") == pl.col("_best")).drop("_best")


def _no_util_on_mig(samples: pl.DataFrame,
                    warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    util = pl.col("metric") == FALLBACK
    mig_instants = (samples.filter(pl.col("gpu_instance").is_not_null())
                    .select("gpu_uuid", "ts").unique().with_columns(_mig=pl.lit(True)))
    if mig_instants.height == 0:
        return samples, samples.clear()
    marked = samples.join(mig_instants, on=["gpu_uuid", "ts"], how="left").with_columns(
        pl.col("_mig").fill_null(False))
    prof_at = (marked.filter(pl.col("metric") == PREFERRED).select(*DEVICE, "ts").unique()
               .with_columns(_prof=pl.lit(True)))
    marked = marked.join(prof_at, on=[*DEVICE, "ts"], how="left", nulls_equal=True).with_columns(
        pl.col("_prof").fill_null(False))
    on_mig = util & pl.col("_mig")
    bad = marked.filter(on_mig & ~pl.col("_prof"))
    if bad.height:
        gpus = bad["gpu_uuid"].unique().sort().to_list()
        warnings.append(
            f"{FALLBACK}: {bad.height} samples of MIG devices (or of GPUs while MIG instances "
            f"report) without {PREFERRED} at the same instant, on {len(gpus)} GPU(s) (e.g. "
            f"{gpus[:3]}): not used (GPU_UTIL is not measured under MIG, dcgm-exporter#216, "
            f"#430); add {PREFERRED} to the exporter's counters (etc/dcp-metrics-included.csv)"
        )
    kept = marked.filter(~on_mig).drop("_mig", "_prof")
    return kept, bad.drop("_mig", "_prof")


def _stuck_profiling(samples: pl.DataFrame,
                     warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    whole = samples.filter(pl.col("gpu_instance").is_null())
    day = pl.col("ts").dt.date().alias("_day")
    per_ts = whole.group_by("gpu_uuid", "metric", "ts").agg(pl.col("value").max(),
                                                             pl.col("node").first())
    stats = per_ts.group_by("gpu_uuid", day).agg(
        (pl.col("metric") == PREFERRED).sum().alias("prof_n"),
        pl.col("value").filter(pl.col("metric") == PREFERRED).max().alias("prof_max"),
        (pl.col("metric") == FALLBACK).sum().alias("util_n"),
        ((pl.col("metric") == FALLBACK) & (pl.col("value") >= STUCK_UTIL_LEVEL)).sum()
        .alias("util_busy"),
        pl.col("node").drop_nulls().first(),
    )
    stuck = stats.filter(
        (pl.col("prof_n") > 0) & (pl.col("prof_max") == 0)
        & (pl.col("util_busy") >= STUCK_MIN_BUSY)
        & (pl.col("util_busy") >= STUCK_SHARE * pl.col("util_n"))
    ).sort("gpu_uuid", "_day")
    if stuck.height == 0:
        return samples, samples.clear()
    for r in stuck.iter_rows(named=True):
        warnings.append(
            f"{PREFERRED} reads 0 on all {r['prof_n']} samples of GPU {r['gpu_uuid']} on node "
            f"{r['node']!r} on {r['_day']} while {FALLBACK} reads >= "
            f"{STUCK_UTIL_LEVEL * 100:g} % on {r['util_busy']} of its {r['util_n']}: profiling "
            f"field stuck (dcgm-exporter#662); {FALLBACK}/100 used for that GPU-day"
        )
    flagged = samples.with_columns(day).join(
        stuck.select("gpu_uuid", "_day", _stuck=pl.lit(True)), on=["gpu_uuid", "_day"],
        how="left").with_columns(
        _stuck=pl.col("_stuck").fill_null(False) & pl.col("gpu_instance").is_null())
    bad = flagged.filter(pl.col("_stuck") & (pl.col("metric") == PREFERRED))
    kept = flagged.filter(~(pl.col("_stuck") & (pl.col("metric") == PREFERRED)))
    return kept.drop("_day", "_stuck"), bad.drop("_day", "_stuck")


def _fill(samples: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """The profiling field where it has a sample; GPU_UTIL at the other instants."""
    preferred = samples.filter(pl.col("metric") == PREFERRED)
    fallback = samples.filter(pl.col("metric") == FALLBACK)
    if preferred.height == 0 and fallback.height:
        warnings.append(f"{PREFERRED} absent: every GPU uses {FALLBACK}/100")
        return fallback
    if fallback.height == 0:
        return preferred
    key = [*DEVICE, "ts"]
    filled = fallback.join(preferred.select(key).unique(), on=key, how="anti", nulls_equal=True)
    if filled.height:
        gpus = filled["gpu_uuid"].unique().sort().to_list()
        warnings.append(
            f"{PREFERRED} missing for {filled.height} samples on {len(gpus)} GPU(s) "
            f"(e.g. {gpus[:3]}): {FALLBACK}/100 used there"
        )
    return pl.concat([preferred, filled.select(preferred.columns)])
