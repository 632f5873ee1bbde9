"""UTC time helpers of the source adapters: naive datetimes mean UTC; windows are half-open."""

from datetime import UTC, datetime, timedelta


def utc_naive(value: datetime) -> datetime:
    """`value` as a naive UTC datetime (naive input is taken to be UTC already)."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def epoch_ms(value: datetime) -> int:
    """Milliseconds since the epoch (Prometheus' timestamp resolution)."""
    naive = utc_naive(value)
    return round((naive - datetime(1970, 1, 1)) / timedelta(milliseconds=1))


def windows(start: datetime, end: datetime, chunk: timedelta) -> list[tuple[datetime, datetime]]:
    """Non-overlapping ``[a, b)`` windows covering ``[start, end)``; the last may be shorter."""
    if chunk <= timedelta(0):
        msg = f"expected a positive chunk length, found {chunk}"
        raise ValueError(msg)
    start, end = utc_naive(start), utc_naive(end)
    out = []
    a = start
    while a < end:
        b = min(a + chunk, end)
        out.append((a, b))
        a = b
    return out
