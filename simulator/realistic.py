"""``--realistic`` (issue #15 item 1): what a messy cluster adds to a world, outside the planted
scenarios (those are ``planted_real``). Each feature and the real behaviour it imitates is in
docs/simulator-shapes.md.

Nothing here may create an incident the truth does not list: utilization goes below 5 % only for
less than the idle rule's minimum (docs/detectors.md), and a planted idle period that an exporter
gap cuts is split exactly as the rule says (unknown time is never idle).
"""

from dataclasses import replace

from simulator.config import DAY, HOUR, MINUTE, SimConfig
from simulator.k8s_model import JOB_TTL_SECONDS, WorkloadPlan
from simulator.openmetrics import Irregularities
from simulator.records import Holder, Incident, Profile
from simulator.rng import digest_hex, mix, stream
from simulator.world import Node

IDLE_THRESHOLD_PERCENT = 5  # docs/detectors.md: idle_threshold 0.05
IDLE_MIN_SECONDS = 30 * MINUTE  # docs/detectors.md: idle_min_minutes 30
MAX_WARMUP = 25 * MINUTE
INEFFICIENT_PERCENT = 12  # share of background holders that are simply inefficient
KSM_CLOCK_SKEW = 4  # seconds the API server's clock runs ahead of slurmctld's
WORKLOAD_DELETE_AFTER = JOB_TTL_SECONDS  # ttlSecondsAfterFinished: the Job, then its Workload
GAPS_PER_DAY = 2  # dcgm-exporter down 10-60 min
RESTARTS_PER_DAY = 3  # dcgm-exporter restarted: 1-3 scrapes missing
FQDN_SHARE = 0.5
REAL_KIND = {"train": "real_train", "hpc": "real_hpc", "io": "real_io"}


def fqdn_some(config: SimConfig, nodes: tuple[Node, ...]) -> tuple[str, ...]:
    """The nodes whose kubelet and dcgm-exporter use the FQDN (the others: short names)."""
    if not config.realistic or config.fqdn_nodes:
        return ()
    ranked = sorted((n.name for n in nodes), key=lambda x: digest_hex(config.seed, "fqdn", x))
    return tuple(sorted(ranked[:max(1, round(FQDN_SHARE * len(ranked)))]))


def realistic_profile(h: Holder, step: int) -> Profile:
    """A background holder's realistic profile: a warm-up of up to 25 minutes (short enough
    that its samples stay under the idle minimum at this scrape interval), then phases."""
    kind = REAL_KIND.get(h.profile.kind)
    if kind is None:
        return h.profile
    seed = h.profile.seed
    longest = min(MAX_WARMUP, IDLE_MIN_SECONDS - 2 * step)
    warm = 0 if longest <= 0 else mix(seed, 11, 13) % (longest + 1)
    if mix(seed, 17, 19) % 100 < INEFFICIENT_PERCENT:
        kind = "inefficient"
    return Profile(kind, seed, h.start + warm)


def with_realistic_profile(h: Holder, step: int) -> Holder:
    profile = realistic_profile(h, step)
    return h if profile is h.profile else replace(h, profile=profile)


def exporter_gaps(config: SimConfig, nodes: tuple[Node, ...]) -> tuple[tuple[str, int, int], ...]:
    """dcgm-exporter outages and restarts: per day some nodes' series are missing for 10-60
    minutes, others for a few scrapes. On the scrape grid, one gap per node at a time."""
    rng = stream(config.seed, "realistic-gaps")
    step = config.step_seconds
    names = [n.name for n in nodes]
    out: list[tuple[str, int, int]] = []
    for d in range(config.days):
        day = config.window_start + d * DAY
        for k in range(GAPS_PER_DAY + RESTARTS_PER_DAY):
            node = rng.choice(names)
            start = day + rng.randrange(0, DAY - HOUR) // step * step
            if k < GAPS_PER_DAY:
                length = rng.randint(10, 60) * MINUTE
            else:
                length = rng.randint(1, 3) * MINUTE
            end = start + max(step, length // step * step)
            if any(n == node and a < end and start < b for n, a, b in out):
                continue
            out.append((node, start, end))
    return tuple(sorted(out, key=lambda g: (g[1], g[0])))


def realistic_irregularities(config: SimConfig, nodes: tuple[Node, ...],
                             base: Irregularities) -> Irregularities:
    gaps = exporter_gaps(config, nodes)
    return replace(base, exporter_outages=tuple(sorted(
        (*base.exporter_outages, *gaps), key=lambda g: (g[1], g[0]))),
        ksm_clock_skew=KSM_CLOCK_SKEW)


def workload_deleted(plan: WorkloadPlan) -> WorkloadPlan:
    """The Job (ttlSecondsAfterFinished) and with it its Workload are deleted 10 minutes after
    the Job ended; Deployment pods' Workloads go with their pod."""
    if plan.deleted is not None or not plan.attempts:
        return plan
    last = plan.attempts[-1]
    if last.ended is None or last.evict_reason:
        return plan
    if plan.pod_owner_kind == "Job":
        return replace(plan, deleted=last.ended + WORKLOAD_DELETE_AFTER)
    pods = [p.deleted for p in last.pods]
    if pods and all(d is not None for d in pods):
        return replace(plan, deleted=max(d for d in pods if d is not None))
    return plan


def split_by_gaps(incident: Incident, gaps: tuple[tuple[str, int, int], ...],
                  min_seconds: int = IDLE_MIN_SECONDS) -> list[Incident]:
    """An idle incident as the rule sees it when exporter gaps cut it: a gap ends an idle
    period, and only pieces of at least the minimum remain (gaps lie on the scrape grid)."""
    if incident.kind != "idle_allocation":
        return [incident]
    nodes = set(incident.node.split(";"))
    cuts = sorted((a, b) for n, a, b in gaps if n in nodes and a < incident.end
                  and b > incident.start)
    if not cuts:
        return [incident]
    pieces: list[tuple[int, int]] = []
    t = incident.start
    for a, b in cuts:
        if a > t:
            pieces.append((t, a))
        t = max(t, b)
    if t < incident.end:
        pieces.append((t, incident.end))
    gpus = len(incident.gpu_uuids)
    return [replace(incident, start=a, end=b, gpu_seconds=gpus * (b - a),
                    detail=f"{incident.detail} (cut by a dcgm-exporter gap)")
            for a, b in pieces if b - a >= min_seconds]
