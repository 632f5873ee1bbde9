"""UTC time helpers shared by the ingest modules."""

from datetime import datetime, timedelta

from connectors.times import utc_naive

MINUTE_GRAIN = timedelta(minutes=1)  # gpu_utilization buckets


def daily_windows(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """Split ``[start, end)`` at UTC midnights."""
    start, end = utc_naive(start), utc_naive(end)
    if end <= start:
        msg = f"expected an end after the start, found {start:%F %T} .. {end:%F %T}"
        raise ValueError(msg)
    windows = []
    cursor = start
    while cursor < end:
        midnight = datetime.combine(cursor.date() + timedelta(days=1), datetime.min.time())
        windows.append((cursor, min(midnight, end)))
        cursor = min(midnight, end)
    return windows


def floor_to(value: datetime, step: timedelta) -> datetime:
    """`value` rounded down to a multiple of `step` since the epoch."""
    epoch = datetime(1970, 1, 1)
    return epoch + step * ((value - epoch) // step)


def ceil_to(value: datetime, step: timedelta) -> datetime:
    floor = floor_to(value, step)
    return floor if floor == value else floor + step
