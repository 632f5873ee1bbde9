"""Which allocations hold idle GPUs right now, and which alerts are due (pure: no I/O).

Inputs: per-GPU utilization samples of a recent window with their holder labels (``SAMPLE_COLUMNS``,
from dcgm-exporter: ``namespace``/``pod``/``pod_uid`` for Kubernetes, ``hpc_job`` for Slurm), the
allocations that hold GPUs at ``as_of`` with their owners and rate (``HeldAllocation``), the
site's policy (``AlertsSite``) and ``as_of``. The rules (docs/alerts.md):

* a sample is *idle* when its busy fraction is ``<= idle_threshold`` (default 0: exactly 0 %),
  *low* when ``<= low_efficiency_threshold``;
* a GPU's streak is the run of idle samples ending with its newest sample, unbroken: two
  samples further apart than 1.5 scrape intervals (a missed scrape) end it, because unknown
  time is never idle; its length is newest sample - first sample of the run;
* data-quality gate: a GPU without samples gives no alert (a warning); a GPU whose newest sample
  is older than ``max_sample_age_minutes`` (default two scrape intervals) before ``as_of`` gives
  no alert (a warning: the source is stale);
* an allocation and node is reported with the GPUs whose streak reached the first warning; its
  level is set by the shortest of those streaks: ``idle_first`` (>= first_warning_minutes),
  ``idle_second`` (>= second_warning_minutes), ``idle_action`` (>= action.after_minutes, when
  the action is enabled and has a command for the domain).

:func:`due` then keeps what the alert log has not seen (one message per incident and level).
"""

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise

import polars as pl

from gpuledger.site.alerts import AlertsSite

SAMPLE_COLUMNS = {
    "cluster": pl.String, "ts": pl.Datetime("us"), "node": pl.String, "gpu_uuid": pl.String,
    "gpu_instance": pl.String, "gpu_index": pl.Int32, "busy": pl.Float64,
    "namespace": pl.String, "pod": pl.String, "pod_uid": pl.String, "hpc_job": pl.String,
}
LEVELS = ("idle_first", "idle_second", "idle_action")
DEFAULT_INTERVAL = timedelta(seconds=60)  # a GPU with a single sample
GAP_FACTOR = 1.5


@dataclass(frozen=True)
class HeldAllocation:
    """One allocation (Slurm job or pod) on one node, holding GPUs at ``as_of``."""

    domain: str  # slurm | kubernetes
    cluster: str
    ident: str  # Slurm: the JobID as sacct prints it; Kubernetes: the pod uid
    node: str
    gpus: int
    started: datetime
    job_id: str | None = None
    job_id_raw: str | None = None
    job_name: str | None = None
    user: str | None = None
    account: str | None = None
    qos: str | None = None
    namespace: str | None = None
    pod: str | None = None
    gpu_model: str | None = None
    sharing: str | None = None  # mig, shard, mps, time_slicing; None: whole GPUs
    person: str | None = None
    team: str | None = None
    cost_centre: str | None = None
    rate_per_gpu_hour: Decimal | None = None
    currency: str | None = None

    @property
    def workload(self) -> str:
        if self.domain == "slurm":
            return f"job {self.job_id}" + (f" ({self.job_name})" if self.job_name else "")
        return f"pod {self.namespace}/{self.pod}"


@dataclass(frozen=True)
class Finding:
    """Idle (or low-efficiency) GPUs of one allocation on one node at ``as_of``."""

    allocation: HeldAllocation
    family: str  # idle | low_efficiency
    level: str  # idle_first | idle_second | idle_action | low_efficiency
    gpus: tuple[str, ...]
    idle_since: datetime  # the latest streak start among the GPUs reported
    latest_sample: datetime
    idle_minutes: float  # the shortest streak among the GPUs reported
    gpu_seconds: float  # summed over the GPUs reported
    cost: Decimal | None
    currency: str | None
    as_of: datetime

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600


@dataclass(frozen=True)
class Evaluation:
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Streak:
    start: datetime
    latest: datetime

    @property
    def seconds(self) -> float:
        return (self.latest - self.start).total_seconds()


def _interval(times: Sequence[datetime]) -> timedelta:
    steps = [(b - a) for a, b in pairwise(times) if b > a]
    return statistics.median(steps) if steps else DEFAULT_INTERVAL


def streak(times: Sequence[datetime], busy: Sequence[float], threshold: float,
           interval: timedelta) -> Streak | None:
    """The run of samples ``<= threshold`` ending with the newest one (``times`` ascending),
    broken by a gap of more than ``GAP_FACTOR`` intervals; None when the newest is not."""
    if not times or busy[-1] > threshold:
        return None
    start = len(times) - 1
    while start > 0 and busy[start - 1] <= threshold and (
            times[start] - times[start - 1]) <= interval * GAP_FACTOR:
        start -= 1
    return Streak(times[start], times[-1])


def _matches(a: HeldAllocation) -> pl.Expr:
    here = (pl.col("cluster") == a.cluster) & (pl.col("node") == a.node)
    if a.domain == "slurm":
        ids = [i for i in (a.job_id, a.job_id_raw) if i]
        return here & pl.col("hpc_job").is_in(ids)
    by_uid = pl.col("pod_uid") == a.ident
    by_name = (pl.col("namespace") == a.namespace) & (pl.col("pod") == a.pod)
    return here & (by_uid.fill_null(False) | (pl.col("pod_uid").is_null() & by_name))


def _cost(seconds: float, a: HeldAllocation) -> Decimal | None:
    if a.rate_per_gpu_hour is None:
        return None
    hours = Decimal(str(round(seconds))) / Decimal(3600)
    return (hours * a.rate_per_gpu_hour).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def idle_level(minutes: float, policy: AlertsSite, domain: str) -> str | None:
    action = policy.action
    if action.enabled and action.command(domain) and minutes >= action.after_minutes:
        return "idle_action"
    if minutes >= policy.second_warning_minutes:
        return "idle_second"
    if minutes >= policy.first_warning_minutes:
        return "idle_first"
    return None


def _gpu_name(row: dict) -> str:
    name = row["gpu_uuid"] or (str(row["gpu_index"]) if row["gpu_index"] is not None else "?")
    return f"{name}/{row['gpu_instance']}" if row["gpu_instance"] else name


def evaluate(samples: pl.DataFrame, allocations: Iterable[HeldAllocation], policy: AlertsSite,
             as_of: datetime) -> Evaluation:
    """The findings at ``as_of`` (see the module docstring); samples after ``as_of`` are
    ignored, so a past tick can be evaluated again."""
    missing = set(SAMPLE_COLUMNS) - set(samples.columns)
    if missing:
        msg = f"expected sample columns {sorted(SAMPLE_COLUMNS)}, missing {sorted(missing)}"
        raise ValueError(msg)
    samples = samples.filter(pl.col("ts") <= as_of)
    findings: list[Finding] = []
    warnings: list[str] = []
    for a in allocations:
        mine = samples.filter(_matches(a) & (pl.col("ts") >= a.started)).sort("ts")
        if mine.height == 0:
            warnings.append(f"{a.cluster} {a.workload} on {a.node}: no GPU samples, no alert "
                            "(data-quality gate: dcgm-exporter does not report its GPUs)")
            continue
        idle: list[tuple[str, Streak]] = []
        low: list[tuple[str, Streak]] = []
        for part in mine.partition_by(["gpu_uuid", "gpu_instance", "gpu_index"],
                                      maintain_order=True):
            times, busy = part["ts"].to_list(), part["busy"].to_list()
            name = _gpu_name(part.row(0, named=True))
            interval = _interval(times)
            max_age = (timedelta(minutes=policy.max_sample_age_minutes)
                       if policy.max_sample_age_minutes > 0 else 2 * interval)
            if as_of - times[-1] > max_age:
                warnings.append(
                    f"{a.cluster} {a.workload} on {a.node}: GPU {name}'s newest sample "
                    f"({times[-1]:%Y-%m-%d %H:%M:%S}) is older than {max_age} before as_of "
                    f"{as_of:%Y-%m-%d %H:%M:%S}: stale source, no alert")
                continue
            s = streak(times, busy, policy.idle_threshold, interval)
            if s is not None and s.seconds >= policy.first_warning_minutes * 60:
                idle.append((name, s))
                continue
            s = streak(times, busy, policy.low_efficiency_threshold, interval)
            if (policy.include_low_efficiency and s is not None
                    and s.seconds >= policy.low_efficiency_minutes * 60):
                low.append((name, s))
        for family, found in (("idle", idle), ("low_efficiency", low)):
            if not found:
                continue
            shortest = min(s.seconds for _, s in found) / 60
            level = (idle_level(shortest, policy, a.domain) if family == "idle"
                     else "low_efficiency")
            assert level is not None
            seconds = sum(s.seconds for _, s in found)
            findings.append(Finding(
                allocation=a, family=family, level=level,
                gpus=tuple(sorted(n for n, _ in found)),
                idle_since=max(s.start for _, s in found),
                latest_sample=max(s.latest for _, s in found),
                idle_minutes=shortest, gpu_seconds=seconds, cost=_cost(seconds, a),
                currency=a.currency if a.rate_per_gpu_hour is not None else None,
                as_of=as_of))
    return Evaluation(tuple(findings), tuple(dict.fromkeys(warnings)))


# --------------------------------------------------------------------------- the alert log


@dataclass(frozen=True)
class Logged:
    """An alert the log holds (sent, or logged by a dry run)."""

    key: str
    family: str
    level: str
    domain: str
    cluster: str
    ident: str
    node: str | None
    incident_start: datetime | None  # idle_since at the incident's first alert
    as_of: datetime


def _rank(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else 0


def incident_key(f: Finding, start: datetime, level: str) -> str:
    a = f.allocation
    return (f"{f.family}:{a.domain}:{a.cluster}:{a.ident}:{a.node}:"
            f"{start:%Y%m%dT%H%M%S}:{level}")


@dataclass(frozen=True)
class Due:
    finding: Finding
    key: str
    incident_start: datetime


def due(findings: Iterable[Finding], logged: Iterable[Logged]) -> list[Due]:
    """The alerts to send now: per finding, its level unless the log holds that level or a
    higher one for the same incident. Same incident: an entry of the same allocation, node and
    family whose ``as_of`` is at or after the finding's ``idle_since`` (the streak had begun
    when it was logged); a streak that began after the last entry is a new incident."""
    by_alloc: dict[tuple, list[Logged]] = {}
    for entry in logged:
        by_alloc.setdefault((entry.family, entry.domain, entry.cluster, entry.ident,
                             entry.node), []).append(entry)
    out = []
    for f in findings:
        a = f.allocation
        same = [e for e in by_alloc.get((f.family, a.domain, a.cluster, a.ident, a.node), [])
                if e.as_of >= f.idle_since]
        start = min((e.incident_start for e in same if e.incident_start), default=f.idle_since)
        if same and max(_rank(e.level) for e in same) >= _rank(f.level):
            continue
        out.append(Due(f, incident_key(f, start, f.level), start))
    return out
