"""kube-state-metrics GPU pods of one window in bounded memory: a group of pods at a time (#18).

A pod's allocation intervals depend on its own samples, and on the other pods of its node only
(a grid end shared with a pod admitted in the slack, ksm_boundaries._shared_grid_ends). So the
GPU request/limit series are listed first (``/api/v1/series``, labels only) together with
``kube_pod_info`` (a pod's node), pods and nodes are joined into components, and
:func:`~connectors.kubernetes.ksm.pod_gpu_allocations` runs on about ``pods_per_group`` pods at a
time: their request/limit reads narrowed by ``uid`` matchers (every other per-pod read already
follows from those). Node-level reads (``kube_node_labels``) are read once and shared. Pods
without a uid label (kube-state-metrics before v2.1.0) form a group of their own. The groups'
notes are merged into the whole read's (:func:`merge_notes`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

import polars as pl

from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames, k8s_resource_pattern
from connectors.kubernetes.ksm import (
    GPU_RESOURCE,
    POD_INFO_METRIC,
    node_gpu_capacity,
    pod_gpu_allocations,
    read_window,
)
from connectors.kubernetes.ksm_gangs import PENDING_POD_SCHEMA, PENDING_SELECTOR, pending_gpu_pods
from connectors.kubernetes.ksm_keys import regex_literal
from connectors.kubernetes.ksm_pods import GPU_METRICS
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.promql_selectors import add_matchers
from connectors.kubernetes.records import (
    NODE_GPU_CAPACITY_SCHEMA,
    POD_GPU_ALLOCATION_SCHEMA,
    empty,
)
from connectors.kubernetes.sample_frames import finish_raw
from gpuledger.ingest.kubernetes.groups import grouped_by_node

#: pods per group when streaming
DEFAULT_PODS_PER_GROUP = 400
_UID_LABELS = ("exported_uid", "uid")  # with_workload: the exported twin first
_NODE_LABELS = ("exported_node", "node")
_POD_METRICS = frozenset(m for m, _, _ in GPU_METRICS)
_SHARED = ("kube_node_labels",)  # node-level reads every group makes: read once


class _PodGroupSource:
    def __init__(self, source: MetricsSource, matchers: Sequence[str],
                 shared: dict[tuple[str, datetime, datetime], pl.DataFrame],
                 narrowed: frozenset[str] = _POD_METRICS) -> None:
        self.source, self.matchers, self.shared = source, list(matchers), shared
        self.narrowed = narrowed

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        name = selector.split("{", 1)[0].strip()
        if name in self.narrowed:
            parts = [self.source.raw_samples(add_matchers(selector, m), start, end)
                     for m in self.matchers]
            return parts[0] if len(parts) == 1 else finish_raw(parts, start, end)
        if name in _SHARED:
            key = (selector, start, end)
            if key not in self.shared:
                self.shared[key] = self.source.raw_samples(selector, start, end)
            return self.shared[key]
        return self.source.raw_samples(selector, start, end)

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.series(match, start, end)


def _col(frame: pl.DataFrame, name: str) -> pl.Expr:
    return (pl.col(name) if name in frame.columns else pl.lit(None, dtype=pl.String)).alias(name)


def ksm_pod_groups(source: MetricsSource, q0: datetime, q1: datetime, names: SharingNames,
                   pods_per_group: int) -> list[list[str]]:
    """Matcher lists, one per group of pods (empty: no GPU pod series listed)."""
    pattern = k8s_resource_pattern(names)
    listed = [source.series(f'{m}{{resource=~"{pattern}"}}', q0, q1) for m, _, _ in GPU_METRICS]
    listed = [f.select(*[_col(f, n) for n in (*_UID_LABELS, *_NODE_LABELS)])
              for f in listed if f.height]
    if not listed:
        return []
    series = pl.concat(listed).unique().with_columns(
        _uid=pl.coalesce(*_UID_LABELS), _node=pl.coalesce(*_NODE_LABELS))
    orphans = series.filter(pl.col("_uid").is_null()).height > 0
    series = series.filter(pl.col("_uid").is_not_null())
    info = source.series(POD_INFO_METRIC, q0, q1)
    links = [series.select("_uid", "_node")]
    if info.height:
        links.append(info.select(pl.coalesce(_col(info, "exported_uid"), _col(info, "uid"))
                                 .alias("_uid"),
                                 pl.coalesce(_col(info, "exported_node"), _col(info, "node"))
                                 .alias("_node")))
    wanted = set(series["_uid"].to_list())
    groups = grouped_by_node(((uid, node) for uid, node in pl.concat(links).unique().iter_rows()
                              if uid is not None and uid in wanted),
                             sorted(wanted), pods_per_group, member_tag="u")
    out = [_matchers(series.filter(pl.col("_uid").is_in(g))) for g in groups]
    if orphans:
        out.append([",".join(f'{n}=""' for n in _UID_LABELS)])
    return out


def _matchers(series: pl.DataFrame) -> list[str]:
    return _label_matchers(series, _UID_LABELS)


def _label_matchers(series: pl.DataFrame, labels: Sequence[str]) -> list[str]:
    """One matcher per spelling of the key, the earlier spellings absent."""
    out = []
    for i, name in enumerate(labels):
        picked = series
        for n in labels[:i]:
            picked = picked.filter(pl.col(n).is_null())
        values = picked[name].drop_nulls().unique().sort().to_list()
        if values:
            alternatives = "|".join(regex_literal(v) for v in values)
            out.append(",".join([*(f'{n}=""' for n in labels[:i]),
                                 f'{name}=~"{alternatives}"']))
    return out


def pod_gpu_allocations_grouped(
    source: MetricsSource, start: datetime, end: datetime, *,
    scrape_interval: timedelta | None, names: SharingNames = DEFAULT_NAMES,
    notes: list[str], rejects: list[pl.DataFrame], pods_per_group: int,
) -> pl.DataFrame:
    """:func:`pod_gpu_allocations` group by group: the same rows, rejects and notes."""
    q0, q1 = read_window(start, end, scrape_interval)
    groups = ksm_pod_groups(source, q0, q1, names, pods_per_group)
    if not groups:
        return pod_gpu_allocations(source, start, end, scrape_interval=scrape_interval,
                                   names=names, notes=notes, rejects=rejects)
    shared: dict[tuple[str, datetime, datetime], pl.DataFrame] = {}
    parts, per_group = [], []
    for matchers in groups:
        group_notes: list[str] = []
        parts.append(pod_gpu_allocations(
            _PodGroupSource(source, matchers, shared), start, end,
            scrape_interval=scrape_interval, names=names, notes=group_notes, rejects=rejects))
        per_group.append(group_notes)
    notes.extend(merge_notes(per_group))
    kept = [p for p in parts if p.height]
    if not kept:
        return empty(POD_GPU_ALLOCATION_SCHEMA)
    return pl.concat(kept, how="vertical_relaxed").sort(
        ["namespace", "pod", "uid", "gpu_resource", "start_ts"])


def pending_gpu_pods_grouped(
    source: MetricsSource, start: datetime, end: datetime, *,
    scrape_interval: timedelta | None, notes: list[str], rejects: list[pl.DataFrame],
    pods_per_group: int,
) -> pl.DataFrame:
    """:func:`pending_gpu_pods` a group of pods at a time (each pod's row is its own): the
    Pending series of every pod of the cluster are never held at once."""
    listed = source.series(PENDING_SELECTOR, start, end)
    if listed.height == 0:
        return pending_gpu_pods(source, start, end, scrape_interval=scrape_interval,
                                notes=notes, rejects=rejects)
    listed = listed.select(*[_col(listed, n) for n in _UID_LABELS]).unique().with_columns(
        _uid=pl.coalesce(*_UID_LABELS))
    uids = listed["_uid"].drop_nulls().unique().sort().to_list()
    groups = [_matchers(listed.filter(pl.col("_uid").is_in(uids[i:i + pods_per_group])))
              for i in range(0, len(uids), pods_per_group)]
    if listed.filter(pl.col("_uid").is_null()).height:
        groups.append([",".join(f'{n}=""' for n in _UID_LABELS)])
    parts, per_group = [], []
    for matchers in groups:
        group_notes: list[str] = []
        scoped = _PodGroupSource(source, matchers, {}, frozenset({"kube_pod_status_phase"}))
        parts.append(pending_gpu_pods(scoped, start, end, scrape_interval=scrape_interval,
                                      notes=group_notes, rejects=rejects))
        per_group.append(group_notes)
    notes.extend(merge_notes(per_group))
    kept = [p for p in parts if p.height]
    if not kept:
        return empty(PENDING_POD_SCHEMA)
    return pl.concat(kept, how="vertical_relaxed").sort(["namespace", "pod", "uid"])


_NODE_METRICS = frozenset({"kube_node_status_capacity", "kube_node_status_allocatable",
                           "kube_node_spec_unschedulable"})


def node_groups(source: MetricsSource, selector: str, a: datetime, b: datetime,
                nodes_per_group: int) -> list[list[str]]:
    """Matcher lists splitting `selector`'s series by node (``exported_node`` first), about
    `nodes_per_group` nodes each; series without a node in a group of their own."""
    listed = source.series(selector, a, b)
    if listed.height == 0:
        return []
    listed = listed.select(*[_col(listed, n) for n in _NODE_LABELS]).unique().with_columns(
        _n=pl.coalesce(*_NODE_LABELS))
    nodes = listed["_n"].drop_nulls().unique().sort().to_list()
    groups = []
    for i in range(0, len(nodes), nodes_per_group):
        picked = listed.filter(pl.col("_n").is_in(nodes[i:i + nodes_per_group]))
        groups.append(_label_matchers(picked, _NODE_LABELS))
    if listed.filter(pl.col("_n").is_null()).height:
        groups.append([",".join(f'{n}=""' for n in _NODE_LABELS)])
    return groups


def node_source(source: MetricsSource, matchers: Sequence[str]) -> MetricsSource:
    """`source` with the node metrics narrowed to one group of nodes."""
    return _PodGroupSource(source, matchers, {}, _NODE_METRICS)  # type: ignore[return-value]


def node_gpu_capacity_grouped(
    source: MetricsSource, start: datetime, end: datetime, *,
    scrape_interval: timedelta | None, notes: list[str], rejects: list[pl.DataFrame],
    nodes_per_group: int,
) -> pl.DataFrame:
    """:func:`node_gpu_capacity` a group of nodes at a time (each node's rows are its own)."""
    q0, q1 = read_window(start, end, scrape_interval)
    groups = node_groups(source, f'kube_node_status_capacity{{resource="{GPU_RESOURCE}"}}',
                         q0, q1, nodes_per_group)
    if not groups:
        return node_gpu_capacity(source, start, end, scrape_interval=scrape_interval,
                                 notes=notes, rejects=rejects)
    parts, per_group = [], []
    for matchers in groups:
        group_notes: list[str] = []
        parts.append(node_gpu_capacity(node_source(source, matchers), start, end,
                                       scrape_interval=scrape_interval, notes=group_notes,
                                       rejects=rejects))
        per_group.append(group_notes)
    notes.extend(merge_notes(per_group))
    kept = [p for p in parts if p.height]
    if not kept:
        return empty(NODE_GPU_CAPACITY_SCHEMA)
    return pl.concat(kept, how="vertical_relaxed").sort(["node", "start_ts"])


# --------------------------------------------------------------------------- notes

_COUNT = re.compile(r"\b(\d+)(?= (?:pod starts|pod ends|GPU pods|pods|samples)\b)")
_ABSENT = re.compile(r" absent(?::| \(|$)|: no samples")
_NODES = re.compile(r"^(nvidia\.com/gpu\.product \.\.\.-MIG-\.\.\.-SHARED on )(.*?)(: .*)$")
_NUMBER = "\x00n\x00"


def merge_notes(per_group: list[list[str]]) -> list[str]:
    """The notes one whole read gives, from its groups': counts added; "absent" / "no samples"
    only when every group says so; node lists joined."""
    merged: dict[str, list[int]] = {}
    nodes: dict[tuple[str, str], set[str]] = {}
    order: list[tuple[str, object]] = []
    absent_in = {}
    for notes in per_group:
        for text in dict.fromkeys(notes):
            if _ABSENT.search(text) and not _COUNT.search(text):
                absent_in[text] = absent_in.get(text, 0) + 1
                if absent_in[text] == 1:
                    order.append(("absent", text))
                continue
            m = _NODES.match(text)
            if m:
                key = (m.group(1), m.group(3))
                if key not in nodes:
                    nodes[key] = set()
                    order.append(("nodes", key))
                nodes[key] |= set(m.group(2).split(", "))
                continue
            key = _COUNT.sub(_NUMBER, text)
            counts = [int(n) for n in _COUNT.findall(text)]
            if key not in merged:
                merged[key] = counts
                order.append(("count", key))
            else:
                merged[key] = [a + b for a, b in zip(merged[key], counts, strict=True)]
    out = []
    for kind, key in order:
        if kind == "absent":
            if absent_in[key] == len(per_group):
                out.append(key)
        elif kind == "nodes":
            head, tail = key  # type: ignore[misc]
            out.append(f"{head}{', '.join(sorted(nodes[key]))}{tail}")  # type: ignore[index]
        else:
            pieces = str(key).split(_NUMBER)
            values = [str(n) for n in merged[key]]  # type: ignore[index]
            out.append(pieces[0] + "".join(v + p for v, p in zip(values, pieces[1:],
                                                                 strict=True)))
    return out
