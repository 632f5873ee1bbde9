"""How the CLI's ``ingest`` commands pick their sources: the site file's clusters, with
environment variables and flags over it, or the older flat settings (``gpuledger.cli``)."""

import argparse
import os
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from connectors.kubernetes.dra_claims import DEFAULT_DRA_NAMES
from connectors.kubernetes.metrics_source import MetricsSource, PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.kubernetes.workload_api import fetch_workload_snapshot
from connectors.slurm.commands import CommandRunner
from connectors.slurm.sanity import SanityLimits
from gpuledger.ingest.kubernetes.dra import DraSetup, read_fresh
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.site import ClusterSite, Site
from gpuledger.site import sources as site_sources
from gpuledger.site.config import Settings

# label, runner, sanity limits, lookback hours, sreport too
SlurmSource = tuple[str, CommandRunner, SanityLimits, float, bool]


def clusters(site: Site, name: str | None) -> list[ClusterSite]:
    """The cluster `name` (``--cluster``), else every cluster of the site."""
    return [site.cluster(name)] if name else list(site.clusters)


def slurm_sources(args: argparse.Namespace, settings: Settings) -> list[SlurmSource]:
    """One (label, runner, limits, lookback hours, sreport?) per Slurm source: the site's live
    clusters (``--cluster`` picks one), else the flat settings; flags and
    ``GPULEDGER_SACCT_PREFIX`` override the file."""
    if settings.site is None:
        runner = CommandRunner.from_prefix(settings.sacct_prefix, timeout_s=args.timeout or 300.0)
        lookback = args.lookback_hours if args.lookback_hours is not None else 48.0
        return [("", runner, slurm_ingest.configured_limits(settings), lookback,
                 not args.no_sreport)]
    chosen = clusters(settings.site, args.cluster)
    live = [c.slurm for c in chosen if c.slurm is not None and c.slurm.mode == "sacct"]
    if not live:
        msg = (f"{settings.site.path}: expected a cluster with [slurm] mode = \"sacct\" to "
               f"ingest from, found {[c.name for c in chosen]} (dump files: gpuledger load)")
        raise ValueError(msg)
    names = [c.name for c in chosen if c.slurm is not None and c.slurm.mode == "sacct"]
    prefix = os.environ.get("GPULEDGER_SACCT_PREFIX")
    out: list[SlurmSource] = []
    for name, s in zip(names, live, strict=True):
        s = replace(s, prefix=prefix if prefix is not None else s.prefix,
                    timeout_s=args.timeout or s.timeout_s)
        lookback = args.lookback_hours if args.lookback_hours is not None else s.lookback_hours
        out.append((f"{name}: " if len(live) > 1 else "", site_sources.slurm_runner(s),
                    site_sources.slurm_limits(s), lookback, s.sreport and not args.no_sreport))
    return out


def _header_flags(args: argparse.Namespace) -> dict[str, str]:
    headers: dict[str, str] = {}
    for text in args.header or []:
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            msg = f"expected --header 'Name: value', found {text!r}"
            raise ValueError(msg)
        headers[name.strip()] = value.strip()
    return headers


def _prometheus_flags(args: argparse.Namespace) -> dict[str, object]:
    """The PrometheusConfig fields given on the command line (they override the file)."""
    given = {
        "bearer_token_file": Path(args.bearer_token_file) if args.bearer_token_file else None,
        "basic_auth_user": args.basic_auth_user or None,
        "basic_auth_password_file": (Path(args.basic_auth_password_file)
                                     if args.basic_auth_password_file else None),
        "ca_bundle": Path(args.ca_bundle) if args.ca_bundle else None,
        "verify_tls": False if args.insecure else None,
        "timeout_s": args.timeout, "connect_timeout_s": args.connect_timeout,
        "window_budget_s": args.window_budget, "retries": args.retries,
        "chunk": timedelta(hours=args.chunk_hours) if args.chunk_hours else None,
    }
    return {k: v for k, v in given.items() if v is not None}


def prometheus_config(args: argparse.Namespace, settings: Settings) -> PrometheusConfig:
    """Flags over the config file's ``prometheus_*`` keys (flat ``[gpuledger]`` table)."""
    extra = settings.extra

    def path(key: str) -> Path | None:
        return Path(str(extra[key])) if extra.get(key) else None

    url = args.prometheus_url or settings.prometheus_url
    if not url:
        msg = "expected --prometheus-url (or prometheus_url / GPULEDGER_PROMETHEUS_URL)"
        raise ValueError(msg)
    headers = {str(k): str(v) for k, v in dict(extra.get("prometheus_headers") or {}).items()}
    base = PrometheusConfig(
        url=url, bearer_token_file=path("prometheus_bearer_token_file"),
        basic_auth_user=str(extra.get("prometheus_basic_auth_user") or "") or None,
        basic_auth_password_file=path("prometheus_basic_auth_password_file"),
        ca_bundle=path("prometheus_ca_bundle"),
        verify_tls=not bool(extra.get("prometheus_insecure", False)),
        headers={**headers, **_header_flags(args)}, chunk=timedelta(hours=6),
    )
    return replace(base, **_prometheus_flags(args))  # type: ignore[arg-type]


def site_metrics(args: argparse.Namespace, c: ClusterSite) -> MetricsSource:
    """The cluster's Prometheus (or OpenMetrics file) with the flags and
    ``GPULEDGER_PROMETHEUS_URL`` over the site file."""
    p = c.prometheus
    assert p is not None
    if os.environ.get("GPULEDGER_PROMETHEUS_URL"):
        p = replace(p, url=os.environ["GPULEDGER_PROMETHEUS_URL"], openmetrics=None)
    if p.openmetrics is not None:
        return OpenMetricsFileSource(p.openmetrics)
    config = site_sources.prometheus_config(p)
    config = replace(config, headers={**config.headers, **_header_flags(args)},
                     **_prometheus_flags(args))  # type: ignore[arg-type]
    return PrometheusHttpSource(config)


def workload_snapshot(args: argparse.Namespace, settings: Settings,
                       cluster: ClusterSite | None = None) -> Path | None:
    """The Workload snapshot to load: a given file, or one fetched now through a kubeconfig
    (flags, else the cluster's [kueue] table, else the flat ``kubeconfig`` key)."""
    if args.workloads:
        return Path(args.workloads)
    kueue = cluster.kueue if cluster is not None else None
    kubeconfig = args.kubeconfig or (kueue.kubeconfig if kueue else None) \
        or settings.extra.get("kubeconfig")
    if not kubeconfig:
        return kueue.snapshot if kueue else None
    context = args.kube_context or (kueue.context if kueue else None) or None
    dest = settings.db.parent / "snapshots"
    path = fetch_workload_snapshot(Path(str(kubeconfig)), dest, context=context)
    print(f"fetched Kueue Workloads from the API into {path}", file=sys.stderr)
    return path


def dra_setup(args: argparse.Namespace, settings: Settings,
              cluster: ClusterSite | None = None) -> DraSetup:
    """The site's DRA drivers and device classes, and the ResourceClaims read once for the
    ingest: ``--resource-claims`` (a file or a folder), else the cluster's ``[dra]`` table (the
    API through its kubeconfig, or its snapshot); gpuledger/ingest/kubernetes/dra.py."""
    names = settings.site.dra.names if settings.site is not None else DEFAULT_DRA_NAMES
    given = getattr(args, "resource_claims", None)
    if given:
        return DraSetup(names, read_fresh(snapshot=Path(given)))
    dra = cluster.dra if cluster is not None else None
    if dra is None:
        return DraSetup(names)
    fresh = read_fresh(kubeconfig=dra.kubeconfig, context=dra.context, namespace=dra.namespace,
                       timeout_s=dra.timeout_s, snapshot=dra.snapshot)
    print(f"ResourceClaims: {fresh.devices['claim_uid'].n_unique()} claims with "
          f"{fresh.devices.height} devices read, {fresh.slices.height} devices the drivers' "
          f"ResourceSlices publish ({len(fresh.rejects)} items rejected)", file=sys.stderr)
    for reject in fresh.rejects[:3]:  # e.g. resourceslices refused: said, not a silent zero
        print(f"  warning: {reject.describe()}", file=sys.stderr)
    return DraSetup(names, fresh)

