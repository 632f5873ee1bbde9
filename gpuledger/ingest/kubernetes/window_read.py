"""Reading one Kubernetes ingest window (gpuledger/ingest/kubernetes/run.py): every read, no writes.

Pod GPU allocation intervals and node GPU capacity (kube-state-metrics), terminal pod phases,
per-GPU busy fractions per minute and busy seconds per UTC day (dcgm-exporter) and Kueue's
metrics, with the scrape interval they are cut by, the samples rejected and the warnings a person
must see. Streamed by default (gpuledger/ingest/kubernetes/ksm_stream.py,
gpuledger/ingest/kubernetes/dcgm_stream.py: bounded
memory, issue #18); ``gpus_per_group=None`` reads whole (the former path, the benchmark's
baseline and the equivalence tests' reference).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TypedDict

import polars as pl

from connectors.errors import Reject
from connectors.gpu_sharing import DEFAULT_NAMES, WHOLE_GPU_RESOURCE, SharingNames
from connectors.kubernetes.dcgm import gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.dcgm_dra import dra_series
from connectors.kubernetes.dra_claims import ClaimRead
from connectors.kubernetes.dra_pods import dra_pod_allocations
from connectors.kubernetes.ksm import (
    GPU_RESOURCE,
    KUEUE_QUEUE_LABELS,
    QUEUE_LABEL,
    infer_intervals,
    node_gpu_capacity,
    pod_gpu_allocations,
    read_for_uids,
)
from connectors.kubernetes.ksm_gangs import (
    JOB_SPEC_SCHEMA,
    PENDING_POD_SCHEMA,
    job_specs,
    pending_gpu_pods,
)
from connectors.kubernetes.kueue_metrics import KueueMetrics, read_kueue_metrics
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA, TS, empty, label
from connectors.kubernetes.workload_conditions import DEFAULT_GPU_RESOURCES
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.kubernetes.dcgm_stream import (
    DEFAULT_GPUS_PER_GROUP,
    SpilledFrames,
    dcgm_groups,
    read_dcgm_grouped,
)
from gpuledger.ingest.kubernetes.dra import DraInput, busy_gpu_warnings, fix_no_pod_note
from gpuledger.ingest.kubernetes.ksm_stream import (
    DEFAULT_PODS_PER_GROUP,
    node_gpu_capacity_grouped,
    node_groups,
    node_source,
    pending_gpu_pods_grouped,
    pod_gpu_allocations_grouped,
)
from gpuledger.ingest.timewindows import MINUTE_GRAIN as GRAIN
from gpuledger.ingest.timewindows import ceil_to, floor_to

DEFAULT_LOOKBACK = timedelta(hours=1)
KUEUE_WINDOW = timedelta(hours=1)  # Kueue tables
TERMINAL_PHASES = ("Succeeded", "Failed", "Unknown")
PHASE_BATCH = 500  # pods per terminal-phase read when streaming
NODES_PER_GROUP = 64  # nodes per node-metric read when streaming
_QUEUE_LIKE = re.compile(r"(?i)queue")


class _MemoSource:
    """A `MetricsSource` that answers repeated identical reads from memory (one ingest call)."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self._raw: dict[tuple[str, datetime, datetime], pl.DataFrame] = {}

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        key = (selector, start, end)
        hit = self._raw.get(key)
        if hit is None:
            hit = self.source.raw_samples(selector, start, end)
            self._raw[key] = hit
        return hit

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        return self.source.series(match, start, end)

    def clear(self) -> None:
        self._raw.clear()


def infer_scrape_interval(
    source: MetricsSource, start: datetime, end: datetime, lookback: timedelta, *,
    nodes_per_group: int | None = None,
) -> timedelta | None:
    """kube-state-metrics' scrape interval: median spacing of its samples near the window
    (the node probe read `nodes_per_group` nodes at a time: each series' spacing is its own)."""
    probes = (
        (f'kube_node_status_capacity{{resource="{GPU_RESOURCE}"}}', start - lookback, end),
        (f'kube_pod_container_resource_requests{{resource="{GPU_RESOURCE}"}}',
         start - lookback, min(end, start + lookback)),
    )
    for i, (selector, a, b) in enumerate(probes):
        groups = (node_groups(source, selector, a, b, nodes_per_group)
                  if i == 0 and nodes_per_group else [])
        frames = ((node_source(source, g).raw_samples(selector, a, b) for g in groups)
                  if groups else iter([source.raw_samples(selector, a, b)]))
        spacings, height = [], 0
        for frame in frames:
            height += frame.height
            if frame.height == 0:
                continue
            labels = [c for c in frame.columns if c not in ("ts", "value")]
            ids = frame.select(labels).unique(maintain_order=True).with_row_index("_sid")
            with_ids = frame.join(ids, on=labels, how="left", nulls_equal=True)
            spacings.append(infer_intervals(with_ids.select("_sid", "ts"), ["_sid"])["interval"])
        if height < 2:
            continue
        per_series = pl.concat(spacings) if spacings else pl.Series("interval", [])
        if per_series.len():
            value = per_series.median()
            if isinstance(value, timedelta) and value > timedelta(0):
                return value
    return None


def _terminal_phases(
    source: MetricsSource, uids: list[str], start: datetime, until: datetime, *,
    batch: int | None = None,
) -> pl.DataFrame:
    """uid -> the latest terminal phase shown (value 1) in ``[start, until)``, with its time;
    `batch` pods at a time (each pod's answer is its own: the same rows, less held)."""
    schema_ = {"uid": pl.String, "namespace": pl.String, "pod": pl.String, "phase": pl.String,
               "phase_ts": TS}
    if batch is not None and len(uids) > batch:
        parts = [_terminal_phases(source, uids[i:i + batch], start, until)
                 for i in range(0, len(uids), batch)]
        return pl.concat(parts, how="vertical_relaxed")
    if not uids:
        return pl.DataFrame(schema=schema_)
    phases = "|".join(TERMINAL_PHASES)
    raw = read_for_uids(source, "kube_pod_status_phase", uids, start, until,
                        f'phase=~"{phases}"')
    if raw.height == 0 or not {"uid", "phase"} <= set(raw.columns):
        return pl.DataFrame(schema=schema_)
    shown = raw.filter(pl.col("value") == 1)
    if shown.height == 0:
        return pl.DataFrame(schema=schema_)
    latest = shown.sort("ts").group_by("uid").agg(
        label(shown, "namespace").last().alias("namespace"),
        label(shown, "pod").last().alias("pod"),
        pl.col("phase").last(),
        pl.col("ts").last().alias("phase_ts"),
    )
    return latest.select([pl.col(c).cast(t) for c, t in schema_.items()])


def queue_label_warnings(pods: pl.DataFrame) -> list[str]:
    """Pod labels that look like a Kueue queue label but are not one of those Kueue sets."""
    known = {name.removeprefix("label_") for name in KUEUE_QUEUE_LABELS}
    out: set[str] = set()
    for text in pods["labels"].drop_nulls().unique().to_list():
        try:
            keys = json.loads(text)
        except ValueError:
            out.add(f"kube_pod_labels: cannot read the labels {text[:80]!r}")
            continue
        for k in keys:
            if _QUEUE_LIKE.search(k) and k not in known:
                out.add(f"kube_pod_labels: label_{k} looks like a Kueue queue label but is not "
                        f"{QUEUE_LABEL}; not used as the pod's LocalQueue")
    return sorted(out)



@dataclass
class WindowRead:
    pods: pl.DataFrame
    phases: pl.DataFrame
    capacity: pl.DataFrame
    utilization: pl.DataFrame | SpilledFrames  # spilled group by group when streamed
    busy: pl.DataFrame
    kueue: KueueMetrics
    warnings: list[tuple[str, str]]
    interval: timedelta | None
    util_span: tuple[datetime, datetime]
    busy_days: tuple[date, date]
    kueue_span: tuple[datetime, datetime]
    rejects: pl.DataFrame  # SAMPLE_REJECT_SCHEMA
    line_rejects: list[Reject]  # unreadable lines of an OpenMetrics file
    # gangs from pods alone (ksm_gangs.py): Job sizes and the GPU pods waiting without a node
    job_specs: pl.DataFrame = field(default_factory=lambda: empty(JOB_SPEC_SCHEMA))
    pending_pods: pl.DataFrame = field(default_factory=lambda: empty(PENDING_POD_SCHEMA))
    # ResourceClaims read for this window (stored with it: gpuledger/ingest/kubernetes/dra.py)
    claims: ClaimRead = field(default_factory=ClaimRead)


class WindowReadOptions(TypedDict, total=False):
    """:func:`read_kubernetes_window`'s options, for the callers that pass them on."""

    lookback: timedelta
    scrape_interval: timedelta | None
    gpu_resources: Sequence[str]
    sharing: SharingNames
    gpus_per_group: int | None
    pods_per_group: int
    nodes_per_group: int | None
    dra: DraInput | None


def read_kubernetes_window(
    source: MetricsSource,
    start: datetime,
    end: datetime,
    *,
    lookback: timedelta = DEFAULT_LOOKBACK,
    scrape_interval: timedelta | None = None,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
    sharing: SharingNames = DEFAULT_NAMES,
    gpus_per_group: int | None = DEFAULT_GPUS_PER_GROUP,
    pods_per_group: int = DEFAULT_PODS_PER_GROUP,
    nodes_per_group: int | None = None,
    dra: DraInput | None = None,
) -> WindowRead:
    """Every read of one window (no writes). Raises whatever the source raises; a source with
    a ``window_budget`` (PrometheusHttpSource) bounds the whole read by it.

    dcgm-exporter samples are read and derived about `gpus_per_group` GPUs at a time
    (gpuledger/ingest/kubernetes/dcgm_stream.py: the same rows, bounded memory); ``None`` reads
    them whole
    (the former path, kept as the benchmark's baseline and the equivalence tests' reference),
    and kube-state-metrics GPU pods then also whole. Streamed, the GPU pods are read about
    `pods_per_group` at a time (gpuledger/ingest/kubernetes/ksm_stream.py). `dra`: the
    ResourceClaims and
    the site's GPU drivers and classes for the DRA pods (gpuledger/ingest/kubernetes/dra.py;
    default: none
    read, kube-state-metrics' and dcgm-exporter's DRA labels only)."""
    start, end = check_window(start, end, lookback)
    if (gpus_per_group is not None and gpus_per_group < 1) or pods_per_group < 1:
        msg = ("expected at least 1 GPU (or None) and 1 pod per group, found "
               f"{gpus_per_group} and {pods_per_group}")
        raise ValueError(msg)
    budget = getattr(source, "window_budget", None)
    with _quiet_connector_log(), (budget() if callable(budget) else nullcontext()):
        return _read_window(source, start, end, lookback, scrape_interval,
                            tuple(gpu_resources), sharing, gpus_per_group, pods_per_group,
                            nodes_per_group or NODES_PER_GROUP, dra or DraInput())



@contextmanager
def _quiet_connector_log() -> Iterator[None]:
    """The readers log each note they return; the notes are reported (and stored) from here."""
    logger = logging.getLogger("connectors.kubernetes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _read_window(source: MetricsSource, start: datetime, end: datetime, lookback: timedelta,
                 scrape_interval: timedelta | None,
                 gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
                 sharing: SharingNames = DEFAULT_NAMES,
                 gpus_per_group: int | None = None,
                 pods_per_group: int = DEFAULT_PODS_PER_GROUP,
                 nodes_per_group: int = 64, dra: DraInput | None = None) -> WindowRead:
    memo = _MemoSource(source)
    # streamed: no read is kept past its reader (none repeats); whole: the former memo
    ksm: MetricsSource = memo if gpus_per_group is None else source
    warnings: list[tuple[str, str]] = []
    interval = scrape_interval or infer_scrape_interval(
        ksm, start, end, lookback, nodes_per_group=None if gpus_per_group is None
        else nodes_per_group)
    if interval is not None and lookback < 2 * interval:
        lookback = 2 * interval

    ksm_notes: list[str] = []
    sink: list[pl.DataFrame] = []
    if gpus_per_group is None:
        pods = pod_gpu_allocations(ksm, start, end, scrape_interval=interval, names=sharing,
                                   notes=ksm_notes, rejects=sink)
    else:  # pods a group of nodes at a time (gpuledger/ingest/kubernetes/ksm_stream.py)
        pods = pod_gpu_allocations_grouped(ksm, start, end, scrape_interval=interval,
                                           names=sharing, notes=ksm_notes, rejects=sink,
                                           pods_per_group=pods_per_group)
    if gpus_per_group is None:
        capacity = node_gpu_capacity(ksm, start, end, scrape_interval=interval,
                                     notes=ksm_notes, rejects=sink)
    else:
        capacity = node_gpu_capacity_grouped(ksm, start, end, scrape_interval=interval,
                                             notes=ksm_notes, rejects=sink,
                                             nodes_per_group=nodes_per_group)
    # the window itself (no margin): stored widened, so windows add up
    specs = job_specs(ksm, start, end, scrape_interval=interval, notes=ksm_notes,
                      rejects=sink)
    if gpus_per_group is None:
        pending = pending_gpu_pods(ksm, start, end, scrape_interval=interval, notes=ksm_notes,
                                   rejects=sink)
    else:
        pending = pending_gpu_pods_grouped(ksm, start, end, scrape_interval=interval,
                                           notes=ksm_notes, rejects=sink,
                                           pods_per_group=pods_per_group)
    warnings += [("ksm", n) for n in dict.fromkeys(ksm_notes)]
    # pods holding GPUs through DRA ResourceClaims (connectors/kubernetes/dra_pods.py)
    dra = dra or DraInput()
    d0 = floor_to(start, timedelta(days=1))
    d1 = ceil_to(end, timedelta(days=1))
    dra_notes: list[str] = []
    dra_read = dra_pod_allocations(ksm, start, end, claims=dra.claims,
                                   dcgm=dra_series(source, d0, d1), names=dra.names,
                                   scrape_interval=interval, notes=dra_notes, rejects=sink)
    if dra_read.pods.height:
        # an extended-resource claim for a resource kube-state-metrics shows (nvidia.com/gpu
        # mapped to a device class) is the same GPUs as the pod's request: charged once
        twice = set(pods["uid"].to_list()) & dra_read.extended_uids
        if twice:
            dra_notes.append(f"DRA: {len(twice)} pod(s) request GPUs through an extended "
                             "resource that kube-state-metrics shows and a claim made for it: "
                             "charged once, from the request")
        pods = pl.concat([pods, dra_read.pods.filter(~pl.col("uid").is_in(list(twice)))],
                         how="diagonal_relaxed")
    warnings += [("dra", n) for n in dict.fromkeys(dra_notes)]
    warnings += [("ksm", n) for n in queue_label_warnings(pods)]
    uids = pods["uid"].drop_nulls().unique().sort().to_list()
    phases = _terminal_phases(ksm, uids, start, end + lookback,
                              batch=None if gpus_per_group is None else PHASE_BATCH)

    memo.clear()  # each stage's raw reads are let go before the next stage reads

    u0, u1 = floor_to(start, GRAIN), ceil_to(end, GRAIN)
    # samples without pod labels go to the only pod holding the whole node (dcgm_attribution),
    # counted in nvidia_com_gpu as the capacity is: MIG instances of the mixed strategy and
    # renamed replicas are other devices, never a whole node's GPUs
    whole = pods.filter(pl.col("gpu_resource") == WHOLE_GPU_RESOURCE)
    groups = dcgm_groups(source, d0, d1, gpus_per_group) if gpus_per_group else []
    utilization: pl.DataFrame | SpilledFrames
    if groups:
        dcgm = read_dcgm_grouped(source, groups, u0, u1, d0, d1, grain=GRAIN, rejects=sink,
                                 pods=whole, capacity=capacity)
        utilization, busy = dcgm.utilization, dcgm.busy
        util_warn, busy_warn = dcgm.util_warnings, dcgm.busy_warnings
    else:
        utilization, util_warn = gpu_utilization(memo, u0, u1, grain=GRAIN, rejects=sink,
                                                 pods=whole, capacity=capacity)
        busy, busy_warn = gpu_busy_seconds_daily(memo, d0, d1, scrape_interval=None)
        memo.clear()
    warnings += [("dcgm", w) for w in dict.fromkeys([*util_warn, *busy_warn])]
    # busy GPUs that no pod and no Slurm job holds (gpuledger/ingest/kubernetes/dra.py)
    parts = utilization.frames() if isinstance(utilization, SpilledFrames) else [utilization]
    unheld, any_busy = busy_gpu_warnings(pods, parts, start, end, dra_read.claim_nodes)
    warnings += [("dcgm", w) for w in unheld]
    warnings = fix_no_pod_note(warnings, dra_read.pods["uid"].n_unique(), any_busy)

    # whole UTC days: the gauge readers let a read's last sample stand only up to the read's
    # end, so reads cut elsewhere than at midnight would give other workload_seconds
    k0, k1 = d0, d1
    kueue = read_kueue_metrics(memo, k0, k1, window=KUEUE_WINDOW, lookback=lookback,
                               resource=gpu_resources, rejects=sink)
    warnings += [("kueue", w) for w in dict.fromkeys(kueue.warnings)]
    server = getattr(source, "warnings", None)
    if isinstance(server, list):
        warnings += [("prometheus", w) for w in dict.fromkeys(server)]
        server.clear()
    if interval is None:
        warnings.append(("ksm", "scrape interval unknown (no kube_node_status_capacity or GPU "
                                "pod samples): intervals use each series' own spacing"))
    rejects = (pl.concat(sink, how="vertical_relaxed").unique(maintain_order=True) if sink
               else empty(SAMPLE_REJECT_SCHEMA))
    line_rejects = list(getattr(source, "rejects", None) or [])
    return WindowRead(pods, phases, capacity, utilization, busy, kueue, warnings, interval,
                 (u0, u1), (d0.date(), (d1 - timedelta(days=1)).date()), (k0, k1),
                 rejects, line_rejects, specs, pending, dra.fresh)


def check_window(start: datetime, end: datetime, lookback: timedelta) -> tuple[datetime, datetime]:
    start, end = _utc_naive(start), _utc_naive(end)
    if end <= start:
        msg = f"expected an end after the start, found {start:%F %T} .. {end:%F %T}"
        raise ValueError(msg)
    if lookback <= timedelta(0):
        msg = f"expected a positive look-back, found {lookback}"
        raise ValueError(msg)
    return start, end
