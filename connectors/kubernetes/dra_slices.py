"""ResourceSlices (resource.k8s.io/v1): the devices a DRA driver publishes per node, with the
attributes that tie a claim's device name to a physical GPU.

A ResourceClaim names its device by the driver's name (``gpu-0``; a MIG device
``gpu-0-mig-1g10gb-19-0`` since dra-driver-nvidia-gpu v25.12, ``gpu-1-mig-19-4-1`` before, which
does not carry the profile). dcgm-exporter, the nodes file and Slurm name GPUs by UUID. The
driver's ResourceSlice says which is which (NVIDIA/k8s-dra-driver-gpu ``cmd/gpu-kubelet-plugin/
deviceinfo.go`` ``GpuInfo.Attributes``: ``type`` ``gpu``, ``uuid``; ``mig.go``
``CommonAttributesMig``: ``type`` ``mig``, ``parentUUID``, ``profile``, and ``uuid`` the MIG
device's own):

* ``spec.driver``, ``spec.pool.name`` (the node, for node-local drivers), ``spec.nodeName``;
* ``spec.devices[].name`` and ``.attributes`` (v1; ``.basic.attributes`` in v1beta1), each
  attribute one of ``{"string": …}``, ``{"int": …}``, ``{"bool": …}``, ``{"version": …}``.

Rows (``SLICE_DEVICE_SCHEMA``): one per published device: ``gpu_uuid`` (a whole GPU's UUID, or a
MIG device's parent's), ``mig_uuid``, ``mig_profile``, ``device_type``. Devices of any driver
are kept; which are GPUs is decided where claims are (``DraNames``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from connectors.frame_types import SchemaDict
from connectors.kubernetes.records import TS
from connectors.kubernetes.workload_fields import BadField, obj, objects, string

SLICE_DEVICE_SCHEMA: SchemaDict = {
    "driver": pl.String,
    "pool": pl.String,
    "node": pl.String,  # spec.nodeName (null for a network-attached pool)
    "device": pl.String,
    "device_type": pl.String,  # the attribute ``type``: gpu, mig, vfio …
    "gpu_uuid": pl.String,  # the physical GPU: ``uuid`` of a GPU, ``parentUUID`` of a MIG device
    "mig_uuid": pl.String,
    "mig_profile": pl.String,
    "source": pl.String,
    "observed_at": TS,
}


def _attribute(attributes: dict[str, Any], name: str, path: str) -> str | None:
    """A string attribute's value (``{"string": "GPU-…"}``); None when absent."""
    value = attributes.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        where = f"{path}.{name}"
        raise BadField(where, 'an attribute object such as {"string": "…"}', value)
    return string(value, "string", f"{path}.{name}")


def slice_rows(item: dict[str, Any], source: str, at: datetime) -> list[dict[str, Any]]:
    """The devices of one ResourceSlice item (``BadField`` names the first bad field)."""
    spec = obj(item, "spec", "", required=True) or {}
    driver = string(spec, "driver", "spec", required=True, nonempty=True)
    pool = string(obj(spec, "pool", "spec", required=True) or {}, "name", "spec.pool",
                  required=True, nonempty=True)
    node = string(spec, "nodeName", "spec")
    rows = []
    for i, device in enumerate(objects(spec, "devices", "spec")):
        path = f"spec.devices[{i}]"
        name = string(device, "name", path, required=True, nonempty=True)
        basic = obj(device, "basic", path)  # v1beta1
        where = f"{path}.basic.attributes" if basic is not None else f"{path}.attributes"
        attributes = obj(basic if basic is not None else device, "attributes",
                         f"{path}.basic" if basic is not None else path) or {}
        kind = _attribute(attributes, "type", where)
        uuid = _attribute(attributes, "uuid", where)
        parent = _attribute(attributes, "parentUUID", where)
        mig = kind == "mig" or parent is not None
        rows.append({
            "driver": driver, "pool": pool, "node": node, "device": name,
            "device_type": kind,
            "gpu_uuid": parent if mig else uuid,
            "mig_uuid": uuid if mig else None,
            "mig_profile": _attribute(attributes, "profile", where) if mig else None,
            "source": source, "observed_at": at,
        })
    return rows


def empty_slices() -> pl.DataFrame:
    return pl.DataFrame(schema=SLICE_DEVICE_SCHEMA)
