"""Time and host-list formatting exactly as the real tools print them."""

from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from simulator.config import DAY


@lru_cache(maxsize=65_536)
def iso_utc(ts: int) -> str:
    """``2026-01-05T08:00:00``: the naive-UTC form used in the truth files."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def iso_z(ts: int) -> str:
    """``2026-01-05T08:00:00Z``: Kubernetes timestamps."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=8)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=65_536)
def iso_local(ts: int, zone: str) -> str:
    """What sacct prints in the zone it runs in: ISO without an offset."""
    return datetime.fromtimestamp(ts, _zone(zone)).strftime("%Y-%m-%dT%H:%M:%S")


def day_of(ts: int) -> date:
    return datetime.fromtimestamp(ts, UTC).date()


def day_floor(ts: int) -> int:
    return ts - ts % DAY


def elapsed(seconds: int) -> str:
    """sacct's Elapsed: ``[D-]HH:MM:SS`` (``00:MM:SS`` under an hour)."""
    days, rest = divmod(max(seconds, 0), DAY)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def weekday(ts: int) -> int:
    """Monday is 0, as ``date.weekday``."""
    return day_of(ts).weekday()


def compress_hostlist(names: list[str]) -> str:
    """Slurm's bracket form: ``gpu-hpc-[01-03,05]``; a single host stays as it is."""
    if len(names) == 1:
        return names[0]
    groups: dict[str, list[str]] = {}
    for name in names:
        stem = name.rstrip("0123456789")
        groups.setdefault(stem, []).append(name[len(stem):])
    parts = []
    for stem, numbers in groups.items():
        width = len(numbers[0])
        values = sorted(int(n) for n in numbers)
        ranges: list[str] = []
        low = prev = values[0]
        for value in [*values[1:], None]:
            if value is not None and value == prev + 1:
                prev = value
                continue
            first, last = f"{low:0{width}d}", f"{prev:0{width}d}"
            ranges.append(first if low == prev else f"{first}-{last}")
            if value is not None:
                low = prev = value
        # one host of its own stem is printed bare, as Slurm's hostlist does (a job on
        # gpu-hpc-01 and the Slinky node slinky-0: gpu-hpc-01,slinky-0)
        single = len(values) == 1 and len(groups) > 1
        parts.append(f"{stem}{ranges[0]}" if single else f"{stem}[{','.join(ranges)}]")
    return ",".join(parts)


def days_in(start: int, end: int) -> list[tuple[date, int, int]]:
    """The UTC days touched by ``[start, end)`` with the part of the interval in each day."""
    out = []
    cursor = start
    while cursor < end:
        next_day = day_floor(cursor) + DAY
        stop = min(end, next_day)
        out.append((day_of(cursor), cursor, stop))
        cursor = stop
    return out


def add_days(day: date, n: int) -> date:
    return day + timedelta(days=n)
