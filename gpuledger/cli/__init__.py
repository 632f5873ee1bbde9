"""The ``gpuledger`` console command.

Every subcommand calls the same library functions as the Dagster assets
(``gpuledger.ingest.service``).
"""

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import duckdb

from connectors.errors import SourceError
from gpuledger.cli.ingest import (
    EXIT_ERROR,
    EXIT_OK,
    cmd_import_accounts,
    cmd_import_identity,
    cmd_import_nodes,
    cmd_import_pod_groups,
    cmd_import_rate_card,
    cmd_import_reference,
    cmd_import_sacct,
    cmd_import_scontrol,
    cmd_import_workloads,
    cmd_ingest_kubernetes,
    cmd_ingest_slurm,
    cmd_load,
    cmd_load_world,
    parse_time,
)
from gpuledger.ingest import service
from gpuledger.ingest.nodenames import set_node_aliases
from gpuledger.ingest.progress import Progress
from gpuledger.site.config import Settings, load_settings
from gpuledger.site.engine import open_engine
from models import build
from models.incidents import (
    DEFAULT_IDLE_MIN_MINUTES,
    DEFAULT_IDLE_THRESHOLD,
    build_incidents,
    idle_rules_with,
)
from models.kueue_quota import build_kueue_quota
from models.migrations import MigrationFailed
from models.quality import build_data_quality
from models.runner import LedgerIncomplete, PublishFailed, connect, publish_snapshot

BUILD_CHUNK_DAYS = 7
# commands that load sources: the configured node aliases are put in the ledger first
WRITING_COMMANDS = frozenset({"import-sacct", "import-scontrol", "import-workloads",
                              "import-pod-groups",
                              "import-identity", "load", "load-world", "ingest",
                              "import-nodes", "import-reference"})



def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    with connect(settings.db) as con:
        first, last = build.data_days(con)
        if first is not None and settings.site is not None and first < settings.site.first_day:
            # the site accounts from its first_day: a job that ran into it is charged from
            # then, as Dagster's daily partitions do (one ledger either way)
            first = settings.site.first_day
        if args.start:
            first = parse_time(args.start).date()
        if args.end:
            last = parse_time(args.end).date() - timedelta(days=1)
        if first is None or last is None or last < first:
            print("gpuledger build: nothing to build (no allocations loaded)", file=sys.stderr)
            return EXIT_OK
        # and the neighbours built before: they read these days' data (docs/accounting.md)
        first, last = build.days_to_build(con, first, last)
        days = (last - first).days + 1
        print(f"building {days} day(s) {first} .. {last}", file=sys.stderr)
        build.begin_build(con, first, last)  # publishing waits until every table is rebuilt
        # a week at a time: bounded memory on a year's backfill, and a progress bar to watch
        chunks = [(a, min(a + timedelta(days=BUILD_CHUNK_DAYS - 1), last))
                  for a in (first + timedelta(days=d) for d in range(0, days, BUILD_CHUNK_DAYS))]
        progress = Progress(len(chunks), "weeks" if len(chunks) > 1 else "week")
        # [gpuledger.engine]: the heavy models on DuckDB (default) or one Spark session for all
        with open_engine(settings.site, settings.db) as engine:
            if engine.name != "duckdb":
                print(f"engine: {engine.name} ({settings.site.engine.master})",  # type: ignore
                      file=sys.stderr)
            for a, b in chunks:
                progress.start(f"build {a} .. {b}")
                rows = build.build_allocations(con, a, b)
                hourly = build.build_gpu_usage_hourly(con, a, b, engine=engine)
                provisional = build_data_quality(
                    con, a, b, settings.site.quality if settings.site is not None else None)
                lines = build.build_chargeback(con, a, b)
                quota = build_kueue_quota(con, a, b)  # Kueue quota history (docs/kubernetes.md)
                found = build_incidents(con, a, b, engine=engine, idle_rules=idle_rules_with(
                    settings.site.idle if settings.site is not None else None,
                    args.idle_threshold, args.idle_min_minutes))  # flags over the site's policies
                progress.note(f"  allocations: {rows} rows; gpu_usage_hourly: {hourly} rows; "
                              f"chargeback: {lines} lines (day, week, month); "
                              f"provisional cluster-days: {provisional}; "
                              f"kueue_quota_hourly: {quota} rows\n  {found.summary()}")
                progress.advance()
        progress.finish()
        build.finish_build(con, first, last)
        publish_snapshot(con, settings.db)
    return EXIT_OK


def cmd_close_week(args: argparse.Namespace, settings: Settings) -> int:
    from models.close_week import close_week
    from models.closing import unpublished_close
    from models.runner import snapshot_path
    from models.weeks import parse_iso_week

    with connect(settings.db) as con:
        # a close whose publish failed or was killed: the ledger has it, readers do not
        pending = None if args.reclose else unpublished_close(
            con, snapshot_path(settings.db), parse_iso_week(args.week).name)
        if pending is not None:
            publish_snapshot(con, settings.db)
            print(f"{pending.summary()}; it had not been published (its publish failed or was "
                  "killed): published now", file=sys.stderr)
            return EXIT_OK
        close = close_week(con, args.week, closed_by=args.by, reclose=args.reclose,
                           reason=args.reason or "")
        publish_snapshot(con, settings.db)
    print(close.summary(), file=sys.stderr)
    return EXIT_OK


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(service.run_sql(settings.db, args.query))
    return EXIT_OK


def cmd_report_weekly(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.export.focus import site_focus
    from gpuledger.report.location import reports_dir
    from gpuledger.report.weekly import write_weekly_report
    from models.runner import read_snapshot
    from models.weeks import parse_iso_week

    week = parse_iso_week(args.week)  # a bad week fails before the ledger is opened
    out = Path(args.out) if args.out else reports_dir(settings)
    with read_snapshot(settings.db) as con:  # the published copy: the pipeline may be writing
        report = write_weekly_report(con, week, out, focus=site_focus(settings.site))
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
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


def cmd_doctor(args: argparse.Namespace, settings: Settings | None) -> int:
    from gpuledger.doctor.run import run_doctor  # its checks import every source's client

    return run_doctor(args.site_config or args.config)


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

    p = sub.add_parser("import-pod-groups", help="load a kubectl snapshot (JSON) of the "
                       "scheduler's Workload/PodGroup objects (gang sizes)")
    p.add_argument("file", help="the file, or a folder of time-named files")
    p.add_argument("--cluster", help="the cluster the objects belong to (default: none)")
    p.set_defaults(handler=cmd_import_pod_groups)

    p = sub.add_parser("import-identity", help="load the identity map CSV")
    p.add_argument("file")
    p.set_defaults(handler=cmd_import_identity)

    p = sub.add_parser("import-nodes", help="load the GPU inventory CSV of a cluster (history "
                       "kept in node_inventory)")
    p.add_argument("file")
    p.add_argument("--cluster", help="the cluster the nodes belong to (default: the site's "
                   "first cluster)")
    p.set_defaults(handler=cmd_import_nodes)

    p = sub.add_parser("import-accounts", help="load the Slurm account tree CSV "
                       "(account,parent)")
    p.add_argument("file")
    p.set_defaults(handler=cmd_import_accounts)

    p = sub.add_parser("import-rate-card", help="load the rate card CSV")
    p.add_argument("file")
    p.set_defaults(handler=cmd_import_rate_card)

    p = sub.add_parser("import-reference", help="read nodes, accounts and namespace owners "
                       "from the site's sources (scontrol, sacctmgr, kube-state-metrics), "
                       "then the reference files as overrides")
    p.add_argument("--cluster", help="this cluster's sources only (default: every cluster)")
    p.set_defaults(handler=cmd_import_reference)

    p = sub.add_parser("load", help="load the site file's reference files and file-mode "
                       "sources (docs/site-file.md)")
    p.add_argument("--cluster", help="load this cluster's sources only (default: every cluster)")
    p.set_defaults(handler=cmd_load)

    p = sub.add_parser("load-world", help="deprecated: load --config DIR/gpuledger.toml")
    p.add_argument("world", help="folder holding a site file gpuledger.toml (such as one "
                   "written by `python -m simulator`)")
    p.set_defaults(handler=cmd_load_world)

    p = sub.add_parser("ingest", help="pull from a live source")
    ingest = p.add_subparsers(dest="source", required=True, metavar="SOURCE")
    q = ingest.add_parser("slurm", help="run sacct/sreport for a window")
    q.add_argument("--start", required=True, help="UTC date or time")
    q.add_argument("--end", required=True, help="UTC date or time (exclusive)")
    q.add_argument("--cluster", help="the site cluster to ingest (default: every cluster with "
                   "[slurm] mode = \"sacct\")")
    q.add_argument("--lookback-hours", type=float,
                   help="re-pull jobs that started this long before each day (default: the "
                   "site's lookback_hours, else 48)")
    q.add_argument("--timeout", type=float, help="seconds per sacct call (default: the site's "
                   "timeout_s, else 300)")
    q.add_argument("--no-sreport", action="store_true", help="skip the sreport figures")
    q.set_defaults(handler=cmd_ingest_slurm)
    q = ingest.add_parser("kubernetes", help="read Prometheus for a window")
    q.add_argument("--prometheus-url", help="Prometheus-compatible HTTP API (default: settings "
                   "prometheus_url / GPULEDGER_PROMETHEUS_URL)")
    q.add_argument("--openmetrics", metavar="FILE", help="read an OpenMetrics backfill file "
                   "instead of a server (the fixture twin)")
    q.add_argument("--start", required=True, help="UTC date or time")
    q.add_argument("--end", required=True, help="UTC date or time (exclusive)")
    q.add_argument("--cluster", help="the site cluster to ingest (default: every cluster with "
                   "[prometheus]); with --prometheus-url/--openmetrics, the cluster name to "
                   "file the data under (default: the inventory's only cluster, else 'default')")
    q.add_argument("--kubeconfig", metavar="FILE", help="fetch Kueue Workloads from the API "
                   "with kubectl and this kubeconfig (kept under <db folder>/snapshots/)")
    q.add_argument("--kube-context", help="kubeconfig context to use with --kubeconfig")
    q.add_argument("--workloads", metavar="FILE", help="also load a kubectl Workload snapshot "
                   "(kubectl get workloads.kueue.x-k8s.io -A -o json)")
    q.add_argument("--resource-claims", metavar="FILE", help="DRA ResourceClaims: a kubectl "
                   "get resourceclaims[,pods] -A -o json file, or a folder of time-named ones "
                   "(default: the cluster's [dra] table; docs/kubernetes.md \"DRA\")")
    q.add_argument("--lookback-minutes", type=float,
                   help="samples read before each day (Kueue counter baselines, at least two "
                   "scrape intervals; default: the site's lookback_minutes, else 60)")
    q.add_argument("--scrape-interval", type=float, metavar="SECONDS",
                   help="kube-state-metrics scrape interval (default: inferred from the data)")
    q.add_argument("--bearer-token-file", help="file holding a bearer token (re-read per request)")
    q.add_argument("--basic-auth-user")
    q.add_argument("--basic-auth-password-file")
    q.add_argument("--ca-bundle", help="PEM file to verify the server's certificate")
    q.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    q.add_argument("--header", action="append", metavar="'NAME: VALUE'",
                   help="extra HTTP header (repeatable), e.g. 'X-Scope-OrgID: tenant1'")
    # defaults below are the site file's values, else PrometheusConfig's: flags override both
    q.add_argument("--timeout", type=float, help="total seconds per request, "
                   "connect and whole answer (default 120)")
    q.add_argument("--connect-timeout", type=float, help="seconds to connect (default 10)")
    q.add_argument("--window-budget", type=float, metavar="SECONDS",
                   help="wall-clock budget of one day's reads with their retries (default 1800)")
    q.add_argument("--retries", type=int, help="retries per request (default 3)")
    q.add_argument("--chunk-hours", type=float,
                   help="longest raw-sample window per request (default 6; site: 24)")
    q.set_defaults(handler=cmd_ingest_kubernetes)

    p = sub.add_parser("build", help="build the accounting model and the detectors")
    p.add_argument("--start", help="first UTC day (default: the first day with data)")
    p.add_argument("--end", help="UTC day after the last one (default: after the last data)")
    p.add_argument("--idle-threshold", type=float,
                   help="busy fraction below which a held GPU is idle, for every allocation "
                   "(default: the site's [gpuledger.idle] policies, else "
                   f"{DEFAULT_IDLE_THRESHOLD})")
    p.add_argument("--idle-min-minutes", type=float,
                   help="shortest idle period reported as an incident, for every allocation "
                   "(default: the site's [gpuledger.idle] policies, else "
                   f"{DEFAULT_IDLE_MIN_MINUTES})")
    p.set_defaults(handler=cmd_build)

    p = sub.add_parser("close-week", help="freeze an ISO week's invoice lines (late data then "
                       "lands as adjustments in the next open week)")
    p.add_argument("week", help="ISO week, YYYY-Www (it must have ended)")
    p.add_argument("--reclose", action="store_true",
                   help="replace a closed week's frozen lines with the ledger's (recorded)")
    p.add_argument("--reason", help="why (required with --reclose)")
    p.add_argument("--by", help="who closes (default: the OS user@host)")
    p.set_defaults(handler=cmd_close_week)

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

    p = sub.add_parser("doctor", help="check a site file end to end: sources, metrics, clocks, "
                       "reference files; one OK/WARN/FAIL line per check (exit 1 on a FAIL)")
    # its own dest: a subparser's default would overwrite the global --config
    p.add_argument("--config", dest="site_config", metavar="FILE",
                   help="the site file (default: the global --config, GPULEDGER_CONFIG or "
                   "./gpuledger.toml)")
    p.set_defaults(handler=cmd_doctor)
    from gpuledger.cli import alerts as cli_alerts  # alerts run|digest (docs/alerts.md)
    cli_alerts.register(sub)
    from gpuledger.cli import export as cli_export  # `export focus` (docs/focus.md)
    cli_export.register(sub)
    from gpuledger.cli import backup as cli_backup  # backup / restore (docs/storage.md)
    cli_backup.register(sub)
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
    if args.command == "doctor":  # it reports a broken site file itself, as its first check
        return args.handler(args, None)
    try:
        settings = load_settings(Path(args.config) if args.config else None, db=args.db)
        if settings.node_aliases and args.command in WRITING_COMMANDS:
            with connect(settings.db) as con:
                set_node_aliases(con, settings.node_aliases)
        return args.handler(args, settings)
    except (SourceError, FileNotFoundError, ValueError, LedgerIncomplete, PublishFailed,
            MigrationFailed) as exc:
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
