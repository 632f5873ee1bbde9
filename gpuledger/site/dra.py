"""The site file's DRA settings (docs/site-file.md, "DRA"; docs/kubernetes.md, "DRA").

``[gpuledger.dra]`` (site-wide)::

    drivers = ["gpu.nvidia.com"]                        # DRA drivers whose devices are GPUs
    device_classes = ["gpu.nvidia.com", "mig.nvidia.com"]  # device classes that are GPUs
    # Kueue's resources.deviceClassMappings: a device class counted as a resource for quota;
    # each name whose classes are GPU classes joins gpu_resources (Workload GPU counts)
    kueue_config = "kueue/controller_manager_config.yaml"   # Kueue's Configuration (or its
                                                          # ConfigMap), read for its mappings
    device_class_mappings = [{ name = "example.com/gpu", device_class_names = ["gpu.nvidia.com"] }]

``[gpuledger.clusters.<name>.dra]`` (where a cluster's ResourceClaims come from)::

    kubeconfig = "kubeconfig"    # the API (resource.k8s.io/v1 resourceclaims), or
    snapshot = "claims/"         # a kubectl get resourceclaims -A -o json file, or a folder of
                                 # time-named ones (resourceclaims-20260112T000000Z.json)
    context = "", namespace = "", timeout_s = 30
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from connectors.kubernetes.dra_claims import (
    DEFAULT_DEVICE_CLASSES,
    DEFAULT_DRA_NAMES,
    DEFAULT_DRIVERS,
    DraNames,
)


@dataclass(frozen=True)
class DraSite:
    names: DraNames = DEFAULT_DRA_NAMES
    # Kueue's deviceClassMappings: (resource name, its device classes)
    kueue_mappings: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def gpu_resources(self) -> tuple[str, ...]:
        """The mapped resource names Kueue counts GPU device classes under."""
        return tuple(name for name, classes in self.kueue_mappings
                     if set(classes) & set(self.names.device_classes))


@dataclass(frozen=True)
class DraClusterSite:
    kubeconfig: Path | None = None
    context: str = ""
    namespace: str = ""
    snapshot: Path | None = None
    timeout_s: float = 30.0


def _names(t: Any, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = t.get(key, list, list(default), "a list of names")
    if not value or not all(isinstance(v, str) and v.strip() for v in value):
        t.fail(key, "a non-empty list of names", value)
    return tuple(dict.fromkeys(value))


def _mappings(t: Any, value: object, where: str) -> list[tuple[str, tuple[str, ...]]]:
    what = "a list of {name, deviceClassNames} mappings"
    if not isinstance(value, list):
        t.fail(where, what, value)
    out = []
    for entry in value:  # type: ignore[union-attr]
        if not isinstance(entry, dict):
            t.fail(where, what, entry)
        name = entry.get("name")
        classes = entry.get("device_class_names", entry.get("deviceClassNames"))
        if not (isinstance(name, str) and name and isinstance(classes, list) and classes
                and all(isinstance(c, str) and c for c in classes)):
            t.fail(where, what, entry)
        out.append((name, tuple(classes)))
    return out


def read_kueue_config(t: Any, path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """``resources.deviceClassMappings`` of Kueue's Configuration (the YAML file, or the
    ConfigMap holding it under ``controller_manager_config.yaml``)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        t.fail("kueue_config", "a readable Kueue Configuration (YAML)", f"{path}: {exc}")
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):  # the ConfigMap
        inner = doc["data"].get("controller_manager_config.yaml")
        doc = yaml.safe_load(inner) if isinstance(inner, str) else None
    if not isinstance(doc, dict):
        t.fail("kueue_config", "a Kueue Configuration mapping", str(path))
    resources = doc.get("resources") or {}  # type: ignore[union-attr]
    mappings = resources.get("deviceClassMappings") if isinstance(resources, dict) else None
    return _mappings(t, mappings or [], "kueue_config")


def parse_dra(t: Any | None) -> DraSite:
    """``[gpuledger.dra]`` (a ``gpuledger.site.table.SiteTable`` or None)."""
    if t is None:
        return DraSite()
    names = DraNames(drivers=_names(t, "drivers", DEFAULT_DRIVERS),
                     device_classes=_names(t, "device_classes", DEFAULT_DEVICE_CLASSES))
    mappings = _mappings(t, t.get("device_class_mappings", list, [], "a list"),
                         "device_class_mappings")
    config = t.file("kueue_config")
    if config is not None:
        mappings += read_kueue_config(t, config)
    t.done()
    return DraSite(names, tuple(dict.fromkeys(mappings)))


def parse_cluster_dra(t: Any) -> DraClusterSite:
    """``[gpuledger.clusters.<name>.dra]``."""
    site = DraClusterSite(kubeconfig=t.file("kubeconfig"), context=t.text("context"),
                          namespace=t.text("namespace"), snapshot=t.file("snapshot"),
                          timeout_s=t.number("timeout_s", 30.0, minimum=1.0))
    if site.kubeconfig is None and site.snapshot is None:
        t.fail("kubeconfig", "kubeconfig (API access) or snapshot (a kubectl JSON file or "
               "folder)", None)
    t.done()
    return site
