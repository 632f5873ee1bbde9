"""A sacct dump loaded batch by batch (bounded memory): the next batch is parsed in a thread
while this one is written, in one transaction; :class:`NotStreamable` when the batches are not
independent (the caller then parses the dump whole)."""

import queue
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Generic, TypeVar

import duckdb
import polars as pl
import pyarrow as pa

from connectors.errors import Reject, rejects_frame
from connectors.slurm.node_split import allocations_per_node
from connectors.slurm.sacct_stream import SacctBatch, iter_sacct_batches
from connectors.slurm.sanity import SanityLimits
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.nodenames import NodeNamer, load_namer, record_names
from gpuledger.ingest.slurm.store import (
    NODE_COLUMNS,
    SlurmLoad,
    drop_runs_under_other_keys,
    finish_load,
    fresh_tables,
    merge_runs,
    next_load_id,
    node_models,
    observed_rows,
)
from models import schema
from models.runner import append_rows, ledger_arrow, record_ingest, transaction


class NotStreamable(Exception):
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
    """What :func:`stream_sacct_file` has loaded so far."""

    runs: int = 0
    steps: int = 0
    nodes: int = 0
    lines: int = 0
    latest: datetime | None = None
    rejects: list[Reject] = field(default_factory=list)
    # into a fresh table, runs still going are held back and appended last with their until:
    # an UPDATE of rows already written in this transaction makes DuckDB rewrite them at commit
    held: list[pl.DataFrame] = field(default_factory=list)
    base_keys: list[pl.Series] = field(default_factory=list)
    step_keys: list[pl.DataFrame] = field(default_factory=list)


@dataclass(frozen=True)
class _Targets:
    """Where the streamed batches go: the ledger's tables themselves (``direct``, when all three
    were empty) or temporary tables of the same columns merged at the end (the observation time
    of a dump without ``--as-of``, its latest instant, is known only then)."""

    runs: schema.Table
    per_node: schema.Table
    steps: schema.Table
    direct: bool

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, direct: bool) -> "_Targets":
        tables = (schema.SLURM_RUNS, schema.SLURM_NODE_ALLOCATIONS, schema.SLURM_STEPS)
        if direct:
            return cls(*tables, direct=True)
        staged = []
        for t in tables:
            temp = replace(t, name=f"_staged_{t.name}_{uuid.uuid4().hex}")
            con.execute(temp.ddl().replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))
            staged.append(temp)
        return cls(*staged, direct=False)

    def close(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.direct:
            for t in (self.runs, self.per_node, self.steps):
                con.execute(f"DROP TABLE IF EXISTS {t.name}")


def stream_sacct_file(con: duckdb.DuckDBPyConnection, path: Path, *, delimiter: str | None,
                      timezone: str, observed_until: datetime | None,
                      cluster: str | None = None,
                      limits: SanityLimits | None = None) -> SlurmLoad:
    """:func:`import_sacct_file` batch by batch: parse the next batch while loading this one.

    Same result as :func:`store_sacct` of :func:`parse_sacct`, or :class:`NotStreamable` (inside
    the transaction, so nothing is written) when the batches are not independent. Into empty
    tables the batches are appended as they come; otherwise they are staged in temporary tables
    and merged at the end (:func:`merge_runs`), when the dump's observation time is known.
    """
    source_file = str(path)
    given = _utc_naive(observed_until) if observed_until else None
    done = _Streamed()
    with _streaming_settings(con), transaction(con):
        load_id = next_load_id(con)
        models = node_models(con)
        namer = load_namer(con)  # applied in the parsing thread, recorded below
        fresh = fresh_tables(con)
        targets = _Targets.open(con, direct=all(fresh.values()))
        con.execute("DELETE FROM rejects WHERE source = 'sacct' AND source_file = ?",
                    [source_file])
        batches = iter_sacct_batches(path, delimiter=delimiter, timezone=timezone,
                                     source_file=source_file, cluster=cluster,
                                     limits=limits)
        # runs still going are held back only when nothing of theirs can already be there
        prepared = _prepare(batches, given, models, hold=given is None and targets.direct,
                            namer=namer, targets=targets, load_id=load_id)
        if PREFETCH:
            with _Prefetch(prepared) as stream:
                for prep in stream:
                    _load_batch(con, prep, done, targets)
        else:
            for prep in prepared:
                _load_batch(con, prep, done, targets)
        # requeued runs sharing a key in two batches are numbered over the whole dump; a step key
        # in two batches of a load into a ledger with steps is parsed whole too, as it always was
        if len(done.base_keys) > 1 and pl.concat(done.base_keys).is_duplicated().any():
            raise NotStreamable
        if len(done.step_keys) > 1 and pl.concat(done.step_keys).is_duplicated().any():
            raise NotStreamable
        until = given or done.latest
        kept = 0
        if targets.direct:
            if done.held:
                append_rows(con, schema.SLURM_RUNS,
                            observed_rows(pl.concat(done.held), until, load_id))
        else:
            if given is None:  # runs still going are charged up to the dump's latest instant
                con.execute(f'UPDATE {targets.runs.name} SET observed_until = ? '
                            'WHERE "end" IS NULL', [until])
            kept = merge_runs(con, targets.runs.name, targets.per_node.name, targets.steps.name,
                              observed=until)
            targets.close(con)
        record_names(con, namer, "sacct")  # the parsing thread is done with the namer
        kept += drop_runs_under_other_keys(con, source_file).kept
        finish_load(con, load_id, source_file, until)
        append_rows(con, schema.REJECTS, rejects_frame(done.rejects))
        record_ingest(
            con, source="sacct", partition_key=source_file, window_start=None, window_end=None,
            rows_loaded=done.runs + done.steps, rows_rejected=len(done.rejects), atomic=False,
        )
    return SlurmLoad("sacct", done.runs, done.steps, done.nodes, tuple(done.rejects), done.lines,
                     kept, source_file)


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
    one, only writes): the ``*_arrow`` tables are the frames as the target tables take them;
    ``runs_arrow`` excludes the ``held`` runs still going."""

    batch: SacctBatch
    per_node_rows: int
    held: pl.DataFrame | None
    latest: datetime | None
    runs_arrow: pa.Table
    per_node_arrow: pa.Table
    steps_arrow: pa.Table


def _prepare(batches: Iterable[SacctBatch], given: datetime | None, models: dict[str, str],
             *, hold: bool, targets: _Targets, load_id: int,
             namer: NodeNamer | None = None) -> Iterator[_Prepared]:
    """Canonical node names, per-node rows, ``observed_until`` where known (``given``; for runs
    still going else set when the load ends), ``load_id``, the Arrow tables to append."""
    latest: datetime | None = None
    for batch in batches:
        if not batch.complete:
            raise NotStreamable
        if namer is not None:
            batch = replace(batch, runs=namer.canonical_frame(batch.runs, NODE_COLUMNS),
                            steps=namer.canonical_frame(batch.steps, NODE_COLUMNS))
        latest = _later(latest, _latest_instant(batch))
        runs = observed_rows(batch.runs, given, load_id)
        per_node = allocations_per_node(batch.runs, models)
        held = None
        if hold:
            going = pl.col("end").is_null()
            held, runs = runs.filter(going), runs.filter(~going)
        yield _Prepared(batch, per_node.height, held, latest,
                        ledger_arrow(targets.runs, runs),
                        ledger_arrow(targets.per_node, per_node),
                        ledger_arrow(targets.steps, batch.steps))


def _load_batch(con: duckdb.DuckDBPyConnection, prep: _Prepared, done: _Streamed,
                targets: _Targets) -> None:
    batch = prep.batch
    done.latest = prep.latest
    append_rows(con, targets.runs, prep.runs_arrow)
    append_rows(con, targets.per_node, prep.per_node_arrow)
    append_rows(con, targets.steps, prep.steps_arrow)
    if not targets.direct:
        done.step_keys.append(batch.steps.select("cluster", "step_job_id", "start").unique())
    if prep.held is not None:
        done.held.append(prep.held)
    done.base_keys.append(batch.base_keys)
    done.rejects.extend(batch.rejects)
    done.runs += batch.runs.height
    done.steps += batch.steps.height
    done.nodes += prep.per_node_rows
    done.lines += batch.lines_read


def _latest_instant(batch: SacctBatch) -> datetime | None:
    return batch.runs.select(
        pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
    ).item()


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a, b)
