"""Parse ``sreport -P`` text: ``cluster utilization`` and ``cluster AccountUtilizationByUser``.

What sreport 22.05 prints with ``-P`` (``-n`` would drop banner AND header, which we refuse)::

    --------------------------------------------------------------------------------
    Cluster Utilization 2026-11-30T05:00:00 - 2026-11-30T05:59:59
    Usage reported in TRES Seconds
    --------------------------------------------------------------------------------
    Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported
    gpuledger|gres/gpu|142|0|0|8018|0|8160

and for ``AccountUtilizationByUser`` the title ``Cluster/Account/User Utilization … (3600 secs)``
and the header ``Cluster|Account|Login|Proper Name|TRES Name|Used``.

- Units come from the banner: ``TRES Seconds``, ``TRES Minutes`` (sreport's default) or
  ``TRES Hours`` (``CPU …`` in old versions); values are converted to seconds (minutes × 60, so a
  minutes report is only as precise as its minutes). ``-t minper``/``secper``/``hourper`` values
  ``123(4.56%)`` keep the count. ``-t percent`` has no counts and is refused.
- The period in the title is in the sreport process's local time (``timezone``) and its end is
  inclusive (``05:59:59``); ``report_end`` is made exclusive (+1 s). Both are UTC naive.
- ``Planned`` was ``Reserved`` before 22.05; ``Over Comm`` appears when asked for. Both map.
- ``AccountUtilizationByUser``: rows with an empty ``Login`` are **account rows**: the usage of the
  account's whole subtree (its own users *and all child accounts*; ``root`` is the cluster total).
  They are kept and flagged ``is_account_total`` so that nobody adds them to the user rows. With a
  typed ``-T``, every (account, user) has one row per TRES, zero rows included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from connectors.errors import SourceError
from connectors.slurm.records import SREPORT_ACCOUNT_USER_SCHEMA, SREPORT_UTILIZATION_SCHEMA
from connectors.slurm.timefmt import check_timezone
from connectors.textfiles import open_text

_TITLE_RE = re.compile(
    r"^(?P<title>.+?) (?P<start>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) - "
    r"(?P<end>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?: \(\d+ secs\))?\s*$"
)
_UNIT_RE = re.compile(
    r"^Usage reported in (?:(?:TRES|CPU) (?P<unit>Seconds|Minutes|Hours)"
    r"(?P<per>/Percentage of Total)?|(?P<pct>Percentage of Total))\s*$"
)
_VALUE_RE = re.compile(r"^(\d+)(?:\([\d.]+%\))?$")
_FACTOR = {"Seconds": 1, "Minutes": 60, "Hours": 3600}

UTILIZATION_TITLE = "Cluster Utilization"
ACCOUNT_USER_TITLE = "Cluster/Account/User Utilization"

_UTIL_COLUMNS = {
    "Cluster": "cluster",
    "TRES Name": "tres_name",
    "Allocated": "allocated_seconds",
    "Down": "down_seconds",
    "PLND Down": "planned_down_seconds",
    "Idle": "idle_seconds",
    "Planned": "planned_seconds",
    "Reserved": "planned_seconds",
    "Over Comm": "over_committed_seconds",
    "Reported": "reported_seconds",
}
_UTIL_REQUIRED = ("Cluster", "TRES Name", "Allocated", "Reported")
_ACCT_REQUIRED = ("Cluster", "Account", "Login", "Proper Name", "TRES Name", "Used")


class SreportFormatError(SourceError):
    """sreport text whose layout is not the one this parser knows."""


@dataclass(frozen=True)
class SreportTable:
    """The banner and the rows of one ``sreport -P`` report, as texts."""

    title: str
    period_start: datetime  # UTC, naive
    period_end: datetime  # UTC, naive, exclusive
    unit: str  # seconds | minutes | hours
    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]  # (line number, fields)


def _text(source: Path | str | bytes) -> str:
    if isinstance(source, Path):
        if not source.is_file():
            msg = f"expected an sreport output at {source}, found none"
            raise SourceError(msg)
        with open_text(source) as fh:
            return fh.read()
    if isinstance(source, bytes):
        return source.decode("utf-8")
    return source


def _utc(text: str, tz: str) -> datetime:
    local = datetime.fromisoformat(text)
    if tz == "UTC":
        return local
    aware = local.replace(tzinfo=ZoneInfo(tz))
    return aware.astimezone(ZoneInfo("UTC")).replace(tzinfo=None)


def read_sreport(source: Path | str | bytes, *, timezone: str = "UTC", source_file: str,
                 free_text: str | None = None) -> SreportTable:
    """Split ``sreport -P`` output into banner facts, header and rows.

    ``free_text`` names the one column that may contain ``|`` (``Proper Name``); extra separators
    on a row are given to it. Any other mismatch of the field count raises.
    """
    check_timezone(timezone)
    lines = _text(source).splitlines()
    title = start = end = unit = None
    header: tuple[str, ...] | None = None
    rows: list[tuple[int, tuple[str, ...]]] = []
    for no, line in enumerate(lines, start=1):
        if header is None:
            stripped = line.strip()
            if not stripped or set(stripped) == {"-"}:
                continue
            if m := _TITLE_RE.match(stripped):
                title, start, end = m["title"], m["start"], m["end"]
                continue
            if m := _UNIT_RE.match(stripped):
                if m["pct"]:
                    msg = (f"{source_file}:{no}: expected usage in TRES seconds, minutes or "
                           f"hours, found {stripped!r} (run sreport with -t seconds)")
                    raise SreportFormatError(msg)
                unit = m["unit"]
                continue
            if "|" in line and title is not None:
                header = tuple(h.strip() for h in line.split("|"))
                continue
            msg = (f"{source_file}:{no}: expected the sreport banner (title with the period, "
                   f"'Usage reported in …') and then a '|' header, found {line[:120]!r}"
                   " (was sreport run with -n or without -P?)")
            raise SreportFormatError(msg)
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) > len(header) and free_text in header:
            i = header.index(free_text)
            extra = len(fields) - len(header)
            fields = [*fields[:i], "|".join(fields[i : i + extra + 1]), *fields[i + extra + 1 :]]
        if len(fields) != len(header):
            msg = (f"{source_file}:{no}: expected {len(header)} fields ({'|'.join(header)}), "
                   f"found {len(fields)}: {line[:200]!r}")
            raise SreportFormatError(msg)
        rows.append((no, tuple(fields)))
    if header is None or title is None or start is None or end is None:
        msg = (f"{source_file}: expected an sreport banner with a period and a header line, "
               "found none (empty output, or sreport -n)")
        raise SreportFormatError(msg)
    if unit is None:
        msg = f"{source_file}: expected a 'Usage reported in TRES …' line, found none"
        raise SreportFormatError(msg)
    period_end = _utc(end, timezone)
    return SreportTable(
        title=title,
        period_start=_utc(start, timezone),
        period_end=period_end + timedelta(seconds=1),
        unit=unit.lower(),
        header=header,
        rows=tuple(rows),
    )


def _seconds(value: str, factor: int, where: str, column: str) -> int:
    m = _VALUE_RE.match(value.strip())
    if m is None:
        msg = f"{where}: column {column}: expected a whole number of TRES units, found {value!r}"
        raise SreportFormatError(msg)
    return int(m.group(1)) * factor


def _check_layout(table: SreportTable, title: str, required: tuple[str, ...], source_file: str,
                  report: str) -> None:
    if table.title != title:
        msg = (f"{source_file}: expected a '{report}' report titled {title!r}, found "
               f"{table.title!r}")
        raise SreportFormatError(msg)
    missing = [c for c in required if c not in table.header]
    if missing:
        msg = (f"{source_file}: expected the columns {'|'.join(required)}, found "
               f"{'|'.join(table.header)} (missing {', '.join(missing)})")
        raise SreportFormatError(msg)


def parse_cluster_utilization(source: Path | str | bytes, *, timezone: str = "UTC",
                              source_file: str) -> pl.DataFrame:
    """``sreport -P -t seconds -T … cluster utilization`` → one row per (cluster, TRES).

    Schema: :data:`connectors.slurm.records.SREPORT_UTILIZATION_SCHEMA`. Columns the report does
    not have (``Over Comm`` unless asked for) are null.
    """
    table = read_sreport(source, timezone=timezone, source_file=source_file)
    _check_layout(table, UTILIZATION_TITLE, _UTIL_REQUIRED, source_file, "cluster utilization")
    factor = _FACTOR[table.unit.capitalize()]
    records = []
    for no, fields in table.rows:
        rec: dict[str, object] = dict.fromkeys(SREPORT_UTILIZATION_SCHEMA)
        for name, value in zip(table.header, fields, strict=True):
            col = _UTIL_COLUMNS.get(name)
            if col is None:
                continue
            if col in ("cluster", "tres_name"):
                rec[col] = value
            else:
                rec[col] = _seconds(value, factor, f"{source_file}:{no}", name)
        rec.update(report_start=table.period_start, report_end=table.period_end,
                   unit=table.unit)
        records.append(rec)
    return pl.DataFrame(records, schema=SREPORT_UTILIZATION_SCHEMA, orient="row")


def parse_account_utilization_by_user(source: Path | str | bytes, *, timezone: str = "UTC",
                                      source_file: str) -> pl.DataFrame:
    """``sreport -P -t seconds -T … cluster AccountUtilizationByUser`` → one row per
    (cluster, account, login, TRES) with ``used_seconds``.

    Account rows (empty ``Login``) are subtree totals (child accounts included) and carry
    ``is_account_total = True``; sum either the user rows or one account row, never both.
    Schema: :data:`connectors.slurm.records.SREPORT_ACCOUNT_USER_SCHEMA`.
    """
    table = read_sreport(source, timezone=timezone, source_file=source_file,
                         free_text="Proper Name")
    _check_layout(table, ACCOUNT_USER_TITLE, _ACCT_REQUIRED, source_file,
                  "cluster AccountUtilizationByUser")
    factor = _FACTOR[table.unit.capitalize()]
    idx = {name: table.header.index(name) for name in _ACCT_REQUIRED}
    records = []
    for no, f in table.rows:
        login = f[idx["Login"]]
        records.append({
            "cluster": f[idx["Cluster"]],
            "account": f[idx["Account"]].strip(),  # `tree` indents sub-accounts
            "login": login,
            "proper_name": f[idx["Proper Name"]],
            "tres_name": f[idx["TRES Name"]],
            "used_seconds": _seconds(f[idx["Used"]], factor, f"{source_file}:{no}", "Used"),
            "is_account_total": login == "",
            "report_start": table.period_start,
            "report_end": table.period_end,
            "unit": table.unit,
        })
    return pl.DataFrame(records, schema=SREPORT_ACCOUNT_USER_SCHEMA, orient="row")
