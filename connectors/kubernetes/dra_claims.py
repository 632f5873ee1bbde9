"""Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34): which devices a
ResourceClaim was allocated and which pods it is for, from a List of ResourceClaim (and Pod)
objects -- the API's answer (``connectors/kubernetes/dra_api.py``) or its fixture twin, a
``kubectl get resourceclaims -A -o json`` (``kubectl get resourceclaims,pods -A -o json``) file.

A pod's GPU through DRA has no ``nvidia.com/gpu`` request: the pod names ResourceClaims
(``spec.resourceClaims``: a claim by name, or one generated from a ResourceClaimTemplate whose
name the kubelet writes into ``status.resourceClaimStatuses``), or -- the extended-resource path
slurm-bridge uses -- requests ``deviceclass.resource.kubernetes.io/<class>`` and the scheduler
creates a claim named in ``status.extendedResourceClaimStatus``. The claim holds the answer
(Kubernetes API reference, ResourceClaim v1):

* ``status.allocation.devices.results[]``: ``request`` (``<request>`` or, for ``firstAvailable``,
  ``<request>/<subrequest>``), ``driver`` (``gpu.nvidia.com``), ``pool`` (the node, for
  node-local drivers such as NVIDIA's) and ``device`` (``gpu-0``; a MIG device
  ``gpu-0-mig-1g10gb-19-0`` since dra-driver-nvidia-gpu v25.12, ``gpu-0-mig-19-0-1`` before);
  ``adminAccess`` results (monitoring access to devices others hold) are no allocation;
* the request's device class: ``spec.devices.requests[].exactly.deviceClassName`` (v1;
  ``deviceClassName`` on the request itself in v1beta1; a ``firstAvailable`` subrequest's own);
* ``status.reservedFor[]``: the pods (``resource: pods``, ``name``, ``uid``) using the claim now;
  a claim several pods share lists them all;
* the sharing strategy of NVIDIA's ``GpuConfig`` (``sharing.strategy``: ``TimeSlicing``,
  ``MPS``) in ``status.allocation.devices.config`` (else ``spec.devices.config``).

Frames: ``devices`` (one row per allocated device of a claim, ``CLAIM_DEVICE_SCHEMA``) and
``pods`` (one row per pod a claim is for, ``CLAIM_POD_SCHEMA``: from reservedFor, the claim's
owner pod, and a Pod item's resourceClaimStatuses / extendedResourceClaimStatus). Bad items are
rejected one by one (``Reject``: index, JSON path, reason); the others are read. Which drivers
and device classes are GPUs is the site's (``DraNames``; docs/kubernetes.md, "DRA").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from connectors.errors import Reject, SourceError
from connectors.frame_types import SchemaDict
from connectors.kubernetes.dra_slices import SLICE_DEVICE_SCHEMA, empty_slices, slice_rows
from connectors.kubernetes.records import TS
from connectors.kubernetes.workload_fields import (
    BadField,
    boolean,
    obj,
    objects,
    string,
)
from connectors.textfiles import open_text

REJECT_SOURCE = "resource_claims"
DEFAULT_DRIVERS = ("gpu.nvidia.com",)
DEFAULT_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
#: dra-driver-nvidia-gpu's canonical MIG device names (cmd/gpu-kubelet-plugin/mig.go
#: ToCanonicalName, v25.12.0+): gpu-<minor>-mig-<profile without dots, RFC 1123>-<profile id>-
#: <placement start>; 1g.10gb -> 1g10gb, 1g.10gb+me -> 1g10gb-me, a compute instance 1c.3g.40gb
#: -> 1c3g40gb
_MIG_NAME = re.compile(
    r"^gpu-\d+-mig-(?:(?P<c>\d+c)(?=\d+g))?(?P<g>\d+g)(?P<mem>\d+gb)(?P<extra>(?:-[a-z0-9]+)*)"
    r"-\d+-\d+$")
#: before v25.12 (deviceinfo.go): gpu-<minor>-mig-<profile id>-<placement start>-<size>; the
#: profile is not in the name (dcgm-exporter's dra_mig_profile names it)
_OLD_MIG_NAME = re.compile(r"^gpu-\d+-mig-\d+-\d+-\d+$")

CLAIM_DEVICE_SCHEMA: SchemaDict = {
    "namespace": pl.String,
    "claim": pl.String,  # the ResourceClaim's name
    "claim_uid": pl.String,
    "request": pl.String,
    "driver": pl.String,
    "pool": pl.String,  # the node, for node-local drivers
    "device": pl.String,
    "device_class": pl.String,
    "mig_profile": pl.String,  # 1g.10gb from the device name; null: a whole GPU or unknown
    "sharing_strategy": pl.String,  # GpuConfig sharing.strategy (TimeSlicing, MPS) or null
    "share_id": pl.String,  # a device shared by several claims (DRAConsumableCapacity)
    "extended": pl.Boolean,  # made by the scheduler for an extended-resource request
    "observed_at": TS,
    "source": pl.String,
}

CLAIM_POD_SCHEMA: SchemaDict = {
    "namespace": pl.String,
    "claim": pl.String,
    "claim_uid": pl.String,  # null when only a pod names the claim
    "pod": pl.String,
    "pod_uid": pl.String,
    # reservedFor, ownerReference, resourceClaimStatuses, extendedResourceClaimStatus
    "via": pl.String,
    "observed_at": TS,
    "source": pl.String,
}


@dataclass(frozen=True)
class DraNames:
    """Which DRA drivers and device classes mean GPUs (site ``[gpuledger.dra]``)."""

    drivers: tuple[str, ...] = DEFAULT_DRIVERS
    device_classes: tuple[str, ...] = DEFAULT_DEVICE_CLASSES


DEFAULT_DRA_NAMES = DraNames()


@dataclass
class ClaimRead:
    """What one List said: its claims' devices and pods, and the items it could not read."""

    devices: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema=CLAIM_DEVICE_SCHEMA))
    pods: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CLAIM_POD_SCHEMA))
    rejects: list[Reject] = field(default_factory=list)
    # the drivers' ResourceSlices: which GPU (UUID) and MIG profile each device name is
    slices: pl.DataFrame = field(default_factory=empty_slices)

    def __add__(self, other: ClaimRead) -> ClaimRead:
        return ClaimRead(pl.concat([self.devices, other.devices], how="vertical_relaxed"),
                         pl.concat([self.pods, other.pods], how="vertical_relaxed"),
                         [*self.rejects, *other.rejects],
                         pl.concat([self.slices, other.slices], how="vertical_relaxed"))


def mig_profile(device: str | None) -> str | None:
    """The MIG profile a dra-driver-nvidia-gpu device name carries (``1g.10gb``,
    ``1g.10gb+me``, ``1c.3g.40gb``), else None (a whole GPU, or a name before v25.12)."""
    m = _MIG_NAME.match(device or "")
    if not m:
        return None
    extra = "".join(f"+{e}" for e in m.group("extra").split("-") if e)
    compute = f"{m.group('c')}." if m.group("c") else ""
    return f"{compute}{m.group('g')}.{m.group('mem')}{extra}"


def is_mig_device(device: str | None) -> bool:
    """A MIG device by its dra-driver-nvidia-gpu name (either spelling)."""
    name = device or ""
    return bool(_MIG_NAME.match(name) or _OLD_MIG_NAME.match(name))


def is_gpu(driver: pl.Expr, device_class: pl.Expr, names: DraNames) -> pl.Expr:
    """A GPU (or MIG) device: a GPU driver's, and of a GPU device class where the class is
    known (a claim read from dcgm-exporter's labels alone names no class)."""
    return driver.is_in(list(names.drivers)) & (
        device_class.is_null() | device_class.is_in(list(names.device_classes)))


# --------------------------------------------------------------------------- reading


def _request_classes(spec: dict[str, Any], path: str) -> dict[str, str]:
    """request name (and ``request/subrequest``) -> device class."""
    out: dict[str, str] = {}
    devices = obj(spec, "devices", path) or {}
    base = f"{path}.devices"
    for i, req in enumerate(objects(devices, "requests", base)):
        where = f"{base}.requests[{i}]"
        name = string(req, "name", where, required=True, nonempty=True)
        exactly = obj(req, "exactly", where)
        cls = string(exactly, "deviceClassName", f"{where}.exactly") if exactly else \
            string(req, "deviceClassName", where)  # v1beta1
        if cls:
            out[str(name)] = cls
        for j, sub in enumerate(objects(req, "firstAvailable", where)):
            sub_where = f"{where}.firstAvailable[{j}]"
            sub_name = string(sub, "name", sub_where, required=True, nonempty=True)
            sub_cls = string(sub, "deviceClassName", sub_where)
            if sub_cls:
                out[f"{name}/{sub_name}"] = sub_cls
    return out


def _strategies(configs: list[dict[str, Any]], path: str) -> dict[str | None, str]:
    """request name (None: every request) -> GpuConfig sharing strategy."""
    out: dict[str | None, str] = {}
    for i, config in enumerate(configs):
        opaque = obj(config, "opaque", f"{path}[{i}]") or {}
        params = opaque.get("parameters")
        sharing = params.get("sharing") if isinstance(params, dict) else None
        strategy = sharing.get("strategy") if isinstance(sharing, dict) else None
        if not isinstance(strategy, str) or not strategy:
            continue
        requests = config.get("requests")
        for name in (requests if isinstance(requests, list) and requests else [None]):
            out[name if isinstance(name, str) else None] = strategy
    return out


def _claim(item: dict[str, Any], source: str,
           at: datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    meta = obj(item, "metadata", "", required=True) or {}
    namespace = string(meta, "namespace", "metadata", required=True, nonempty=True)
    name = string(meta, "name", "metadata", required=True, nonempty=True)
    uid = string(meta, "uid", "metadata", required=True, nonempty=True)
    annotations = obj(meta, "annotations", "metadata") or {}
    extended = str(annotations.get(EXTENDED_ANNOTATION, "")).lower() == "true"
    spec = obj(item, "spec", "", required=True) or {}
    classes = _request_classes(spec, "spec")
    status = obj(item, "status", "") or {}
    allocation = obj(status, "allocation", "status") or {}
    devices = obj(allocation, "devices", "status.allocation") or {}
    where = "status.allocation.devices"
    strategies = {**_strategies(objects(obj(spec, "devices", "spec") or {}, "config",
                                        "spec.devices"), "spec.devices.config"),
                  **_strategies(objects(devices, "config", where), f"{where}.config")}
    rows = []
    for i, result in enumerate(objects(devices, "results", where)):
        w = f"{where}.results[{i}]"
        request = string(result, "request", w, required=True, nonempty=True)
        device = string(result, "device", w, required=True, nonempty=True)
        if boolean(result, "adminAccess", w):
            continue  # access to devices others hold (monitoring): no allocation
        top = str(request).split("/", 1)[0]
        rows.append({
            "namespace": namespace, "claim": name, "claim_uid": uid, "request": request,
            "driver": string(result, "driver", w, required=True, nonempty=True),
            "pool": string(result, "pool", w, required=True, nonempty=True),
            "device": device,
            "device_class": classes.get(str(request), classes.get(top)),
            "mig_profile": mig_profile(device),
            "sharing_strategy": strategies.get(str(request), strategies.get(
                top, strategies.get(None))),
            "share_id": string(result, "shareID", w),
            "extended": extended, "observed_at": at, "source": source,
        })
    pods = []
    for i, ref in enumerate(objects(status, "reservedFor", "status")):
        w = f"status.reservedFor[{i}]"
        if string(ref, "resource", w, required=True) != "pods" or ref.get("apiGroup"):
            continue  # reserved for something other than a core pod
        pods.append(_pod_row(namespace, name, uid, string(ref, "name", w, required=True,
                                                           nonempty=True),
                             string(ref, "uid", w, required=True, nonempty=True),
                             "reservedFor", at, source))
    for i, ref in enumerate(objects(meta, "ownerReferences", "metadata")):
        w = f"metadata.ownerReferences[{i}]"
        if ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            pods.append(_pod_row(namespace, name, uid, string(ref, "name", w, required=True),
                                 string(ref, "uid", w), "ownerReference", at, source))
    return rows, pods


def _pod_row(namespace: str | None, claim: str | None, claim_uid: str | None,
             pod: str | None, pod_uid: str | None, via: str, at: datetime,
             source: str) -> dict[str, Any]:
    return {"namespace": namespace, "claim": claim, "claim_uid": claim_uid, "pod": pod,
            "pod_uid": pod_uid, "via": via, "observed_at": at, "source": source}


def _pod(item: dict[str, Any], source: str, at: datetime) -> list[dict[str, Any]]:
    """A Pod's claims: the generated ones (resourceClaimStatuses) and the extended-resource
    claim (extendedResourceClaimStatus, Kubernetes 1.34+ DRAExtendedResource)."""
    meta = obj(item, "metadata", "", required=True) or {}
    namespace = string(meta, "namespace", "metadata", required=True, nonempty=True)
    name = string(meta, "name", "metadata", required=True, nonempty=True)
    uid = string(meta, "uid", "metadata", required=True, nonempty=True)
    status = obj(item, "status", "") or {}
    out = []
    for i, ref in enumerate(objects(status, "resourceClaimStatuses", "status")):
        claim = string(ref, "resourceClaimName", f"status.resourceClaimStatuses[{i}]")
        if claim:
            out.append(_pod_row(namespace, claim, None, name, uid, "resourceClaimStatuses", at,
                                source))
    ext = obj(status, "extendedResourceClaimStatus", "status")
    if ext:
        claim = string(ext, "resourceClaimName", "status.extendedResourceClaimStatus",
                       required=True, nonempty=True)
        out.append(_pod_row(namespace, claim, None, name, uid, "extendedResourceClaimStatus",
                            at, source))
    for i, ref in enumerate(objects(obj(item, "spec", "") or {}, "resourceClaims", "spec")):
        claim = string(ref, "resourceClaimName", f"spec.resourceClaims[{i}]")
        if claim:  # a claim by name (a template's generated name is in the status)
            out.append(_pod_row(namespace, claim, None, name, uid, "resourceClaims", at,
                                source))
    return out


def read_claim_document(doc: object, *, source: str, observed_at: datetime,
                        kind: str = "") -> ClaimRead:
    """The ResourceClaim, ResourceSlice and Pod items of a kubectl List or API list `doc`;
    `kind` for the items of an API list, which carry none. Items of other kinds are skipped."""
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        msg = f"{source}: expected a kubectl List with an 'items' array, found " \
              f"{type(doc).__name__}"
        raise SourceError(msg)
    devices: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    rejects: list[Reject] = []
    for index, item in enumerate(doc["items"]):
        what = item.get("kind", kind) if isinstance(item, dict) else kind
        try:
            if not isinstance(item, dict):
                top = ""  # the item itself
                raise BadField(top, "an object", item)
            if what == "ResourceClaim":
                rows, refs = _claim(item, source, observed_at)
                devices += rows
                pods += refs
            elif what == "Pod":
                pods += _pod(item, source, observed_at)
            elif what == "ResourceSlice":
                slices += slice_rows(item, source, observed_at)
        except BadField as bad:
            where = f"items[{index}]" + (f".{bad.path}" if bad.path else "")
            rejects.append(Reject(REJECT_SOURCE, source, index, where, bad.reason,
                                  json.dumps(item, sort_keys=True)[:2000]))
    return ClaimRead(pl.DataFrame(devices, schema=CLAIM_DEVICE_SCHEMA, orient="row"),
                     pl.DataFrame(pods, schema=CLAIM_POD_SCHEMA, orient="row"), rejects,
                     pl.DataFrame(slices, schema=SLICE_DEVICE_SCHEMA, orient="row"))


def read_claim_file(path: Path, observed_at: datetime) -> ClaimRead:
    """A ``kubectl get resourceclaims[,resourceslices,pods] -A -o json`` file (``.json`` or
    ``.json.gz``)."""
    try:
        with open_text(path) as fh:
            doc = json.load(fh)
    except FileNotFoundError as exc:
        msg = f"expected a ResourceClaim snapshot at {path}, found none"
        raise SourceError(msg) from exc
    except json.JSONDecodeError as exc:
        msg = f"{path}:{exc.lineno}: expected JSON from kubectl -o json, found {exc.msg}"
        raise SourceError(msg) from exc
    return read_claim_document(doc, source=str(path), observed_at=observed_at)
