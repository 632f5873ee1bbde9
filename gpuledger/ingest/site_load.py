"""``gpuledger load``: load what a site file's file-mode sources and reference files hold.

Reference files first (nodes, identity map, accounts, rate card), then per cluster: the Kueue
Workload snapshot, the sacct dump (read in its ``dump_timezone``, charged up to its
``dump_as_of``), the sreport files, the ``scontrol show job -d`` snapshots of the snapshot
folder and the OpenMetrics file, day by day from ``first_day`` to the last day it holds. Live
sources (sacct over a prefix, a Prometheus URL, the Kueue API) are ``gpuledger ingest``'s and
the schedules'; they are named and skipped here. The ledger is opened for each step's write
only, so no connection is held while the Kubernetes days are read.
"""

import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames
from connectors.kubernetes.dra_claims import ClaimRead
from connectors.kubernetes.kube_api import snapshot_files
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.secrets import without_credentials
from gpuledger.ingest import service
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.dra import DraSetup, read_fresh
from gpuledger.ingest.progress import Progress
from gpuledger.ingest.slurm import run as slurm_ingest
from gpuledger.ingest.slurm import scontrol as scontrol_ingest
from gpuledger.ingest.timewindows import daily_windows
from gpuledger.site import ClusterSite, Site
from gpuledger.site.config import DEFAULT_GPU_RESOURCES
from gpuledger.site.days import openmetrics_last_sample
from gpuledger.site.sources import slurm_limits
from models.runner import connect, publish_snapshot, transaction

Step = tuple[str, Callable[[duckdb.DuckDBPyConnection], object]]


def ingest_kubernetes_days(
    ledger: duckdb.DuckDBPyConnection | Callable[[], AbstractContextManager],
    source: MetricsSource, start: datetime, end: datetime, *,
    cluster: str, lookback: timedelta, scrape_interval: timedelta | None,
    workloads: Path | None, indent: str = "", max_warnings: int = 8,
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
    sharing: SharingNames = DEFAULT_NAMES,
    dra: DraSetup | None = None,
) -> None:
    """Ingest ``[start, end)`` day by day (progress lines on stderr), then the Workloads.
    `dra`: the site's DRA names and the ResourceClaims read for the run (with the ledger's
    stored ones, per day: gpuledger/ingest/kubernetes/dra.py).

    `ledger` is an open connection, or a function opening one: then each day is read from the
    source with the ledger closed and written in a short transaction (one writer at a time: a
    slow Prometheus never holds the ledger's lock).
    """
    def opened() -> AbstractContextManager:
        return nullcontext(ledger) if isinstance(ledger, duckdb.DuckDBPyConnection) else ledger()

    days = daily_windows(start, end)
    progress = Progress(len(days))
    for day_start, day_end in days:
        progress.start(f"{indent}prometheus {day_start:%Y-%m-%d}")
        read = k8s_ingest.read_kubernetes_window(
            source, day_start, day_end, lookback=lookback, scrape_interval=scrape_interval,
            gpu_resources=gpu_resources, sharing=sharing,
            dra=(dra or DraSetup()).opened_input(opened, cluster, day_start),
        )
        with opened() as con:
            load = k8s_ingest.write_kubernetes_window(con, read, source, day_start, day_end,
                                                      cluster=cluster)
        text = load.summary(max_warnings)
        progress.note(f"{indent}  " + text.replace("\n", f"\n{indent}  "))
        progress.advance()
    progress.finish()
    if workloads is not None:
        with opened() as con:
            result = k8s_ingest.import_workload_conditions(con, workloads,
                                                           gpu_resources=gpu_resources)
        print(f"{indent}{result.summary()}", file=sys.stderr)


def _dra(site: Site, c: ClusterSite) -> DraSetup:
    """The site's DRA names and the cluster's ResourceClaim snapshot (file mode only)."""
    snapshot = c.dra.snapshot if c.dra is not None else None
    return DraSetup(site.dra.names, read_fresh(snapshot=snapshot) if snapshot else ClaimRead())


def _say(result: object) -> None:
    if hasattr(result, "summary"):  # LoadResult, SlurmLoad …
        print(result.summary(), file=sys.stderr)


def _reference_steps(site: Site) -> list[Step]:
    ref = site.reference
    steps: list[Step] = []
    if ref.nodes is not None:
        # one inventory file: filed under the first cluster (node names are unique in a site)
        cluster = site.clusters[0].name
        steps.append(("nodes", lambda con: service.import_nodes(con, ref.nodes, cluster)))
    if ref.identity_map is not None:
        steps.append(("identity map",
                      lambda con: service.import_identity_map(con, ref.identity_map)))
    if ref.accounts is not None:
        steps.append(("accounts", lambda con: service.import_accounts(con, ref.accounts)))
    if ref.rate_card is not None:
        steps.append(("rate card", lambda con: service.import_rate_card(con, ref.rate_card)))
    return steps


def _sreport(con: duckdb.DuckDBPyConnection, util: Path, accounts: Path) -> str:
    rows = slurm_ingest.store_sreport(con, util.read_text(encoding="utf-8"),
                                      accounts.read_text(encoding="utf-8"),
                                      source=str(util.parent))
    return f"sreport: {rows[0]} utilization rows, {rows[1]} account rows"


def _scontrol(con: duckdb.DuckDBPyConnection, folder: Path) -> str:
    files = scontrol_ingest.snapshot_folder_files(folder)  # .txt.gz too, oldest first
    for snapshot in files:
        print(scontrol_ingest.import_scontrol_file(con, snapshot).summary(), file=sys.stderr)
    return f"scontrol: {len(files)} snapshot(s) from {folder}"


def _workloads(con: duckdb.DuckDBPyConnection, snapshot: Path,
               gpu_resources: tuple[str, ...], cluster: str) -> object:
    """One Workload snapshot, or a folder of time-named ones in the order taken (the history
    then keeps the Workloads deleted between them,
    gpuledger/ingest/kubernetes/workload_history.py)."""
    if not snapshot.is_dir():
        return service.import_workloads(con, snapshot, gpu_resources=gpu_resources,
                                        cluster=cluster)
    files = snapshot_files(snapshot)
    for _, path in files:
        service.import_workloads(con, path, gpu_resources=gpu_resources, cluster=cluster)
    return f"workloads: {len(files)} snapshot(s) from {snapshot}"


def _pod_groups(con: duckdb.DuckDBPyConnection, path: Path, cluster: str) -> object:
    from gpuledger.ingest.kubernetes.pod_groups import import_pod_groups

    return import_pod_groups(con, path, cluster=cluster)


def _cluster_steps(c: ClusterSite, gpu_resources: tuple[str, ...]) -> list[Step]:
    steps: list[Step] = []
    if c.kueue is not None and c.kueue.snapshot is not None:
        snapshot = c.kueue.snapshot
        steps.append(("workloads", lambda con: _workloads(con, snapshot, gpu_resources,
                                                          c.name)))
    if c.kueue is not None and c.kueue.pod_groups is not None:
        # the scheduler's gang objects (gpuledger/ingest/kubernetes/pod_groups.py)
        groups = c.kueue.pod_groups
        steps.append(("pod groups", lambda con: _pod_groups(con, groups, c.name)))
    s = c.slurm
    if s is not None and s.mode == "dump" and s.dump is not None:
        limits = slurm_limits(s)
        steps.append(("sacct", lambda con: slurm_ingest.import_sacct_file(
            con, s.dump, timezone=s.dump_timezone, observed_until=s.dump_as_of,
            cluster=c.name, limits=limits)))
        if s.sreport_utilization is not None and s.sreport_accounts is not None:
            steps.append(("sreport", lambda con: _sreport(con, s.sreport_utilization,
                                                          s.sreport_accounts)))
    if s is not None and s.scontrol_snapshots is not None:
        steps.append(("scontrol snapshots", lambda con: _scontrol(con, s.scontrol_snapshots)))
    if s is not None and s.mode == "dump" and s.scontrol_nodes is not None:
        steps.append(("scontrol nodes", lambda con: _slinky_pods(con, s.scontrol_nodes, c.name)))
    return steps


def _slinky_pods(con: duckdb.DuckDBPyConnection, path: Path, cluster: str) -> str:
    """The Slinky slurmd pods an `scontrol -o show node` file's Comment= names
    (slurm_node_pods; docs/accounting.md "Slurm inside Kubernetes")."""
    from connectors.slurm.scontrol_nodes import slinky_node_pods
    from gpuledger.ingest.reference import write_slinky_pods

    pods = slinky_node_pods(path.read_text(encoding="utf-8"))
    with transaction(con):
        # when the file was written: a re-load of the same file changes nothing
        written = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)
        write_slinky_pods(con, cluster, pods, written)
    return f"  {path.name}: {pods.height} Slurm node(s) named as Slinky slurmd pods"


def _live(c: ClusterSite) -> Iterable[str]:
    if c.slurm is not None and c.slurm.mode == "sacct":
        yield "slurm (sacct): gpuledger ingest slurm"
    if c.prometheus is not None and c.prometheus.url:
        yield (f"prometheus ({without_credentials(c.prometheus.url)}): "
               "gpuledger ingest kubernetes")
    if c.kueue is not None and c.kueue.snapshot is None:
        yield "kueue (API): gpuledger ingest kubernetes --kubeconfig"


def load_site_files(site: Site, db: Path, *, clusters: Iterable[str] | None = None,
                    gpu_resources: tuple[str, ...] | None = None) -> None:
    """Load the site's reference files and, per cluster (all, or those named), its file-mode
    sources into the ledger `db`, then publish it."""
    names = list(clusters) if clusters else [c.name for c in site.clusters]
    chosen = [site.cluster(n) for n in names]
    resources = gpu_resources or site.gpu_resources
    steps = [(label, None, run) for label, run in _reference_steps(site)]
    metrics = [c for c in chosen if c.prometheus is not None and c.prometheus.openmetrics]
    for c in chosen:
        many = len(site.clusters) > 1
        steps += [(label, c.name if many else None, run)
                  for label, run in _cluster_steps(c, resources)]
    total = len(steps) + len(metrics)
    for number, (label, cluster, run) in enumerate(steps, start=1):
        where = f" ({cluster})" if cluster else ""
        print(f"[{number}/{total}] loading {label}{where}", file=sys.stderr)
        with connect(db) as con:
            result = run(con)
        if isinstance(result, str):
            print(result, file=sys.stderr)
        else:
            _say(result)
    number = len(steps)
    for c in metrics:
        number += 1
        path = c.prometheus.openmetrics  # type: ignore[union-attr]
        start = datetime.combine(site.first_day, datetime.min.time())
        last = openmetrics_last_sample(path)  # type: ignore[arg-type]
        # whole UTC days, through the day of the file's last sample
        end = datetime.combine(last.date() + timedelta(days=1), datetime.min.time()) \
            if last is not None else start
        print(f"[{number}/{total}] loading Kubernetes metrics ({path.name}, {c.name}, "  # type: ignore[union-attr]
              f"{start:%Y-%m-%d} .. {end:%Y-%m-%d})", file=sys.stderr)
        ingest_kubernetes_days(  # the Workloads were loaded above (step "workloads")
            lambda: connect(db), OpenMetricsFileSource(path), start, end,  # type: ignore[arg-type]
            cluster=c.name, lookback=k8s_ingest.DEFAULT_LOOKBACK, scrape_interval=None,
            workloads=None, indent="  ", max_warnings=2, gpu_resources=resources,
            sharing=site.sharing, dra=_dra(site, c),
        )
    for c in chosen:
        for live in _live(c):
            print(f"{c.name}: live source not loaded by `load`: {live}", file=sys.stderr)
    with connect(db) as con:
        publish_snapshot(con, db)
