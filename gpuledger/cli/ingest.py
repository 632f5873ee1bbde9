"""The loading commands of ``gpuledger``: ``import-*`` (one file each), ``load`` (a site's
reference files and file sources), ``load-world`` and ``ingest slurm|kubernetes`` (a window of a
live or file source). Each calls the library functions the Dagster assets call."""

import argparse
import functools
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from gpuledger.cli.sources import (
    clusters,
    dra_setup,
    prometheus_config,
    site_metrics,
    slurm_sources,
    workload_snapshot,
)
from gpuledger.ingest import service, site_load
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.loads import LoadResult
from gpuledger.ingest.nodenames import set_node_aliases
from gpuledger.ingest.progress import Progress
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from gpuledger.site import Site
from gpuledger.site.config import Settings, load_settings
from models.runner import connect, publish_snapshot

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
# the Kubernetes day loop (one for `load`, `ingest kubernetes` and Dagster's callers)
_ingest_kubernetes_days = site_load.ingest_kubernetes_days


def _report(result: LoadResult) -> int:
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def _with_ledger(
    settings: Settings, load: Callable[..., LoadResult], *args: object
) -> int:
    with connect(settings.db) as con:
        result = load(con, *args)
        publish_snapshot(con, settings.db)
    return _report(result)


def cmd_import_identity(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, service.import_identity_map, Path(args.file))


def cmd_import_nodes(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.ingest import reference as reference_ingest

    site = settings.site
    cluster = args.cluster or str(settings.extra.get("cluster") or "") or (
        site.clusters[0].name if site is not None and site.clusters else "default")
    return _with_ledger(settings, reference_ingest.import_nodes_file, Path(args.file), cluster)


def cmd_import_accounts(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, service.import_accounts, Path(args.file))


def cmd_import_rate_card(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, service.import_rate_card, Path(args.file))


def cmd_import_reference(args: argparse.Namespace, settings: Settings) -> int:
    """The site's sources (scontrol, sacctmgr, KSM), read with the ledger closed, then the
    reference files as overrides (gpuledger/ingest/reference.py)."""
    from gpuledger.ingest import reference as reference_ingest

    site = _site(settings, "import-reference")
    names = [c.name for c in clusters(site, args.cluster)]
    result = reference_ingest.import_reference(site, lambda: connect(settings.db),
                                               clusters=names)
    with connect(settings.db) as con:
        publish_snapshot(con, settings.db)
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_import_workloads(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, _load_workloads(settings), Path(args.file))


def cmd_import_pod_groups(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.ingest.kubernetes import pod_groups

    return _with_ledger(settings, functools.partial(pod_groups.import_pod_groups,
                                                    cluster=args.cluster or ""), Path(args.file))


def _load_workloads(settings: Settings) -> Callable[..., LoadResult]:
    """The one Workload import (kueue_workloads_raw and kueue_workloads, one transaction) with
    the configured GPU resource names; every command that loads Workloads goes through it."""
    return functools.partial(service.import_workloads, gpu_resources=settings.gpu_resources)


def _site(settings: Settings, command: str) -> Site:
    if settings.site is None:
        msg = (f"expected a site file for `{command}` (--config FILE, GPULEDGER_CONFIG or "
               "./gpuledger.toml with [gpuledger.clusters.<name>] tables; docs/site-file.md), "
               "found none")
        raise ValueError(msg)
    return settings.site


def cmd_load(args: argparse.Namespace, settings: Settings) -> int:
    site = _site(settings, "load")
    names = [c.name for c in clusters(site, args.cluster)]
    site_load.load_site_files(site, settings.db, clusters=names,
                              gpu_resources=settings.gpu_resources)
    return EXIT_OK


def cmd_load_world(args: argparse.Namespace, settings: Settings) -> int:
    """Deprecated: ``load-world DIR`` is ``load --config DIR/gpuledger.toml``."""
    path = Path(args.world) / "gpuledger.toml"
    if not path.is_file():
        msg = (f"expected a site file {path} (load-world DIR means load --config "
               "DIR/gpuledger.toml), found none")
        raise FileNotFoundError(msg)
    print(f"gpuledger load-world: deprecated, use `gpuledger load --config {path}`",
          file=sys.stderr)
    settings = load_settings(path, db=args.db)
    if settings.node_aliases:
        with connect(settings.db) as con:
            set_node_aliases(con, settings.node_aliases)
    return cmd_load(argparse.Namespace(cluster=None), settings)


def parse_time(text: str) -> datetime:
    """ISO date or time; naive means UTC."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def cmd_import_sacct(args: argparse.Namespace, settings: Settings) -> int:
    limits = slurm_ingest.configured_limits(settings)
    with connect(settings.db) as con:
        result = slurm_ingest.import_sacct_file(
            con, Path(args.file), delimiter=args.delimiter, timezone=args.timezone,
            observed_until=parse_time(args.as_of) if args.as_of else None,
            cluster=args.cluster or str(settings.extra.get("cluster") or "") or None,
            limits=limits,
        )
        publish_snapshot(con, settings.db)
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_import_scontrol(args: argparse.Namespace, settings: Settings) -> int:
    with connect(settings.db) as con:
        result = scontrol_ingest.import_scontrol_file(
            con, Path(args.file), timezone=args.timezone,
            observed_at=parse_time(args.observed_at) if args.observed_at else None,
        )
        publish_snapshot(con, settings.db)
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_ingest_slurm(args: argparse.Namespace, settings: Settings) -> int:
    start, end = parse_time(args.start), parse_time(args.end)
    days = slurm_ingest.daily_windows(start, end)
    for label, runner, limits, lookback_hours, sreport in slurm_sources(args, settings):
        with connect(settings.db) as con:
            progress = Progress(len(days))
            for day_start, day_end in days:
                progress.start(f"{label}sacct {day_start:%Y-%m-%d}")
                result = slurm_ingest.ingest_slurm_window(
                    con, runner, day_start, day_end, lookback=timedelta(hours=lookback_hours),
                    limits=limits,
                )
                progress.note("  " + result.summary().replace("\n", "\n  "))
                if sreport:
                    util, accounts = slurm_ingest.ingest_sreport(con, runner, day_start,
                                                                 day_end)
                    progress.note(f"  sreport: {util} utilization rows, {accounts} account "
                                  "rows")
                progress.advance()
            progress.finish()
            publish_snapshot(con, settings.db)
    return EXIT_OK


def cmd_ingest_kubernetes(args: argparse.Namespace, settings: Settings) -> int:
    start, end = parse_time(args.start), parse_time(args.end)
    site = settings.site
    if args.openmetrics or args.prometheus_url or site is None:
        _ingest_kubernetes_flags(args, settings, start, end)
    else:
        chosen = [c for c in clusters(site, args.cluster) if c.prometheus is not None]
        if not chosen:
            msg = (f"{site.path}: expected a cluster with a [prometheus] table, found none "
                   f"among {[c.name for c in clusters(site, args.cluster)]}")
            raise ValueError(msg)
        for c in chosen:
            p = c.prometheus
            assert p is not None
            minutes = args.lookback_minutes if args.lookback_minutes is not None \
                else p.lookback_minutes
            interval = args.scrape_interval or p.scrape_interval_s or None
            if len(chosen) > 1:
                print(f"cluster {c.name}", file=sys.stderr)
            _ingest_kubernetes_days(
                lambda: connect(settings.db), site_metrics(args, c), start, end,
                cluster=c.name, lookback=timedelta(minutes=minutes),
                scrape_interval=timedelta(seconds=interval) if interval else None,
                workloads=workload_snapshot(args, settings, c),
                gpu_resources=settings.gpu_resources, sharing=settings.sharing,
                dra=dra_setup(args, settings, c),
            )
    with connect(settings.db) as con:
        publish_snapshot(con, settings.db)
    return EXIT_OK


def _ingest_kubernetes_flags(args: argparse.Namespace, settings: Settings, start: datetime,
                             end: datetime) -> None:
    if args.openmetrics:
        source: MetricsSource = OpenMetricsFileSource(Path(args.openmetrics))
    else:
        source = PrometheusHttpSource(prometheus_config(args, settings))
    interval = timedelta(seconds=args.scrape_interval) if args.scrape_interval else None
    cluster = args.cluster or str(settings.extra.get("cluster") or "")
    if not cluster:
        with connect(settings.db) as con:
            cluster = k8s_ingest.default_cluster(con)
    minutes = args.lookback_minutes if args.lookback_minutes is not None else 60.0
    _ingest_kubernetes_days(
        lambda: connect(settings.db), source, start, end, cluster=cluster,
        lookback=timedelta(minutes=minutes), scrape_interval=interval,
        workloads=workload_snapshot(args, settings),
        gpu_resources=settings.gpu_resources, sharing=settings.sharing,
        dra=dra_setup(args, settings),
    )
