"""The UTC days a site accounts: from ``first_day`` to the last day its sources hold.

One function for the CLI (``python -m gpuledger.site.partitions SITEFILE``, ``gpuledger load``) and
Dagster (the daily partitions). A file source holds data up to a known day: a sacct dump up to
its ``dump_as_of`` day (exclusive: that day was not over when the dump was taken), an
OpenMetrics file up to the day of its last sample (inclusive). A live source (sacct, a
Prometheus URL) holds data up to yesterday. The site's days end with the latest of these.
"""

import gzip
import math
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from gpuledger.site import Site, SiteError

_GZIP_MAGIC = b"\x1f\x8b"


def openmetrics_last_sample(path: Path) -> datetime | None:
    """The latest sample timestamp (naive UTC) in an OpenMetrics file (plain or gzip), or None
    when it holds no sample line. Only the timestamps are read (the last field of a line)."""
    with path.open("rb") as probe:
        gz = probe.read(2) == _GZIP_MAGIC
    latest = -math.inf
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line or line[0] == "#":
                if line.startswith("# EOF"):
                    break
                continue
            if " # {" in line:  # an exemplar follows the sample
                line = line[: line.rfind(" # {")]
            parts = line.rsplit(None, 2)
            if len(parts) < 3:
                continue  # a bad line: the reader rejects it, it bounds nothing
            try:
                seconds = float(parts[-1])
            except ValueError:
                continue
            if math.isfinite(seconds) and seconds > latest:
                latest = seconds
    if latest == -math.inf:
        return None
    return datetime.fromtimestamp(latest, UTC).replace(tzinfo=None)


def data_end(site: Site, *, today: date | None = None) -> dict[str, date]:
    """Per cluster, the day after the last day its sources hold (exclusive end)."""
    today = today or datetime.now(UTC).date()
    ends: dict[str, date] = {}
    for c in site.clusters:
        found: list[date] = []
        if c.slurm is not None:
            if c.slurm.mode == "sacct":
                found.append(today)
            elif c.slurm.dump_as_of is not None:
                found.append(c.slurm.dump_as_of.date())
        if c.prometheus is not None:
            if c.prometheus.url:
                found.append(today)
            elif c.prometheus.openmetrics is not None:
                last = openmetrics_last_sample(c.prometheus.openmetrics)
                if last is not None:
                    found.append(last.date() + timedelta(days=1))
        if found:
            ends[c.name] = max(found)
    return ends


def accounted_days(site: Site, *, today: date | None = None) -> list[date]:
    """Every UTC day from ``first_day`` up to the last day of data the site's sources hold
    (yesterday for live sources); empty when first_day is after it."""
    ends = data_end(site, today=today)
    if not ends:
        msg = (f"{site.path}: expected a source that says how far its data goes (a live "
               "source, dump_as_of of a sacct dump, or an OpenMetrics file with samples), "
               f"found none in clusters {[c.name for c in site.clusters]}")
        raise SiteError(msg)
    end = max(ends.values())
    return [site.first_day + timedelta(days=n) for n in range((end - site.first_day).days)]
