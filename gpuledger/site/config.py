"""Settings: command-line flags over environment variables over a TOML file over defaults.

The TOML file is a site file (``docs/site-file.md``: it has ``[gpuledger.clusters.<name>]``
tables, validated by ``gpuledger.site.load_site``) or, for older set-ups, flat ``[gpuledger]``
keys (``sacct_prefix``, ``prometheus_url``, ``cluster``, ``slurm_limits``, …). From a site file
the settings are read off the ``Site`` (``Settings.site``), so the two never disagree.
"""

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.gpu_sharing import SharingNames
from gpuledger.site.table import DEFAULT_CONFIG, DEFAULT_GPU_RESOURCES

if TYPE_CHECKING:
    from gpuledger.site import Site

DEFAULT_DB = Path("data/gpuledger.duckdb")

# Environment variable -> settings attribute.
ENVIRONMENT = {
    "GPULEDGER_DB": "db",
    "GPULEDGER_SACCT_PREFIX": "sacct_prefix",
    "GPULEDGER_PROMETHEUS_URL": "prometheus_url",
    "GPULEDGER_IDENTITY_MAP": "identity_map",
    "GPULEDGER_RATE_CARD": "rate_card",
    "GPULEDGER_REPORTS_DIR": "reports_dir",
    "GPULEDGER_GPU_RESOURCES": "gpu_resources",
}



@dataclass(frozen=True)
class Settings:
    """Everything a run needs to know about where data lives and how to reach the sources."""

    db: Path = DEFAULT_DB
    reports_dir: Path = Path("reports")
    sacct_prefix: str = ""
    prometheus_url: str = ""
    identity_map: Path | None = None
    rate_card: Path | None = None
    # raw node name as a source prints it -> canonical name (gpuledger/ingest/nodenames.py)
    node_aliases: dict[str, str] = field(default_factory=dict)
    # a DRA workload's GPUs go under the logical name of Kueue's deviceClassMappings
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    # [gpuledger.sharing] of a site file: Kubernetes resources that are GPU replicas
    sharing: SharingNames = field(default_factory=SharingNames)
    extra: dict[str, object] = field(default_factory=dict)
    # the validated site file, when the TOML file is one (db and reports_dir as settled here)
    site: "Site | None" = None


def _coerce(name: str, value: object) -> object:
    if name == "node_aliases":
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v.strip()
                for k, v in value.items()):
            msg = ("expected node_aliases as a table of \"raw name\" = \"canonical name\", "
                   f"found {value!r}")
            raise ValueError(msg)
        return dict(value)
    if name == "gpu_resources":
        return _gpu_resources(value)
    if name in {"db", "reports_dir", "identity_map", "rate_card"} and value:
        return Path(str(value))
    return value


def _gpu_resources(value: object) -> tuple[str, ...]:
    """A list (TOML) or a comma-separated string (environment) of resource names."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        msg = f"expected gpu_resources as a list of resource names, found {value!r}"
        raise ValueError(msg)
    names = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    if not names:
        msg = f"expected at least one GPU resource name in gpu_resources, found {value!r}"
        raise ValueError(msg)
    return names


def is_site_document(doc: dict) -> bool:
    """A site file has ``[gpuledger.clusters]``; a flat settings file has not."""
    table = doc.get("gpuledger", doc)
    return isinstance(table, dict) and "clusters" in table


def _site_values(site: "Site") -> tuple[dict[str, object], dict[str, object]]:
    """Settings values and ``extra`` keys a site file gives (paths already resolved by it)."""
    limits: dict[str, object] = {}
    for c in site.clusters:  # per-cluster commands use their own; this is the merged view
        if c.slurm is not None:
            limits.update(c.slurm.limits)
    values: dict[str, object] = {
        "db": site.db, "reports_dir": site.reports_dir,
        "gpu_resources": site.gpu_resources, "node_aliases": site.node_aliases,
        "sharing": site.sharing,
        "identity_map": site.reference.identity_map, "rate_card": site.reference.rate_card,
    }
    extra: dict[str, object] = {"slurm_limits": limits} if limits else {}
    if len(site.clusters) == 1:  # one cluster: the flat keys' meaning is unambiguous
        only = site.clusters[0]
        extra["cluster"] = only.name
        if only.slurm is not None:
            values["sacct_prefix"] = only.slurm.prefix
        if only.prometheus is not None:
            values["prometheus_url"] = only.prometheus.url
    return values, extra


def load_settings(config_file: Path | None = None, **overrides: object) -> Settings:
    """Build settings: defaults, then the TOML file, then environment, then ``overrides``.

    A site file is validated whole (``gpuledger.site.SiteError``, a ``ValueError``)."""
    values: dict[str, object] = {}
    path = config_file or Path(os.environ.get("GPULEDGER_CONFIG") or DEFAULT_CONFIG)
    # sharing: a site file's [gpuledger.sharing] table only (validated there)
    known = {f.name for f in fields(Settings)} - {"extra", "site", "sharing"}
    extra: dict[str, object] = {}
    site = None
    if path.is_file():
        with path.open("rb") as fh:
            try:
                doc = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                msg = f"{path}: expected TOML, found a syntax error: {exc}"
                raise ValueError(msg) from None
        if is_site_document(doc):
            from gpuledger.site import load_site  # site.py imports this module

            site = load_site(path)
            values, extra = _site_values(site)
        else:
            for key, value in doc.get("gpuledger", doc).items():
                if key in known:
                    values[key] = _coerce(key, value)
                else:
                    extra[key] = value
    elif config_file is not None or os.environ.get("GPULEDGER_CONFIG"):
        # a file someone named must exist: silently running on defaults would write elsewhere
        named = "--config" if config_file is not None else "GPULEDGER_CONFIG"
        msg = f"expected a config file at {path} ({named}), found none"
        raise FileNotFoundError(msg)
    for env, attr in ENVIRONMENT.items():
        if os.environ.get(env):
            values[attr] = _coerce(attr, os.environ[env])
    for key, value in overrides.items():
        if value is not None:
            values[key] = _coerce(key, value)
    settings = replace(Settings(), **values, extra=extra)
    if site is not None:  # env and flags settle db and reports_dir for both
        settings = replace(settings, site=replace(site, db=settings.db,
                                                  reports_dir=settings.reports_dir))
    return settings
