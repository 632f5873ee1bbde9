"""Slurm ingest: sacct dumps or live sacct/sreport into the ledger (CLI and Dagster share it).

Runs are upserted by ``run_key`` (``cluster:JobIDRaw:Submit``), so re-ingesting a window, or a
later window that re-pulls a job (lookback), replaces what was known with what sacct says now and
otherwise changes nothing. A run still going is charged up to ``observed_until``; that never moves
backwards when an older window is re-ingested.
"""

import queue
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Generic, TypeVar

import duckdb
import polars as pl
import pyarrow as pa

from connectors.errors import Reject, rejects_frame
from connectors.slurm.commands import CommandRunner
from connectors.slurm.fields import SACCT_ENVIRONMENT, sacct_command
from connectors.slurm.parse import (
    SacctBatch,
    SacctParse,
    allocations_per_node,
    iter_sacct_batches,
    parse_sacct,
)
from connectors.slurm.sreport import (
    parse_account_utilization_by_user,
    parse_cluster_utilization,
)
from gpuledger.nodenames import NodeNamer, load_namer, record_names
from gpuledger.timewindows import daily_windows  # noqa: F401  (re-exported for callers)
from gpuledger.timewindows import utc_naive as _utc_naive
from models import schema
from models.runner import (
    append_rows,
    is_empty,
    ledger_arrow,
    record_ingest,
    replace_rows,
    transaction,
    upsert_rows,
)

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




#: Node-name columns of the Slurm frames (a run's ``nodes`` is a list; per-node rows are derived
#: from it after canonicalization).
NODE_COLUMNS = ("nodes", "node")


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
    namer = load_namer(con)  # canonical node names before anything is written
    parsed_runs = namer.canonical_frame(parsed.runs, NODE_COLUMNS)
    steps = namer.canonical_frame(parsed.steps, NODE_COLUMNS)
    # a finished run is fully known: pinning observed_until to its end keeps re-ingests identical
    runs = parsed_runs.with_columns(
        pl.coalesce(pl.col("end"), pl.lit(until, dtype=pl.Datetime("us"))).alias("observed_until")
    )
    per_node = allocations_per_node(parsed_runs, node_models(con))
    with transaction(con):
        record_names(con, namer, "sacct")
        _upsert_runs(con, runs, per_node, fresh=_fresh(con))
        upsert_rows(con, schema.SLURM_STEPS, steps,
                    key=("cluster", "step_job_id", "start"), atomic=False)
        drop_runs_under_other_keys(con, source_file)
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


def _fresh(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Which of the Slurm tables are empty (then nothing in them needs replacing)."""
    tables = (schema.SLURM_RUNS, schema.SLURM_STEPS, schema.SLURM_NODE_ALLOCATIONS)
    return {t.name: is_empty(con, t) for t in tables}


def _upsert_runs(con: duckdb.DuckDBPyConnection, runs: pl.DataFrame, per_node: pl.DataFrame,
                 *, fresh: dict[str, bool]) -> pl.DataFrame:  # fmt: skip
    """Replace the runs of ``runs`` (and all their per-node rows) inside the open transaction.

    Returns the ``observed_until`` that runs still going had before (``run_key``,
    ``observed_until``), for :func:`_keep_longer_until`.
    """
    previous = pl.DataFrame(schema={"run_key": pl.String, "observed_until": pl.Datetime("us")})
    view = f"_incoming_runs_keys_{uuid.uuid4().hex}"
    touch_runs = not fresh[schema.SLURM_RUNS.name] and runs.height > 0
    touch_nodes = not fresh[schema.SLURM_NODE_ALLOCATIONS.name] and runs.height > 0
    if touch_runs or touch_nodes:
        con.register(view, runs.select("run_key").to_arrow())
    try:
        if touch_runs:
            previous = con.execute(
                f"SELECT run_key, observed_until FROM slurm_runs WHERE run_key IN "
                f"(SELECT run_key FROM {view}) AND \"end\" IS NULL"
            ).pl()
            con.execute(f"DELETE FROM slurm_runs WHERE run_key IN (SELECT run_key FROM {view})")
        append_rows(con, schema.SLURM_RUNS, runs)
        _keep_longer_until(con, previous)
        # a run's per-node rows are replaced whole, also when it now holds no GPU row
        if touch_nodes:
            con.execute("DELETE FROM slurm_node_allocations "
                        f"WHERE run_key IN (SELECT run_key FROM {view})")  # fmt: skip
        append_rows(con, schema.SLURM_NODE_ALLOCATIONS, per_node)
    finally:
        if touch_runs or touch_nodes:
            con.unregister(view)
    return previous


def _keep_longer_until(con: duckdb.DuckDBPyConnection, previous: pl.DataFrame) -> None:
    """A re-ingest of an older window must not shorten a run already seen going longer."""
    if previous.height == 0:
        return
    view = f"_previous_until_{uuid.uuid4().hex}"
    con.register(view, previous.to_arrow())
    try:
        con.execute(
            f"UPDATE slurm_runs AS t SET observed_until = p.observed_until FROM {view} AS p "
            "WHERE t.run_key = p.run_key AND t.\"end\" IS NULL "
            "AND p.observed_until > t.observed_until"
        )
    finally:
        con.unregister(view)


class _NotStreamable(Exception):
    """The dump cannot be loaded batch by batch (see :class:`SacctBatch`); parse it whole."""


_T = TypeVar("_T")


class _Prefetch(Generic[_T]):
    """Iterate ``items`` in a background thread, ``depth`` items ahead, so that parsing the next
    batch (Polars, GIL released) overlaps loading this one (DuckDB, GIL released).

    Use as a context manager: leaving it (also on an error) stops and joins the thread; an
    exception of the producer is raised in the consumer.
    """

    _DONE = object()

    def __init__(self, items: Iterable[_T], depth: int = 1) -> None:
        self._items = items
        self._queue: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sacct-parse", daemon=True)

    def _put(self, item: tuple[bool, object]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
            except queue.Full:
                continue
            return True
        return False

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put((True, item)):
                    return
        except BaseException as exc:  # handed over to the consumer
            self._put((False, exc))
            return
        self._put((True, self._DONE))

    def __enter__(self) -> Iterator[_T]:
        self._thread.start()
        return self._iterate()

    def _iterate(self) -> Iterator[_T]:
        while True:
            ok, value = self._queue.get()
            if not ok:
                assert isinstance(value, BaseException)
                raise value
            if value is self._DONE:
                return
            yield value  # type: ignore[misc]

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class _Streamed:
    """What :func:`_stream_sacct_file` has loaded so far."""

    runs: int = 0
    steps: int = 0
    nodes: int = 0
    lines: int = 0
    latest: datetime | None = None
    rejects: list[Reject] = field(default_factory=list)
    previous: list[pl.DataFrame] = field(default_factory=list)
    going: list[pl.Series] = field(default_factory=list)  # runs still going: until set at the end
    # into a fresh table, runs still going are held back and appended last with their until:
    # an UPDATE of rows already written in this transaction makes DuckDB rewrite them at commit
    held: list[pl.DataFrame] = field(default_factory=list)
    base_keys: list[pl.Series] = field(default_factory=list)
    step_keys: list[pl.DataFrame] = field(default_factory=list)


def _stream_sacct_file(con: duckdb.DuckDBPyConnection, path: Path, *, delimiter: str | None,
                       timezone: str, observed_until: datetime | None,
                       cluster: str | None = None) -> SlurmLoad:  # fmt: skip
    """:func:`import_sacct_file` batch by batch: parse the next batch while loading this one.

    Same result as :func:`store_sacct` of :func:`parse_sacct`, or :class:`_NotStreamable` (inside
    the transaction, so nothing is written) when the batches are not independent.
    """
    source_file = str(path)
    given = _utc_naive(observed_until) if observed_until else None
    done = _Streamed()
    with _streaming_settings(con), transaction(con):
        models = node_models(con)
        namer = load_namer(con)  # applied in the parsing thread, recorded below
        fresh = _fresh(con)
        con.execute("DELETE FROM rejects WHERE source = 'sacct' AND source_file = ?",
                    [source_file])  # fmt: skip
        batches = iter_sacct_batches(path, delimiter=delimiter, timezone=timezone,
                                     source_file=source_file, cluster=cluster)  # fmt: skip
        # runs still going are held back only when nothing of theirs can already be there
        hold = (given is None and fresh[schema.SLURM_RUNS.name]
                and fresh[schema.SLURM_NODE_ALLOCATIONS.name])
        prepared = _prepare(batches, given, models, fresh, hold=hold, namer=namer)
        if PREFETCH:
            with _Prefetch(prepared) as stream:
                for prep in stream:
                    _load_batch(con, prep, done, fresh)
        else:
            for prep in prepared:
                _load_batch(con, prep, done, fresh)
        # requeued runs sharing a key in two batches are numbered over the whole dump; a step key
        # in two batches would have replaced this load's own row: both need the whole dump
        if len(done.base_keys) > 1 and pl.concat(done.base_keys).is_duplicated().any():
            raise _NotStreamable
        if len(done.step_keys) > 1 and pl.concat(done.step_keys).is_duplicated().any():
            raise _NotStreamable
        if done.held:
            append_rows(con, schema.SLURM_RUNS, pl.concat(done.held).with_columns(
                pl.lit(done.latest, dtype=pl.Datetime("us")).alias("observed_until")))
        if given is None and done.going:
            _settle_going(con, pl.concat(done.going), done.latest)
        for p in done.previous:
            _keep_longer_until(con, p)
        record_names(con, namer, "sacct")  # the parsing thread is done with the namer
        drop_runs_under_other_keys(con, source_file)
        append_rows(con, schema.REJECTS, rejects_frame(done.rejects))
        record_ingest(
            con, source="sacct", partition_key=source_file, window_start=None, window_end=None,
            rows_loaded=done.runs + done.steps, rows_rejected=len(done.rejects), atomic=False,
        )
    return SlurmLoad("sacct", done.runs, done.steps, done.nodes, tuple(done.rejects), done.lines)


#: Parse the next batch in a thread while this one loads.
PREFETCH = True
#: Leave one core to the parsing thread while DuckDB loads (DuckDB's threads minus one).
SPARE_PARSER_CORE = True
#: DuckDB buffers this much of a transaction's appended row groups before compressing and
#: writing them (its default is a fifth of its memory limit, per thread): a small buffer keeps the
#: streamed load's memory flat and moves that work from the commit to the appends, where it
#: overlaps the parsing of the next batch.
WRITE_BUFFER = "64MB"


@contextmanager
def _streaming_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB settings for the streamed load, restored afterwards.

    DuckDB's appends scale poorly past one thread while Polars parses the next batch beside them;
    on a small machine the extra DuckDB thread only competes with the parser.
    """
    def setting(name: str) -> str:
        return str(con.execute("SELECT current_setting(?)", [name]).fetchone()[0])

    threads, buffer = int(setting("threads")), setting("write_buffer_row_group_memory_limit")
    try:
        if SPARE_PARSER_CORE and threads > 1:
            con.execute(f"SET threads = {threads - 1}")
        if WRITE_BUFFER:
            con.execute(f"SET write_buffer_row_group_memory_limit = '{WRITE_BUFFER}'")
        yield
    finally:
        con.execute(f"SET threads = {threads}")
        # the default follows the memory limit and the threads: keep it a default if it was one
        con.execute("RESET write_buffer_row_group_memory_limit")
        if setting("write_buffer_row_group_memory_limit") != buffer:
            con.execute(f"SET write_buffer_row_group_memory_limit = '{buffer}'")


@dataclass(frozen=True)
class _Prepared:
    """A parsed batch made ready to write, in the parsing thread (the loading thread, the slower
    one, only writes). ``runs`` excludes the ``held`` runs still going; the ``*_arrow`` tables are
    the frames as the ledger's tables take them, made when those tables were empty (appends)."""

    batch: SacctBatch
    runs: pl.DataFrame
    per_node: pl.DataFrame
    held: pl.DataFrame | None
    latest: datetime | None
    runs_arrow: pa.Table | None = None
    per_node_arrow: pa.Table | None = None
    steps_arrow: pa.Table | None = None


def _prepare(batches: Iterable[SacctBatch], given: datetime | None, models: dict[str, str],
             fresh: dict[str, bool], *, hold: bool,
             namer: NodeNamer | None = None) -> Iterator[_Prepared]:  # fmt: skip
    latest: datetime | None = None
    for batch in batches:
        if not batch.complete:
            raise _NotStreamable
        if namer is not None:
            batch = replace(batch, runs=namer.canonical_frame(batch.runs, NODE_COLUMNS),
                            steps=namer.canonical_frame(batch.steps, NODE_COLUMNS))
        latest = _later(latest, _latest_instant(batch))
        runs = batch.runs.with_columns(
            pl.coalesce(pl.col("end"), pl.lit(given or latest, dtype=pl.Datetime("us")))
            .alias("observed_until")
        )  # fmt: skip
        per_node = allocations_per_node(batch.runs, models)
        held = None
        if hold:
            going = pl.col("end").is_null()
            held, runs = runs.filter(going), runs.filter(~going)
        arrow = {}
        for name, target, frame in ((schema.SLURM_RUNS.name, schema.SLURM_RUNS, runs),
                                    (schema.SLURM_NODE_ALLOCATIONS.name,
                                     schema.SLURM_NODE_ALLOCATIONS, per_node),
                                    (schema.SLURM_STEPS.name, schema.SLURM_STEPS, batch.steps)):
            if fresh[name]:
                arrow[name] = ledger_arrow(target, frame)
        yield _Prepared(batch, runs, per_node, held, latest,
                        arrow.get(schema.SLURM_RUNS.name),
                        arrow.get(schema.SLURM_NODE_ALLOCATIONS.name),
                        arrow.get(schema.SLURM_STEPS.name))  # fmt: skip


def _load_batch(con: duckdb.DuckDBPyConnection, prep: _Prepared, done: _Streamed,
                fresh: dict[str, bool]) -> None:  # fmt: skip
    batch = prep.batch
    done.latest = prep.latest
    if prep.runs_arrow is not None and prep.per_node_arrow is not None:
        append_rows(con, schema.SLURM_RUNS, prep.runs_arrow)
        append_rows(con, schema.SLURM_NODE_ALLOCATIONS, prep.per_node_arrow)
    else:
        done.previous.append(_upsert_runs(con, prep.runs, prep.per_node, fresh=fresh))
    if prep.steps_arrow is not None:
        append_rows(con, schema.SLURM_STEPS, prep.steps_arrow)
    else:
        upsert_rows(con, schema.SLURM_STEPS, batch.steps,
                    key=("cluster", "step_job_id", "start"), atomic=False)  # fmt: skip
        done.step_keys.append(batch.steps.select("cluster", "step_job_id", "start").unique())
    if prep.held is not None:
        done.held.append(prep.held)
    else:
        done.going.append(batch.runs.filter(pl.col("end").is_null())["run_key"])
    done.base_keys.append(batch.base_keys)
    done.rejects.extend(batch.rejects)
    done.runs += batch.runs.height
    done.steps += batch.steps.height
    done.nodes += prep.per_node.height
    done.lines += batch.lines_read


def _latest_instant(batch: SacctBatch) -> datetime | None:
    return batch.runs.select(
        pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
    ).item()


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a, b)


def _settle_going(con: duckdb.DuckDBPyConnection, keys: pl.Series | None,
                  until: datetime | None) -> None:  # fmt: skip
    """Runs still going are charged up to the dump's latest instant, known only at its end."""
    if keys is None or keys.len() == 0:
        return
    view = f"_going_{uuid.uuid4().hex}"
    con.register(view, keys.to_frame("run_key").to_arrow())
    try:
        con.execute(
            f"UPDATE slurm_runs SET observed_until = ? WHERE run_key IN "
            f"(SELECT run_key FROM {view}) AND \"end\" IS NULL", [until],
        )  # fmt: skip
    finally:
        con.unregister(view)


def import_sacct_file(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    delimiter: str | None = None,
    timezone: str = "UTC",
    observed_until: datetime | None = None,
    cluster: str | None = None,
) -> SlurmLoad:
    """Load a sacct dump a site exported (any field order, delimiter from the header).

    ``cluster``: the cluster of a dump without a Cluster field (with one, rows of another cluster
    are rejected). The dump is parsed and loaded batch by batch (bounded memory, parsing
    overlapped with loading) in one transaction; a dump whose batches are not independent (steps
    away from their allocation line, requeued runs sharing a key far apart) is parsed whole
    instead.
    """
    try:
        return _stream_sacct_file(con, path, delimiter=delimiter, timezone=timezone,
                                  observed_until=observed_until, cluster=cluster)  # fmt: skip
    except _NotStreamable:
        pass
    parsed = parse_sacct(path, delimiter=delimiter, timezone=timezone, source_file=str(path),
                         cluster=cluster)  # fmt: skip
    return store_sacct(con, parsed, source_file=str(path), observed_until=observed_until,
                       partition_key=str(path))




def drop_runs_under_other_keys(con: duckdb.DuckDBPyConnection, source_file: str) -> int:
    """Remove older rows of a run this load stored under the other form of its key.

    A dump without JobIDRaw keys an array task or het component by its JobID text
    (``c:123_4:submit``), one with JobIDRaw by the database id (``c:127:submit``,
    connectors.slurm.header). Loading both kinds of dump would charge such a run twice: the rows
    this load (``source_file``) just stored replace those of the same run (cluster, JobID, Submit
    and Start) keyed the other way, with their per-node rows and steps. Returns the number of
    runs removed. Costs nothing while no run lacks JobIDRaw.
    """
    if con.execute("SELECT count(*) FROM (SELECT 1 FROM slurm_runs WHERE job_id_raw IS NULL "
                   "LIMIT 1)").fetchone()[0] == 0:  # fmt: skip
        return 0
    stale = [k for (k,) in con.execute(
        """
        SELECT DISTINCT o.run_key
        FROM slurm_runs AS m
        INNER JOIN slurm_runs AS o
            ON o.cluster = m.cluster AND o.job_id = m.job_id
            AND o.submit IS NOT DISTINCT FROM m.submit AND o.start IS NOT DISTINCT FROM m.start
            AND o.run_key <> m.run_key
            AND (o.job_id_raw IS NULL) <> (m.job_id_raw IS NULL)
        WHERE m.source_file = ?
        """, [source_file]).fetchall()]  # fmt: skip
    if stale:
        for table in ("slurm_runs", "slurm_node_allocations", "slurm_steps"):
            con.execute(f"DELETE FROM {table} WHERE run_key IN (SELECT unnest(?))", [stale])
    return len(stale)


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
