"""Slurm ingest: sacct dumps or live sacct/sreport into the ledger (CLI and Dagster share it).

Runs are upserted by ``run_key`` (``cluster:JobIDRaw:Submit``), so re-ingesting a window, or a
later window that re-pulls a job (lookback), replaces what was known with what sacct says now and
otherwise changes nothing. A run still going is charged up to ``observed_until``; that never moves
backwards when an older window is re-ingested.

Facts move forward (monotonic ingest). Every run row names the load that stored it (``load_id``);
``sacct_loads`` holds when that load's source was observed (``observed_at``): a dump's ``--as-of``
(else its latest instant), a live sacct query's time. A run's record is replaced only by one
observed as late or later, and never by one that has got less far (a run still going, or not
started, never replaces the same run ended: a requeue is another run, with another key). So
re-importing an older dump after a newer one changes nothing for the runs it knows less about,
and says so (``SlurmLoad.kept``). A record that says the same as the ledger's leaves the row as it
is (re-running a window changes nothing). The observation is a row of its own, written when the
load ends, so a load into empty tables appends its rows as they are parsed although a dump's
latest instant is known only at its end.

Sanity limits (``connectors.slurm.sanity``) are held where the node inventory is at hand: here, at
load, with the observation time for times in the future.
"""

import ipaddress
import queue
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

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
from connectors.slurm.sanity import SanityLimits, counts_by_rule
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
)

SREPORT_TRES = "gres/gpu"

SREPORT_TRES = "gres/gpu"


@dataclass(frozen=True)
class SlurmLoad:
    """What one Slurm load did.

    ``runs``/``steps``: what the source held (lines that loaded); ``kept``: of those runs, the
    ones the ledger already knew from a later observation and left as they were (monotonic
    ingest, module docstring); ``rejects``: the lines that could not be loaded, sanity limits
    among them (:attr:`rejected_by_rule`).
    """

    source: str
    runs: int
    steps: int
    node_allocations: int
    rejects: tuple[Reject, ...] = field(default_factory=tuple)
    lines_read: int = 0
    kept: int = 0
    source_file: str = ""

    @property
    def rows(self) -> int:
        return self.runs + self.steps

    @property
    def rejected_by_rule(self) -> dict[str, int]:
        """Rejected lines per sanity rule (every rule, 0 included; connectors.slurm.sanity)."""
        return counts_by_rule(self.rejects)

    def summary(self) -> str:
        text = (
            f"{self.source}: {self.lines_read} lines read: {self.runs} runs, {self.steps} steps, "
            f"{self.node_allocations} per-node GPU allocations, {len(self.rejects)} rejected"
        )
        broken = {rule: n for rule, n in self.rejected_by_rule.items() if n}
        if broken:
            text += (f" ({sum(broken.values())} by sanity limits: "
                     + ", ".join(f"{rule} {n}" for rule, n in broken.items()) + ")")
        if self.kept:
            text += f"\n  {self.kept} runs kept: the ledger has a later observation"
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


def node_gpu_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """GPUs per node from the inventory (its ``gpu_count``, else its number of GPU rows)."""
    rows = con.execute("SELECT node, coalesce(max(gpu_count), count(*)) FROM nodes "
                       "GROUP BY node").fetchall()  # fmt: skip
    return {node: int(n) for node, n in rows}


def _inventory_name(namer: NodeNamer) -> Callable[[str], str]:
    """A node name as a dump prints it → the name the inventory uses, without deciding anything
    (the parser runs batches in parallel; the names are recorded later, by ``namer`` itself):
    the ledger's register of names, else a configured alias, else the short name of a dotted
    name that is not an IP address (gpuledger.nodenames)."""
    known = dict(namer.known)
    aliases = {k.strip().lower(): v.strip() for k, v in namer.aliases.items()}

    def name(raw: str) -> str:
        if raw in known:
            return known[raw]
        text = raw.strip()
        alias = aliases.get(text.lower())
        if alias:
            return alias
        if "." in text:
            try:
                ipaddress.ip_address(text)
            except ValueError:
                return text.split(".", 1)[0]
        return text

    return name


def sanity_limits(con: duckdb.DuckDBPyConnection, *, observed_at: datetime | None,
                  observed_what: str, charged_until: datetime | None = None,
                  base: SanityLimits | None = None) -> SanityLimits:  # fmt: skip
    """``base`` (the configured limits, else the defaults) with the ledger's node inventory, the
    observation time that times must not pass and how far runs still going are charged
    (connectors.slurm.sanity)."""
    inventory = node_gpu_counts(con)
    return replace(
        base or SanityLimits(), inventory=inventory,
        canonical=_inventory_name(load_namer(con)) if inventory else None,
        observed_at=_utc_naive(observed_at) if observed_at else None, observed_what=observed_what,
        charged_until=_utc_naive(charged_until) if charged_until else None,
    )


def configured_limits(settings: object) -> SanityLimits:
    """The sanity limits of ``[gpuledger.slurm_limits]`` in the settings file (any of
    ``max_gpus_per_node``, ``max_gpus_per_job``, ``max_elapsed_days``, ``clock_skew_seconds``;
    the others keep their defaults). ``ValueError`` for an unknown key or a bad value."""
    extra = getattr(settings, "extra", {}) or {}
    table = extra.get("slurm_limits")
    if table is not None and not isinstance(table, dict):
        msg = ("expected [gpuledger.slurm_limits] as a table of limits (max_gpus_per_node = 64, "
               f"…), found {table!r}")
        raise ValueError(msg)
    return SanityLimits.from_config(table)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def default_observed_until(parsed: SacctParse) -> datetime | None:
    """Without a stated time, a dump is taken as seen at its latest recorded instant."""
    latest = parsed.runs.select(
        pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
    ).item()
    return latest


def _observed(runs: pl.DataFrame, until: datetime | None, load_id: int) -> pl.DataFrame:
    """Runs with ``observed_until`` (a finished run is fully known: pinned to its end, which keeps
    re-ingests identical; a run still going: ``until``) and the ``load_id`` storing them."""
    return runs.with_columns(
        pl.coalesce(pl.col("end"), pl.lit(until, dtype=pl.Datetime("us"))).alias("observed_until"),
        pl.lit(load_id, dtype=pl.Int64).alias("load_id"),
    )


def _next_load_id(con: duckdb.DuckDBPyConnection) -> int:
    """A new load's id (inside the writer's transaction: one writer at a time)."""
    return int(con.execute("SELECT coalesce(max(load_id), 0) + 1 FROM sacct_loads").fetchone()[0])


def _finish_load(con: duckdb.DuckDBPyConnection, load_id: int, source_file: str,
                 observed: datetime | None) -> None:  # fmt: skip
    """Record the load's observation, and forget loads none of whose rows is left (a re-run
    whose every run was the same leaves ``sacct_loads`` as it was)."""
    con.execute("INSERT INTO sacct_loads (load_id, source_file, observed_at) VALUES (?, ?, ?)",
                [load_id, source_file, observed])  # fmt: skip
    con.execute("DELETE FROM sacct_loads WHERE load_id NOT IN "
                "(SELECT DISTINCT load_id FROM slurm_runs WHERE load_id IS NOT NULL)")


def store_sacct(
    con: duckdb.DuckDBPyConnection,
    parsed: SacctParse,
    *,
    source_file: str,
    observed_until: datetime | None,
    partition_key: str,
    window: tuple[datetime | None, datetime | None] = (None, None),
    observed_at: datetime | None = None,
) -> SlurmLoad:
    """Store a parsed sacct output: runs, steps, per-node allocations and rejects, atomically.

    ``observed_until``: how far a run still going is charged (default: the dump's latest
    instant). ``observed_at``: when the source was observed (default: ``observed_until``, else
    the dump's latest instant); a run the ledger knows from a later observation is kept as it is
    (:func:`_merge_runs`).
    """
    until = _utc_naive(observed_until) if observed_until else default_observed_until(parsed)
    seen = _utc_naive(observed_at) if observed_at else until
    namer = load_namer(con)  # canonical node names before anything is written
    parsed_runs = namer.canonical_frame(parsed.runs, NODE_COLUMNS)
    steps = namer.canonical_frame(parsed.steps, NODE_COLUMNS)
    per_node = allocations_per_node(parsed_runs, node_models(con))
    with transaction(con):
        load_id = _next_load_id(con)
        record_names(con, namer, "sacct")
        kept = _store_runs(con, _observed(parsed_runs, until, load_id), per_node, steps, seen)
        kept += drop_runs_under_other_keys(con, source_file).kept
        _finish_load(con, load_id, source_file, seen)
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
                     tuple(parsed.rejects), parsed.lines_read, kept, source_file)


def _fresh(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Which of the Slurm tables are empty (then nothing in them needs replacing)."""
    tables = (schema.SLURM_RUNS, schema.SLURM_STEPS, schema.SLURM_NODE_ALLOCATIONS)
    return {t.name: is_empty(con, t) for t in tables}


def _store_runs(con: duckdb.DuckDBPyConnection, runs: pl.DataFrame, per_node: pl.DataFrame,
                steps: pl.DataFrame, observed: datetime | None) -> int:  # fmt: skip
    """Runs (with ``observed_until`` and ``load_id``), their per-node rows and steps, observed
    at ``observed``, into the ledger, inside the caller's transaction: appended into empty
    tables, else merged (:func:`_merge_runs`). Returns the runs kept because the ledger knows
    them later."""
    frames = ((schema.SLURM_RUNS, runs), (schema.SLURM_NODE_ALLOCATIONS, per_node),
              (schema.SLURM_STEPS, steps))  # fmt: skip
    if all(_fresh(con).values()):
        for table, frame in frames:
            append_rows(con, table, frame)
        return 0
    views: list[str] = []
    try:
        for table, frame in frames:
            views.append(f"_incoming_{table.name}_{uuid.uuid4().hex}")
            con.register(views[-1], ledger_arrow(table, frame))
        return _merge_runs(con, *views, observed=observed)
    finally:
        for view in views:
            con.unregister(view)


def _progress(alias: str) -> str:
    """How far a run record has got: 2 ended, 1 started (still going), 0 not started."""
    return (f'(CASE WHEN {alias}."end" IS NOT NULL THEN 2 '
            f"WHEN {alias}.start IS NOT NULL THEN 1 ELSE 0 END)")  # fmt: skip


def _stored_is_later(stored: str, stored_seen: str, incoming: str, incoming_seen: str) -> str:
    """SQL: the ``stored`` record of a run (observed at ``stored_seen``) stays against the
    ``incoming`` one (observed at ``incoming_seen``), facts moving forward: it has got further
    (ended where the other is still going or not started; a requeue is another run), or as far
    and was observed later. Equal: the incoming one wins (a re-import replaces); a stored row of
    no known load (written before loads were recorded) is replaced unless it got further."""
    s, i = _progress(stored), _progress(incoming)
    return f"({s} > {i} OR ({s} = {i} AND {stored_seen} > {incoming_seen}))"


#: Columns compared to tell whether an incoming run says anything new (all but load_id).
_SAME_COLUMNS = tuple(c for c in schema.SLURM_RUNS.column_names if c != "load_id")


def _merge_runs(con: duckdb.DuckDBPyConnection, runs: str, per_node: str, steps: str, *,
                observed: datetime | None) -> int:  # fmt: skip
    """Merge incoming runs, per-node rows and steps (tables or views with the ledger's columns),
    observed at ``observed``, into the ledger, inside the caller's transaction. Returns the runs
    kept as they were.

    Per incoming run, by its key:

    - ``new``: not in the ledger: stored;
    - ``same``: every column equal but ``load_id``: the row is left as it is (re-running a
      window, re-importing a dump changes nothing; the row stays with the load that first stored
      this content; a row of no known load takes this one's);
    - ``later``: the ledger's record is later (:func:`_stored_is_later`): kept with its per-node
      rows and steps, counted ("N runs kept: the ledger has a later observation");
    - ``replace``: replaced; a run still going keeps the longer ``observed_until`` of the two
      (re-ingesting an older window never shortens it).

    Per-node rows of every run but the ``later`` ones are replaced whole (also when the run now
    holds no GPU row); steps are upserted by ``(cluster, step_job_id, start)``, those of ``later``
    runs left out, and a step of no run (its allocation line was rejected) never replaces one
    the ledger knows with its run.
    """
    verdicts = f"_sacct_verdicts_{uuid.uuid4().hex}"
    same = " AND ".join(f'i."{c}" IS NOT DISTINCT FROM s."{c}"' for c in _SAME_COLUMNS)
    later = _stored_is_later("s", "l.observed_at", "i", "$observed")
    con.execute(f"""
        CREATE TEMP TABLE {verdicts} AS
        SELECT i.run_key,
               CASE WHEN s.run_key IS NULL THEN 'new'
                    WHEN l.load_id IS NOT NULL AND {same} THEN 'same'
                    WHEN {later} THEN 'later'
                    ELSE 'replace' END AS verdict,
               CASE WHEN s."end" IS NULL THEN s.observed_until END AS going_until
        FROM {runs} AS i
        LEFT JOIN slurm_runs AS s ON s.run_key = i.run_key
        LEFT JOIN sacct_loads AS l ON l.load_id = s.load_id
    """, {"observed": observed})  # fmt: skip
    try:
        def keys(*kinds: str) -> str:
            listed = ", ".join(f"'{k}'" for k in kinds)
            return f"(SELECT run_key FROM {verdicts} WHERE verdict IN ({listed}))"

        con.execute(f"DELETE FROM slurm_runs WHERE run_key IN {keys('replace')}")
        con.execute(f"INSERT INTO slurm_runs BY NAME SELECT * FROM {runs} "
                    f"WHERE run_key IN {keys('new', 'replace')}")  # fmt: skip
        con.execute(f"""
            UPDATE slurm_runs AS t SET observed_until = v.going_until FROM {verdicts} AS v
            WHERE t.run_key = v.run_key AND v.verdict = 'replace' AND t."end" IS NULL
              AND v.going_until > t.observed_until
        """)  # fmt: skip
        renewed = keys("new", "same", "replace")
        con.execute(f"DELETE FROM slurm_node_allocations WHERE run_key IN {renewed}")
        con.execute(f"INSERT INTO slurm_node_allocations BY NAME SELECT * FROM {per_node} "
                    f"WHERE run_key IN {renewed}")  # fmt: skip
        incoming_steps = f"""(
            SELECT * FROM {steps} AS n
            WHERE n.run_key NOT IN {keys('later')}
               OR (n.run_key IS NULL AND NOT EXISTS (
                   SELECT 1 FROM slurm_steps AS k WHERE k.run_key IS NOT NULL
                   AND k.cluster = n.cluster AND k.step_job_id = n.step_job_id
                   AND k.start = n.start)))"""  # fmt: skip
        if not is_empty(con, schema.SLURM_STEPS):
            con.execute("DELETE FROM slurm_steps WHERE (cluster, step_job_id, start) IN "
                        f"(SELECT DISTINCT cluster, step_job_id, start FROM {incoming_steps})")
        con.execute(f"INSERT INTO slurm_steps BY NAME SELECT * FROM {incoming_steps}")
        return int(con.execute(f"SELECT count(*) FROM {verdicts} WHERE verdict = 'later'")
                   .fetchone()[0])  # fmt: skip
    finally:
        con.execute(f"DROP TABLE {verdicts}")


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


def _stream_sacct_file(con: duckdb.DuckDBPyConnection, path: Path, *, delimiter: str | None,
                       timezone: str, observed_until: datetime | None,
                       cluster: str | None = None,
                       limits: SanityLimits | None = None) -> SlurmLoad:  # fmt: skip
    """:func:`import_sacct_file` batch by batch: parse the next batch while loading this one.

    Same result as :func:`store_sacct` of :func:`parse_sacct`, or :class:`_NotStreamable` (inside
    the transaction, so nothing is written) when the batches are not independent. Into empty
    tables the batches are appended as they come; otherwise they are staged in temporary tables
    and merged at the end (:func:`_merge_runs`), when the dump's observation time is known.
    """
    source_file = str(path)
    given = _utc_naive(observed_until) if observed_until else None
    done = _Streamed()
    with _streaming_settings(con), transaction(con):
        load_id = _next_load_id(con)
        models = node_models(con)
        namer = load_namer(con)  # applied in the parsing thread, recorded below
        fresh = _fresh(con)
        targets = _Targets.open(con, direct=all(fresh.values()))
        con.execute("DELETE FROM rejects WHERE source = 'sacct' AND source_file = ?",
                    [source_file])  # fmt: skip
        batches = iter_sacct_batches(path, delimiter=delimiter, timezone=timezone,
                                     source_file=source_file, cluster=cluster,
                                     limits=limits)  # fmt: skip
        # runs still going are held back only when nothing of theirs can already be there
        prepared = _prepare(batches, given, models, hold=given is None and targets.direct,
                            namer=namer, targets=targets, load_id=load_id)  # fmt: skip
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
            raise _NotStreamable
        if len(done.step_keys) > 1 and pl.concat(done.step_keys).is_duplicated().any():
            raise _NotStreamable
        until = given or done.latest
        kept = 0
        if targets.direct:
            if done.held:
                append_rows(con, schema.SLURM_RUNS,
                            _observed(pl.concat(done.held), until, load_id))  # fmt: skip
        else:
            if given is None:  # runs still going are charged up to the dump's latest instant
                con.execute(f'UPDATE {targets.runs.name} SET observed_until = ? '
                            'WHERE "end" IS NULL', [until])  # fmt: skip
            kept = _merge_runs(con, targets.runs.name, targets.per_node.name, targets.steps.name,
                               observed=until)  # fmt: skip
            targets.close(con)
        record_names(con, namer, "sacct")  # the parsing thread is done with the namer
        kept += drop_runs_under_other_keys(con, source_file).kept
        _finish_load(con, load_id, source_file, until)
        append_rows(con, schema.REJECTS, rejects_frame(done.rejects))
        record_ingest(
            con, source="sacct", partition_key=source_file, window_start=None, window_end=None,
            rows_loaded=done.runs + done.steps, rows_rejected=len(done.rejects), atomic=False,
        )
    return SlurmLoad("sacct", done.runs, done.steps, done.nodes, tuple(done.rejects), done.lines,
                     kept, source_file)  # fmt: skip


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
             namer: NodeNamer | None = None) -> Iterator[_Prepared]:  # fmt: skip
    """Canonical node names, per-node rows, ``observed_until`` where known (``given``; for runs
    still going else set when the load ends), ``load_id``, the Arrow tables to append."""
    latest: datetime | None = None
    for batch in batches:
        if not batch.complete:
            raise _NotStreamable
        if namer is not None:
            batch = replace(batch, runs=namer.canonical_frame(batch.runs, NODE_COLUMNS),
                            steps=namer.canonical_frame(batch.steps, NODE_COLUMNS))
        latest = _later(latest, _latest_instant(batch))
        runs = _observed(batch.runs, given, load_id)
        per_node = allocations_per_node(batch.runs, models)
        held = None
        if hold:
            going = pl.col("end").is_null()
            held, runs = runs.filter(going), runs.filter(~going)
        yield _Prepared(batch, per_node.height, held, latest,
                        ledger_arrow(targets.runs, runs),
                        ledger_arrow(targets.per_node, per_node),
                        ledger_arrow(targets.steps, batch.steps))  # fmt: skip


def _load_batch(con: duckdb.DuckDBPyConnection, prep: _Prepared, done: _Streamed,
                targets: _Targets) -> None:  # fmt: skip
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
    )  # fmt: skip
    try:
        return _stream_sacct_file(con, path, delimiter=delimiter, timezone=timezone,
                                  observed_until=observed_until, cluster=cluster,
                                  limits=limits)  # fmt: skip
    except _NotStreamable:
        pass
    parsed = parse_sacct(path, delimiter=delimiter, timezone=timezone, source_file=str(path),
                         cluster=cluster, limits=limits)  # fmt: skip
    return store_sacct(con, parsed, source_file=str(path), observed_until=observed_until,
                       partition_key=str(path))


class OtherKeys(NamedTuple):
    """What :func:`drop_runs_under_other_keys` did."""

    removed: int  # runs stored earlier under the other key form, replaced by this load's
    kept: int  # runs of this load dropped: the ledger has them, under the other form, later


def drop_runs_under_other_keys(con: duckdb.DuckDBPyConnection, source_file: str) -> OtherKeys:
    """Resolve runs this load stored that the ledger also has under the other form of the key.

    A dump without JobIDRaw keys an array task or het component by its JobID text
    (``c:123_4:submit``), one with JobIDRaw by the database id (``c:127:submit``,
    connectors.slurm.header). Loading both kinds of dump would charge such a run twice. Of the
    two records of one run (cluster, JobID, Submit and Start), the one of this load
    (``source_file``) replaces the other, with its per-node rows and steps, unless the other is
    later (the same rule as for one key: :func:`_stored_is_later`): then this load's is dropped.
    Costs nothing while no run lacks JobIDRaw.
    """
    if con.execute("SELECT count(*) FROM (SELECT 1 FROM slurm_runs WHERE job_id_raw IS NULL "
                   "LIMIT 1)").fetchone()[0] == 0:  # fmt: skip
        return OtherKeys(0, 0)
    pairs = con.execute(
        f"""
        SELECT DISTINCT m.run_key, o.run_key,
               coalesce({_stored_is_later("o", "lo.observed_at", "m", "lm.observed_at")}, FALSE)
        FROM slurm_runs AS m
        INNER JOIN slurm_runs AS o
            ON o.cluster = m.cluster AND o.job_id = m.job_id
            AND o.submit IS NOT DISTINCT FROM m.submit AND o.start IS NOT DISTINCT FROM m.start
            AND o.run_key <> m.run_key
            AND (o.job_id_raw IS NULL) <> (m.job_id_raw IS NULL)
        LEFT JOIN sacct_loads AS lm ON lm.load_id = m.load_id
        LEFT JOIN sacct_loads AS lo ON lo.load_id = o.load_id
        WHERE m.source_file = ?
        """, [source_file]).fetchall()  # fmt: skip
    replaced = sorted({o for _, o, other_later in pairs if not other_later})
    dropped = sorted({m for m, _, other_later in pairs if other_later})
    stale = replaced + dropped
    if stale:
        for table in ("slurm_runs", "slurm_node_allocations", "slurm_steps"):
            con.execute(f"DELETE FROM {table} WHERE run_key IN (SELECT unnest(?))", [stale])
    return OtherKeys(len(replaced), len(dropped))


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
                           charged_until=seen, base=limits)  # fmt: skip
    label = f"sacct {start_text}..{end_text}"
    parsed = parse_sacct(text, timezone="UTC", source_file=label, limits=limits)
    return store_sacct(
        con, parsed, source_file=label, observed_until=seen, observed_at=observed,
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
