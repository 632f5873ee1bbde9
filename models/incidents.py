"""Detectors: double-scheduled GPUs, partial gangs and idle allocations (``incidents``), and the
slurm-bridge pairs that look like double scheduling but are one workload (``bridge_pairs``).

Rules, thresholds, evidence and the charging rule: docs/detectors.md. Each detector is one SQL
model (``models/sql/detect_*.sql``) run into a temp table; ``detect_incidents.sql`` puts them in
one layout with their cost. The write is a partition-scoped delete+insert in one transaction, so
re-building a day changes nothing when its inputs did not change.

An incident belongs to the UTC day it started on. A build of days ``[first, last]`` also
rebuilds the day before ``first`` (and any earlier day whose incidents were still open when
``first`` began), so an incident crossing midnight is rebuilt whole when the next day lands:
its duration, GPU-seconds and cost come from both days' data, in one row under its start day.
The detectors read one day more on each side of the days rebuilt.
"""

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any

import duckdb

from models import load_sql
from models.build import create_staging_view
from models.engines import DUCKDB_ENGINE, Engine
from models.pricing import create_rate_choice
from models.runner import transaction
from models.scalars import scalar

DEFAULT_IDLE_THRESHOLD = 0.05  # busy fraction strictly below this is idle
DEFAULT_IDLE_MIN_MINUTES = 30  # shorter idle periods (warm-ups, pauses) are no incident
DEFAULT_GANG_GRACE_SECONDS = 300  # Kueue's default waitForPodsReady timeout: normal start-up
MARGIN = timedelta(days=1)
# An incident of an earlier day that ended this close to the first day's midnight was still open
# when its day's data ended (cut there): it is rebuilt with the next day. Looking back further
# than CARRY_DAYS would rescan weeks on every daily build; longer incidents are cut there.
CARRY_SLACK = timedelta(hours=1)
CARRY_DAYS = 14
KINDS = ("double_scheduled", "partial_gang", "idle_allocation", "low_efficiency",
         "shared_overcommit", "mig_layout_change", "over_capacity", "unaccounted_use")
# window rule off by default: realistic work has hours-long phases at 5-15 % (data loading,
# evaluation) that are work, not waste (docs/detectors.md "Idle policies")
DEFAULT_WINDOW_THRESHOLD = 0.10
DEFAULT_WINDOW_MINUTES = 0.0
DEFAULT_EFFICIENCY_THRESHOLD = 0.10  # busy share over a job's life below this: low_efficiency
DEFAULT_EFFICIENCY_MIN_MINUTES = 60.0  # shorter jobs are tests and smoke runs
EFFICIENCY_COVERAGE = 0.9  # share of a job's GPU-time with samples needed to judge it

# temp table -> the model that fills it, in the order they run (later ones read earlier ones)
DETECTORS = (
    ("det_overcommit", "detect_node_sweep"),
    ("det_double_gpu", "detect_double_gpu"),
    ("det_double_scontrol", "detect_double_gpu_scontrol"),
    ("det_double_node", "detect_double_node"),
    ("det_double", "detect_double_scheduled"),
    ("det_gang", "detect_partial_gang"),
    ("det_idle", "detect_idle"),  # minus det_double's and det_gang's GPU-time
    ("det_low_eff", "detect_low_efficiency"),
    ("det_shared", "detect_shared_overcommit"),  # the shared-GPU invariant (docs/shared-gpus.md)
    ("det_mig_layout", "detect_mig_layout_change"),
    # conservation (docs/accounting.md): one scheduler beyond a node's GPUs, and busy GPUs no
    # holder claims (gpu_conservation_hourly)
    ("det_over_capacity", "detect_over_capacity"),
    ("det_unaccounted", "detect_unaccounted_use"),
)
# the detectors whose input grows with the minute samples (they read gpu_utilization): these run
# on the engine build_incidents is given, the rest on DuckDB
HEAVY_DETECTORS = frozenset({"det_double_gpu", "det_idle", "det_low_eff"})
_PARAMETER = re.compile(r"\$([a-z_]+)")


@dataclass(frozen=True)
class IdlePolicy:
    """The idle rules for allocations on ``cluster`` (empty: any) in a Slurm ``partition`` or a
    Kubernetes ``namespace`` (empty: any); the site file's ``[gpuledger.idle]`` and
    ``[[gpuledger.idle.policy]]`` (docs/site-file.md). Rules: (a) zero: busy below
    ``zero_threshold`` for ``zero_minutes``; (b) window: mean busy below ``window_threshold``
    over ``window_minutes`` (0: off); (c) low efficiency: mean busy below
    ``efficiency_threshold`` over a job's life of at least ``efficiency_min_minutes`` (0: off)."""

    cluster: str = ""
    partition: str = ""
    namespace: str = ""
    zero_threshold: float = DEFAULT_IDLE_THRESHOLD
    zero_minutes: float = DEFAULT_IDLE_MIN_MINUTES
    window_threshold: float = DEFAULT_WINDOW_THRESHOLD
    window_minutes: float = DEFAULT_WINDOW_MINUTES
    efficiency_threshold: float = DEFAULT_EFFICIENCY_THRESHOLD
    efficiency_min_minutes: float = DEFAULT_EFFICIENCY_MIN_MINUTES

    def check(self) -> None:
        for name in ("zero_threshold", "window_threshold"):
            if not 0 < getattr(self, name) <= 1:
                msg = f"expected {name} in (0, 1], found {getattr(self, name)}"
                raise ValueError(msg)
        if not 0 <= self.efficiency_threshold <= 1:
            msg = f"expected efficiency_threshold in [0, 1], found {self.efficiency_threshold}"
            raise ValueError(msg)
        if self.zero_minutes <= 0:
            msg = f"expected a positive zero_minutes, found {self.zero_minutes}"
            raise ValueError(msg)
        for name in ("window_minutes", "efficiency_min_minutes"):
            if getattr(self, name) < 0:
                msg = f"expected {name} of zero (off) or more, found {getattr(self, name)}"
                raise ValueError(msg)
        if self.partition and self.namespace:
            msg = ("expected a policy for a partition or for a namespace, found both "
                   f"{self.partition!r} and {self.namespace!r}")
            raise ValueError(msg)


@dataclass(frozen=True)
class IdleRules:
    """The default policy and the specific ones, first match wins (file order)."""

    default: IdlePolicy = field(default_factory=IdlePolicy)
    policies: tuple[IdlePolicy, ...] = ()


def idle_rules_with(rules: IdleRules | None, zero_threshold: float | None = None,
                    zero_minutes: float | None = None) -> IdleRules:
    """The site's rules (or the defaults) with a zero rule given on the command line or in run
    config applied to every policy: a flag says "for this build, this rule everywhere"."""
    rules = rules or IdleRules()
    changes: dict[str, Any] = {k: v for k, v in (("zero_threshold", zero_threshold),
                                 ("zero_minutes", zero_minutes)) if v is not None}
    if not changes:
        return rules
    return IdleRules(replace(rules.default, **changes),
                     tuple(replace(p, **changes) for p in rules.policies))


def _idle_policy_table(con: duckdb.DuckDBPyConnection, rules: IdleRules) -> None:
    """The temp table ``idle_policy`` detect_idle.sql and detect_low_efficiency.sql read: one
    row per policy, ``priority`` the file order, the default last and matching everything."""
    con.execute("CREATE OR REPLACE TEMP TABLE idle_policy (priority INTEGER, cluster VARCHAR, "
                "partition VARCHAR, namespace VARCHAR, zero_threshold DOUBLE, "
                "zero_seconds DOUBLE, window_threshold DOUBLE, window_seconds DOUBLE, "
                "efficiency_threshold DOUBLE, efficiency_min_seconds DOUBLE)")
    default = replace(rules.default, cluster="", partition="", namespace="")
    con.executemany("INSERT INTO idle_policy VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        (i, p.cluster, p.partition, p.namespace, float(p.zero_threshold),
         float(p.zero_minutes) * 60, float(p.window_threshold), float(p.window_minutes) * 60,
         float(p.efficiency_threshold), float(p.efficiency_min_minutes) * 60)
        for i, p in enumerate((*rules.policies, default))])


@dataclass(frozen=True)
class IncidentsBuilt:
    """What one build wrote: incidents per kind (every kind present) and bridge pairs."""

    by_kind: dict[str, int] = field(default_factory=dict)
    bridge_pairs: int = 0
    tolerance_seconds: int = 0

    @property
    def incidents(self) -> int:
        return sum(self.by_kind.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{self.by_kind.get(k, 0)} {k}" for k in KINDS)
        return (f"incidents: {self.incidents} ({kinds}); bridge_pairs: {self.bridge_pairs} "
                f"(scrape tolerance {self.tolerance_seconds} s)")


def _run(con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, object]) -> None:
    """Execute ``sql`` binding only the ``$parameters`` it names."""
    names = set(_PARAMETER.findall(sql))
    missing = names - values.keys()
    if missing:
        msg = f"expected values for the parameters {sorted(names)}, found none for {missing}"
        raise ValueError(msg)
    con.execute(sql, {k: values[k] for k in names})


def scrape_tolerance(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime) -> int:
    """The Kubernetes scrape interval in ``[start, end)`` (pod starts and ends are known to it)."""
    value = scalar(con,
        "SELECT coalesce(max(scrape_interval_s), 0) FROM k8s_pod_allocations "
        "WHERE start_ts < ? AND end_ts > ?", [end, start])
    return int(value)


def carry_first_day(con: duckdb.DuckDBPyConnection, first_day: date) -> date:
    """The first day a build starting on ``first_day`` rebuilds: the day before, or the start
    day of an earlier incident still open at ``first_day``'s midnight (at most CARRY_DAYS)."""
    midnight = datetime.combine(first_day, time())
    earliest = scalar(con,
        "SELECT min(day) FROM incidents WHERE day < ? AND day >= ? AND end_ts >= ?",
        [first_day - MARGIN, first_day - timedelta(days=CARRY_DAYS),
         midnight - CARRY_SLACK])
    return min(first_day - MARGIN, earliest) if earliest else first_day - MARGIN


def _check(idle_threshold: float, idle_min_minutes: float, gang_grace_seconds: float) -> None:
    if not 0 < idle_threshold <= 1:
        msg = f"expected an idle threshold in (0, 1], found {idle_threshold}"
        raise ValueError(msg)
    if idle_min_minutes <= 0:
        msg = f"expected a positive idle minimum in minutes, found {idle_min_minutes}"
        raise ValueError(msg)
    if gang_grace_seconds < 0:
        msg = f"expected a gang grace of zero or more seconds, found {gang_grace_seconds}"
        raise ValueError(msg)


def build_incidents(
    con: duckdb.DuckDBPyConnection,
    first_day: date,
    last_day: date,
    *,
    idle_threshold: float = DEFAULT_IDLE_THRESHOLD,
    idle_min_minutes: float = DEFAULT_IDLE_MIN_MINUTES,
    gang_grace_seconds: float = DEFAULT_GANG_GRACE_SECONDS,
    tolerance_seconds: int | None = None,
    idle_rules: IdleRules | None = None,
    engine: Engine = DUCKDB_ENGINE,
) -> IncidentsBuilt:
    """Rebuild ``incidents`` and ``bridge_pairs`` for the UTC days ``first_day`` .. ``last_day``
    and for the days before whose incidents may continue into them (:func:`carry_first_day`).

    ``tolerance_seconds`` defaults to the Kubernetes scrape interval of the data. ``idle_rules``
    (the site's idle policies) replaces ``idle_threshold``/``idle_min_minutes``, which otherwise
    make the default policy's zero rule. The detectors of ``HEAVY_DETECTORS`` run on ``engine``.
    """
    _check(idle_threshold, idle_min_minutes, gang_grace_seconds)
    if idle_rules is None:
        idle_rules = IdleRules(IdlePolicy(zero_threshold=idle_threshold,
                                          zero_minutes=idle_min_minutes))
    for policy in (idle_rules.default, *idle_rules.policies):
        policy.check()
    asked_first, first_day = first_day, carry_first_day(con, first_day)  # made whole
    scan_first, scan_last = first_day - MARGIN, last_day + MARGIN
    scan_start = datetime.combine(scan_first, time())
    scan_end = datetime.combine(scan_last + timedelta(days=1), time())
    if tolerance_seconds is None:
        tolerance_seconds = scrape_tolerance(con, scan_start, scan_end)
    values: dict[str, object] = {
        "scan_start": scan_start, "scan_end": scan_end,
        "scan_first": scan_first, "scan_last": scan_last,
        "first_day": first_day, "last_day": last_day,
        "tolerance_seconds": tolerance_seconds,
        "efficiency_coverage": EFFICIENCY_COVERAGE,
        "gang_grace_seconds": float(gang_grace_seconds),
    }
    create_staging_view(con)  # bridge_pairs reads the pods' uncut intervals
    _idle_policy_table(con, idle_rules)
    # detect_idle builds the window rule's time line only when a policy has the rule (read from
    # the table the SQL reads; a constant, so the plan drops the branch it does not take)
    values["window_rule"] = bool(scalar(con,
        "SELECT coalesce(bool_or(window_seconds > 0), false) FROM idle_policy"))
    # the one node sweep (node_holding_segments.sql) of the scan days, for detect_over_capacity
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE holding_segments AS {load_sql('node_holding_segments')}",
        {"from_ts": scan_start, "to_ts": scan_end})
    try:
        for temp, model in DETECTORS:
            on = engine if temp in HEAVY_DETECTORS else DUCKDB_ENGINE
            on.create_temp(con, temp, load_sql(model), values)
    except BaseException:
        engine.drop_temps(con, (t for t, _ in DETECTORS))
        raise
    create_rate_choice(con, " UNION ALL ".join(
        f"SELECT CAST(start_ts AS DATE) AS day, rate_domain AS domain, gpu_model, qos FROM {t}"
        for t in ("det_double", "det_gang", "det_idle", "det_low_eff", "det_shared",
                  "det_mig_layout", "det_over_capacity")))
    with transaction(con):
        con.execute("DELETE FROM incidents WHERE day >= ? AND day <= ?", [first_day, last_day])
        _run(con, f"INSERT INTO incidents BY NAME {load_sql('detect_incidents')}", values)
        con.execute("DELETE FROM bridge_pairs WHERE day >= ? AND day <= ?",
                    [first_day, last_day])
        _run(con, f"INSERT INTO bridge_pairs BY NAME {load_sql('bridge_pairs')}", values)
        # what the days asked for hold (the days before were only made whole)
        by_kind = dict(con.execute(
            "SELECT kind, count(*) FROM incidents WHERE day >= ? AND day <= ? GROUP BY kind",
            [asked_first, last_day]).fetchall())
        pairs = scalar(con, "SELECT count(*) FROM bridge_pairs WHERE day >= ? AND day <= ?",
                            [asked_first, last_day])
    engine.drop_temps(con, (t for t, _ in DETECTORS))
    for temp in ("rate_choice", "rate_keys", "idle_policy", "holding_segments"):
        con.execute(f"DROP TABLE IF EXISTS {temp}")
    return IncidentsBuilt({k: by_kind.get(k, 0) for k in KINDS}, pairs, tolerance_seconds)
