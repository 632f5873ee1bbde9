"""Storing parsed sacct output in the ledger: runs, steps, per-node GPUs and rejects.

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
"""

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

import duckdb
import polars as pl

from connectors.errors import Reject, rejects_frame
from connectors.slurm.node_split import allocations_per_node
from connectors.slurm.parse import SacctParse
from connectors.slurm.sanity import counts_by_rule
from connectors.times import utc_naive as _utc_naive
from gpuledger.ingest.nodenames import load_namer, record_names
from models import schema
from models.build import mark_days_to_rebuild
from models.runner import (
    append_rows,
    is_empty,
    ledger_arrow,
    record_ingest,
    replace_rows,
    transaction,
)


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
                       "GROUP BY node").fetchall()
    return {node: int(n) for node, n in rows}


def default_observed_until(parsed: SacctParse) -> datetime | None:
    """Without a stated time, a dump is taken as seen at its latest recorded instant."""
    latest = parsed.runs.select(
        pl.max_horizontal(pl.col("submit").max(), pl.col("start").max(), pl.col("end").max())
    ).item()
    return latest


def observed_rows(runs: pl.DataFrame, until: datetime | None, load_id: int) -> pl.DataFrame:
    """Runs with ``observed_until`` (a finished run is fully known: pinned to its end, which keeps
    re-ingests identical; a run still going: ``until``) and the ``load_id`` storing them."""
    return runs.with_columns(
        pl.coalesce(pl.col("end"), pl.lit(until, dtype=pl.Datetime("us"))).alias("observed_until"),
        pl.lit(load_id, dtype=pl.Int64).alias("load_id"),
    )


def next_load_id(con: duckdb.DuckDBPyConnection) -> int:
    """A new load's id (inside the writer's transaction: one writer at a time)."""
    return int(con.execute("SELECT coalesce(max(load_id), 0) + 1 FROM sacct_loads").fetchone()[0])


def finish_load(con: duckdb.DuckDBPyConnection, load_id: int, source_file: str,
                observed: datetime | None) -> None:
    """Record the load's observation, and forget loads none of whose rows is left (a re-run
    whose every run was the same leaves ``sacct_loads`` as it was)."""
    con.execute("INSERT INTO sacct_loads (load_id, source_file, observed_at) VALUES (?, ?, ?)",
                [load_id, source_file, observed])
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
    (:func:`merge_runs`).
    """
    until = _utc_naive(observed_until) if observed_until else default_observed_until(parsed)
    seen = _utc_naive(observed_at) if observed_at else until
    namer = load_namer(con)  # canonical node names before anything is written
    parsed_runs = namer.canonical_frame(parsed.runs, NODE_COLUMNS)
    steps = namer.canonical_frame(parsed.steps, NODE_COLUMNS)
    per_node = allocations_per_node(parsed_runs, node_models(con))
    with transaction(con):
        load_id = next_load_id(con)
        record_names(con, namer, "sacct")
        kept = store_runs(con, observed_rows(parsed_runs, until, load_id), per_node, steps, seen)
        kept += drop_runs_under_other_keys(con, source_file).kept
        finish_load(con, load_id, source_file, seen)
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


def fresh_tables(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Which of the Slurm tables are empty (then nothing in them needs replacing)."""
    tables = (schema.SLURM_RUNS, schema.SLURM_STEPS, schema.SLURM_NODE_ALLOCATIONS)
    return {t.name: is_empty(con, t) for t in tables}


def store_runs(con: duckdb.DuckDBPyConnection, runs: pl.DataFrame, per_node: pl.DataFrame,
               steps: pl.DataFrame, observed: datetime | None) -> int:
    """Runs (with ``observed_until`` and ``load_id``), their per-node rows and steps, observed
    at ``observed``, into the ledger, inside the caller's transaction: appended into empty
    tables, else merged (:func:`merge_runs`). Returns the runs kept because the ledger knows
    them later."""
    frames = ((schema.SLURM_RUNS, runs), (schema.SLURM_NODE_ALLOCATIONS, per_node),
              (schema.SLURM_STEPS, steps))
    if all(fresh_tables(con).values()):
        for table, frame in frames:
            append_rows(con, table, frame)
        return 0
    views: list[str] = []
    try:
        for table, frame in frames:
            views.append(f"_incoming_{table.name}_{uuid.uuid4().hex}")
            con.register(views[-1], ledger_arrow(table, frame))
        return merge_runs(con, *views, observed=observed)
    finally:
        for view in views:
            con.unregister(view)


def _progress(alias: str) -> str:
    """How far a run record has got: 2 ended, 1 started (still going), 0 not started."""
    return (f'(CASE WHEN {alias}."end" IS NOT NULL THEN 2 '
            f"WHEN {alias}.start IS NOT NULL THEN 1 ELSE 0 END)")


def stored_is_later(stored: str, stored_seen: str, incoming: str, incoming_seen: str) -> str:
    """SQL: the ``stored`` record of a run (observed at ``stored_seen``) stays against the
    ``incoming`` one (observed at ``incoming_seen``), facts moving forward: it has got further
    (ended where the other is still going or not started; a requeue is another run), or as far
    and was observed later. Equal: the incoming one wins (a re-import replaces); a stored row of
    no known load (written before loads were recorded) is replaced unless it got further."""
    s, i = _progress(stored), _progress(incoming)
    return f"({s} > {i} OR ({s} = {i} AND {stored_seen} > {incoming_seen}))"


#: Columns compared to tell whether an incoming run says anything new (all but load_id).
_SAME_COLUMNS = tuple(c for c in schema.SLURM_RUNS.column_names if c != "load_id")
# what a run says beyond where it was read and how far it has run: equal on both records, a
# replacement changes only the run's tail (a job still running, pulled again the next day)
_CONTENT_COLUMNS = tuple(c for c in _SAME_COLUMNS if c not in {
    "source_file", "line_no", "observed_until", "end", "elapsed_s"})
LATE_RUNS = "sacct: a run of the day changed or arrived after the day was built"


def merge_runs(con: duckdb.DuckDBPyConnection, runs: str, per_node: str, steps: str, *,
               observed: datetime | None) -> int:
    """Merge incoming runs, per-node rows and steps (tables or views with the ledger's columns),
    observed at ``observed``, into the ledger, inside the caller's transaction. Returns the runs
    kept as they were.

    Per incoming run, by its key:

    - ``new``: not in the ledger: stored;
    - ``same``: every column equal but ``load_id``: the row is left as it is (re-running a
      window, re-importing a dump changes nothing; the row stays with the load that first stored
      this content; a row of no known load takes this one's);
    - ``later``: the ledger's record is later (:func:`stored_is_later`): kept with its per-node
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
    later = stored_is_later("s", "l.observed_at", "i", "$observed")
    tail = " AND ".join(f'i."{c}" IS NOT DISTINCT FROM s."{c}"' for c in _CONTENT_COLUMNS)
    con.execute(f"""
        CREATE TEMP TABLE {verdicts} AS
        SELECT i.run_key,
               CASE WHEN s.run_key IS NULL THEN 'new'
                    WHEN l.load_id IS NOT NULL AND {same} THEN 'same'
                    WHEN {later} THEN 'later'
                    ELSE 'replace' END AS verdict,
               CASE WHEN s."end" IS NULL THEN s.observed_until END AS going_until,
               {tail} AS tail_only
        FROM {runs} AS i
        LEFT JOIN slurm_runs AS s ON s.run_key = i.run_key
        LEFT JOIN sacct_loads AS l ON l.load_id = s.load_id
    """, {"observed": observed})
    try:
        def keys(*kinds: str) -> str:
            listed = ", ".join(f"'{k}'" for k in kinds)
            return f"(SELECT run_key FROM {verdicts} WHERE verdict IN ({listed}))"

        _mark_changed_days(con, runs, verdicts)  # before the stored records are replaced
        con.execute(f"DELETE FROM slurm_runs WHERE run_key IN {keys('replace')}")
        con.execute(f"INSERT INTO slurm_runs BY NAME SELECT * FROM {runs} "
                    f"WHERE run_key IN {keys('new', 'replace')}")
        con.execute(f"""
            UPDATE slurm_runs AS t SET observed_until = v.going_until FROM {verdicts} AS v
            WHERE t.run_key = v.run_key AND v.verdict = 'replace' AND t."end" IS NULL
              AND v.going_until > t.observed_until
        """)
        renewed = keys("new", "same", "replace")
        con.execute(f"DELETE FROM slurm_node_allocations WHERE run_key IN {renewed}")
        con.execute(f"INSERT INTO slurm_node_allocations BY NAME SELECT * FROM {per_node} "
                    f"WHERE run_key IN {renewed}")
        incoming_steps = f"""(
            SELECT * FROM {steps} AS n
            WHERE n.run_key NOT IN {keys('later')}
               OR (n.run_key IS NULL AND NOT EXISTS (
                   SELECT 1 FROM slurm_steps AS k WHERE k.run_key IS NOT NULL
                   AND k.cluster = n.cluster AND k.step_job_id = n.step_job_id
                   AND k.start = n.start)))"""
        if not is_empty(con, schema.SLURM_STEPS):
            con.execute("DELETE FROM slurm_steps WHERE (cluster, step_job_id, start) IN "
                        f"(SELECT DISTINCT cluster, step_job_id, start FROM {incoming_steps})")
        con.execute(f"INSERT INTO slurm_steps BY NAME SELECT * FROM {incoming_steps}")
        return int(con.execute(f"SELECT count(*) FROM {verdicts} WHERE verdict = 'later'")
                   .fetchone()[0])
    finally:
        con.execute(f"DROP TABLE {verdicts}")


def _mark_changed_days(con: duckdb.DuckDBPyConnection, runs: str, verdicts: str) -> None:
    """Built days whose charge the merge changes are rebuilt by the next build
    (models/build.py ``mark_days_to_rebuild``): every day of a new run, of both records of a
    replaced one; of a run that only ran on, the days between its old and new ends."""
    def reach(alias: str) -> str:
        return f'coalesce({alias}."end", {alias}.observed_until)'

    mark_days_to_rebuild(con, f"""
        SELECT s.start AS start_ts, {reach('s')} AS end_ts
        FROM slurm_runs AS s INNER JOIN {verdicts} AS v USING (run_key)
        WHERE v.verdict = 'replace' AND NOT coalesce(v.tail_only, FALSE)
        UNION ALL
        SELECT i.start, {reach('i')}
        FROM {runs} AS i INNER JOIN {verdicts} AS v USING (run_key)
        WHERE v.verdict = 'new' OR (v.verdict = 'replace' AND NOT coalesce(v.tail_only, FALSE))
        UNION ALL
        SELECT least({reach('s')}, {reach('i')}), greatest({reach('s')}, {reach('i')})
        FROM {runs} AS i INNER JOIN {verdicts} AS v USING (run_key)
        INNER JOIN slurm_runs AS s USING (run_key)
        WHERE v.verdict = 'replace' AND coalesce(v.tail_only, FALSE)
    """, LATE_RUNS)


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
    later (the same rule as for one key: :func:`stored_is_later`): then this load's is dropped.
    Costs nothing while no run lacks JobIDRaw.
    """
    if con.execute("SELECT count(*) FROM (SELECT 1 FROM slurm_runs WHERE job_id_raw IS NULL "
                   "LIMIT 1)").fetchone()[0] == 0:
        return OtherKeys(0, 0)
    pairs = con.execute(
        f"""
        SELECT DISTINCT m.run_key, o.run_key,
               coalesce({stored_is_later("o", "lo.observed_at", "m", "lm.observed_at")}, FALSE)
        FROM slurm_runs AS m
        INNER JOIN slurm_runs AS o
            ON o.cluster = m.cluster AND o.job_id = m.job_id
            AND o.submit IS NOT DISTINCT FROM m.submit AND o.start IS NOT DISTINCT FROM m.start
            AND o.run_key <> m.run_key
            AND (o.job_id_raw IS NULL) <> (m.job_id_raw IS NULL)
        LEFT JOIN sacct_loads AS lm ON lm.load_id = m.load_id
        LEFT JOIN sacct_loads AS lo ON lo.load_id = o.load_id
        WHERE m.source_file = ?
        """, [source_file]).fetchall()
    replaced = sorted({o for _, o, other_later in pairs if not other_later})
    dropped = sorted({m for m, _, other_later in pairs if other_later})
    stale = replaced + dropped
    if stale:
        for table in ("slurm_runs", "slurm_node_allocations", "slurm_steps"):
            con.execute(f"DELETE FROM {table} WHERE run_key IN (SELECT unnest(?))", [stale])
    return OtherKeys(len(replaced), len(dropped))
