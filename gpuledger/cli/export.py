"""``gpuledger export focus``: the FOCUS 1.2 file of a billing period (docs/focus.md)."""

import argparse
import sys
from pathlib import Path

from gpuledger.export.focus import (
    FORMATS,
    check_version,
    default_path,
    export_focus,
    site_focus,
)
from gpuledger.site.config import Settings, load_settings
from models.focus import FOCUS_VERSIONS, parse_period

EXIT_OK = 0


def cmd_export_focus(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.report.location import reports_dir
    from models.runner import read_snapshot

    period = parse_period(args.period)  # a bad period fails before the ledger is opened
    version = check_version(args.version)
    if args.export_config:  # `export focus --config SITE` names the site like the global flag
        settings = load_settings(Path(args.export_config), db=args.db)
    focus = site_focus(settings.site)
    path = (Path(args.output) if args.output
            else default_path(reports_dir(settings), period, version, args.format))
    with read_snapshot(settings.db) as con:  # the published copy: the pipeline may be writing
        result = export_focus(con, period, focus=focus, out={args.format: path})
    for warning in result.rows.warnings:
        print(f"gpuledger export focus: warning: {warning}", file=sys.stderr)
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add ``export`` (``focus``) to the gpuledger command."""
    p = sub.add_parser("export", help="export the ledger for other tools")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    q = kinds.add_parser("focus", help="FOCUS 1.2 cost and usage rows of an ISO week or month "
                         "(FinOps tools; docs/focus.md)")
    q.add_argument("--period", required=True, help="ISO week YYYY-Www or month YYYY-MM (UTC)")
    q.add_argument("--version", default="1.2", choices=FOCUS_VERSIONS,
                   help="FOCUS version (default 1.2)")
    q.add_argument("--format", default="csv", choices=FORMATS, help="file format (default csv)")
    q.add_argument("--output", help="file to write (default <reports_dir>/<period>/"
                   "focus-<version>.<format>)")
    # its own dest: a subparser's default would overwrite the global --config
    q.add_argument("--config", dest="export_config", metavar="SITE",
                   help="the site file (default: the global --config, GPULEDGER_CONFIG or "
                   "./gpuledger.toml)")
    q.set_defaults(handler=cmd_export_focus)
