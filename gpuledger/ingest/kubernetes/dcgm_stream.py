"""dcgm-exporter samples of one window in bounded memory: a group of GPUs at a time (issue #18).

The DCGM derivations (metric choice per GPU-day, busy fractions per GPU-minute, attribution of
unlabelled samples per node, busy seconds per GPU-day) never look across GPUs of different nodes,
nor across nodes that never share a GPU. So the window's DCGM series are listed first
(``/api/v1/series``: label sets only, no samples), split into *components* -- node names
(``node``/``kubernetes_node``/``Hostname``/``hostname``, the first present) and GPU UUIDs
connected by the series carrying both -- and the components are read and derived in groups of
about ``gpus_per_group`` GPUs: each group's raw samples are the exact subset of the whole read
(the same sort, so the same first-kept duplicates), hence the same rows. Series without any UUID
label (rejects only) form a group of their own. The per-group warnings are merged into the
whole-window texts (counts added, ``e.g.`` lists re-cut), see :func:`merge_warnings`.

Utilization rows of each group are spilled to a Parquet file (``SpilledFrames``) and inserted
group by group in the window's one write transaction, so neither the read nor the write holds
the window's GPU-minutes at once.
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from connectors.kubernetes.dcgm import gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.dcgm_names import GPU_LABELS, VARIANTS, canonical_uuid
from connectors.kubernetes.ksm_keys import regex_literal
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.promql_selectors import add_matchers
from connectors.kubernetes.records import GPU_BUSY_DAILY_SCHEMA, GPU_UTILIZATION_SCHEMA, empty
from connectors.kubernetes.sample_frames import finish_raw
from gpuledger.ingest.kubernetes.groups import grouped_by_node

#: GPUs per group when streaming (a group's day of raw samples: ~6,000 per GPU at 30 s).
DEFAULT_GPUS_PER_GROUP = 64
_DCGM_NAMES = frozenset(v.name for v in VARIANTS)
_UUID_LABELS = GPU_LABELS["gpu_uuid"]
_NODE_LABELS = GPU_LABELS["node"]


@dataclass
class SpilledFrames:
    """Frames written to Parquet files under one temporary folder, read back one at a time."""

    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpuledger-k8s-")))
    files: list[Path] = field(default_factory=list)
    height: int = 0

    def __post_init__(self) -> None:  # removed with the object at the latest
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)

    def add(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        path = self.folder / f"part-{len(self.files):05d}.parquet"
        frame.write_parquet(path, compression="lz4")
        self.files.append(path)
        self.height += frame.height

    def frames(self) -> Iterator[pl.DataFrame]:
        for path in self.files:
            yield pl.read_parquet(path)

    def unique(self, column: str) -> pl.Series:
        parts = [pl.read_parquet(p, columns=[column])[column].unique() for p in self.files]
        return pl.concat(parts).unique() if parts else pl.Series(column, [], dtype=pl.String)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.files.clear()


class _GroupSource:
    """`source` with DCGM selectors narrowed to one group's series (other metrics as they are)."""

    def __init__(self, source: MetricsSource, matchers: Sequence[str]) -> None:
        self.source, self.matchers = source, list(matchers)
        self._raw: dict[tuple[str, datetime, datetime], pl.DataFrame] = {}

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        name = selector.split("{", 1)[0].strip()
        if name not in _DCGM_NAMES:
            return self.source.raw_samples(selector, start, end)
        key = (selector, start, end)  # utilization and busy seconds read the same series
        if key not in self._raw:
            parts = [self.source.raw_samples(add_matchers(selector, m), start, end)
                     for m in self.matchers]
            self._raw[key] = parts[0] if len(parts) == 1 else finish_raw(parts, start, end)
        return self._raw[key]

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.series(match, start, end)


def _first(frame: pl.DataFrame, names: Sequence[str]) -> pl.Expr:
    present = [pl.col(n) for n in names if n in frame.columns]
    return pl.coalesce(present) if present else pl.lit(None, dtype=pl.String)


def dcgm_groups(source: MetricsSource, start: datetime, end: datetime,
                gpus_per_group: int) -> list[list[str]]:
    """Matcher lists, one per group (each matcher read once per DCGM selector and concatenated).

    Empty when no DCGM series is listed (the caller then reads the window whole)."""
    rows = []
    for variant in VARIANTS:
        listed = source.series(variant.name, start, end)
        if listed.height == 0:
            continue
        rows.append(listed.select(
            _first(listed, _NODE_LABELS).fill_null("").alias("node"),
            *[(pl.col(n) if n in listed.columns else pl.lit(None, dtype=pl.String)).alias(n)
              for n in _UUID_LABELS],
        ))
    if not rows:
        return []
    series = pl.concat(rows).unique()
    series = series.with_columns(_gpu=canonical_uuid(_first(series, _UUID_LABELS)))
    orphans = series.filter(pl.col("_gpu").is_null()).height > 0
    series = series.filter(pl.col("_gpu").is_not_null())
    # a GPU whose series name no node still joins the others without one (one "" node)
    groups = grouped_by_node(((gpu, node or "") for gpu, node in
                              series.select("_gpu", "node").unique().iter_rows()),
                             series["_gpu"].unique().sort().to_list(), gpus_per_group,
                             member_tag="g")
    out = [_matchers(series.filter(pl.col("_gpu").is_in(g))) for g in groups]
    if orphans:  # series without any UUID label: rejected as such, in a read of their own
        out.append([",".join(f'{n}=""' for n in _UUID_LABELS)])
    return out


def _matchers(series: pl.DataFrame) -> list[str]:
    """One matcher per UUID spelling: ``UUID=~"a|b"``, ``UUID="",uuid=~"c"`` …"""
    out = []
    for i, name in enumerate(_UUID_LABELS):
        before = [f'{n}=""' for n in _UUID_LABELS[:i]]
        picked = series
        for n in _UUID_LABELS[:i]:
            picked = picked.filter(pl.col(n).is_null())
        values = picked[name].drop_nulls().unique().sort().to_list()
        if values:
            alternatives = "|".join(regex_literal(v) for v in values)
            out.append(",".join([*before, f'{name}=~"{alternatives}"']))
    return out


@dataclass
class DcgmWindow:
    utilization: SpilledFrames
    busy: pl.DataFrame
    util_warnings: list[str]
    busy_warnings: list[str]


def read_dcgm_grouped(
    source: MetricsSource, groups: list[list[str]], u0: datetime, u1: datetime, d0: datetime,
    d1: datetime, *, grain: timedelta, rejects: list[pl.DataFrame], pods: pl.DataFrame,
    capacity: pl.DataFrame,
) -> DcgmWindow:
    """:func:`gpu_utilization` over ``[u0, u1)`` and :func:`gpu_busy_seconds_daily` over the
    days ``[d0, d1)``, group by group; the same rows, rejects and (merged) warnings."""
    spilled = SpilledFrames()
    busy_parts: list[pl.DataFrame] = []
    util_lists: list[list[str]] = []
    busy_lists: list[list[str]] = []
    try:
        for matchers in groups:
            scoped = _GroupSource(source, matchers)
            util, util_warn = gpu_utilization(scoped, u0, u1, grain=grain, rejects=rejects,
                                              pods=pods, capacity=capacity)
            spilled.add(util)
            del util
            busy, busy_warn = gpu_busy_seconds_daily(scoped, d0, d1, scrape_interval=None)
            busy_parts.append(busy)
            util_lists.append(util_warn)
            busy_lists.append(busy_warn)
    except BaseException:
        spilled.close()
        raise
    busy = (pl.concat([b for b in busy_parts if b.height], how="vertical_relaxed")
            if any(b.height for b in busy_parts) else empty(GPU_BUSY_DAILY_SCHEMA))
    if busy.height:
        busy = busy.sort(["gpu_uuid", "gpu_instance", "day"], nulls_last=True)
    return DcgmWindow(spilled, busy, merge_warnings(util_lists), merge_warnings(busy_lists))


# --------------------------------------------------------------------------- warnings

#: parts of a warning that add up across groups: counts of samples, GPUs, exporters, GPU-days
_COUNT = re.compile(r"\b(\d+)(?= (?:samples|GPU\(s\)|exporter\(s\)|GPU-day\(s\)))")
#: lists of examples, cut to 3: ``e.g. ['a', 'b']``, ``not found for ['x']``
_LIST = re.compile(r"(?:(?<=e\.g\. )|(?<=for ))(\[[^\]]*\])")
_NUMBER, _EXAMPLES = "\x00n\x00", "\x00e\x00"  # placeholders no warning holds
_NO_SAMPLES = re.compile(r"^neither \S+ nor \S+ has samples in ")


def _template(text: str) -> tuple[str, list[int], list[str]]:
    counts = [int(m) for m in _COUNT.findall(text)]
    lists = _LIST.findall(text)
    key = _LIST.sub(_EXAMPLES, _COUNT.sub(_NUMBER, text))
    return key, counts, lists


def merge_warnings(per_group: list[list[str]]) -> list[str]:
    """The warnings one whole-window read gives, from those of its groups: the same text from
    several groups once, counts added, example lists merged (sorted, first 3); "no samples at
    all" only when no group had any."""
    merged: dict[str, tuple[list[int], list[list[str]], str]] = {}
    nothing = [w for ws in per_group for w in ws if _NO_SAMPLES.match(w)]
    for warnings in per_group:
        for text in dict.fromkeys(warnings):
            if _NO_SAMPLES.match(text):
                continue
            key, counts, lists = _template(text)
            if key not in merged:
                merged[key] = (counts, [_values(v) for v in lists], text)
                continue
            old_counts, old_lists, _ = merged[key]
            merged[key] = ([a + b for a, b in zip(old_counts, counts, strict=True)],
                           [sorted({*a, *_values(b)})[:3] for a, b in zip(old_lists, lists,
                                                                           strict=True)], text)
    out = []
    for key, (counts, lists, _) in merged.items():
        out.append(_fill(_fill(key, _NUMBER, [str(n) for n in counts]), _EXAMPLES,
                         [repr(v) for v in lists]))
    if per_group and all(any(_NO_SAMPLES.match(w) for w in ws) for ws in per_group):
        out.extend(dict.fromkeys(nothing))
    return out


def _fill(text: str, placeholder: str, values: list[str]) -> str:
    pieces = text.split(placeholder)
    return pieces[0] + "".join(v + p for v, p in zip(values, pieces[1:], strict=True))


def _values(text: str) -> list:
    value = ast.literal_eval(text)
    return list(value) if isinstance(value, list) else [value]


__all__ = ["DEFAULT_GPUS_PER_GROUP", "GPU_UTILIZATION_SCHEMA", "DcgmWindow", "SpilledFrames",
           "dcgm_groups", "merge_warnings", "read_dcgm_grouped"]
