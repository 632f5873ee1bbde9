"""Slurm ingest: sacct dumps or live sacct/sreport into the ledger (CLI and Dagster share it).

The entry points are here (:func:`import_sacct_file`, :func:`ingest_slurm_window`, and the
sreport ones re-exported); the parts live beside them:

- :mod:`gpuledger.ingest.slurm.store`: storing parsed runs, steps and per-node GPUs (monotonic
ingest:
  facts move forward), :class:`SlurmLoad`;
- :mod:`gpuledger.ingest.slurm.stream_load`: a dump loaded batch by batch while the next is parsed;
- :mod:`gpuledger.ingest.slurm.limits`: the sanity limits held at load (node inventory,
observation);
- :mod:`gpuledger.ingest.slurm.sreport`: sreport figures for reconciliation.
"""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.slurm.commands import CommandRunner
from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.parse import SacctParse, parse_sacct
from connectors.slurm.sanity import SanityLimits
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.slurm.limits import configured_limits, sanity_limits
from gpuledger.ingest.slurm.sreport import (
    SREPORT_TRES,
    ingest_sreport,
    sreport_commands,
    store_sreport,
)
from gpuledger.ingest.slurm.store import (
    NODE_COLUMNS,
    OtherKeys,
    SlurmLoad,
    default_observed_until,
    drop_runs_under_other_keys,
    node_gpu_counts,
    node_models,
    store_sacct,
)
from gpuledger.ingest.slurm.stream_load import NotStreamable, stream_sacct_file
from gpuledger.ingest.timewindows import daily_windows

# the names callers have always imported from here
__all__ = [
    "NODE_COLUMNS", "SREPORT_TRES", "NotStreamable", "OtherKeys", "SlurmLoad",
    "configured_limits", "daily_windows", "default_observed_until", "drop_runs_under_other_keys",
    "import_sacct_file", "ingest_slurm_window", "ingest_sreport", "node_gpu_counts",
    "node_models", "parse_sacct", "sacct_window", "sanity_limits", "sreport_commands",
    "store_sacct", "store_sreport", "stream_sacct_file", "within_window",
]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def import_sacct_file(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    delimiter: str | None = None,
    timezone: str = "UTC",
    observed_until: datetime | None = None,
    cluster: str | None = None,
    limits: SanityLimits | None = None,
) -> SlurmLoad:
    """Load a sacct dump a site exported (any field order, delimiter from the header).

    ``observed_until``: when the dump was taken (``--as-of``; default: its latest instant): runs
    still going are charged up to it, and a run the ledger knows from a later observation is
    kept. ``cluster``: the cluster of a dump without a Cluster field (with one, rows of another
    cluster are rejected). ``limits``: the configured sanity limits (default: the defaults),
    held against the ledger's node inventory and times after ``observed_until`` (else after the
    time of the import) plus the clock skew. The dump is parsed and loaded batch by batch
    (bounded memory, parsing overlapped with loading) in one transaction; a dump whose batches
    are not independent (steps away from their allocation line, requeued runs sharing a key far
    apart) is parsed whole instead.
    """
    limits = sanity_limits(
        con, observed_at=observed_until or _now(),
        observed_what="the dump's --as-of time" if observed_until else
        "the time of the import (no --as-of given)", charged_until=observed_until, base=limits,
    )
    try:
        return stream_sacct_file(con, path, delimiter=delimiter, timezone=timezone,
                                 observed_until=observed_until, cluster=cluster,
                                 limits=limits)
    except NotStreamable:
        pass
    parsed = parse_sacct(path, delimiter=delimiter, timezone=timezone, source_file=str(path),
                         cluster=cluster, limits=limits)
    return store_sacct(con, parsed, source_file=str(path), observed_until=observed_until,
                       partition_key=str(path))


def within_window(parsed: SacctParse, start: datetime, end: datetime) -> SacctParse:
    """Keep what ``sacct -S start -E end`` would report: runs that held resources in the window
    (or were still going), and their steps. Used when a dump stands in for the live command."""
    start, end = _utc_naive(start), _utc_naive(end)
    runs = parsed.runs.filter(
        pl.col("start").is_not_null()
        & (pl.col("start") < end)
        & (pl.col("end").is_null() | (pl.col("end") > start))
    )
    steps = parsed.steps.filter(pl.col("run_key").is_in(runs["run_key"].implode()))
    return replace(parsed, runs=runs, steps=steps)


def sacct_window(start: datetime, end: datetime, lookback: timedelta) -> tuple[str, str]:
    """sacct's --starttime/--endtime for a window with its trailing lookback (UTC, no offset)."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    return (_utc_naive(start) - lookback).strftime(fmt), _utc_naive(end).strftime(fmt)


def ingest_slurm_window(
    con: duckdb.DuckDBPyConnection,
    runner: CommandRunner,
    start: datetime,
    end: datetime,
    *,
    lookback: timedelta = timedelta(days=2),
    now: datetime | None = None,
    limits: SanityLimits | None = None,
) -> SlurmLoad:
    """Run sacct for ``[start - lookback, end)`` and upsert what it says.

    A run still going is charged up to ``min(end, now)``. The pull is observed at ``now`` (the
    time of the query): it replaces what an earlier pull stored, and a run whose record is the
    same stays as it is (re-running a window changes nothing). ``limits``: the configured sanity
    limits (times after ``now`` plus the clock skew are in the future). If sacct fails, nothing
    is written.
    """
    start_text, end_text = sacct_window(start, end, lookback)
    text = runner.run(sacct_command(start_text, end_text), SACCT_ENVIRONMENT)
    observed = _utc_naive(now) if now else _now()  # sacct has answered: what it said holds now
    seen = min(_utc_naive(end), observed)
    limits = sanity_limits(con, observed_at=observed, observed_what="the time of the sacct query",
                           charged_until=seen, base=limits)
    label = f"sacct {start_text}..{end_text}"
    parsed = parse_sacct(text, timezone="UTC", source_file=label, limits=limits)
    return store_sacct(
        con, parsed, source_file=label, observed_until=seen, observed_at=observed,
        partition_key=f"{_utc_naive(start):%Y-%m-%dT%H:%M:%S}",
        window=(_utc_naive(start), _utc_naive(end)),
    )
