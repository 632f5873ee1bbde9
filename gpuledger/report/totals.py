"""Totals of invoice lines by any grouping, in exact arithmetic.

Amounts are sums of the lines' rounded amounts (the lines are the invoice), kept per currency;
GPU-hours are summed as GPU-seconds and divided once, so no per-line rounding accumulates.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from gpuledger.report.lines import USAGE_COLUMNS, Row

# one meaning of "unattributed", shared with the dashboards' Chargeback page
from models.attribution import UNATTRIBUTED, is_incomplete, is_unattributed

__all__ = ["UNATTRIBUTED", "Totals", "column", "group", "is_incomplete", "is_unattributed",
           "total"]


@dataclass
class Totals:
    label: str
    lines: int = 0
    gpu_seconds: int = 0
    # currency -> sum of line amounts; lines without a rate are counted in unpriced_seconds
    amounts: dict[str, Decimal] = field(default_factory=dict)
    unpriced_lines: int = 0
    unpriced_seconds: int = 0
    # usage column -> sum over the lines that have a value (None: no line had one)
    usage: dict[str, Decimal | None] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> Decimal:
        return Decimal(self.gpu_seconds) / 3600

    def add(self, line: Row) -> None:
        self.lines += 1
        self.gpu_seconds += int(line["gpu_seconds"])
        amount = line.get("amount")
        if amount is None:
            self.unpriced_lines += 1
            self.unpriced_seconds += int(line["gpu_seconds"])
        else:
            currency = line.get("currency") or ""
            self.amounts[currency] = self.amounts.get(currency, Decimal(0)) + Decimal(amount)
        for column in USAGE_COLUMNS:
            if column not in line:
                continue
            value = line[column]
            if value is not None:
                before = self.usage.get(column)
                self.usage[column] = (before or Decimal(0)) + Decimal(value)
            else:
                self.usage.setdefault(column, None)


def total(lines: Iterable[Row], label: str = "total") -> Totals:
    result = Totals(label)
    for line in lines:
        result.add(line)
    return result


def group(lines: Iterable[Row], key: Callable[[Row], str]) -> list[Totals]:
    """Totals per ``key(line)``, largest GPU-hours first (ties by label)."""
    groups: dict[str, Totals] = {}
    for line in lines:
        label = key(line)
        groups.setdefault(label, Totals(label)).add(line)
    return sorted(groups.values(), key=lambda t: (-t.gpu_seconds, t.label))


def column(name: str) -> Callable[[Row], str]:
    """A grouping key reading one column (NULL as an empty label)."""
    return lambda line: "" if line.get(name) is None else str(line[name])
