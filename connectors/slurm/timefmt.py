"""sacct timestamps and durations as Polars expressions.

Timestamps (``Submit``, ``Eligible``, ``Start``, ``End``) come in three shapes:

- epoch seconds (``SLURM_TIME_FORMAT=%s``, our extraction);
- naive ``YYYY-MM-DDTHH:MM:SS``: sacct's default, in the *sacct process's* local time zone, which
  the caller names (``timezone``, an IANA name);
- ISO with an offset (``+0000``, ``+01:00``, ``Z``), from ``SLURM_TIME_FORMAT=%Y-%m-%dT%H:%M:%S%z``
  with a widened column (22.05 cuts it to 19 characters otherwise, which drops the offset).

``Unknown`` (time 0 or INFINITE) and ``None`` (NO_VAL) and empty mean "no time" → null.
The result is a UTC instant as a naive ``Datetime("us")`` (the project's convention).

A naive local time in the hour repeated when DST ends is ambiguous. The expressions give both
readings (``earliest`` and ``later``); :mod:`connectors.slurm.sacct_typing` then resolves them
from the other times of the same row or rejects the line. Local times that do not exist (the
skipped hour when DST starts) cannot come from sacct and are rejected.

Durations: ``[D-]HH:MM:SS``, ``MM:SS[.mmm]``; ``UNLIMITED``, ``Partition_Limit``, ``INVALID`` (and
empty) → null. Whole seconds (a fraction, only printed by CPU-time fields, is dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

TIME_NULL_TOKENS: tuple[str, ...] = ("", "Unknown", "None")
DURATION_NULL_TOKENS: tuple[str, ...] = ("", "UNLIMITED", "Partition_Limit", "INVALID")

NAIVE_FORMAT = "%Y-%m-%dT%H:%M:%S"
OFFSET_FORMAT = "%Y-%m-%dT%H:%M:%S%#z"  # %#z: +0000, +00:00 and Z
DURATION_RE = r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$"
_US = 1_000_000

TIME_EXPECTED = (
    "expected epoch seconds, YYYY-MM-DDTHH:MM:SS, an ISO time with offset, Unknown or None"
)
DURATION_EXPECTED = "expected [D-]HH:MM:SS, MM:SS.mmm, UNLIMITED or Partition_Limit"


def check_timezone(name: str) -> str:
    """``name`` if it is a known IANA zone, else ``ValueError`` ("expected …, found …")."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        msg = f"expected an IANA time zone name such as Europe/Berlin or UTC, found {name!r}"
        raise ValueError(msg) from exc
    return name


@dataclass(frozen=True)
class TimeKinds:
    """Which timestamp shapes occur in a column (so absent ones are not computed)."""

    naive: bool
    offset: bool


def detect_kinds(values: pl.Series) -> TimeKinds:
    """Look at a String column once to see whether ISO shapes occur at all."""
    has_t = bool(values.str.contains("T", literal=True).any())
    if not has_t:
        return TimeKinds(naive=False, offset=False)
    has_offset = bool(values.str.contains(r"(?:[+-]\d\d:?\d\d|Z)$").any())
    return TimeKinds(naive=True, offset=has_offset)


def _is_null_token(col: pl.Expr, tokens: tuple[str, ...]) -> pl.Expr:
    return col.is_null() | col.is_in(list(tokens))


def time_frame(frame: pl.DataFrame, fields: list[str], timezone: str) -> pl.DataFrame:
    """Parse the timestamp columns ``fields`` of ``frame``.

    For each field ``F`` the result has ``f`` (lower case: the UTC instant; for an ambiguous local
    time the earlier reading), ``_later_F`` (the later reading where ambiguous, else null),
    ``_gap_F`` (a local time inside a DST gap) and ``_bad_F`` (not a timestamp at all, or in a gap).
    Shapes that do not occur in a column are not computed.
    """
    kinds = {f: detect_kinds(frame[f]) for f in fields}
    # stage 1: the parses that apply, each once
    s1: list[pl.Expr] = []
    for f in fields:
        c = pl.col(f)
        s1.append(c.alias(f"_t_{f}"))
        s1.append((c.str.to_integer(strict=False) * _US).cast(pl.Datetime("us")).alias(f"_ep_{f}"))
        if kinds[f].naive:
            s1.append(c.str.strptime(pl.Datetime("us"), NAIVE_FORMAT, strict=False)
                      .alias(f"_nv_{f}"))
        if kinds[f].offset:
            s1.append(
                c.str.strptime(pl.Datetime("us", "UTC"), OFFSET_FORMAT, strict=False)
                .dt.replace_time_zone(None).alias(f"_of_{f}")
            )
    st = frame.lazy().select(s1)
    # stage 2: local → UTC (both readings) where naive local times occur outside UTC
    s2: list[pl.Expr] = []
    local = timezone != "UTC"
    for f in fields:
        if kinds[f].naive and local:
            for which in ("earliest", "latest"):
                s2.append(
                    pl.col(f"_nv_{f}")
                    .dt.replace_time_zone(timezone, ambiguous=which, non_existent="null")
                    .dt.convert_time_zone("UTC").dt.replace_time_zone(None)
                    .alias(f"_{which}_{f}")
                )
    if s2:
        st = st.with_columns(s2)
    # stage 3: combine
    s3: list[pl.Expr] = []
    for f in fields:
        parts = [pl.col(f"_ep_{f}")]
        gap = pl.lit(False)
        later = pl.lit(None, dtype=pl.Datetime("us"))
        if kinds[f].naive:
            if local:
                early, late = pl.col(f"_earliest_{f}"), pl.col(f"_latest_{f}")
                parts.append(early)
                later = pl.when(late != early).then(late)
                gap = pl.col(f"_nv_{f}").is_not_null() & early.is_null()
            else:
                parts.append(pl.col(f"_nv_{f}"))
        if kinds[f].offset:
            parts.append(pl.col(f"_of_{f}"))
        s3 += [
            (pl.coalesce(parts) if len(parts) > 1 else parts[0]).alias(f.lower()),
            later.alias(f"_later_{f}"),
            gap.alias(f"_gap_{f}"),
        ]
    st = st.with_columns(s3)
    return st.select(
        *(pl.col(f.lower()) for f in fields),
        *(pl.col(f"_later_{f}") for f in fields),
        *(pl.col(f"_gap_{f}") for f in fields),
        *(
            (
                (pl.col(f.lower()).is_null() & ~_is_null_token(pl.col(f"_t_{f}"), TIME_NULL_TOKENS))
                | pl.col(f"_gap_{f}")
            ).alias(f"_bad_{f}")
            for f in fields
        ),
    ).collect()


def duration_exprs(col: str) -> tuple[pl.Expr, pl.Expr]:
    """(seconds as Int64, bad) for a duration column such as ``Elapsed`` or ``Timelimit``."""
    c = pl.col(col)
    g = c.str.extract_groups(DURATION_RE)

    def part(name: str) -> pl.Expr:
        return g.struct.field(name).cast(pl.Int64).fill_null(0)

    secs = part("1") * 86_400 + part("2") * 3_600 + part("3") * 60 + part("4")
    matched = g.struct.field("3").is_not_null()
    value = pl.when(matched).then(secs)
    bad = ~matched & ~_is_null_token(c, DURATION_NULL_TOKENS)
    return value, bad


def raw_seconds_exprs(col: str, *, factor: int = 1) -> tuple[pl.Expr, pl.Expr]:
    """(integer × factor, bad) for ``ElapsedRaw`` (seconds) or ``TimelimitRaw`` (minutes)."""
    c = pl.col(col)
    n = c.str.to_integer(strict=False)
    value = n * factor
    bad = n.is_null() & ~_is_null_token(c, DURATION_NULL_TOKENS) | (n < 0).fill_null(False)
    return value, bad
