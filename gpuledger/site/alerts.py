"""``[gpuledger.alerts]``: idle-GPU alerts to their owners (docs/alerts.md).

Read with the site file's own table reader, so every problem names the file and the key,
"expected …, found …". The delivery sub-tables (``[gpuledger.alerts.smtp]``,
``[[gpuledger.alerts.webhook]]``) are parsed by ``gpuledger.alerts.delivery_config``.
"""

from dataclasses import dataclass, field
from datetime import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpuledger.site.table import SiteError

PLACEHOLDERS = {
    "slurm": ("cluster", "job_id", "node", "user", "account"),
    "kubernetes": ("cluster", "namespace", "pod", "pod_uid", "node"),
}
DELIVERY_KEYS = ("smtp", "webhook")


@dataclass(frozen=True)
class ActionSite:
    """``[gpuledger.alerts.action]``: a command run once per idle incident (off by default)."""

    enabled: bool = False
    after_minutes: float = 120.0
    timeout_s: float = 60.0
    # argv templates ({job_id}, {namespace}, {pod}, …: PLACEHOLDERS); never run through a shell
    slurm_command: tuple[str, ...] = ()
    kubernetes_command: tuple[str, ...] = ()

    def command(self, domain: str) -> tuple[str, ...]:
        return self.slurm_command if domain == "slurm" else self.kubernetes_command


@dataclass(frozen=True)
class AlertsSite:
    enabled: bool = False
    dry_run: bool = False
    every_minutes: float = 15.0
    lookback_minutes: float = 180.0
    first_warning_minutes: float = 60.0
    second_warning_minutes: float = 105.0
    # a sample is idle when its busy fraction (0..1) <= idle_threshold: 0 means exactly 0 %
    idle_threshold: float = 0.0
    include_low_efficiency: bool = False
    low_efficiency_threshold: float = 0.10  # busy fraction <= this (and above idle): low
    low_efficiency_minutes: float = 240.0
    # the newest sample must be at most this old at as_of; 0: two scrape intervals
    max_sample_age_minutes: float = 0.0
    quiet_hours: tuple[time, time] | None = None
    timezone: str = "UTC"
    admins: tuple[str, ...] = ()
    dashboard_url: str = ""
    contacts: Path | None = None
    digest_enabled: bool = True
    digest_min_gpu_hours: float = 10.0
    digest_schedule: str = "0 8 * * 1"  # cron, in `timezone`
    action: ActionSite = field(default_factory=ActionSite)
    delivery: Any = None  # gpuledger.alerts.delivery_config.DeliverySettings


def _quiet_hours(t: Any, key: str) -> tuple[time, time] | None:
    value = t.text(key)
    if not value:
        return None
    what = "a range of local times such as \"22:00-07:00\""
    parts = value.replace(" ", "").split("-")
    if len(parts) != 2:
        t.fail(key, what, value)
    try:
        start, end = (time.fromisoformat(p) for p in parts)
    except ValueError:
        t.fail(key, what, value)
    if start == end:
        t.fail(key, "a range whose start and end differ", value)
    return start, end


def _argv(t: Any, key: str, domain: str) -> tuple[str, ...]:
    value = t.get(key, list, [], "a list of strings (the command and its arguments)")
    if not all(isinstance(v, str) and v for v in value):
        t.fail(key, "a list of non-empty strings (the command and its arguments)", value)
    allowed = PLACEHOLDERS[domain]
    for part in value:
        try:
            part.format(**dict.fromkeys(allowed, "x"))
        except (KeyError, IndexError, ValueError):
            t.fail(key, f"placeholders among {['{' + a + '}' for a in allowed]}", part)
    return tuple(value)


def _action(t: Any | None) -> ActionSite:
    if t is None:
        return ActionSite()
    site = ActionSite(
        enabled=t.flag("enabled", False),
        after_minutes=t.number("after_minutes", 120.0, minimum=1.0),
        timeout_s=t.number("timeout_s", 60.0, minimum=1.0),
        slurm_command=_argv(t, "slurm_command", "slurm"),
        kubernetes_command=_argv(t, "kubernetes_command", "kubernetes"),
    )
    if site.enabled and not (site.slurm_command or site.kubernetes_command):
        t.fail("slurm_command", "slurm_command or kubernetes_command when enabled = true", None)
    t.done()
    return site


def parse_alerts(t: Any | None, *, schedule_timezone: str = "UTC") -> AlertsSite:
    """``[gpuledger.alerts]`` (a ``gpuledger.site.table.SiteTable`` or None) -> ``AlertsSite``."""
    if t is None:
        return AlertsSite(timezone=schedule_timezone)
    first = t.number("first_warning_minutes", 60.0, minimum=1.0)
    second = t.number("second_warning_minutes", 105.0, minimum=1.0)
    if second <= first:
        t.fail("second_warning_minutes", f"more than first_warning_minutes ({first:g})", second)
    shares = {k: t.number(k, d) for k, d in
              (("idle_threshold", 0.0), ("low_efficiency_threshold", 0.10))}
    for key, value in shares.items():
        if value >= 1:
            t.fail(key, "a busy fraction below 1 (0.05 is 5 %)", value)
    if shares["low_efficiency_threshold"] <= shares["idle_threshold"]:
        t.fail("low_efficiency_threshold", f"more than idle_threshold "
               f"({shares['idle_threshold']:g})", shares["low_efficiency_threshold"])
    zone = t.text("timezone", schedule_timezone) or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        t.fail("timezone", "an IANA time zone such as Europe/Berlin", zone)
    admins = t.get("admins", list, [], "a list of e-mail addresses")
    if not all(isinstance(a, str) and "@" in a for a in admins):
        t.fail("admins", "a list of e-mail addresses", admins)
    url = t.text("dashboard_url").rstrip("/")
    if url and not url.startswith(("http://", "https://")):
        t.fail("dashboard_url", "an http:// or https:// URL", url)
    cron = t.text("digest_schedule", "0 8 * * 1")
    if len(cron.split()) != 5:
        t.fail("digest_schedule", "a cron expression of five fields", cron)
    site = AlertsSite(
        enabled=t.flag("enabled", False), dry_run=t.flag("dry_run", False),
        every_minutes=t.number("every_minutes", 15.0, minimum=1.0),
        lookback_minutes=t.number("lookback_minutes", 180.0, minimum=10.0),
        first_warning_minutes=first, second_warning_minutes=second,
        idle_threshold=shares["idle_threshold"],
        include_low_efficiency=t.flag("include_low_efficiency", False),
        low_efficiency_threshold=shares["low_efficiency_threshold"],
        low_efficiency_minutes=t.number("low_efficiency_minutes", 240.0, minimum=1.0),
        max_sample_age_minutes=t.number("max_sample_age_minutes", 0.0),
        quiet_hours=_quiet_hours(t, "quiet_hours"), timezone=zone,
        admins=tuple(dict.fromkeys(admins)), dashboard_url=url, contacts=t.file("contacts"),
        digest_enabled=t.flag("digest_enabled", True),
        digest_min_gpu_hours=t.number("digest_min_gpu_hours", 10.0),
        digest_schedule=cron,
        action=_action(t.sub("action")),
    )
    if site.lookback_minutes < site.second_warning_minutes:
        t.fail("lookback_minutes", f"at least second_warning_minutes "
               f"({site.second_warning_minutes:g}): a streak must fit in the window",
               site.lookback_minutes)
    if site.action.enabled and site.lookback_minutes < site.action.after_minutes:
        t.fail("lookback_minutes", f"at least action.after_minutes "
               f"({site.action.after_minutes:g})", site.lookback_minutes)
    t.seen.update(DELIVERY_KEYS)
    delivery = None
    if any(k in t.data for k in DELIVERY_KEYS):
        from gpuledger.alerts.delivery_config import parse_delivery
        try:
            delivery = parse_delivery(t.data, where=str(t.path), base_dir=t.path.parent)
        except SiteError:
            raise
        except ValueError as exc:
            msg = f"{t.path}: [{t.where}]: {exc}"
            raise SiteError(msg) from None
    from dataclasses import replace
    site = replace(site, delivery=delivery)
    t.done()
    return site
