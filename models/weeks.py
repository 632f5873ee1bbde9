"""ISO weeks as the reports name them: ``YYYY-Www`` (Monday 00:00 UTC to the next Monday)."""

import re
from dataclasses import dataclass
from datetime import date, timedelta

_WEEK = re.compile(r"(\d{4})-W(\d{2})")


@dataclass(frozen=True, order=True)
class IsoWeek:
    year: int
    week: int

    @property
    def monday(self) -> date:
        return date.fromisocalendar(self.year, self.week, 1)

    @property
    def end(self) -> date:
        """The Monday after (exclusive end of the week)."""
        return self.monday + timedelta(days=7)

    @property
    def name(self) -> str:
        """``YYYY-Www``, the spelling of ``chargeback.period`` for weeks and of the folder."""
        return f"{self.year:04d}-W{self.week:02d}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def containing(cls, day: date) -> "IsoWeek":
        year, week, _ = day.isocalendar()
        return cls(year, week)


def parse_iso_week(text: str) -> IsoWeek:
    """``2026-W02`` -> IsoWeek(2026, 2); anything else is an error that says what was expected."""
    match = _WEEK.fullmatch(text.strip())
    if match is None or int(match.group(1)) < 1:
        msg = f"expected an ISO week YYYY-Www (e.g. 2026-W02), found {text!r}"
        raise ValueError(msg)
    year, week = int(match.group(1)), int(match.group(2))
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError:
        weeks = date(year, 12, 28).isocalendar()[1]  # 28 December is always in the last week
        msg = f"expected an ISO week YYYY-Www with week 01..{weeks} in {year}, found {text!r}"
        raise ValueError(msg) from None
    return IsoWeek(year, week)
