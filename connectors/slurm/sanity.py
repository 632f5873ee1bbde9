"""Sanity limits of sacct allocation lines: values a line can parse to that no real run has.

A line can be well formed and still impossible: ``gres/gpu=99999999999`` on a node the inventory
says has 8 GPUs (an invoice line of half a trillion euros), an End before its Start (stored, then
charged nothing), a run of forty years, a Start after the dump was taken. Such a line is not
loaded: it goes to ``rejects`` (file, line, field) with the rule it broke, and the ingest counts
it per rule. Only allocation lines (runs: what is charged) are checked; steps are never charged.

The rules, in the order they are tried (a line is rejected for the first one it breaks):

================  ========================  ==================================================
rule              field                     the line is rejected when
================  ========================  ==================================================
gpus_per_job      AllocTRES                 its GPUs exceed ``max_gpus_per_job`` (no real job
                                            holds more, inventory or not)
gpus_per_node     AllocTRES                 its GPUs do not fit on its nodes: more than the
                                            sum of each node's GPUs, a node's count being the
                                            inventory's ``gpu_count`` (``nodes`` table) or,
                                            for a node the inventory does not list,
                                            ``max_gpus_per_node``
end_before_start  End                       End is before Start
elapsed_too_long  ElapsedRaw/Elapsed, End,  Elapsed, End − Start, or (still going) the time
                  Start                     from Start to the observation exceeds
                                            ``max_elapsed``
time_in_future    Submit, Start, End        the time is later than the observation time plus
                                            ``clock_skew`` (Eligible is not checked: a job
                                            submitted with ``--begin`` is eligible later; nor
                                            the Start of a PENDING job, sacct's estimate)
================  ========================  ==================================================

``gpus_per_node`` and the per-node split. sacct keeps only a run's total; the ledger splits it
evenly over the run's nodes (:func:`connectors.slurm.node_split.allocations_per_node`). On nodes of
one size a run fits exactly when its even split fits every node. On nodes of different sizes
the even split of a real run can exceed its smaller node (12 GPUs on an 8- and a 4-GPU node:
6 and 6, where Slurm gave 8 and 4): the run is real and its total is right, so the rule compares
the total with the sum and such a run loads (its split is marked ``even_split``, an estimate, and
an ``scontrol show job -d`` snapshot gives the true counts at build time; docs/slurm.md).

A node the inventory does not list (or no inventory at all, as in a test loading only sacct) is
fine: it is held to ``max_gpus_per_node`` only.

The reason of such a reject reads ``sanity limit <rule>: expected …, found …``:
:func:`rule_of` gives the rule back from a reject, :data:`REASON_PREFIX` finds them in SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from connectors.errors import Reject

GPUS_PER_JOB = "gpus_per_job"
GPUS_PER_NODE = "gpus_per_node"
END_BEFORE_START = "end_before_start"
ELAPSED_TOO_LONG = "elapsed_too_long"
TIME_IN_FUTURE = "time_in_future"
#: Every rule, in the order they are tried.
RULES: tuple[str, ...] = (GPUS_PER_JOB, GPUS_PER_NODE, END_BEFORE_START, ELAPSED_TOO_LONG,
                          TIME_IN_FUTURE)
#: Every sanity reject's reason starts with this, then the rule and ": ".
REASON_PREFIX = "sanity limit "

#: The defaults (``[gpuledger.slurm_limits]`` in gpuledger.toml changes them; docs/slurm.md).
DEFAULT_MAX_GPUS_PER_NODE = 64
DEFAULT_MAX_GPUS_PER_JOB = 100_000
DEFAULT_MAX_ELAPSED_DAYS = 365.0
DEFAULT_CLOCK_SKEW_SECONDS = 300

#: Settings keys of ``[gpuledger.slurm_limits]`` and what each must be.
CONFIG_KEYS: Mapping[str, str] = {
    "max_gpus_per_node": "a whole number of GPUs, at least 1",
    "max_gpus_per_job": "a whole number of GPUs, at least 1",
    "max_elapsed_days": "a number of days above 0",
    "clock_skew_seconds": "a number of seconds, 0 or more",
}


@dataclass(frozen=True)
class SanityLimits:
    """The limits a sacct allocation line is held to (see the module docstring).

    ``observed_at``: when the dump was taken (``--as-of``; the time of a live sacct query; the
    time of the import when the dump does not say): times later than it plus ``clock_skew`` are
    in the future. ``None``: not checked. ``observed_what`` says in a reason what that time is.
    ``charged_until``: how far a run still going is charged (``--as-of``, the query's window
    end), for its duration; ``None`` when only known later (a dump's latest instant): then the
    Elapsed sacct printed is what is checked.

    ``inventory``: GPUs per node, by canonical node name (the ``nodes`` table); ``canonical``
    turns a node name as the dump prints it into that name (``gpuledger.ingest.nodenames``); it
    must be
    safe to call from several threads (the parser runs batches in parallel).
    """

    max_gpus_per_node: int = DEFAULT_MAX_GPUS_PER_NODE
    max_gpus_per_job: int = DEFAULT_MAX_GPUS_PER_JOB
    max_elapsed: timedelta = timedelta(days=DEFAULT_MAX_ELAPSED_DAYS)
    clock_skew: timedelta = timedelta(seconds=DEFAULT_CLOCK_SKEW_SECONDS)
    observed_at: datetime | None = None
    observed_what: str = "the dump's observation time"
    charged_until: datetime | None = None
    inventory: Mapping[str, int] = field(default_factory=dict)
    canonical: Callable[[str], str] | None = field(default=None, compare=False)

    @classmethod
    def from_config(cls, table: Mapping[str, object] | None) -> SanityLimits:
        """Limits from a settings table (``[gpuledger.slurm_limits]``); absent keys keep their
        default. Raises ``ValueError`` ("expected …, found …") for an unknown key or a bad
        value."""
        table = dict(table or {})
        unknown = sorted(set(table) - set(CONFIG_KEYS))
        if unknown:
            msg = (f"expected slurm_limits keys among {', '.join(CONFIG_KEYS)}, found "
                   f"{', '.join(unknown)}")
            raise ValueError(msg)

        def number(key: str, *, whole: bool, low: float, strict: bool) -> float | None:
            if key not in table:
                return None
            value = table[key]
            number = (float(value) if isinstance(value, int | float)
                      and not isinstance(value, bool) else None)
            if (number is None or (whole and not number.is_integer())
                    or not (number > low if strict else number >= low)):
                msg = f"expected slurm_limits.{key} as {CONFIG_KEYS[key]}, found {value!r}"
                raise ValueError(msg)
            return number

        out = cls()
        if (v := number("max_gpus_per_node", whole=True, low=1, strict=False)) is not None:
            out = replace(out, max_gpus_per_node=int(v))
        if (v := number("max_gpus_per_job", whole=True, low=1, strict=False)) is not None:
            out = replace(out, max_gpus_per_job=int(v))
        if (v := number("max_elapsed_days", whole=False, low=0, strict=True)) is not None:
            out = replace(out, max_elapsed=timedelta(days=v))
        if (v := number("clock_skew_seconds", whole=False, low=0, strict=False)) is not None:
            out = replace(out, clock_skew=timedelta(seconds=v))
        return out

    def as_config(self) -> dict[str, float]:
        """The settings table these limits come from (inverse of :meth:`from_config`)."""
        return {
            "max_gpus_per_node": self.max_gpus_per_node,
            "max_gpus_per_job": self.max_gpus_per_job,
            "max_elapsed_days": self.max_elapsed / timedelta(days=1),
            "clock_skew_seconds": self.clock_skew / timedelta(seconds=1),
        }

    def gpus_of(self, node: str) -> int | None:
        """The inventory's GPUs of a node named as the dump prints it, else ``None``."""
        if not self.inventory:
            return None
        name = self.canonical(node) if self.canonical is not None else node
        return self.inventory.get(name)


#: What a parse is held to when the caller gives nothing: the ceilings and durations, no
#: inventory, no observation time.
DEFAULT_LIMITS = SanityLimits()

def rule_of(reject: Reject) -> str | None:
    """The sanity rule a reject broke, or ``None`` for any other reject."""
    if not reject.reason.startswith(REASON_PREFIX):
        return None
    rule = reject.reason[len(REASON_PREFIX) :].split(":", 1)[0]
    return rule if rule in RULES else None


def counts_by_rule(rejects: tuple[Reject, ...] | list[Reject]) -> dict[str, int]:
    """How many of ``rejects`` broke each sanity rule (every rule, 0 included)."""
    out = dict.fromkeys(RULES, 0)
    for r in rejects:
        rule = rule_of(r)
        if rule is not None:
            out[rule] += 1
    return out


def _ts(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC"


def _days(seconds: float) -> str:
    if seconds < 86_400:
        return f"{seconds:,.0f} s"
    days = seconds / 86_400
    return f"{days:,.0f} days" if days >= 10 else f"{days:,.2f} days"


def _candidates(typed: pl.DataFrame, limits: SanityLimits) -> pl.Expr:
    """Allocation rows that could break a rule (cheap, vectorized); the rest are fine."""
    gpus = pl.col("alloc_gpus").fill_null(0)
    n_nodes = pl.col("nodes").list.len().fill_null(0)
    smallest = min([limits.max_gpus_per_node, *limits.inventory.values()])
    start, end = pl.col("start"), pl.col("end")
    longest = int(limits.max_elapsed.total_seconds())
    maybe = [
        gpus > limits.max_gpus_per_job,
        (n_nodes > 0) & (gpus > n_nodes * max(smallest, 0)),
        end < start,
        pl.col("elapsed_s") > longest,
        (end - start).dt.total_seconds() > longest,
    ]
    if limits.charged_until is not None:
        going_for = (pl.lit(limits.charged_until) - start).dt.total_seconds()
        maybe.append(end.is_null() & (going_for > longest))
    if limits.observed_at is not None:
        latest = limits.observed_at + limits.clock_skew
        maybe += [pl.col("submit") > latest, start > latest, end > latest]
    return ~pl.col("is_step") & pl.any_horizontal(maybe).fill_null(False)


def check_limits(typed: pl.DataFrame, limits: SanityLimits, present: set[str], *,
                 source: str, source_file: str,
                 text_of: Callable[[list[int]], dict[int, str]],
                 ) -> tuple[pl.DataFrame, list[Reject]]:
    """``typed`` (the parser's typed rows of a batch) without the allocation rows that break a
    limit, and their rejects. Vectorized; Python runs only for the candidate rows, which are
    the impossible ones (and, with a very uneven inventory, multi-node GPU runs)."""
    if typed.height == 0:
        return typed, []
    mask = typed.lazy().select(_candidates(typed, limits)).collect().to_series()
    if not mask.any():
        return typed, []
    rows = typed.with_row_index("_row").filter(mask)
    problems: list[tuple[int, int, str, str]] = []  # (row, line, field, reason)
    for row in rows.iter_rows(named=True):
        found = _first_problem(row, limits, present)
        if found is not None:
            problems.append((row["_row"], int(row["line_no"]), *found))
    if not problems:
        return typed, []
    texts = text_of([line for _, line, _, _ in problems])
    rejects = [Reject(source, source_file, line, fld, f"{REASON_PREFIX}{why}", texts[line])
               for _, line, fld, why in problems]
    drop = pl.Series([r for r, _, _, _ in problems], dtype=pl.UInt32)
    kept = typed.with_row_index("_row").filter(~pl.col("_row").is_in(drop.implode())).drop("_row")
    return kept, rejects


def _first_problem(row: Mapping[str, Any], limits: SanityLimits,
                   present: set[str]) -> tuple[str, str] | None:
    """(field, "rule: expected …, found …") of the first rule ``row`` breaks, else None."""
    gpus = row.get("alloc_gpus") or 0
    nodes = list(row.get("nodes") or [])
    start, end, submit = row.get("start"), row.get("end"), row.get("submit")
    elapsed = row.get("elapsed_s")
    assert isinstance(gpus, int)
    if gpus > limits.max_gpus_per_job:
        return "AllocTRES", (f"{GPUS_PER_JOB}: expected at most {limits.max_gpus_per_job:,} "
                             f"GPUs per job (max_gpus_per_job), found {gpus:,} GPUs in AllocTRES")
    if nodes and gpus > 0:
        capacity = [(n, limits.gpus_of(n)) for n in nodes]
        total = sum(c if c is not None else limits.max_gpus_per_node for _, c in capacity)
        if gpus > total:
            return "AllocTRES", f"{GPUS_PER_NODE}: " + _fit_reason(
                gpus, capacity, total, limits, str(row.get("nodelist") or ",".join(nodes)))
    longest = limits.max_elapsed.total_seconds()
    limit_text = f"{_days(longest)} (max_elapsed_days)"
    if isinstance(start, datetime) and isinstance(end, datetime) and end < start:
        return "End", (f"{END_BEFORE_START}: expected End at or after Start ({_ts(start)}), "
                       f"found End {_ts(end)}, {_days((start - end).total_seconds())} before it")
    if isinstance(elapsed, int) and elapsed > longest:
        fld = "ElapsedRaw" if "ElapsedRaw" in present else "Elapsed"
        return fld, (f"{ELAPSED_TOO_LONG}: expected a run of at most {limit_text}, found "
                     f"{fld} {elapsed:,} s ({_days(elapsed)})")
    if isinstance(start, datetime) and isinstance(end, datetime) and (
            (end - start).total_seconds() > longest):
        return "End", (f"{ELAPSED_TOO_LONG}: expected a run of at most {limit_text}, found "
                       f"Start {_ts(start)} and End {_ts(end)} "
                       f"({_days((end - start).total_seconds())} apart)")
    until = limits.charged_until
    if (until is not None and end is None and isinstance(start, datetime)
            and (until - start).total_seconds() > longest):
        return "Start", (f"{ELAPSED_TOO_LONG}: expected a run still going to have started at "
                         f"most {limit_text} before the time it is charged up to ({_ts(until)}), "
                         "found "
                         f"Start {_ts(start)} ({_days((until - start).total_seconds())} before)")
    seen = limits.observed_at
    if seen is None:
        return None
    latest = seen + limits.clock_skew
    skew = int(limits.clock_skew.total_seconds())
    for fld, value in (("Submit", submit), ("Start", start), ("End", end)):
        if fld == "Start" and row.get("state") == "PENDING":
            continue  # a pending job's Start is sacct's estimate
        if isinstance(value, datetime) and value > latest:
            return fld, (f"{TIME_IN_FUTURE}: expected {fld} no later than {limits.observed_what} "
                         f"({_ts(seen)}, {skew} s of clock skew allowed), found {_ts(value)}")
    return None


def _fit_reason(gpus: int, capacity: list[tuple[str, int | None]], total: int,
                limits: SanityLimits, nodelist: str) -> str:
    def one(node: str, count: int | None) -> str:
        if count is None:
            return (f"{node}: not in the inventory, at most {limits.max_gpus_per_node} "
                    "(max_gpus_per_node)")
        return f"{node}: {count} in the inventory"

    if len(capacity) == 1:
        node, count = capacity[0]
        where = ("its gpu_count in the nodes inventory" if count is not None
                 else "it is not in the nodes inventory: max_gpus_per_node")
        return (f"expected at most {total:,} GPUs on {node} ({where}), found {gpus:,} GPUs in "
                "AllocTRES")
    shown = "; ".join(one(n, c) for n, c in capacity[:4])
    if len(capacity) > 4:
        shown += f"; … {len(capacity) - 4} more"
    share = -(-gpus // len(capacity))
    return (f"expected at most {total:,} GPUs on the run's {len(capacity)} nodes {nodelist} "
            f"({shown}), found {gpus:,} GPUs in AllocTRES (up to {share:,} per node by the even "
            "split)")
