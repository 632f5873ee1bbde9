"""The dashboards' only query layer.

Queries read the published read-only snapshot with bound parameters. The router wraps each script
run in :func:`one_connection_per_run`: the run's queries share one connection, opened on the first
cache miss and closed when the run ends, so no DuckDB handle outlives a rerun and the pipeline can
keep writing the ledger (outside a run, each query opens and closes its own).

Access: functions returning per-cost-centre figures bind the viewer's grant (``$all_ccs``,
``$ccs``, from :mod:`dashboards.access`) into their WHERE clause; functions returning
cluster-wide figures (node capacity, queue metrics) raise :class:`Restricted` for a restricted
viewer. Pages therefore cannot show another cost centre's numbers even by mistake.

The only text spliced into SQL is code constants (column names chosen from fixed maps); every
value a viewer picks is a bound parameter.
"""

import calendar
import os
import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date, timedelta
from pathlib import Path

import duckdb
import polars as pl
import streamlit as st

from dashboards import access
from models.runner import read_snapshot, snapshot_path
from models.schema import INCIDENTS


class Restricted(PermissionError):
    """A cluster-wide figure was asked for by a viewer restricted to some cost centres."""


def ledger_path() -> Path:
    return Path(os.environ.get("GPULEDGER_DB", "data/gpuledger.duckdb"))


def _version(db: Path) -> float:
    target = snapshot_path(db)
    return target.stat().st_mtime if target.exists() else 0.0


class _Run:
    """The queries of one script run: one snapshot version, one connection opened on the first
    cache miss (opening the snapshot costs tens of milliseconds, a page runs a dozen queries)."""

    def __init__(self) -> None:
        self.versions: dict[Path, float] = {}
        self.connections: dict[Path, duckdb.DuckDBPyConnection] = {}
        self.stack = ExitStack()

    def version(self, db: Path) -> float:
        # stat before the connection opens: a snapshot swapped in between is cached under the
        # older version, which the next rerun no longer asks for
        if db not in self.versions:
            self.versions[db] = _version(db)
        return self.versions[db]

    def connection(self, db: Path) -> duckdb.DuckDBPyConnection:
        if db not in self.connections:
            self.connections[db] = self.stack.enter_context(read_snapshot(db))
        return self.connections[db]


_RUN = threading.local()  # Streamlit runs each session's script in a thread of its own


@contextmanager
def one_connection_per_run() -> Iterator[None]:
    """Let every query of the block (one script run) share one read-only connection, closed when
    the block ends: no connection outlives the rerun that opened it."""
    outer = getattr(_RUN, "current", None)
    run = _Run()
    _RUN.current = run
    try:
        with run.stack:
            yield
    finally:
        _RUN.current = outer


@contextmanager
def _connection(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    run = getattr(_RUN, "current", None)
    if run is not None:
        yield run.connection(db)
        return
    with read_snapshot(db) as con:  # outside a script run: one short connection per query
        yield con


@st.cache_data(ttl=60, show_spinner=False, max_entries=1000)
def _query(db: str, version: float, sql: str,
           params: tuple[tuple[str, object], ...]) -> pl.DataFrame:
    with _connection(Path(db)) as con:
        return con.execute(sql, dict(params)).pl()


def query(sql: str, params: dict[str, object] | None = None) -> pl.DataFrame:
    """Run a read-only query with named parameters; results are cached per snapshot version.

    Only the parameters the SQL names are bound (DuckDB refuses extra ones), so a filter that
    applies to restricted viewers only can leave its parameters unused.
    """
    db = ledger_path()
    named = set(re.findall(r"\$(\w+)", sql))
    items = tuple(sorted((k, v) for k, v in (params or {}).items() if k in named))
    run = getattr(_RUN, "current", None)
    version = run.version(db) if run is not None else _version(db)
    # lists are unhashable for the cache key's tuple but fine for st.cache_data's hasher
    return _query(str(db), version, sql, items)


def ledger_available() -> bool:
    return snapshot_path(ledger_path()).exists()


def is_lock_error(exc: Exception) -> bool:
    return isinstance(exc, duckdb.IOException)


# --- access ---------------------------------------------------------------------------------

def _scope(column: str = "cost_centre") -> str:
    """The WHERE fragment limiting rows to the viewer's cost centres (column: a code constant)."""
    return f"($all_ccs OR list_contains($ccs::VARCHAR[], {column}))"


def _scoped(**params: object) -> dict[str, object]:
    scope = access.current_scope()
    return {**params, "all_ccs": not scope.restricted, "ccs": list(scope.cost_centres or ())}


def restricted() -> bool:
    """Whether the viewer sees only some cost centres (cluster-wide figures are hidden)."""
    return access.current_scope().restricted


def _cluster_wide() -> None:
    if restricted():
        msg = "expected an unrestricted viewer for cluster-wide figures, found a restricted one"
        raise Restricted(msg)


# --- what exists in the ledger ---------------------------------------------------------------

def _catalog() -> dict[str, list[str]]:
    """Every table's columns, in one query (pages ask about several tables)."""
    frame = query(
        "SELECT table_name, list(column_name ORDER BY column_index) AS columns "
        "FROM duckdb_columns() GROUP BY table_name"
    )
    return dict(zip(frame["table_name"].to_list(), frame["columns"].to_list(), strict=True))


def table_columns(table: str) -> list[str]:
    """Columns of a ledger table; empty when the table does not exist (not built yet)."""
    return _catalog().get(table, [])


def has_table(table: str) -> bool:
    return bool(table_columns(table))


def freshness() -> pl.DataFrame:
    """Last successful load per source."""
    return query(
        "SELECT source, max(finished_at) AS last_success, sum(rows_loaded) AS rows_loaded, "
        "sum(rows_rejected) AS rows_rejected FROM ingest_runs GROUP BY source ORDER BY source"
    )


def allocation_days() -> tuple[date, date] | None:
    """First and last UTC day with allocations the viewer may see."""
    row = query(
        f"SELECT min(day) AS first, max(day) AS last FROM allocations WHERE {_scope()}",
        _scoped(),
    ).row(0, named=True)
    return None if row["first"] is None else (row["first"], row["last"])


# --- overview --------------------------------------------------------------------------------

def inventory_by_pool() -> pl.DataFrame:
    """GPUs and nodes per pool and model (inventory: no cost centre's figure)."""
    return query(
        "SELECT pool, gpu_model, count(DISTINCT node) AS nodes, count(*) AS gpus "
        "FROM nodes GROUP BY pool, gpu_model ORDER BY pool, gpu_model"
    )


def inventory_totals() -> dict[str, int]:
    return query(
        "SELECT count(*) AS gpus, count(DISTINCT node) AS nodes, "
        "(SELECT count(DISTINCT person) FROM identity_map WHERE person <> '') AS people "
        "FROM nodes"
    ).row(0, named=True)


def activity_totals() -> dict[str, int]:
    """Kueue workloads and Slurm runs loaded (cluster-wide)."""
    _cluster_wide()
    return query(
        "SELECT (SELECT count(*) FROM kueue_workloads_raw) AS workloads, "
        "(SELECT count(*) FROM slurm_runs) AS slurm_runs"
    ).row(0, named=True)


def nodes_in_pool(pool: str) -> pl.DataFrame:
    return query(
        "SELECT node, gpu_model, any_value(gpu_count) AS gpus, any_value(slurm_partition) "
        "AS slurm_partition FROM nodes WHERE pool = $pool GROUP BY node, gpu_model ORDER BY node",
        {"pool": pool},
    )


def gpu_hours_by_day_and_domain() -> pl.DataFrame:
    return query(
        "SELECT day, domain, round(sum(gpu_seconds) / 3600.0, 1) AS gpu_hours "
        f"FROM allocations WHERE {_scope()} GROUP BY day, domain ORDER BY day, domain",
        _scoped(),
    )


def gpu_hours_by_domain() -> pl.DataFrame:
    return query(
        "SELECT domain, sum(gpu_seconds) / 3600.0 AS gpu_hours FROM allocations "
        f"WHERE {_scope()} GROUP BY domain ORDER BY domain",
        _scoped(),
    )


# --- chargeback ------------------------------------------------------------------------------

PERIOD_KINDS = ("week", "month", "day")
USAGE_COLUMNS = ("busy_gpu_hours", "idle_gpu_hours", "measured_gpu_hours")


def chargeback_periods(kind: str) -> pl.DataFrame:
    """The periods of one kind that have invoice lines, newest first."""
    return query(
        "SELECT DISTINCT period, period_start FROM invoice_lines "
        f"WHERE period_kind = $kind AND {_scope()} ORDER BY period_start DESC",
        _scoped(kind=kind),
    )


def period_days(kind: str, period_start: date) -> tuple[date, date]:
    """The half-open day range ``[first, end)`` of a week or month starting on ``period_start``."""
    if kind == "week":
        return period_start, period_start + timedelta(days=7)
    if kind == "month":
        days = calendar.monthrange(period_start.year, period_start.month)[1]
        return period_start, period_start + timedelta(days=days)
    if kind == "day":
        return period_start, period_start + timedelta(days=1)
    msg = f"expected a period kind in {PERIOD_KINDS}, found {kind!r}"
    raise ValueError(msg)


def chargeback_lines(kind: str, first: date, end: date, domains: list[str],
                     gpu_models: list[str]) -> pl.DataFrame:
    """Invoice lines of ``kind`` whose period starts in ``[first, end)``.

    Weeks and months pass their own start (one period); a custom range passes day lines.
    Empty ``domains`` / ``gpu_models`` mean all.
    """
    if kind not in PERIOD_KINDS:
        msg = f"expected a period kind in {PERIOD_KINDS}, found {kind!r}"
        raise ValueError(msg)
    usage = ", ".join(USAGE_COLUMNS)
    return query(
        "SELECT period_kind, period, period_start, cost_centre, team, person, domain, "
        "gpu_model, rate_valid_from, rate_per_gpu_hour, currency, gpu_seconds, gpu_hours, "
        # shared GPUs: gpu_hours is the physical share, slice_hours the units x hours
        "coalesce(slice_hours, 0) AS slice_hours, "
        # invoice_lines: a closed week's day and week lines as frozen at its close
        # provisional: the mark of models/schema/invoices.py's invoice_lines (data-quality gate)
        f"{usage}, allocations, amount, provisional, provisional_reasons FROM invoice_lines "
        "WHERE period_kind = $kind AND period_start >= $first AND period_start < $end "
        "AND (len($domains::VARCHAR[]) = 0 OR list_contains($domains::VARCHAR[], domain)) "
        "AND (len($models::VARCHAR[]) = 0 OR list_contains($models::VARCHAR[], gpu_model)) "
        f"AND {_scope()} "
        "ORDER BY cost_centre, team, person, domain, gpu_model, period_start, rate_valid_from",
        _scoped(kind=kind, first=first, end=end, domains=list(domains), models=list(gpu_models)),
    )


def provisional_days(first: date, end: date) -> pl.DataFrame:
    """The provisional (cluster, day) rows of ``[first, end)`` with their reasons (cluster-wide:
    unrestricted viewers only; a restricted viewer sees the reasons on its own lines)."""
    _cluster_wide()
    return query(
        "SELECT day, cluster, sample_coverage, longest_scrape_gap_minutes, attributed_share, "
        "unknown_nodes, sreport_difference, k8s_rejects, reasons FROM data_quality_days "
        "WHERE provisional AND day >= $first AND day < $end ORDER BY day, cluster",
        {"first": first, "end": end},
    )


def chargeback_dimensions() -> pl.DataFrame:
    """Domains and GPU models that appear on invoice lines (for the filters)."""
    return query(
        "SELECT DISTINCT domain, gpu_model FROM chargeback_periods "
        f"WHERE {_scope()} ORDER BY domain, gpu_model",
        _scoped(),
    )


_DRILL_WHERE = (
    "day >= $first AND day < $end AND cost_centre IS NOT DISTINCT FROM $cost_centre "
    "AND team IS NOT DISTINCT FROM $team AND person IS NOT DISTINCT FROM $person "
    "AND domain IS NOT DISTINCT FROM $domain AND gpu_model IS NOT DISTINCT FROM $gpu_model "
)


def _line_params(first: date, end: date, line: dict[str, str]) -> dict[str, object]:
    keys = ("cost_centre", "team", "person", "domain", "gpu_model")
    return _scoped(first=first, end=end, **{k: line[k] for k in keys})


def allocations_behind(first: date, end: date, line: dict[str, str],
                       limit: int = 5000) -> pl.DataFrame:
    """The jobs and pods behind one (cost centre, team, person, domain, GPU model) line."""
    return query(
        "SELECT day, domain, source_key, job_id, name, node, gpus, start_ts, end_ts, "
        "gpu_seconds, round(gpu_seconds / 3600.0, 4) AS gpu_hours, outcome, evidence "
        f"FROM allocations WHERE {_DRILL_WHERE} AND {_scope()} "
        "ORDER BY start_ts, source_key, node LIMIT $limit",
        {**_line_params(first, end, line), "limit": limit},
    )


def allocations_behind_totals(first: date, end: date, line: dict[str, str]) -> dict[str, int]:
    """Row count, distinct jobs/pods and GPU-seconds behind one line."""
    return query(
        "SELECT count(*) AS rows, count(DISTINCT source_key) AS allocations, "
        "coalesce(sum(gpu_seconds), 0)::BIGINT AS gpu_seconds "
        f"FROM allocations WHERE {_DRILL_WHERE} AND {_scope()}",
        _line_params(first, end, line),
    ).row(0, named=True)


# --- utilization -----------------------------------------------------------------------------

# what the viewer may group by -> the column it is (code constants, never user text)
NODE_GROUPS = {"pool": "pool", "GPU model": "gpu_model"}
USAGE_GROUPS = {"pool": "pool", "GPU model": "gpu_model", "domain": "domain"}
GRAINS = ("hour", "day")


def _grain(grain: str) -> str:
    if grain not in GRAINS:
        msg = f"expected a grain in {GRAINS}, found {grain!r}"
        raise ValueError(msg)
    return grain


def hourly_usage_available() -> bool:
    return has_table("node_usage_hourly") and has_table("gpu_usage_hourly")


def _daily_rollups_cover(first: date, end: date) -> bool:
    """Whether the daily rollups hold every day of ``[first, end)`` the hourly tables hold (a
    ledger built before the rollups existed has them empty until its days are rebuilt)."""
    if not (has_table("node_usage_daily") and has_table("gpu_usage_daily")):
        return False
    return bool(query(
        "SELECT NOT EXISTS (SELECT DISTINCT day FROM node_usage_hourly "
        "WHERE day >= $first AND day < $end EXCEPT SELECT DISTINCT day FROM node_usage_daily "
        "WHERE day >= $first AND day < $end) AS covered",
        {"first": first, "end": end},
    ).item())


def _usage_source(first: date, end: date, grain: str) -> tuple[str, str, str]:
    """The time bucket expression, node table and identity table for usage in ``grain`` buckets:
    the daily rollups for days (24 times fewer rows), the hourly tables otherwise."""
    if _grain(grain) == "day" and _daily_rollups_cover(first, end):
        return "day::TIMESTAMP", "node_usage_daily", "gpu_usage_daily"
    return "date_trunc($grain, hour)", "node_usage_hourly", "gpu_usage_hourly"


def fractions_over_time(first: date, end: date, grain: str, group: str) -> pl.DataFrame:
    """Allocated and busy fractions of capacity per time bucket and group (cluster-wide).

    Pools and GPU models use node capacity; domains share the whole estate's capacity, because a
    shared node serves both schedulers.
    """
    _cluster_wide()
    params = {"first": first, "end": end, "grain": _grain(grain)}
    bucket, nodes, identities = _usage_source(first, end, grain)
    if group in NODE_GROUPS:
        column = NODE_GROUPS[group]
        sql = (
            f"SELECT {bucket} AS bucket, {column} AS grp, "
            "sum(capacity_gpu_seconds)::BIGINT AS capacity_gpu_seconds, "
            "sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds, "
            "sum(busy_gpu_seconds)::DOUBLE AS busy_gpu_seconds "
            f"FROM {nodes} WHERE day >= $first AND day < $end GROUP BY ALL"
        )
    elif group == "domain":
        sql = (
            f"WITH cap AS (SELECT {bucket} AS bucket, "
            f"sum(capacity_gpu_seconds)::BIGINT AS capacity_gpu_seconds FROM {nodes} "
            "WHERE day >= $first AND day < $end GROUP BY ALL), "
            f"use AS (SELECT {bucket} AS bucket, domain AS grp, "
            "sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds, "
            f"sum(busy_gpu_seconds)::DOUBLE AS busy_gpu_seconds FROM {identities} "
            "WHERE day >= $first AND day < $end GROUP BY ALL) "
            "SELECT use.bucket, use.grp, cap.capacity_gpu_seconds, use.allocated_gpu_seconds, "
            "use.busy_gpu_seconds FROM use JOIN cap USING (bucket)"
        )
    else:
        msg = f"expected a grouping in {list(USAGE_GROUPS)}, found {group!r}"
        raise ValueError(msg)
    return query(
        "SELECT bucket, grp, capacity_gpu_seconds, allocated_gpu_seconds, busy_gpu_seconds, "
        "allocated_gpu_seconds / nullif(capacity_gpu_seconds, 0) AS allocated_fraction, "
        "busy_gpu_seconds / nullif(capacity_gpu_seconds, 0) AS busy_fraction "
        f"FROM ({sql}) ORDER BY bucket, grp",
        params,
    )


def own_usage_over_time(first: date, end: date, grain: str, group: str) -> pl.DataFrame:
    """The viewer's own allocated, measured and busy GPU-seconds per bucket and group."""
    if group not in USAGE_GROUPS:
        msg = f"expected a grouping in {list(USAGE_GROUPS)}, found {group!r}"
        raise ValueError(msg)
    column = USAGE_GROUPS[group]
    bucket, _nodes, identities = _usage_source(first, end, grain)
    return query(
        f"SELECT {bucket} AS bucket, {column} AS grp, "
        "sum(allocated_gpu_seconds)::BIGINT AS allocated_gpu_seconds, "
        "sum(measured_gpu_seconds)::DOUBLE AS measured_gpu_seconds, "
        "sum(busy_gpu_seconds)::DOUBLE AS busy_gpu_seconds, "
        "sum(busy_gpu_seconds) / nullif(sum(measured_gpu_seconds), 0) AS busy_share "
        f"FROM {identities} WHERE day >= $first AND day < $end AND {_scope()} "
        "GROUP BY ALL ORDER BY bucket, grp",
        _scoped(first=first, end=end, grain=_grain(grain)),
    )


def daily_allocated_fractions(first: date, end: date, group: str) -> pl.DataFrame:
    """Fallback while the hourly tables are not built: allocated fraction per day and group.

    Capacity is the inventory's GPUs x 86,400 s per day; busy time is not available here.
    """
    _cluster_wide()
    if group not in NODE_GROUPS:
        msg = f"expected a grouping in {list(NODE_GROUPS)}, found {group!r}"
        raise ValueError(msg)
    column = NODE_GROUPS[group]
    return query(
        "WITH days AS (SELECT CAST(unnest(range($first::TIMESTAMP, $end::TIMESTAMP, "
        "INTERVAL 1 DAY)) AS DATE) AS day), "
        f"cap AS (SELECT {column} AS grp, count(*) * 86400 AS capacity_gpu_seconds "
        "FROM nodes GROUP BY ALL), "
        f"used AS (SELECT a.day, n.{column} AS grp, "
        "sum(a.gpu_seconds)::BIGINT AS allocated_gpu_seconds "
        "FROM allocations AS a JOIN (SELECT DISTINCT node, pool, gpu_model FROM nodes) AS n "
        "USING (node) WHERE a.day >= $first AND a.day < $end GROUP BY ALL) "
        "SELECT days.day::TIMESTAMP AS bucket, cap.grp, cap.capacity_gpu_seconds, "
        "coalesce(used.allocated_gpu_seconds, 0) AS allocated_gpu_seconds, "
        "coalesce(used.allocated_gpu_seconds, 0) / cap.capacity_gpu_seconds "
        "AS allocated_fraction "
        "FROM days CROSS JOIN cap LEFT JOIN used ON used.day = days.day AND used.grp = cap.grp "
        "ORDER BY bucket, grp",
        {"first": first, "end": end},
    )


def node_heatmap(first: date, end: date, grain: str) -> pl.DataFrame:
    """Allocated and busy fraction of each node's capacity per time bucket (cluster-wide)."""
    _cluster_wide()
    bucket, nodes, _identities = _usage_source(first, end, grain)
    return query(
        f"SELECT node, {bucket} AS bucket, "
        "sum(allocated_gpu_seconds) / nullif(sum(capacity_gpu_seconds), 0) "
        "AS allocated_fraction, "
        "sum(busy_gpu_seconds) / nullif(sum(capacity_gpu_seconds), 0) AS busy_fraction "
        f"FROM {nodes} WHERE day >= $first AND day < $end "
        "GROUP BY ALL ORDER BY node, bucket",
        {"first": first, "end": end, "grain": _grain(grain)},
    )


# Queue-wait histogram buckets: [lower, upper) seconds and their labels.
WAIT_BUCKETS = (
    (0, 60, "< 1 min"), (60, 300, "1-5 min"), (300, 900, "5-15 min"),
    (900, 1800, "15-30 min"), (1800, 3600, "30-60 min"), (3600, 7200, "1-2 h"),
    (7200, 14400, "2-4 h"), (14400, 28800, "4-8 h"), (28800, 86400, "8-24 h"),
    (86400, 10**12, "> 1 day"),
)
_BUCKETS_SQL = "(VALUES " + ", ".join(
    f"({i}, {lo}, {hi}, '{label}')" for i, (lo, hi, label) in enumerate(WAIT_BUCKETS)
) + ") AS b(bucket_index, lower_s, upper_s, bucket)"
# each wait's bucket by one CASE (a join on lower <= wait < upper costs a range join per row);
# waits outside every bucket get NULL and are left out, as the join left them out
_BUCKET_INDEX_SQL = "CASE " + " ".join(
    f"WHEN w.wait_s >= {lo} AND w.wait_s < {hi} THEN {i}"
    for i, (lo, hi, _label) in enumerate(WAIT_BUCKETS)
) + " END"

# A restricted viewer sees the waits of their own jobs and pods only: the run or workload must
# have a ledger row of a granted cost centre. Its pieces start no earlier than the run itself.
_OWN_SLURM_RUN = (
    "r.run_key IN (SELECT source_key FROM allocations WHERE domain = 'slurm' "
    f"AND day >= $first AND {_scope()})"
)
_OWN_KUEUE_WORKLOAD = (
    "EXISTS (SELECT 1 FROM allocations AS a WHERE a.domain = 'kubernetes' "
    "AND a.k8s_namespace = w.namespace AND a.job_id = w.name AND a.day >= $first "
    f"AND {_scope('a.cost_centre')})"
)


def _own_only(condition: str) -> str:
    """``AND condition`` for a restricted viewer, nothing for the others: DuckDB evaluates the
    subquery over the year's allocations even when ``$all_ccs`` is true."""
    return f"AND {condition} " if restricted() else ""


def _slurm_waits() -> str:
    # submit -> start of each run holding GPUs; slurm-bridge representative jobs are left out
    # (their pods are charged in Kubernetes and waited in Kueue)
    return (
        "SELECT partition AS grp, epoch(start - submit) AS wait_s FROM slurm_runs AS r "
        "WHERE start IS NOT NULL AND alloc_gpus > 0 AND coalesce(len(bridge_pods), 0) = 0 "
        f"AND start >= $first AND start < $end {_own_only(_OWN_SLURM_RUN)}"
    )


def _kueue_waits() -> str:
    # creation -> admission of workloads admitted once (a re-admitted workload's condition
    # shows its latest admission, which would count its first run as waiting)
    return (
        "SELECT cluster_queue AS grp, epoch(admitted_at - created_at) AS wait_s "
        "FROM kueue_workloads AS w WHERE admitted_at IS NOT NULL "
        "AND coalesce(eviction_count, 0) = 0 "
        f"AND admitted_at >= $first AND admitted_at < $end {_own_only(_OWN_KUEUE_WORKLOAD)}"
    )


_WAIT_SOURCES = {"slurm": _slurm_waits, "kueue": _kueue_waits}


def _waits(source: str) -> str:
    if source not in _WAIT_SOURCES:
        msg = f"expected a queue in {list(_WAIT_SOURCES)}, found {source!r}"
        raise ValueError(msg)
    return _WAIT_SOURCES[source]()


def wait_histogram(source: str, first: date, end: date) -> pl.DataFrame:
    """Count of waits per histogram bucket and group (partition / ClusterQueue)."""
    return query(
        f"WITH w AS ({_waits(source)}), counted AS (SELECT w.grp, {_BUCKET_INDEX_SQL} "
        "AS bucket_index, count(*) AS waits FROM w GROUP BY ALL) "
        "SELECT c.grp, b.bucket_index, b.bucket, c.waits "
        f"FROM counted AS c JOIN {_BUCKETS_SQL} USING (bucket_index) "
        "ORDER BY c.grp, b.bucket_index",
        _scoped(first=first, end=end),
    )


def wait_quantiles(source: str, first: date, end: date) -> pl.DataFrame:
    """Count, median, p90, p99, mean and max wait in seconds per group."""
    return query(
        f"WITH w AS ({_waits(source)}) SELECT grp, count(*) AS waits, "
        "quantile_cont(wait_s, 0.5) AS p50_s, quantile_cont(wait_s, 0.9) AS p90_s, "
        "quantile_cont(wait_s, 0.99) AS p99_s, avg(wait_s) AS mean_s, max(wait_s) AS max_s "
        "FROM w GROUP BY grp ORDER BY grp",
        _scoped(first=first, end=end),
    )


def wait_overall(source: str, first: date, end: date) -> dict[str, object]:
    """Count, median and p90 wait in seconds over every group."""
    return query(
        f"WITH w AS ({_waits(source)}) SELECT count(*) AS waits, "
        "quantile_cont(wait_s, 0.5) AS p50_s, quantile_cont(wait_s, 0.9) AS p90_s FROM w",
        _scoped(first=first, end=end),
    ).row(0, named=True)


def kueue_admission_wait(first: date, end: date, grain: str) -> pl.DataFrame:
    """Kueue's own admission-wait metric: admissions and mean wait per time bucket (hour or
    day, like the other charts: a year of hours is too many points to draw) and ClusterQueue."""
    _cluster_wide()
    return query(
        "SELECT date_trunc($grain, window_start) AS bucket, cluster_queue, "
        "sum(count) AS admissions, "
        "sum(sum_seconds) / nullif(sum(count), 0) AS mean_wait_s FROM kueue_admission_wait "
        "WHERE window_start >= $first AND window_start < $end AND count > 0 "
        "GROUP BY ALL ORDER BY bucket, cluster_queue",
        {"first": first, "end": end, "grain": _grain(grain)},
    )


# --- incidents -------------------------------------------------------------------------------

INCIDENT_COLUMNS = tuple(INCIDENTS.column_names)  # in the table's own order
# owner columns shown only when their cost centre is granted to the viewer
_OWNERS = {
    "cost_centre": ("person", "team", "cost_centre"),
    "other_cost_centre": ("other_person", "other_team", "other_cost_centre"),
}
# columns that name both holders of a double-scheduled GPU ("job 24245 (dave) and pod ...
# (heidi)"): shown only when every owner of the incident is granted to the viewer
_BOTH_OWNERS = ("slurm_job", "k8s_workload", "detail", "evidence")


def incidents_available() -> bool:
    """Whether the detectors have built the ``incidents`` table yet."""
    return has_table("incidents")


def _incident_scope() -> str:
    """An incident concerns the viewer when either of its owners' cost centres is granted (a
    double-scheduled GPU has one owner per scheduler)."""
    return f"({_scope()} OR {_scope('other_cost_centre')})"


def _incident_select() -> str:
    masked = {
        column: f"CASE WHEN {_scope(owner)} THEN {column} END AS {column}"
        for owner, columns in _OWNERS.items() for column in columns
    }
    every_owner = f"{_scope()} AND (other_cost_centre IS NULL OR {_scope('other_cost_centre')})"
    masked |= {column: f"CASE WHEN {every_owner} THEN {column} END AS {column}"
               for column in _BOTH_OWNERS}
    return ", ".join(masked.get(c, c) for c in INCIDENT_COLUMNS)


def incidents_by_day(first: date, end: date) -> pl.DataFrame:
    """Incidents, wasted GPU-hours and cost per day, kind and currency (never added up)."""
    return query(
        "SELECT day, kind, currency, count(*) AS incidents, "
        "sum(gpu_seconds) / 3600.0 AS gpu_hours, sum(cost) AS cost FROM incidents "
        f"WHERE day >= $first AND day < $end AND {_incident_scope()} "
        "GROUP BY ALL ORDER BY day, kind, currency",
        _scoped(first=first, end=end),
    )


def incidents_list(first: date, end: date, kinds: list[str]) -> pl.DataFrame:
    """Every incident in the range, costliest first (empty ``kinds`` means all). The owner of
    another cost centre than the viewer's is left empty."""
    return query(
        f"SELECT {_incident_select()} FROM incidents "
        "WHERE day >= $first AND day < $end "
        "AND (len($kinds::VARCHAR[]) = 0 OR list_contains($kinds::VARCHAR[], kind)) "
        f"AND {_incident_scope()} ORDER BY cost DESC NULLS LAST, gpu_seconds DESC, start_ts",
        _scoped(first=first, end=end, kinds=list(kinds)),
    )


def incident_by_id(incident_id: str) -> pl.DataFrame:
    """One incident by its id (a dashboard link: ``/incidents?incident=<id>``), whatever its
    day; empty when unknown or not the viewer's."""
    return query(
        f"SELECT {_incident_select()} FROM incidents WHERE incident_id = $incident_id "
        f"AND {_incident_scope()}",
        _scoped(incident_id=incident_id),
    )


def node_allocations(node: str, start: object, end: object) -> pl.DataFrame:
    """Both schedulers' allocations on one node overlapping ``[start, end)``, one row per job or
    pod (its per-day pieces joined back together)."""
    return query(
        "SELECT domain, source_key, any_value(job_id) AS job_id, any_value(name) AS name, "
        "max(gpus) AS gpus, any_value(gpu_uuids) AS gpu_uuids, min(start_ts) AS start_ts, "
        "max(end_ts) AS end_ts, sum(gpu_seconds)::BIGINT AS gpu_seconds, "
        "any_value(person) AS person, "
        "any_value(team) AS team, any_value(cost_centre) AS cost_centre, "
        "any_value(outcome) AS outcome FROM allocations "
        f"WHERE node = $node AND start_ts < $end AND end_ts > $start AND {_scope()} "
        "GROUP BY domain, source_key ORDER BY start_ts, domain, source_key",
        _scoped(node=node, start=start, end=end),
    )


def allocated_nodes() -> list[str]:
    """Nodes that appear in the ledger (for the timeline's node picker)."""
    frame = query(
        f"SELECT DISTINCT node FROM allocations WHERE {_scope()} ORDER BY node", _scoped()
    )
    return frame["node"].to_list()


# --- Slurm vs Kubernetes scorecard -----------------------------------------------------------

FAILURE_OUTCOMES = ("failed", "timeout", "node_fail")
EVICTION_OUTCOMES = ("preempted", "evicted", "requeued")


def outcome_summary(first: date, end: date) -> pl.DataFrame:
    """Per domain: finished jobs/pods, failures and evictions, and the GPU-hours they held.

    One job or pod counts once (its latest outcome); allocations still running are not finished.
    """
    return query(
        "WITH per_allocation AS (SELECT domain, source_key, any_value(outcome) AS outcome, "
        "sum(gpu_seconds)::BIGINT AS gpu_seconds FROM allocations "
        f"WHERE day >= $first AND day < $end AND {_scope()} GROUP BY domain, source_key) "
        "SELECT domain, count(*) AS allocations, "
        "count(*) FILTER (WHERE outcome <> 'running') AS finished, "
        "count(*) FILTER (WHERE list_contains($failures, outcome)) AS failures, "
        "count(*) FILTER (WHERE list_contains($evictions, outcome)) AS evictions, "
        "sum(gpu_seconds)::BIGINT AS gpu_seconds, "
        "coalesce(sum(gpu_seconds) FILTER (WHERE list_contains($failures, outcome)), 0)::BIGINT "
        "AS failure_gpu_seconds, "
        "coalesce(sum(gpu_seconds) FILTER (WHERE list_contains($evictions, outcome)), 0)::BIGINT "
        "AS eviction_gpu_seconds "
        "FROM per_allocation GROUP BY domain ORDER BY domain",
        _scoped(first=first, end=end, failures=list(FAILURE_OUTCOMES),
                evictions=list(EVICTION_OUTCOMES)),
    )


def cost_summary(first: date, end: date) -> pl.DataFrame:
    """Per domain and currency: amount, allocated and busy GPU-hours from the day lines."""
    return query(
        "SELECT domain, currency, sum(amount) AS amount, sum(gpu_hours) AS gpu_hours, "
        "sum(busy_gpu_hours) AS busy_gpu_hours FROM chargeback_periods WHERE period_kind = 'day' "
        f"AND period_start >= $first AND period_start < $end AND {_scope()} "
        "GROUP BY ALL ORDER BY domain, currency",
        _scoped(first=first, end=end),
    )


def startup_times(first: date, end: date) -> pl.DataFrame:
    """Start-up time per domain: Kubernetes admission -> PodsReady (all pods running);
    Slurm allocation start -> first step start. Median, p90 and count in seconds."""
    return query(
        "WITH s AS ("
        "SELECT 'kubernetes' AS domain, epoch(pods_ready_at - admitted_at) AS startup_s "
        "FROM kueue_workloads AS w WHERE admitted_at IS NOT NULL "
        "AND pods_ready_at >= admitted_at "
        "AND coalesce(eviction_count, 0) = 0 AND admitted_at >= $first AND admitted_at < $end "
        f"{_own_only(_OWN_KUEUE_WORKLOAD)}"
        "UNION ALL "
        "SELECT 'slurm', epoch(min(st.start) - any_value(r.start)) FROM slurm_runs AS r "
        "JOIN slurm_steps AS st USING (run_key) WHERE r.start IS NOT NULL AND r.alloc_gpus > 0 "
        "AND coalesce(len(r.bridge_pods), 0) = 0 AND r.start >= $first AND r.start < $end "
        f"{_own_only(_OWN_SLURM_RUN)}GROUP BY r.run_key) "
        "SELECT domain, count(*) AS started, quantile_cont(startup_s, 0.5) AS p50_s, "
        "quantile_cont(startup_s, 0.9) AS p90_s FROM s GROUP BY domain ORDER BY domain",
        _scoped(first=first, end=end),
    )


def shared_gpus(first: date, end: date) -> pl.DataFrame:
    """Per sharing mode and MIG profile over ``[first, end)`` (shared_gpu_daily, cluster-wide):
    allocations, slice-hours, physical GPU-hours charged, the busy share of the slice time,
    the share of all charged physical GPU-hours, amount and cost per busy slice-hour."""
    return query(
        "WITH t AS (SELECT sharing, slice_profile, currency, "
        "sum(allocations)::BIGINT AS allocations, "
        "sum(slice_seconds) / 3600 AS slice_hours, "
        "sum(physical_gpu_seconds) / 3600 AS physical_gpu_hours, "
        "sum(busy_slice_seconds) / 3600 AS busy_slice_hours, sum(amount) AS amount, "
        "count(*) FILTER (WHERE amount IS NULL) AS unpriced "
        "FROM shared_gpu_daily WHERE day >= $first AND day < $end GROUP BY ALL) "
        "SELECT sharing, slice_profile, currency, allocations, slice_hours, physical_gpu_hours, "
        "busy_slice_hours / nullif(slice_hours, 0) AS busy_share, "
        "physical_gpu_hours / nullif(sum(physical_gpu_hours) OVER (), 0) AS estate_share, "
        "CASE WHEN unpriced = 0 THEN amount END AS amount, "
        "CASE WHEN unpriced = 0 THEN amount / nullif(busy_slice_hours, 0) END "
        "AS cost_per_busy_slice_hour "
        "FROM t ORDER BY sharing = 'whole', sharing, slice_profile, currency",
        {"first": first, "end": end},
    )


# --- Conservation (gpu_conservation_hourly; docs/accounting.md "Conservation") -----------------

CONSERVATION_STATES = {
    "charged_slurm_gpu_seconds": "charged: Slurm",
    "charged_kubernetes_gpu_seconds": "charged: Kubernetes",
    "conflict_gpu_seconds": "conflict (held twice)",
    "infrastructure_gpu_seconds": "infrastructure (scheduler agent)",
    "unaccounted_gpu_seconds": "unaccounted use",
    "idle_gpu_seconds": "idle capacity",
}


def where_gpu_hours_went(first: date, end: date) -> pl.DataFrame:
    """GPU-hours per pool and state over ``[first, end)`` (cluster-wide): every physical
    GPU-hour of capacity in exactly one state, so each pool's states add up to its capacity."""
    _cluster_wide()
    sums = ", ".join(f"sum({c}) / 3600 AS {c}" for c in CONSERVATION_STATES)
    frame = query(
        f"SELECT coalesce(pool, 'unknown') AS pool, sum(capacity_gpu_seconds) / 3600 "
        f"AS capacity_gpu_hours, {sums} FROM gpu_conservation_hourly "
        "WHERE day >= $first AND day < $end GROUP BY ALL ORDER BY pool",
        {"first": first, "end": end},
    )
    return frame.unpivot(index=["pool", "capacity_gpu_hours"], on=list(CONSERVATION_STATES),
                         variable_name="state", value_name="gpu_hours").with_columns(
        pl.col("state").replace_strict(CONSERVATION_STATES),
        pl.col("gpu_hours").cast(pl.Float64), pl.col("capacity_gpu_hours").cast(pl.Float64))


GPU_CONSERVATION_STATES = {
    "charged_gpu_seconds": "charged",
    "conflict_gpu_seconds": "conflict",
    "infrastructure_gpu_seconds": "infrastructure",
    "unaccounted_gpu_seconds": "unaccounted use",
    "idle_gpu_seconds": "idle",
    "not_observed_gpu_seconds": "not observed",
}


def conservation_nodes(first: date, end: date) -> list[str]:
    """Nodes with per-GPU conservation rows in ``[first, end)``, those with unaccounted use or
    conflict first."""
    _cluster_wide()
    return query(
        "SELECT node FROM gpu_conservation_gpu_hourly WHERE day >= $first AND day < $end "
        "GROUP BY node ORDER BY sum(unaccounted_gpu_seconds + conflict_gpu_seconds) DESC, node",
        {"first": first, "end": end})["node"].to_list()


def where_gpu_hours_went_per_gpu(node: str, first: date, end: date) -> pl.DataFrame:
    """Per physical GPU of ``node`` over ``[first, end)``: its GPU-hours in each state, as
    dcgm-exporter's readings place the holders, and the jobs and pods behind the charged ones."""
    _cluster_wide()
    sums = ", ".join(f"sum({c})::DOUBLE / 3600 AS \"{label}\""
                     for c, label in GPU_CONSERVATION_STATES.items())
    return query(
        f"SELECT gpu_index, gpu_uuid, {sums}, "
        "list_sort(list_distinct(flatten(list(holders)))) AS holders "
        "FROM gpu_conservation_gpu_hourly WHERE node = $node AND day >= $first AND day < $end "
        "GROUP BY gpu_index, gpu_uuid ORDER BY gpu_index NULLS LAST, gpu_uuid",
        {"node": node, "first": first, "end": end})


# --- Kueue quota history (kueue_quota_hourly / _weekly; docs/kubernetes.md) ----------------

def kueue_quota_weeks() -> pl.DataFrame:
    """The ISO weeks with Kueue quota rows, latest first (cluster-wide)."""
    _cluster_wide()
    return query("SELECT DISTINCT week_start, week FROM kueue_quota_weekly "
                 "ORDER BY week_start DESC")


def kueue_quota_week(week_start: date) -> pl.DataFrame:
    """One ISO week of ``kueue_quota_weekly``: per ClusterQueue and cohort, flavor and
    resource, quota used, borrowed and lent GPU-hours, pending hours, known hours."""
    _cluster_wide()
    return query(
        "SELECT cluster, scope, cohort, cluster_queue, flavor, resource, "
        "quota_used_share, nominal_gpu_hours, usage_gpu_hours, reservation_gpu_hours, "
        "borrowed_gpu_hours, lendable_gpu_hours, lent_gpu_hours, "
        "pending_active_seconds / 3600 AS pending_active_hours, "
        "pending_inadmissible_seconds / 3600 AS pending_inadmissible_hours, "
        "known_hours, hours FROM kueue_quota_weekly WHERE week_start = $week "
        "ORDER BY cluster, scope DESC, cohort, cluster_queue, flavor, resource",
        {"week": week_start})


def kueue_quota_hours(week_start: date, cluster: str, cluster_queue: str) -> pl.DataFrame:
    """A ClusterQueue's hours of the week: mean GPUs in use, reserved and its nominal quota
    (GPU-hours over the hour's covered time; NULL for an hour without samples), per flavor."""
    _cluster_wide()
    return query(
        "SELECT hour_start, flavor, resource, known, "
        "usage_gpu_hours * 3600 / nullif(covered_seconds, 0) AS usage_gpus, "
        "reservation_gpu_hours * 3600 / nullif(covered_seconds, 0) AS reservation_gpus, "
        "nominal_gpu_hours * 3600 / nullif(covered_seconds, 0) AS nominal_gpus "
        "FROM kueue_quota_hourly WHERE scope = 'queue' AND cluster = $cluster "
        "AND cluster_queue = $queue AND hour_start >= $week "
        "AND hour_start < $week + INTERVAL 7 DAY ORDER BY hour_start, flavor, resource",
        {"week": week_start, "cluster": cluster, "queue": cluster_queue})


def slurm_gpu_hours_by_account(first: date, end: date) -> pl.DataFrame:
    """The Slurm side over ``[first, end)`` from the ledger: physical GPU-hours charged per
    cluster and Slurm account (allocations, cluster-wide), to read beside Kueue's quota."""
    _cluster_wide()
    return query(
        "SELECT cluster, coalesce(slurm_account, '(none)') AS slurm_account, "
        "sum(coalesce(physical_gpu_seconds, gpu_seconds))::DOUBLE / 3600 AS gpu_hours, "
        "count(DISTINCT job_id) AS jobs FROM allocations "
        "WHERE domain = 'slurm' AND day >= $first AND day < $end "
        "GROUP BY ALL ORDER BY cluster, gpu_hours DESC, slurm_account",
        {"first": first, "end": end})
