"""The ``gpuledger`` console command.

Every subcommand calls the same library functions as the Dagster assets (``gpuledger.service``).
"""

import argparse
import functools
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from connectors.errors import SourceError
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import MetricsSource, PrometheusConfig, PrometheusHttpSource
from connectors.kubernetes.workload_api import fetch_workload_snapshot
from connectors.slurm.commands import CommandRunner
from gpuledger import k8s_ingest, scontrol_ingest, service, slurm_ingest
from gpuledger.config import DEFAULT_GPU_RESOURCES, Settings, load_settings
from gpuledger.nodenames import set_node_aliases
from gpuledger.progress import Progress
from gpuledger.simulate.cli_args import add_arguments as add_simulate_arguments
from gpuledger.simulate.cli_args import run_from_args as run_simulation
from models import build
from models.incidents import DEFAULT_IDLE_MIN_MINUTES, DEFAULT_IDLE_THRESHOLD, build_incidents
from models.runner import LedgerIncomplete, PublishFailed, connect, publish_snapshot

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
BUILD_CHUNK_DAYS = 7
# commands that load sources: the configured node aliases are put in the ledger first
WRITING_COMMANDS = frozenset({"import-sacct", "import-scontrol", "import-workloads",
                              "import-identity", "load-world", "ingest"})



def _report(result: service.LoadResult) -> int:
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def _with_ledger(
    settings: Settings, load: Callable[..., service.LoadResult], *args: object
) -> int:
    with connect(settings.db) as con:
        result = load(con, *args)
        publish_snapshot(con, settings.db)
    return _report(result)


def cmd_import_identity(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, service.import_identity_map, Path(args.file))


def cmd_import_workloads(args: argparse.Namespace, settings: Settings) -> int:
    return _with_ledger(settings, _load_workloads(settings), Path(args.file))


def _load_workloads(settings: Settings) -> Callable[..., service.LoadResult]:
    """The one Workload import (kueue_workloads_raw and kueue_workloads, one transaction) with
    the configured GPU resource names; every command that loads Workloads goes through it."""
    return functools.partial(service.import_workloads, gpu_resources=settings.gpu_resources)


def cmd_load_world(args: argparse.Namespace, settings: Settings) -> int:
    world_dir = Path(args.world)
    world = service.read_world(world_dir)
    cluster = str(world.get("cluster", "default"))
    steps: list[tuple[str, Callable[..., service.LoadResult], tuple[object, ...]]] = [
        ("nodes", service.import_nodes, (world_dir / "nodes.csv", cluster)),
        ("identity map", service.import_identity_map, (world_dir / "identity_map.csv",)),
        ("accounts", service.import_accounts, (world_dir / "accounts.csv",)),
        ("rate card", service.import_rate_card, (world_dir / "rate_card.csv",)),
        ("workloads", _load_workloads(settings), (world_dir / "kueue" / "workloads.json",)),
    ]
    sacct = world_dir / "sacct" / "sacct-unitsep-epoch.txt"
    metrics = _world_metrics(world_dir) if "window" in world else None
    total = len(steps) + (1 if sacct.exists() else 0) + (1 if metrics is not None else 0)
    with connect(settings.db) as con:
        for number, (label, load, load_args) in enumerate(steps, start=1):
            print(f"[{number}/{total}] loading {label}", file=sys.stderr)
            _report(load(con, *load_args))
        number = len(steps)
        if sacct.exists():
            number += 1
            print(f"[{number}/{total}] loading sacct", file=sys.stderr)
            end = _parse_time(str(world["window"]["end"])) if "window" in world else None
            result = slurm_ingest.import_sacct_file(
                con, sacct, observed_until=end, limits=slurm_ingest.configured_limits(settings))
            print(result.summary(), file=sys.stderr)
            util = world_dir / "sreport" / "cluster-utilization.txt"
            accounts = world_dir / "sreport" / "account-utilization-by-user.txt"
            if util.exists() and accounts.exists():
                rows = slurm_ingest.store_sreport(
                    con, util.read_text(encoding="utf-8"),
                    accounts.read_text(encoding="utf-8"), source=str(util.parent))
                print(f"sreport: {rows[0]} utilization rows, {rows[1]} account rows",
                      file=sys.stderr)
        # `scontrol show job -d` snapshots, where a site collected them (docs/slurm.md)
        for snapshot in sorted((world_dir / "slurm").glob("scontrol-*.txt")):
            print(scontrol_ingest.import_scontrol_file(con, snapshot).summary(), file=sys.stderr)
        if metrics is not None:
            number += 1
            print(f"[{number}/{total}] loading Kubernetes metrics ({metrics.name})",
                  file=sys.stderr)
            _ingest_kubernetes_days(  # the Workloads were loaded above (step "workloads")
                con, OpenMetricsFileSource(metrics), _parse_time(str(world["window"]["start"])),
                _parse_time(str(world["window"]["end"])), cluster=cluster,
                lookback=k8s_ingest.DEFAULT_LOOKBACK, scrape_interval=None,
                workloads=None, indent="  ", max_warnings=2,
            )
        publish_snapshot(con, settings.db)
    return EXIT_OK


def _world_metrics(world_dir: Path) -> Path | None:
    for name in ("metrics.om", "metrics.om.gz"):
        path = world_dir / "prometheus" / name
        if path.is_file():
            return path
    return None


def _ingest_kubernetes_days(
    ledger: duckdb.DuckDBPyConnection | Callable[[], AbstractContextManager],
    source: MetricsSource, start: datetime, end: datetime, *,
    cluster: str, lookback: timedelta, scrape_interval: timedelta | None,
    workloads: Path | None, indent: str = "", max_warnings: int = 8,
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
) -> None:
    """Ingest ``[start, end)`` day by day (progress lines on stderr), then the Workloads.

    `ledger` is an open connection, or a function opening one: then each day is read from the
    source with the ledger closed and written in a short transaction (one writer at a time: a
    slow Prometheus never holds the ledger's lock).
    """
    def opened() -> AbstractContextManager:
        return nullcontext(ledger) if isinstance(ledger, duckdb.DuckDBPyConnection) else ledger()

    days = k8s_ingest.daily_windows(start, end)
    progress = Progress(len(days))
    for day_start, day_end in days:
        progress.start(f"{indent}prometheus {day_start:%Y-%m-%d}")
        read = k8s_ingest.read_kubernetes_window(
            source, day_start, day_end, lookback=lookback, scrape_interval=scrape_interval,
            gpu_resources=gpu_resources,
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


def _parse_time(text: str) -> datetime:
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
            observed_until=_parse_time(args.as_of) if args.as_of else None,
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
            observed_at=_parse_time(args.observed_at) if args.observed_at else None,
        )
        publish_snapshot(con, settings.db)
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_ingest_slurm(args: argparse.Namespace, settings: Settings) -> int:
    runner = CommandRunner.from_prefix(settings.sacct_prefix, timeout_s=args.timeout)
    start, end = _parse_time(args.start), _parse_time(args.end)
    days = slurm_ingest.daily_windows(start, end)
    limits = slurm_ingest.configured_limits(settings)
    with connect(settings.db) as con:
        progress = Progress(len(days))
        for day_start, day_end in days:
            progress.start(f"sacct {day_start:%Y-%m-%d}")
            result = slurm_ingest.ingest_slurm_window(
                con, runner, day_start, day_end, lookback=timedelta(hours=args.lookback_hours),
                limits=limits,
            )
            progress.note("  " + result.summary().replace("\n", "\n  "))
            if not args.no_sreport:
                util, accounts = slurm_ingest.ingest_sreport(con, runner, day_start, day_end)
                progress.note(f"  sreport: {util} utilization rows, {accounts} account rows")
            progress.advance()
        progress.finish()
        publish_snapshot(con, settings.db)
    return EXIT_OK


def _prometheus_config(args: argparse.Namespace, settings: Settings) -> PrometheusConfig:
    """Flags over the config file's ``prometheus_*`` keys (``[gpuledger]`` table)."""
    extra = settings.extra

    def pick(flag: object, key: str) -> object:
        return flag if flag not in (None, "", []) else extra.get(key)

    def path(value: object) -> Path | None:
        return Path(str(value)) if value else None

    url = args.prometheus_url or settings.prometheus_url
    if not url:
        msg = "expected --prometheus-url (or prometheus_url / GPULEDGER_PROMETHEUS_URL)"
        raise ValueError(msg)
    headers: dict[str, str] = {str(k): str(v) for k, v in
                               dict(extra.get("prometheus_headers") or {}).items()}
    for text in args.header or []:
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            msg = f"expected --header 'Name: value', found {text!r}"
            raise ValueError(msg)
        headers[name.strip()] = value.strip()
    return PrometheusConfig(
        url=url,
        bearer_token_file=path(pick(args.bearer_token_file, "prometheus_bearer_token_file")),
        basic_auth_user=pick(args.basic_auth_user, "prometheus_basic_auth_user") or None,
        basic_auth_password_file=path(pick(args.basic_auth_password_file,
                                           "prometheus_basic_auth_password_file")),
        ca_bundle=path(pick(args.ca_bundle, "prometheus_ca_bundle")),
        verify_tls=not (args.insecure or bool(extra.get("prometheus_insecure", False))),
        headers=headers,
        timeout_s=args.timeout,
        connect_timeout_s=args.connect_timeout,
        window_budget_s=args.window_budget,
        retries=args.retries,
        chunk=timedelta(hours=args.chunk_hours),
    )


def cmd_ingest_kubernetes(args: argparse.Namespace, settings: Settings) -> int:
    start, end = _parse_time(args.start), _parse_time(args.end)
    if args.openmetrics:
        source: MetricsSource = OpenMetricsFileSource(Path(args.openmetrics))
    else:
        source = PrometheusHttpSource(_prometheus_config(args, settings))
    interval = timedelta(seconds=args.scrape_interval) if args.scrape_interval else None
    cluster = args.cluster or str(settings.extra.get("cluster") or "")
    if not cluster:
        with connect(settings.db) as con:
            cluster = k8s_ingest.default_cluster(con)
    _ingest_kubernetes_days(
        lambda: connect(settings.db), source, start, end, cluster=cluster,
        lookback=timedelta(minutes=args.lookback_minutes), scrape_interval=interval,
        workloads=_workload_snapshot(args, settings), gpu_resources=settings.gpu_resources,
    )
    with connect(settings.db) as con:
        publish_snapshot(con, settings.db)
    return EXIT_OK


def _workload_snapshot(args: argparse.Namespace, settings: Settings) -> Path | None:
    """The Workload snapshot to load: a given file, or one fetched now through a kubeconfig."""
    if args.workloads:
        return Path(args.workloads)
    kubeconfig = args.kubeconfig or settings.extra.get("kubeconfig")
    if not kubeconfig:
        return None
    dest = settings.db.parent / "snapshots"
    path = fetch_workload_snapshot(Path(str(kubeconfig)), dest, context=args.kube_context)
    print(f"fetched Kueue Workloads from the API into {path}", file=sys.stderr)
    return path


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    with connect(settings.db) as con:
        first, last = build.data_days(con)
        if args.start:
            first = _parse_time(args.start).date()
        if args.end:
            last = _parse_time(args.end).date() - timedelta(days=1)
        if first is None or last is None or last < first:
            print("gpuledger build: nothing to build (no allocations loaded)", file=sys.stderr)
            return EXIT_OK
        days = (last - first).days + 1
        print(f"building {days} day(s) {first} .. {last}", file=sys.stderr)
        build.begin_build(con, first, last)  # publishing waits until every table is rebuilt
        # a week at a time: bounded memory on a year's backfill, and a progress bar to watch
        chunks = [(a, min(a + timedelta(days=BUILD_CHUNK_DAYS - 1), last))
                  for a in (first + timedelta(days=d) for d in range(0, days, BUILD_CHUNK_DAYS))]
        progress = Progress(len(chunks), "weeks" if len(chunks) > 1 else "week")
        for a, b in chunks:
            progress.start(f"build {a} .. {b}")
            rows = build.build_allocations(con, a, b)
            hourly = build.build_gpu_usage_hourly(con, a, b)
            lines = build.build_chargeback(con, a, b)
            found = build_incidents(con, a, b, idle_threshold=args.idle_threshold,
                                    idle_min_minutes=args.idle_min_minutes)
            progress.note(f"  allocations: {rows} rows; gpu_usage_hourly: {hourly} rows; "
                          f"chargeback: {lines} lines (day, week, month)\n  {found.summary()}")
            progress.advance()
        progress.finish()
        build.finish_build(con, first, last)
        publish_snapshot(con, settings.db)
    return EXIT_OK


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(service.run_sql(settings.db, args.query))
    return EXIT_OK


def cmd_report_weekly(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.report import parse_iso_week, write_weekly_report
    from gpuledger.report.location import reports_dir
    from models.runner import read_snapshot

    week = parse_iso_week(args.week)  # a bad week fails before the ledger is opened
    out = Path(args.out) if args.out else reports_dir(settings)
    with read_snapshot(settings.db) as con:  # the published copy: the pipeline may be writing
        report = write_weekly_report(con, week, out)
    print(report.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    app = Path(__file__).resolve().parent.parent / "dashboards" / "app.py"
    env = {**os.environ, "GPULEDGER_DB": str(settings.db.resolve())}
    command = [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.port", str(args.port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
    ]
    print(f"gpuledger dashboard: http://localhost:{args.port}", file=sys.stderr)
    return subprocess.call(command, env=env)


def cmd_simulate(args: argparse.Namespace, settings: Settings) -> int:
    return run_simulation(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuledger",
        description="GPU-hour accounting across Slurm and Kubernetes/Kueue.",
    )
    parser.add_argument("--db", help="DuckDB ledger file (env GPULEDGER_DB; "
                        "default data/gpuledger.duckdb)")
    parser.add_argument("--config", help="TOML config file (env GPULEDGER_CONFIG; "
                        "default gpuledger.toml when present)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="write a simulated hybrid cluster with ground truth")
    add_simulate_arguments(p)
    p.set_defaults(handler=cmd_simulate)

    p = sub.add_parser("import-sacct", help="load a sacct dump file")
    p.add_argument("file")
    p.add_argument("--delimiter")
    p.add_argument("--timezone", default="UTC",
                   help="IANA zone sacct printed naive times in (default UTC)")
    p.add_argument("--as-of", help="when the dump was taken: runs still going are charged up "
                   "to here (default: the latest time in the dump)")
    p.add_argument("--cluster", help="the cluster of a dump without a Cluster field (default: "
                   "cluster in gpuledger.toml); with one, rows of another cluster are rejected")
    p.set_defaults(handler=cmd_import_sacct)

    p = sub.add_parser("import-scontrol", help="load an `scontrol show job -d` snapshot: the "
                       "GPU indices Slurm gave each job")
    p.add_argument("file")
    p.add_argument("--timezone", default="UTC",
                   help="IANA zone scontrol printed naive times in (default UTC; epoch times "
                   "need none)")
    p.add_argument("--observed-at", help="when the snapshot was taken (default: read from it, "
                   "StartTime + RunTime of its running jobs)")
    p.set_defaults(handler=cmd_import_scontrol)

    p = sub.add_parser("import-workloads", help="load a kubectl Workload snapshot (JSON)")
    p.add_argument("file")
    p.set_defaults(handler=cmd_import_workloads)

    p = sub.add_parser("import-identity", help="load the identity map CSV")
    p.add_argument("file")
    p.set_defaults(handler=cmd_import_identity)

    p = sub.add_parser("load-world", help="load a simulated world's reference files and raw inputs")
    p.add_argument("world", help="folder written by `gpuledger simulate`")
    p.set_defaults(handler=cmd_load_world)

    p = sub.add_parser("ingest", help="pull from a live source")
    ingest = p.add_subparsers(dest="source", required=True, metavar="SOURCE")
    q = ingest.add_parser("slurm", help="run sacct/sreport for a window")
    q.add_argument("--start", required=True, help="UTC date or time")
    q.add_argument("--end", required=True, help="UTC date or time (exclusive)")
    q.add_argument("--lookback-hours", type=float, default=48.0,
                   help="re-pull jobs that started this long before each day (default 48)")
    q.add_argument("--timeout", type=float, default=300.0, help="seconds per sacct call")
    q.add_argument("--no-sreport", action="store_true", help="skip the sreport figures")
    q.set_defaults(handler=cmd_ingest_slurm)
    q = ingest.add_parser("kubernetes", help="read Prometheus for a window")
    q.add_argument("--prometheus-url", help="Prometheus-compatible HTTP API (default: settings "
                   "prometheus_url / GPULEDGER_PROMETHEUS_URL)")
    q.add_argument("--openmetrics", metavar="FILE", help="read an OpenMetrics backfill file "
                   "instead of a server (the fixture twin)")
    q.add_argument("--start", required=True, help="UTC date or time")
    q.add_argument("--end", required=True, help="UTC date or time (exclusive)")
    q.add_argument("--cluster", help="cluster name to file the data under (default: the "
                   "inventory's only cluster, else 'default')")
    q.add_argument("--kubeconfig", metavar="FILE", help="fetch Kueue Workloads from the API "
                   "with kubectl and this kubeconfig (kept under <db folder>/snapshots/)")
    q.add_argument("--kube-context", help="kubeconfig context to use with --kubeconfig")
    q.add_argument("--workloads", metavar="FILE", help="also load a kubectl Workload snapshot "
                   "(kubectl get workloads.kueue.x-k8s.io -A -o json)")
    q.add_argument("--lookback-minutes", type=float, default=60.0,
                   help="samples read before each day (Kueue counter baselines, at least two "
                   "scrape intervals; default 60)")
    q.add_argument("--scrape-interval", type=float, metavar="SECONDS",
                   help="kube-state-metrics scrape interval (default: inferred from the data)")
    q.add_argument("--bearer-token-file", help="file holding a bearer token (re-read per request)")
    q.add_argument("--basic-auth-user")
    q.add_argument("--basic-auth-password-file")
    q.add_argument("--ca-bundle", help="PEM file to verify the server's certificate")
    q.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    q.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                   help="extra HTTP header (repeatable), e.g. 'X-Scope-OrgID: tenant1'")
    q.add_argument("--timeout", type=float, default=120.0, help="total seconds per request, "
                   "connect and whole answer (default 120)")
    q.add_argument("--connect-timeout", type=float, default=10.0,
                   help="seconds to connect (default 10)")
    q.add_argument("--window-budget", type=float, default=1800.0, metavar="SECONDS",
                   help="wall-clock budget of one day's reads with their retries (default 1800)")
    q.add_argument("--retries", type=int, default=3, help="retries per request (default 3)")
    q.add_argument("--chunk-hours", type=float, default=6.0,
                   help="raw-sample window per request (default 6)")
    q.set_defaults(handler=cmd_ingest_kubernetes)

    p = sub.add_parser("build", help="build the accounting model and the detectors")
    p.add_argument("--start", help="first UTC day (default: the first day with data)")
    p.add_argument("--end", help="UTC day after the last one (default: after the last data)")
    p.add_argument("--idle-threshold", type=float, default=DEFAULT_IDLE_THRESHOLD,
                   help="busy fraction below which a held GPU is idle (default "
                   f"{DEFAULT_IDLE_THRESHOLD})")
    p.add_argument("--idle-min-minutes", type=float, default=DEFAULT_IDLE_MIN_MINUTES,
                   help="shortest idle period reported as an incident (default "
                   f"{DEFAULT_IDLE_MIN_MINUTES})")
    p.set_defaults(handler=cmd_build)

    p = sub.add_parser("sql", help="run a read-only SQL query; CSV with a header on stdout")
    p.add_argument("query")
    p.set_defaults(handler=cmd_sql)

    p = sub.add_parser("report", help="write reports")
    report = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    q = report.add_parser("weekly", help="the weekly chargeback report")
    q.add_argument("--week", required=True, help="ISO week, YYYY-Www")
    q.add_argument("--out", help="folder that gets <YYYY-Www>/ (env GPULEDGER_REPORTS; "
                   "default: the reports_dir setting, reports)")
    q.set_defaults(handler=cmd_report_weekly)

    p = sub.add_parser("dashboard", help="serve the Streamlit dashboards")
    p.add_argument("--port", type=int, default=8501)
    p.set_defaults(handler=cmd_dashboard)
    return parser


def ledger_error(exc: duckdb.Error, args: argparse.Namespace, settings: Settings | None) -> str:
    """One line a person can act on for a DuckDB failure (lock conflict, full disk, …)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "lock" in text.lower() and "conflicting lock" in str(exc).lower():
        db = settings.db if settings is not None else args.db
        holder = str(exc).split("(PID", 1)[-1].split(")", 1)[0].strip() if "(PID" in str(exc) \
            else "unknown"
        return (f"another process holds the ledger {db} for writing (pid {holder}); "
                "one writer at a time: wait for it to finish, or stop it")
    if "No space left" in str(exc):
        return f"the disk is full: {text}; nothing of this command was committed"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings: Settings | None = None
    try:
        settings = load_settings(Path(args.config) if args.config else None, db=args.db)
        if settings.node_aliases and args.command in WRITING_COMMANDS:
            with connect(settings.db) as con:
                set_node_aliases(con, settings.node_aliases)
        return args.handler(args, settings)
    except (SourceError, FileNotFoundError, ValueError, LedgerIncomplete, PublishFailed) as exc:
        print(f"gpuledger {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except duckdb.Error as exc:
        print(f"gpuledger {args.command}: error: {ledger_error(exc, args, settings)}",
              file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"gpuledger {args.command}: error: {exc.strerror or exc} "
              f"({exc.filename or 'no file named'})", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
