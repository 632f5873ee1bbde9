"""Pod GPU allocations through Dynamic Resource Allocation (docs/kubernetes.md, "DRA").

A DRA pod requests no ``nvidia.com/gpu``, so ``ksm.pod_gpu_allocations`` never sees it. Which
pod holds which GPU is put together from every place it shows:

* **pod -> claim**: kube-state-metrics >= 2.20 ``kube_pod_resourceclaim_info{namespace, pod,
  uid, claim_name, resourceclaim_name, resourceclaim_template_name}`` (one series per entry of
  the pod's ``spec.resourceClaims``; ``resourceclaim_name`` is the claim object, empty while a
  template's claim is not made yet); the claims' ``status.reservedFor`` and owner pod, a pod's
  ``status.extendedResourceClaimStatus`` (the extended-resource path, which kube-state-metrics
  cannot show: it drops resource names containing ``kubernetes.io/``) and
  ``resourceClaimStatuses`` (``dra_claims.py``); dcgm-exporter's pod and ``dra_claim_*`` labels
  (``dcgm_dra.py``; a pod it names is found by ``kube_pod_info``);
* **claim -> devices**: the claim's ``status.allocation.devices.results`` (driver, pool = the
  node, device), else dcgm-exporter's ``dra_pool_name``/``dra_device_name`` (and
  ``dra_mig_profile``) for that claim. Only the site's GPU drivers and device classes count
  (``DraNames``: ``gpu.nvidia.com``; classes ``gpu.nvidia.com``, ``mig.nvidia.com``).

Then the pod is charged by the rules of every GPU pod: it holds its claims' devices while it is
bound and Running, or Pending from its ``kube_pod_start_time`` on (``ksm_boundaries``: the same
exact ends and scrape-grid fallbacks), one row per kind of device:

* whole GPUs: ``gpu_resource`` ``dra/<device class>``, ``gpus`` = devices, sharing null;
* MIG devices: ``dra/<class>/<profile>``, sharing ``mig``, ``slice_profile`` the profile (from
  the device name, else dcgm-exporter's ``dra_mig_profile``; unknown: reported, not charged);
* devices of a claim several pods use (reserved for or named by more than one pod, or a device
  with a ``shareID``): ``dra/<class>/shared``, sharing ``time_slicing`` (``mps`` where the
  claim's GpuConfig says MPS), ``gpus`` = devices, and ``dra_devices`` the device keys
  (``<pool>/<device>``) on which the ledger splits each second among the pods present
  (``models/sql/allocation_shares.sql``): together they hold the device once.

``dra_claims`` (text: each claim and its devices) and ``dra_devices`` go on every row for the
evidence. A pod whose claim's devices are not known anywhere is reported (not charged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from connectors.kubernetes.dcgm_dra import DRA_SERIES_SCHEMA
from connectors.kubernetes.dra_claims import (
    CLAIM_DEVICE_SCHEMA,
    CLAIM_POD_SCHEMA,
    DEFAULT_DRA_NAMES,
    ClaimRead,
    DraNames,
    is_gpu,
    is_mig_device,
)
from connectors.kubernetes.ksm import PHASE_REASONS, infer_intervals, read_window
from connectors.kubernetes.ksm_attributes import pod_attributes
from connectors.kubernetes.ksm_boundaries import (
    COMPLETION_TIME,
    START_TIME,
    exact_times,
    pod_intervals,
)
from connectors.kubernetes.ksm_keys import read_by_pods, read_for_uids, read_keys
from connectors.kubernetes.ksm_labels import node_target_jobs, with_workload
from connectors.kubernetes.ksm_pods import COMPONENT, NO_KEY
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.records import (
    POD_GPU_ALLOCATION_SCHEMA,
    TS,
    conform,
    empty,
    keep_rejects,
    label,
)
from connectors.times import utc_naive

CLAIM_INFO = "kube_pod_resourceclaim_info"
DRA_POD_SCHEMA = {**POD_GPU_ALLOCATION_SCHEMA, "dra_claims": pl.String,
                  "dra_devices": pl.List(pl.String)}
_EDGE = {"pod_uid": pl.String, "namespace": pl.String, "pod": pl.String, "claim": pl.String,
         "via": pl.String}
_US = 1_000_000


@dataclass
class DraWindow:
    """What the DRA reader found in one window."""

    pods: pl.DataFrame = field(default_factory=lambda: empty(DRA_POD_SCHEMA))
    # nodes where a claim holds a device or a DRA pod runs (the busy-GPU warning's cause)
    claim_nodes: set[str] = field(default_factory=set)
    ksm_claims: bool = False  # kube_pod_resourceclaim_info had samples
    # pods whose GPU claims are all extended-resource claims (made by the scheduler for a
    # request such as nvidia.com/gpu, which kube-state-metrics may show as well)
    extended_uids: set[str] = field(default_factory=set)


def _edges(info: pl.DataFrame, claims: ClaimRead, dcgm: pl.DataFrame,
           dcgm_uids: pl.DataFrame) -> pl.DataFrame:
    """pod uid -> claim (namespace, name), from every source."""
    parts = [empty(_EDGE)]
    if info.height:
        parts.append(info.filter(pl.col("resourceclaim_name").is_not_null()).select(
            pl.col("_uid").alias("pod_uid"), pl.col("_ns").alias("namespace"),
            pl.col("_pod").alias("pod"), pl.col("resourceclaim_name").alias("claim"),
            pl.lit(CLAIM_INFO).alias("via")))
    refs = claims.pods.filter(pl.col("pod_uid").is_not_null())
    if refs.height:
        parts.append(refs.select(*_EDGE))
    if dcgm.height and dcgm_uids.height:
        # a fallback: only for pods no other source ties to a claim (a name kube_pod_info
        # shows for two uids, a StatefulSet pod recreated, is not trusted with a claim)
        known = pl.concat([p.select("pod_uid") for p in parts])
        named = (dcgm.join(dcgm_uids, on=["namespace", "pod"])
                 .filter(pl.col("claim_namespace") == pl.col("namespace"))
                 .join(known, on="pod_uid", how="anti"))
        named = named.filter(pl.col("pod_uid").n_unique().over("namespace", "pod") == 1)
        parts.append(named.select("pod_uid", "namespace", "pod", "claim",
                                  pl.lit("dcgm-exporter").alias("via")))
    return pl.concat([p.select([pl.col(c).cast(t) for c, t in _EDGE.items()]) for p in parts]
                     ).unique(["pod_uid", "namespace", "claim"], keep="first",
                              maintain_order=True)


def _devices(claims: ClaimRead, dcgm: pl.DataFrame, until: datetime) -> pl.DataFrame:
    """(namespace, claim) -> its devices: the API's claim objects (the claim of that name
    observed last before `until`, else the first after), else dcgm-exporter's labels."""
    api = claims.devices
    if api.height:
        picked = (api.group_by("namespace", "claim", "claim_uid")
                  .agg(pl.col("observed_at").min().alias("_first"))
                  .with_columns(_before=pl.col("_first") <= until)
                  .sort("_before", "_first", descending=[True, True])
                  .unique(["namespace", "claim"], keep="first"))
        api = api.join(picked.select("claim_uid"), on="claim_uid", how="semi").unique(
            ["claim_uid", "request", "pool", "device"], keep="last", maintain_order=True)
    seen = dcgm.select(pl.col("claim_namespace").alias("namespace"), "claim", "driver",
                       "pool", "device", pl.col("mig_profile").alias("_dcgm_profile")).unique(
        ["namespace", "claim", "pool", "device"])
    from_dcgm = seen.join(api.select("namespace", "claim").unique(),
                          on=["namespace", "claim"], how="anti")
    out = pl.concat([conform(api, CLAIM_DEVICE_SCHEMA),
                     conform(from_dcgm.with_columns(source=pl.lit("dcgm-exporter")),
                             CLAIM_DEVICE_SCHEMA)], how="vertical_relaxed")
    profiles = seen.select("pool", "device", "_dcgm_profile").drop_nulls().unique(
        ["pool", "device"])
    # the driver's ResourceSlice names a MIG device's profile too (device names before
    # dra-driver-nvidia-gpu v25.12 do not): the latest slice that published the device
    published = (claims.slices.filter(pl.col("mig_profile").is_not_null())
                 .sort("observed_at").unique(["driver", "pool", "device"], keep="last")
                 .select("driver", "pool", "device", pl.col("mig_profile").alias("_slice")))
    return (out.join(profiles, on=["pool", "device"], how="left")
            .join(published, on=["driver", "pool", "device"], how="left")
            .with_columns(mig_profile=pl.coalesce("mig_profile", "_dcgm_profile", "_slice"))
            .drop("_dcgm_profile", "_slice"))


def _resources(pod_devices: pl.DataFrame, notes: list[str]) -> pl.DataFrame:
    """One row per (pod uid, gpu_resource): gpus, sharing, slice_profile, dra_claims,
    dra_devices."""
    users = pod_devices.group_by("namespace", "claim").agg(
        pl.col("pod_uid").n_unique().alias("_users"))
    d = pod_devices.join(users, on=["namespace", "claim"]).with_columns(
        _mig=pl.col("device").map_elements(is_mig_device, return_dtype=pl.Boolean)
        | pl.col("mig_profile").is_not_null(),
        _key=pl.col("pool") + "/" + pl.col("device"),
        _class=pl.coalesce("device_class", "driver"),
    ).with_columns(_shared=~pl.col("_mig") & ((pl.col("_users") > 1)
                                               | pl.col("share_id").is_not_null()))
    unknown = d.filter(pl.col("_mig") & pl.col("mig_profile").is_null())
    if unknown.height:
        notes.append(f"DRA: {unknown['_key'].n_unique()} MIG device(s) without a known profile "
                     f"(e.g. {sorted(unknown['_key'].unique().to_list())[:3]}; device names "
                     "before dra-driver-nvidia-gpu v25.12 do not carry it; dcgm-exporter's "
                     "dra_mig_profile and the driver's ResourceSlices do): not charged")
    shared_mig = d.filter(pl.col("_mig") & (pl.col("_users") > 1))
    if shared_mig.height:
        notes.append(f"DRA: {shared_mig['_key'].n_unique()} MIG device(s) in claims several "
                     "pods share: each pod is charged the instance's fraction")
    d = d.filter(~pl.col("_mig") | pl.col("mig_profile").is_not_null()).with_columns(
        sharing=pl.when(pl.col("_mig")).then(pl.lit("mig"))
        .when(pl.col("_shared") & (pl.col("sharing_strategy").str.to_lowercase() == "mps"))
        .then(pl.lit("mps"))
        .when(pl.col("_shared")).then(pl.lit("time_slicing")),
        slice_profile=pl.when(pl.col("_mig")).then(pl.col("mig_profile")),
    ).with_columns(gpu_resource=pl.concat_str([
        pl.lit("dra/"), pl.col("_class"),
        pl.when(pl.col("_mig")).then("/" + pl.col("mig_profile"))
        .when(pl.col("_shared")).then(pl.lit("/shared")).otherwise(pl.lit(""))]))
    claims_text = d.group_by("pod_uid", "gpu_resource", "namespace", "claim").agg(
        pl.col("_key").unique().sort().str.join(", ").alias("_keys"),
        pl.col("driver").first()).with_columns(
        _text=pl.format("{}/{} ({}: {})", "namespace", "claim", "driver", "_keys"))
    text = claims_text.group_by("pod_uid", "gpu_resource").agg(
        pl.col("_text").sort().str.join("; ").alias("dra_claims"))
    rows = d.group_by("pod_uid", "gpu_resource").agg(
        pl.col("_key").n_unique().cast(pl.Int64).alias("gpus"),
        pl.col("sharing").first(), pl.col("slice_profile").first(),
        pl.col("_key").unique().sort().alias("dra_devices"))
    return rows.join(text, on=["pod_uid", "gpu_resource"]).rename({"pod_uid": "uid"})


def _held_samples(source: MetricsSource, uids: list[str], q0: datetime,
                  q1: datetime, rejects: list[pl.DataFrame] | None) -> pl.DataFrame:
    """(uid, ts) -> namespace, pod, node, running, pending from kube_pod_status_phase and
    kube_pod_info (the pod's node at that scrape)."""
    phase = read_keys(source, "kube_pod_status_phase", uids, q0, q1,
                      'phase=~"Running|Pending"')
    if phase.height == 0:
        return pl.DataFrame()
    bad = pl.lit(False)
    for cond, reason in PHASE_REASONS:
        keep_rejects(rejects, phase.filter(~bad & cond), COMPONENT, reason)
        bad = bad | cond
    phase = phase.filter(~bad)
    name = label(phase, "phase")
    held = phase.group_by(["_key", "ts"]).agg(
        pl.col("_ns").drop_nulls().first().alias("namespace"),
        pl.col("_pod").drop_nulls().first().alias("pod"),
        *[pl.when((name == p).any()).then(((name == p) & (pl.col("value") == 1)).any())
          .alias(p.lower()) for p in ("Running", "Pending")])
    info = read_keys(source, "kube_pod_info", uids, q0, q1)
    if info.height:
        jobs = node_target_jobs(info, own_node=True) | node_target_jobs(phase, own_node=False)
        info = with_workload(info, node_jobs=jobs)
        nodes = info.filter(pl.col("_node").is_not_null()).group_by(["_key", "ts"]).agg(
            pl.col("_node").max().alias("node"))
        held = held.join(nodes, on=["_key", "ts"], how="left")
    else:
        held = held.with_columns(node=pl.lit(None, dtype=pl.String))
    return held.rename({"_key": "uid"})


def dra_pod_allocations(
    source: MetricsSource, start: datetime, end: datetime, *,
    claims: ClaimRead | None = None, dcgm: pl.DataFrame | None = None,
    names: DraNames = DEFAULT_DRA_NAMES, scrape_interval: timedelta | None = None,
    notes: list[str] | None = None, rejects: list[pl.DataFrame] | None = None,
) -> DraWindow:
    """DRA pods' GPU allocation rows for ``[start, end)`` (``DRA_POD_SCHEMA``; module
    docstring). `claims`: ResourceClaim objects read (stored and fresh); `dcgm`:
    ``dcgm_dra.dra_series`` of the window (None: read here)."""
    start, end = utc_naive(start), utc_naive(end)
    q0, q1 = read_window(start, end, scrape_interval)
    claims = claims or ClaimRead()
    found: list[str] = []
    if dcgm is None:
        from connectors.kubernetes.dcgm_dra import dra_series
        dcgm = dra_series(source, q0, q1)
    try:
        return _read(source, start, end, q0, q1, claims, dcgm, names, scrape_interval, found,
                     rejects)
    finally:
        if notes is not None:
            notes.extend(dict.fromkeys(found))


def _read(source: MetricsSource, start: datetime, end: datetime, q0: datetime, q1: datetime,
          claims: ClaimRead, dcgm: pl.DataFrame, names: DraNames,
          scrape_interval: timedelta | None, found: list[str],
          rejects: list[pl.DataFrame] | None) -> DraWindow:
    out = DraWindow()
    info = source.raw_samples(CLAIM_INFO, q0, q1)
    if info.height:
        out.ksm_claims = True
        info = with_workload(info)
        keep_rejects(rejects, info.filter(pl.col("_uid").is_null()), COMPONENT, NO_KEY)
        info = info.filter(pl.col("_uid").is_not_null()).with_columns(
            resourceclaim_name=pl.when(label(info, "resourceclaim_name") != "")
            .then(label(info, "resourceclaim_name")))
    dcgm = dcgm if dcgm is not None and dcgm.height else pl.DataFrame(schema=DRA_SERIES_SCHEMA)
    dcgm_uids = pl.DataFrame(schema={"namespace": pl.String, "pod": pl.String,
                                     "pod_uid": pl.String})
    if dcgm.height:
        pairs = dcgm.select("namespace", "pod").drop_nulls().unique().rows()
        pod_info = read_by_pods(source, "kube_pod_info", pairs, q0, q1)
        if pod_info.height:
            dcgm_uids = pod_info.filter(pl.col("_uid").is_not_null()).select(
                pl.col("_ns").alias("namespace"), pl.col("_pod").alias("pod"),
                pl.col("_uid").alias("pod_uid")).unique()
    edges = _edges(info, claims, dcgm, dcgm_uids)
    devices = _devices(claims, dcgm, q1)
    out.claim_nodes = set(devices["pool"].drop_nulls().to_list())
    if edges.height == 0:
        return out
    known = devices.select("namespace", "claim").unique()
    missing = edges.filter(pl.col("via") == CLAIM_INFO).join(
        known, on=["namespace", "claim"], how="anti")
    if missing.height:
        examples = sorted({f"{n}/{p} claim {c}" for n, p, c in
                           missing.select("namespace", "pod", "claim").rows()})[:3]
        found.append(
            f"DRA claims not read: {missing['pod_uid'].n_unique()} pod(s) name ResourceClaims "
            f"whose devices gpuledger has not read (e.g. {examples}): not charged; give the "
            "cluster's [dra] a kubeconfig or a kubectl snapshot of resourceclaims, or run "
            "dcgm-exporter with --kubernetes-enable-dra")
    gpu = devices.filter(is_gpu(pl.col("driver"), pl.col("device_class"), names))
    pod_devices = edges.join(gpu, on=["namespace", "claim"])
    if pod_devices.height == 0:
        return out
    resources = _resources(pod_devices, found)
    if resources.height == 0:
        return out
    extended = pod_devices.group_by("pod_uid").agg(pl.col("extended").fill_null(False).all())
    out.extended_uids = set(extended.filter("extended")["pod_uid"].to_list())
    uids = resources["uid"].unique().sort().to_list()
    samples = _held_samples(source, uids, q0, q1, rejects)
    if samples.height == 0:
        found.append(f"DRA: kube_pod_status_phase has no samples of {len(uids)} pod(s) holding "
                     "GPUs through ResourceClaims: not charged")
        return out
    out.claim_nodes |= set(samples["node"].drop_nulls().to_list())
    samples = samples.join(resources.select("uid", "gpu_resource", "gpus", "sharing",
                                            "slice_profile"), on="uid")
    if scrape_interval is None:
        intervals = infer_intervals(samples, ["uid"])
    else:
        intervals = samples.select("uid").unique().with_columns(
            interval=pl.lit(scrape_interval).cast(pl.Duration("us")))
    held = samples.filter(pl.col("node").is_not_null())["uid"].unique().sort().to_list()
    starts = exact_times(read_for_uids(source, START_TIME, held, q0, q1), "last")
    completions = exact_times(read_for_uids(source, COMPLETION_TIME, held, q0, q1), "max")
    runs = pod_intervals(samples, intervals, starts, completions, start, end, found)
    if runs.height == 0:
        return out
    runs = runs.with_columns(gpu_seconds=pl.col("gpus") * (
        pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds() / _US)
    attrs = pod_attributes(source, runs.select("uid", "namespace"), q0, q1, found)
    rows = runs.join(attrs, on="uid", how="left").join(
        resources.select("uid", "gpu_resource", "dra_claims", "dra_devices"),
        on=["uid", "gpu_resource"], how="left")
    out.pods = conform(rows, DRA_POD_SCHEMA).sort(["namespace", "pod", "uid", "gpu_resource",
                                                   "start_ts"])
    return out


__all__ = ["CLAIM_INFO", "CLAIM_POD_SCHEMA", "DRA_POD_SCHEMA", "TS", "DraWindow",
           "dra_pod_allocations"]
