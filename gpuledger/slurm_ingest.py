"""Slurm ingest: sacct dumps or live sacct/sreport into the ledger (CLI and Dagster share it).

Runs are upserted by ``run_key`` (``cluster:JobIDRaw:Submit``), so re-ingesting a window, or a
later window that re-pulls a job (lookback), replaces what was known with what sacct says now and
otherwise changes nothing. A run still going is charged up to ``observed_until``; that never moves
backwards when an older window is re-ingested.
"""

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.slurm.commands import CommandRunner
from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.parse import SacctParse, allocations_per_node, parse_sacct
from connectors.slurm.sreport import (
    parse_account_utilization_by_user,
    parse_cluster_utilization,
)
from models import schema
from models.runner import record_ingest, replace_rows, transaction, upsert_rows

SREPORT_TRES = "gres/gpu"


@dataclass(frozen=True)
class SlurmLoad:
    """What one Slurm load did."""

    source: str
    runs: int
    steps: int
    node_allocations: int
    rejects: tuple[Reject, ...] = field(default_factory=tuple)
    lines_read: int = 0

    @property
    def rows(self) -> int:
        return self.runs + self.steps

    def summary(self) -> str:
        text = (
            f"{self.source}: {self.lines_read} lines read: {self.runs} runs, {self.steps} steps, "
            f"{self.node_allocations} per-node GPU allocations, {len(self.rejects)} rejected"
        )
        for r in self.rejects[:5]:
            text += f"\n  rejected {r.describe()}"
        if len(self.rejects) > 5:
            text += f"\n  … and {len(self.rejects) - 5} more (see the rejects table)"
        return text


def _utc_naive(value: datetime) -> datetime:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def node_models(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """GPU model per node from the inventory, for runs whose TRES carry no GPU type."""
    rows = con.execute("SELECT node, any_value(gpu_model) FROM nodes GROUP BY node").fetchall()
    return dict(rows)


def default_observed_until(parsed: SacctParse) -> datetime | None:
    """Without a stated time, a dump is taken as seen at its latest recorded instant."""
    latest = parsed.runs.select(
        pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
    ).item()
    return latest


def store_sacct(
    con: duckdb.DuckDBPyConnection,
    parsed: SacctParse,
    *,
    source_file: str,
    observed_until: datetime | None,
    partition_key: str,
    window: tuple[datetime | None, datetime | None] = (None, None),
) -> SlurmLoad:
    """Upsert a parsed sacct output: runs, steps, per-node allocations and rejects, atomically."""
    until = _utc_naive(observed_until) if observed_until else default_observed_until(parsed)
    # a finished run is fully known: pinning observed_until to its end keeps re-ingests identical
    runs = parsed.runs.with_columns(
        pl.coalesce(pl.col("end"), pl.lit(until, dtype=pl.Datetime("us"))).alias("observed_until")
    )
    per_node = allocations_per_node(parsed.runs, node_models(con))
    keys = runs.select("run_key")
    with transaction(con):
        con.register("_incoming_runs_keys", keys.to_arrow())
        previous = con.execute(
            "SELECT run_key, observed_until FROM slurm_runs "
            "WHERE run_key IN (SELECT run_key FROM _incoming_runs_keys) AND \"end\" IS NULL"
        ).pl()
        con.unregister("_incoming_runs_keys")
        upsert_rows(con, schema.SLURM_RUNS, runs, key=("run_key",), atomic=False)
        if previous.height:
            # a re-ingest of an older window must not shorten a run already seen going longer
            con.register("_previous_until", previous.to_arrow())
            con.execute(
                "UPDATE slurm_runs AS t SET observed_until = p.observed_until "
                "FROM _previous_until AS p WHERE t.run_key = p.run_key AND t.\"end\" IS NULL "
                "AND p.observed_until > t.observed_until"
            )
            con.unregister("_previous_until")
        # a run's per-node rows are replaced whole, also when it now holds no GPU row
        con.register("_incoming_runs_keys", keys.to_arrow())
        con.execute("DELETE FROM slurm_node_allocations "
                    "WHERE run_key IN (SELECT run_key FROM _incoming_runs_keys)")
        con.unregister("_incoming_runs_keys")
        replace_rows(con, schema.SLURM_NODE_ALLOCATIONS, per_node, where="FALSE", atomic=False)
        upsert_rows(con, schema.SLURM_STEPS, parsed.steps,
                    key=("cluster", "step_job_id", "start"), atomic=False)
        replace_rows(
            con, schema.REJECTS, rejects_frame(parsed.rejects),
            where="source = 'sacct' AND source_file = ?", params=(source_file,), atomic=False,
        )
        record_ingest(
            con, source="sacct", partition_key=partition_key, window_start=window[0],
            window_end=window[1], rows_loaded=parsed.runs.height + parsed.steps.height,
            rows_rejected=len(parsed.rejects), atomic=False,
        )
    return SlurmLoad("sacct", parsed.runs.height, parsed.steps.height, per_node.height,
                     tuple(parsed.rejects), parsed.lines_read)


def import_sacct_file(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    delimiter: str | None = None,
    timezone: str = "UTC",
    observed_until: datetime | None = None,
) -> SlurmLoad:
    """Load a sacct dump a site exported (any field order, delimiter from the header)."""
    parsed = parse_sacct(path, delimiter=delimiter, timezone=timezone, source_file=str(path))
    return store_sacct(con, parsed, source_file=str(path), observed_until=observed_until,
                       partition_key=str(path))


def daily_windows(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """Split ``[start, end)`` at UTC midnights."""
    start, end = _utc_naive(start), _utc_naive(end)
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
) -> SlurmLoad:
    """Run sacct for ``[start - lookback, end)`` and upsert what it says.

    A run still going is charged up to ``min(end, now)``. If sacct fails, nothing is written.
    """
    start_text, end_text = sacct_window(start, end, lookback)
    text = runner.run(sacct_command(start_text, end_text), SACCT_ENVIRONMENT)
    label = f"sacct {start_text}..{end_text}"
    parsed = parse_sacct(text, timezone="UTC", source_file=label)
    seen = min(_utc_naive(end), _utc_naive(now or datetime.now(UTC)))
    return store_sacct(
        con, parsed, source_file=label, observed_until=seen,
        partition_key=f"{_utc_naive(start):%Y-%m-%dT%H:%M:%S}",
        window=(_utc_naive(start), _utc_naive(end)),
    )


def sreport_commands(start: datetime, end: datetime) -> list[list[str]]:
    """The two sreport calls for a window (run with ``TZ=UTC``)."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    window = [f"start={_utc_naive(start):{fmt}}", f"end={_utc_naive(end):{fmt}}"]
    base = ["sreport", "-P", "-t", "seconds", "-T", SREPORT_TRES, "cluster"]
    return [[*base, "utilization", *window], [*base, "AccountUtilizationByUser", *window]]


def store_sreport(
    con: duckdb.DuckDBPyConnection, utilization_text: str, account_text: str, source: str
) -> tuple[int, int]:
    """Replace the sreport figures of the report's window (both reports in one transaction)."""
    util = parse_cluster_utilization(utilization_text, source_file=f"{source} utilization")
    accounts = parse_account_utilization_by_user(account_text, source_file=f"{source} accounts")
    with transaction(con):
        for table, frame in ((schema.SREPORT_UTILIZATION, util),
                             (schema.SREPORT_ACCOUNT_USAGE, accounts)):
            windows = frame.select("cluster", "report_start", "report_end").unique()
            for cluster, rs, re in windows.iter_rows():
                con.execute(
                    f"DELETE FROM {table.name} WHERE cluster = ? AND report_start = ? "
                    "AND report_end = ?", [cluster, rs, re],
                )
            replace_rows(con, table, frame, where="FALSE", atomic=False)
    return util.height, accounts.height


def ingest_sreport(
    con: duckdb.DuckDBPyConnection, runner: CommandRunner, start: datetime, end: datetime
) -> tuple[int, int]:
    """Run both sreport reports for ``[start, end)`` and store them."""
    util_cmd, acct_cmd = sreport_commands(start, end)
    env = {"TZ": "UTC"}
    return store_sreport(con, runner.run(util_cmd, env), runner.run(acct_cmd, env),
                         source=f"sreport {start:%Y-%m-%dT%H:%M:%S}")
