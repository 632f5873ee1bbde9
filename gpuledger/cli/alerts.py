"""``gpuledger alerts run|digest``: idle-GPU alerts from the command line (docs/alerts.md).

The same library calls as the Dagster sensor and schedule (gpuledger/alerts/run.py, digest.py);
each prints what was sent, or in a dry run what would have been.
"""

import argparse
from dataclasses import replace
from datetime import UTC, datetime

from gpuledger.site.config import Settings


def _as_of(text: str | None) -> datetime:
    if not text:
        return datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        msg = f"--as-of: expected an ISO 8601 time such as 2026-01-12T09:30:00Z, found {text!r}"
        raise ValueError(msg) from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _site(settings: Settings, command: str):
    if settings.site is None:
        msg = (f"expected a site file for `alerts {command}` (--config FILE, GPULEDGER_CONFIG "
               "or ./gpuledger.toml; docs/alerts.md), found none")
        raise ValueError(msg)
    return replace(settings.site, db=settings.db)


def cmd_alerts_run(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.alerts.run import run_alerts
    site = _site(settings, "run")
    if site.alerts is None or not site.alerts.enabled:
        print("alerts: [gpuledger.alerts] enabled = false: evaluating anyway, as asked")
    report = run_alerts(site, _as_of(args.as_of), dry_run=True if args.dry_run else None)
    print(report.summary())
    return 1 if any(s.status == "failed" for s in report.sent) else 0


def cmd_alerts_digest(args: argparse.Namespace, settings: Settings) -> int:
    from gpuledger.alerts.digest import run_digest
    site = _site(settings, "digest")
    report = run_digest(site, args.week, dry_run=True if args.dry_run else None)
    print(report.summary())
    return 1 if any(s.status == "failed" for s in report.sent) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("alerts", help="idle-GPU alerts to their owners (docs/alerts.md)")
    alerts = p.add_subparsers(dest="alerts_command", required=True)
    q = alerts.add_parser("run", help="evaluate the live window now (or --as-of) and send the "
                          "warnings due")
    q.add_argument("--as-of", help="evaluate at this UTC time (ISO 8601; default: now)")
    q.add_argument("--dry-run", action="store_true",
                   help="log what would be sent and run no action; send nothing")
    q.set_defaults(handler=cmd_alerts_run)
    q = alerts.add_parser("digest", help="the weekly digest of idle GPU-hours per person")
    q.add_argument("--week", required=True, help="ISO week such as 2026-W02")
    q.add_argument("--dry-run", action="store_true", help="log what would be sent; send nothing")
    q.set_defaults(handler=cmd_alerts_digest)
