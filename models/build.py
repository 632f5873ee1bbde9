"""Build the accounting model for a day: staging union, day pieces, identity, allocations.

Every write is a partition-scoped delete+insert in one transaction, so re-building a day changes
nothing when its inputs did not change.
"""

import os
import socket
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb

from models import load_sql
from models.closing import settle_adjustments
from models.engines import DUCKDB_ENGINE, Engine
from models.lake_changes import mark_days
from models.pricing import create_rate_choice
from models.runner import transaction
from models.scalars import one_row, scalar
from models.schema import BUILDS_UNFINISHED, BUILT_DAYS, DAYS_TO_REBUILD

# Domain staging models, unioned into the view stg_allocations (same column layout).
STAGING_MODELS = ("stg_slurm_allocations", "stg_kubernetes_allocations")


def begin_build(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date
                ) -> datetime:
    """Mark a build of ``first_day`` .. ``last_day`` as started (committed at once): until
    :func:`finish_build`, the derived tables may disagree and publishing is refused."""
    started = datetime.now(UTC).replace(tzinfo=None)
    with transaction(con):
        con.execute(f"INSERT INTO {BUILDS_UNFINISHED.name} VALUES (?, ?, ?, ?, ?)",
                    [first_day, last_day, started, os.getpid(), socket.gethostname()])
    return started


def finish_build(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date) -> int:
    """Every table of the days is rebuilt: clear the marks this build covers (its own and
    those of earlier builds it repaired, which lie inside its days), and record the days as
    built (:func:`days_to_build` widens later builds by them)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with transaction(con):
        cleared = con.execute(
            f"DELETE FROM {BUILDS_UNFINISHED.name} WHERE first_day >= ? AND last_day <= ?",
            [first_day, last_day]).fetchall()[0][0]
        for table in (BUILT_DAYS, DAYS_TO_REBUILD):
            con.execute(f"DELETE FROM {table.name} WHERE day >= ? AND day <= ?",
                        [first_day, last_day])
        con.execute(f"INSERT INTO {BUILT_DAYS.name} SELECT d::DATE, ? FROM "
                    "generate_series(?::DATE, ?::DATE, INTERVAL 1 DAY) AS t(d)",
                    [now, first_day, last_day])
        return int(cleared)


def days_to_build(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date
                  ) -> tuple[date, date]:
    """The days a build asked for ``first_day`` .. ``last_day`` rebuilds: those, the built days
    a load marked since (``days_to_rebuild``: :func:`mark_days_to_rebuild`), every day between,
    and the day on either side when an earlier build made it. That day's figures read these
    days' data: dcgm readings whose span crosses midnight, a time-shared pod placed by the next
    day's first samples, a pod or incident open across midnight. A build of the days is how
    their data lands (a Dagster partition, ``gpuledger build``), so the neighbours built before
    it are rebuilt with it, and the days give one ledger whatever order they come in."""
    marked = one_row(con, f"SELECT min(day), max(day) FROM {DAYS_TO_REBUILD.name}")
    if marked[0] is not None:
        first_day, last_day = min(first_day, marked[0]), max(last_day, marked[1])
    before, after = first_day - timedelta(days=1), last_day + timedelta(days=1)
    built = {d for (d,) in con.execute(
        f"SELECT day FROM {BUILT_DAYS.name} WHERE day = ? OR day = ?", [before, after]
    ).fetchall()}
    return (before if before in built else first_day, after if after in built else last_day)


def mark_days_to_rebuild(con: duckdb.DuckDBPyConnection, spans: str, reason: str,
                         params: dict[str, Any] | None = None) -> int:
    """Mark the built days that the intervals ``spans`` selects (columns ``start_ts``,
    ``end_ts``: TIMESTAMP, half-open) touch as to be rebuilt, for ``reason``; inside the
    caller's transaction (a load's). Days not built yet need no mark: their first build reads
    the data. Returns the days newly marked."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return int(con.execute(
        f"INSERT INTO {DAYS_TO_REBUILD.name} SELECT DISTINCT b.day, $reason, $now "
        f"FROM ({spans}) AS s INNER JOIN {BUILT_DAYS.name} AS b "
        "ON b.day >= CAST(s.start_ts AS DATE) AND b.day < s.end_ts "
        f"WHERE s.end_ts > s.start_ts AND NOT EXISTS (SELECT 1 FROM {DAYS_TO_REBUILD.name} "
        "AS d WHERE d.day = b.day AND d.reason = $reason)",
        {**(params or {}), "reason": reason, "now": now}).fetchall()[0][0])


def open_build_days(con: duckdb.DuckDBPyConnection, day: date) -> tuple[date, date]:
    """The days of the unfinished build that covers ``day`` (the latest, as
    :func:`begin_build` recorded them), or :func:`days_to_build` of the day when none does:
    each daily asset of a Dagster partition rebuilds the days its first asset chose."""
    row = con.execute(
        f"SELECT first_day, last_day FROM {BUILDS_UNFINISHED.name} WHERE first_day <= ? "
        "AND last_day >= ? ORDER BY started_at DESC LIMIT 1", [day, day]).fetchone()
    return (row[0], row[1]) if row else days_to_build(con, day, day)


def create_staging_view(con: duckdb.DuckDBPyConnection) -> None:
    # Slinky slurmd pods: both staging models read them (Slurm nodes placed on their pods'
    # Kubernetes nodes; the pods themselves not charged)
    con.execute(f"CREATE OR REPLACE TEMP VIEW slurm_agent_pods AS {load_sql('slurm_agent_pods')}")
    # the Slurm node names that are such a pod's on another node: no capacity of their own
    con.execute("CREATE OR REPLACE TEMP TABLE slinky_slurm_names AS SELECT DISTINCT name FROM "
                "(SELECT node, unnest(slurm_node_names) AS name FROM slurm_agent_pods) "
                "WHERE name <> node")
    union = "\nUNION ALL BY NAME\n".join(f"({load_sql(name)})" for name in STAGING_MODELS)
    con.execute(f"CREATE OR REPLACE TEMP VIEW stg_allocations AS {union}")


def data_days(con: duckdb.DuckDBPyConnection) -> tuple[date | None, date | None]:
    """First and last UTC day any staged allocation touches."""
    create_staging_view(con)
    first, last = one_row(
        con, "SELECT min(start_ts)::DATE, (max(end_ts) - INTERVAL 1 MICROSECOND)::DATE "
        "FROM stg_allocations")
    return first, last


def build_allocations(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date) -> int:
    """Rebuild ``allocations`` for the UTC days ``first_day`` .. ``last_day`` (inclusive)."""
    day_start = datetime.combine(first_day, datetime.min.time())
    day_end = datetime.combine(last_day + timedelta(days=1), datetime.min.time())
    create_staging_view(con)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE alloc_pieces AS {load_sql('allocation_pieces')}",
        {"day_start": day_start, "day_end": day_end},
    )
    con.execute(
        "CREATE OR REPLACE TEMP VIEW identity_pieces AS SELECT piece_id, domain, day, "
        "slurm_user, slurm_account, k8s_namespace, k8s_service_account, kueue_queue, "
        "kueue_cluster_queue, pod_labels FROM alloc_pieces"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE resolved_identity AS {load_sql('resolve_identity')}"
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE alloc_shares AS {load_sql('allocation_shares')}")
    with transaction(con):
        con.execute("DELETE FROM allocations WHERE day >= ? AND day <= ?", [first_day, last_day])
        con.execute(f"INSERT INTO allocations BY NAME {load_sql('allocations')}")
        rows = scalar(con,
            "SELECT count(*) FROM allocations WHERE day >= ? AND day <= ?", [first_day, last_day]
        )
    for temp in ("alloc_shares", "resolved_identity", "alloc_pieces"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    return int(rows)


# Tables build_gpu_usage_hourly rewrites per UTC day, in order (each reads the one before).
USAGE_TABLES = (
    ("allocation_usage_hourly", "gpu_usage_hourly_allocations"),
    ("gpu_usage_hourly", "gpu_usage_hourly"),
    ("node_usage_hourly", "node_usage_hourly"),
    ("gpu_usage_daily", "gpu_usage_daily"),
    ("node_usage_daily", "node_usage_daily"),
)

# A reading's span is at most an hour: one hour of readings on each side of the days is enough.
READING_MARGIN = timedelta(hours=1)


def create_usage_matches(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date,
                         engine: Engine = DUCKDB_ENGINE) -> None:
    """Temp tables ``usage_samples`` (dcgm readings with their spans), ``usage_span_matches``
    (which allocations row of ``first_day`` .. ``last_day`` took which reading) and
    ``usage_matched`` (those readings per allocation and GPU-hour), made by ``engine``
    (heavy: they read every minute sample of the days)."""
    day_start = datetime.combine(first_day, datetime.min.time())
    day_end = datetime.combine(last_day + timedelta(days=1), datetime.min.time())
    engine.create_temp(
        con, "usage_samples", load_sql("gpu_usage_hourly_samples"),
        {"from_ts": day_start - READING_MARGIN, "to_ts": day_end + READING_MARGIN},
    )
    engine.create_temp(
        con, "usage_span_matches", load_sql("gpu_usage_span_matches"),
        {"first_day": first_day, "end_day": last_day + timedelta(days=1)},
    )
    engine.create_temp(con, "usage_matched", load_sql("gpu_usage_hourly_matched"), {})


# Days one pass of build_gpu_usage_hourly reads the samples of: a pass holds its days' minute
# samples (with their spans) at once, so a week's backfill of a large estate would outgrow memory
# and spill; a day is the partition every usage table is written by, and each day's figures need
# only its own samples and an hour on each side (READING_MARGIN), so passes of a day give the
# same rows as one pass over the range, in time linear in the days.
USAGE_CHUNK_DAYS = 1


def build_gpu_usage_hourly(
    con: duckdb.DuckDBPyConnection, first_day: date, last_day: date,
    engine: Engine = DUCKDB_ENGINE, *, chunk_days: int = USAGE_CHUNK_DAYS,
) -> int:
    """Rebuild ``allocation_usage_hourly``, ``gpu_usage_hourly`` and ``node_usage_hourly`` (and
    their daily rollups ``gpu_usage_daily``, ``node_usage_daily``) for the UTC days
    ``first_day`` .. ``last_day`` (inclusive) from ``allocations`` and ``gpu_utilization``;
    returns the ``gpu_usage_hourly`` rows of those days. Every step runs on ``engine``, in passes
    of ``chunk_days`` days, each pass's days replaced in one transaction (a build killed between
    passes stays marked unfinished: :func:`begin_build`)."""
    if chunk_days < 1:
        msg = f"expected chunk_days of 1 or more, found {chunk_days}"
        raise ValueError(msg)
    rows, start = 0, first_day
    while start <= last_day:
        end = min(start + timedelta(days=chunk_days - 1), last_day)
        rows += _build_usage_days(con, start, end, engine)
        start = end + timedelta(days=1)
    return rows


def _build_usage_days(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date,
                      engine: Engine) -> int:
    """One pass of :func:`build_gpu_usage_hourly` over ``first_day`` .. ``last_day``."""
    end_day = last_day + timedelta(days=1)
    create_staging_view(con)  # slinky_slurm_names, which node_usage_hourly reads
    try:
        create_usage_matches(con, first_day, last_day, engine)
        with transaction(con):
            for table_name, model in USAGE_TABLES:
                con.execute(f"DELETE FROM {table_name} WHERE day >= ? AND day < ?",
                            [first_day, end_day])
                mark_days(con, table_name, first_day, end_day)  # lake partitions
                engine.insert(con, table_name, load_sql(model),
                              {"first_day": first_day, "end_day": end_day})
            build_conservation(con, first_day, end_day)
            rows = scalar(con,
                "SELECT count(*) FROM gpu_usage_hourly WHERE day >= ? AND day < ?",
                [first_day, end_day],
            )
    finally:
        engine.drop_temps(con, ("usage_matched", "usage_span_matches", "usage_samples"))
    return int(rows)


def build_conservation(con: duckdb.DuckDBPyConnection, first_day: date, end_day: date) -> None:
    """Rewrite ``gpu_conservation_hourly`` (per node) and ``gpu_conservation_gpu_hourly`` (per
    GPU) for the days [``first_day``, ``end_day``) on DuckDB (in the caller's transaction): where
    every physical GPU-second went. Reads the usage pass's
    temp tables ``usage_samples`` and ``usage_span_matches`` (on either engine they are DuckDB views
    by then) and the tables that pass just rewrote."""
    create_staging_view(con)  # the temp view slurm_agent_pods
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE holding_segments AS {load_sql('node_holding_segments')}",
        {"from_ts": datetime.combine(first_day, datetime.min.time()),
         "to_ts": datetime.combine(end_day, datetime.min.time())})
    days = {"first_day": first_day, "end_day": end_day}
    con.execute(f"CREATE OR REPLACE TEMP TABLE reading_pieces AS {load_sql('gpu_reading_pieces')}",
                days)
    try:
        for table in ("gpu_conservation_hourly", "gpu_conservation_gpu_hourly"):  # node first
            con.execute(f"DELETE FROM {table} WHERE day >= ? AND day < ?", [first_day, end_day])
            mark_days(con, table, first_day, end_day)  # the per-GPU table is in the lake
            con.execute(f"INSERT INTO {table} BY NAME {load_sql(table)}", days)
    finally:
        con.execute("DROP TABLE IF EXISTS holding_segments")
        con.execute("DROP TABLE IF EXISTS reading_pieces")


def _period_bounds(first_day: date, last_day: date, kind: str) -> tuple[date, date]:
    """Whole periods of ``kind`` covering ``first_day`` .. ``last_day`` (end exclusive)."""
    if kind == "day":
        return first_day, last_day + timedelta(days=1)
    if kind == "week":
        start = first_day - timedelta(days=first_day.weekday())
        end = last_day + timedelta(days=7 - last_day.weekday())
        return start, end
    start = first_day.replace(day=1)
    following = (last_day.replace(day=1) + timedelta(days=32)).replace(day=1)
    return start, following


def build_chargeback(con: duckdb.DuckDBPyConnection, first_day: date, last_day: date, *,
                     run: str | None = None) -> int:
    """Rebuild the invoice lines of every day, ISO week and month touching the given days, and
    settle what late data changed in closed weeks as adjustment lines of the next open week
    (``models/closing.py``; ``run`` names who rebuilt, kept on new adjustment lines)."""
    bounds = [_period_bounds(first_day, last_day, kind) for kind in ("day", "week", "month")]
    # a MIG profile can be priced itself (rate card gpu_model = the profile): its key too
    create_rate_choice(
        con, "SELECT day, domain, gpu_model, qos FROM allocations "
        "WHERE day >= $first AND day < $end UNION ALL SELECT day, domain, slice_profile, qos "
        "FROM allocations WHERE day >= $first AND day < $end AND slice_profile IS NOT NULL",
        {"first": min(b[0] for b in bounds), "end": max(b[1] for b in bounds)})
    # the one pricing rule per allocation row, for every line kind and the shared summary
    con.execute(f"CREATE OR REPLACE TEMP TABLE allocation_prices AS "
                f"{load_sql('allocation_prices')}",
                {"first_day": min(b[0] for b in bounds), "end_day": max(b[1] for b in bounds)})
    rows = 0
    with transaction(con):
        for kind in ("day", "week", "month"):
            start, end = _period_bounds(first_day, last_day, kind)
            con.execute(
                "DELETE FROM chargeback_periods WHERE period_kind = ? AND period_start >= ? "
                "AND period_start < ?", [kind, start, end],
            )
            con.execute(
                f"INSERT INTO chargeback_periods BY NAME {load_sql('chargeback')}",
                {"period_kind": kind, "first_day": start, "end_day": end},
            )
            rows += scalar(con,
                "SELECT count(*) FROM chargeback_periods WHERE period_kind = ? "
                "AND period_start >= ? AND period_start < ?", [kind, start, end],
            )
        settle_adjustments(con, run=run)
        # shared GPUs per day, priced with the same rate_choice (docs/shared-gpus.md)
        con.execute("DELETE FROM shared_gpu_daily WHERE day >= ? AND day <= ?",
                    [first_day, last_day])
        con.execute(f"INSERT INTO shared_gpu_daily BY NAME {load_sql('shared_gpu_daily')}",
                    {"first_day": first_day, "end_day": last_day + timedelta(days=1)})
    for temp in ("allocation_prices", "rate_choice", "rate_keys"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    return rows
