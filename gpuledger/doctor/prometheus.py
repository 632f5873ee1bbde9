"""``gpuledger doctor``: a cluster's Prometheus (or its OpenMetrics file).

Reachable, auth accepted, the server's clock (its ``time()``) against ours, the cluster's label
selector matches something, each metric family the readers need present within the last day
(the names come from the connectors that read them), and a sample of GPU pods.
"""

import gzip
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from prometheus_api_client import PrometheusApiClientException

from connectors.errors import SourceError
from connectors.kubernetes.dcgm_names import PREFERRED, VARIANTS
from connectors.kubernetes.ksm import (
    GPU_RESOURCE,
    NODE_CAPACITY_METRIC,
    PHASE_METRIC,
    POD_INFO_METRIC,
)
from connectors.kubernetes.ksm_pods import GPU_METRICS
from connectors.kubernetes.kueue_metrics import (
    COUNTERS,
    PRESENCE_METRIC,
    QUEUE_RESOURCE_GAUGES,
    WAIT_HISTOGRAM,
)
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.secrets import redact, without_credentials
from gpuledger.doctor.checks import SAMPLE_SIZE, Check, fail, first_line, ok, warn
from gpuledger.site import PrometheusSite
from gpuledger.site.sources import prometheus_config

LOOKBACK = timedelta(days=1)  # "present" means a sample within the last day
SKEW_WARN_S = 10.0
SKEW_FAIL_S = 300.0  # the same tolerance as the Slurm sanity limit's default
KSM_FIX = ("deploy kube-state-metrics v2 and scrape it (its ServiceMonitor), or widen "
           "[…prometheus].selector")
DCGM_FIX = "deploy dcgm-exporter (GPU Operator) and scrape it"
KUEUE_FIX = ("enable Kueue's metrics (controller_manager_config metrics, its ServiceMonitor); "
             "none needed if this cluster runs no Kueue")


@dataclass(frozen=True)
class Need:
    """A metric family a reader needs: any one of ``names`` will do."""

    what: str
    names: tuple[str, ...]
    fix: str


def required() -> tuple[Need, ...]:
    requests_or_limits = tuple(m for m, kind, _ in GPU_METRICS if kind == "container")
    return (
        Need("GPU requests (kube-state-metrics)", requests_or_limits, KSM_FIX),
        Need("pod phase (kube-state-metrics)", (PHASE_METRIC,), KSM_FIX),
        Need("pod info (kube-state-metrics)", (POD_INFO_METRIC,), KSM_FIX),
        Need("node GPU capacity (kube-state-metrics)", (NODE_CAPACITY_METRIC,), KSM_FIX),
        Need("GPU utilization (dcgm-exporter)", tuple(v.name for v in VARIANTS), DCGM_FIX),
    )


def kueue_names() -> tuple[str, ...]:
    return (PRESENCE_METRIC, *(c[0] for c in COUNTERS), f"{WAIT_HISTOGRAM}_bucket",
            *(g[1] for g in QUEUE_RESOURCE_GAUGES))


def _all_names() -> list[str]:
    return sorted({*(n for need in required() for n in need.names), *kueue_names()})


def prometheus_checks(name: str, p: PrometheusSite, *, now: datetime,
                      gpu_resources: tuple[str, ...]) -> Iterator[Check]:
    label = f"prometheus {name}"
    if p.openmetrics is not None:
        yield from _file_checks(label, Path(p.openmetrics))
        return
    where = f"[gpuledger.clusters.{name}.prometheus]"
    try:  # the client reads the secret files as it is built
        source = PrometheusHttpSource(prometheus_config(p))
    except (SourceError, ValueError) as exc:
        yield fail(f"{label}: auth", "readable credentials", first_line(exc),
                   f"check {where}.bearer_token_file / basic_auth_password_file (paths are "
                   "relative to the site file's folder)")
        return
    try:
        answered = yield from _reach(label, source, p, where)
        if not answered:
            return
        present = yield from _selector(label, source, p, where, now)
        if present is None:
            return
        yield from _presence(label, present)
        yield _pods(label, source, p, now, gpu_resources)
    finally:
        source.close()


class _Failed(Exception):
    def __init__(self, status: int | None, text: str) -> None:
        super().__init__(text)
        self.status = status


def _call(fn, *args, **kwargs):
    """The client call, its failures as ``_Failed`` (with the HTTP status when there is one)."""
    try:
        return fn(*args, **kwargs)
    except PrometheusApiClientException as exc:
        found = re.search(r"HTTP Status Code (\d+)", str(exc))
        raise _Failed(int(found.group(1)) if found else None, first_line(exc)) from exc
    except (requests.RequestException, SourceError, ValueError, KeyError) as exc:
        raise _Failed(None, f"{type(exc).__name__}: {first_line(exc)}") from exc


def _reach(label: str, source: PrometheusHttpSource, p: PrometheusSite, where: str):
    """Reachable, auth, clock skew; True when the server answered queries."""
    before = time.time()
    shown = without_credentials(p.url)  # the URL as shown: never its user:password@
    try:
        result = _call(source.client.custom_query, "time()", timeout=p.connect_timeout_s + 20)
    except _Failed as exc:
        if exc.status in (401, 403):
            yield ok(f"{label}: reachable", f"{shown} answers (HTTP {exc.status})")
            yield fail(f"{label}: auth", "the server to accept our credentials",
                       f"HTTP {exc.status}", f"check {where}.bearer_token_file, "
                       "basic_auth_user/basic_auth_password_file or headers (a tenant header "
                       "such as X-Scope-OrgID)")
            return False
        if exc.status == 404:
            yield fail(f"{label}: reachable", f"the Prometheus HTTP API at {shown}/api/v1",
                       "HTTP 404", f"set {where}.url to the server's root (http://host:9090, "
                       "or a Thanos querier's), without /api/v1")
            return False
        yield fail(f"{label}: reachable", f"the Prometheus HTTP API at {shown}",
                   redact(str(exc), source._secrets()),
                   f"check {where}.url (scheme, host, port) and that this host can reach it "
                   "(firewall, proxy, ca_bundle for TLS)")
        return False
    after = time.time()
    try:
        server = float(result[0])
    except (TypeError, ValueError, IndexError, KeyError):
        yield fail(f"{label}: reachable", "a Prometheus query API answering time()",
                   repr(result)[:100], f"set {where}.url to a Prometheus-compatible API")
        return False
    yield ok(f"{label}: reachable", f"{shown} answers in {(after - before) * 1000:.0f} ms")
    auth = ("bearer token" if p.bearer_token_file else "basic auth" if p.basic_auth_user
            else "no credentials")
    yield ok(f"{label}: auth", f"queries accepted ({auth})")
    skew = server - (before + after) / 2
    slack = (after - before) / 2 + 0.5
    shown = f"the server is {abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} here"
    if abs(skew) > SKEW_FAIL_S:
        yield fail(f"{label}: clock", f"clocks within {SKEW_FAIL_S:g} s", shown,
                   "run NTP (chrony) on both hosts: day windows would miss or double samples")
    elif abs(skew) > max(SKEW_WARN_S, slack):
        yield warn(f"{label}: clock", f"{shown}; run NTP on both hosts")
    else:
        yield ok(f"{label}: clock", f"the server's time() is within {max(abs(skew), 0):.1f} s "
                 "of here")
    return True


def _epoch(naive_utc: datetime) -> float:
    return naive_utc.replace(tzinfo=UTC).timestamp()


def _names(source: PrometheusHttpSource, match: str, now: datetime) -> list[str]:
    params = {"match[]": match, "start": f"{_epoch(now - LOOKBACK):.0f}",
              "end": f"{_epoch(now):.0f}"}
    return _call(source.client.get_label_values, "__name__", params=params) or []


def _matcher(names: list[str], selector: str) -> str:
    inner = f'__name__=~"{"|".join(names)}"'
    return f"{{{inner},{selector}}}" if selector else f"{{{inner}}}"


def _selector(label: str, source: PrometheusHttpSource, p: PrometheusSite, where: str,
              now: datetime):
    """The metric names present within the last day (selector applied), or None."""
    names = _all_names()
    try:
        present = set(_names(source, _matcher(names, p.selector), now))
    except _Failed as exc:
        yield fail(f"{label}: selector", "the label-values API to answer", exc,
                   f"check {where}.selector (label matchers such as cluster=\"a\")")
        return None
    if not p.selector:
        yield ok(f"{label}: selector", "none: every series of the server is this cluster's")
        return present
    if present:
        yield ok(f"{label}: selector", f"{p.selector} matches {len(present)} of the "
                 f"{len(names)} families read")
        return present
    try:
        unfiltered = _names(source, _matcher(names, ""), now)
        keys = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", p.selector)
        values = {k: _call(source.client.get_label_values, k, params={
            "match[]": POD_INFO_METRIC, "start": f"{_epoch(now - LOOKBACK):.0f}",
            "end": f"{_epoch(now):.0f}"}) for k in keys}
    except _Failed:
        unfiltered, values = [], {}
    found = (f"none ({len(unfiltered)} families without it; values on {POD_INFO_METRIC}: "
             + ", ".join(f"{k}={v[:10]}" for k, v in values.items()) + ")")
    yield fail(f"{label}: selector", f"series matching {p.selector} within the last day", found,
               f"set {where}.selector to this cluster's labels as stored (or \"\" for a server "
               "of one cluster)")
    return None


def _presence(label: str, present: set[str]) -> Iterator[Check]:
    for need in required():
        what = f"{label}: {need.names[0]}"
        have = [n for n in need.names if n in present]
        if not have:
            yield fail(what, f"{need.what}: {' or '.join(need.names)} within the last day",
                       "none", need.fix)
        elif need.names[0] == PREFERRED or have[0] == need.names[0]:
            yield ok(what, f"present ({', '.join(have)})")
        else:
            yield ok(what, f"present as {', '.join(have)} (read in its place)")
    kueue = kueue_names()
    missing = [n for n in kueue if n not in present]
    if PRESENCE_METRIC not in present:
        yield warn(f"{label}: kueue_*", f"expected Kueue's metrics ({PRESENCE_METRIC} …) within "
                   f"the last day, found none; fix: {KUEUE_FIX}")
    elif missing:
        yield warn(f"{label}: kueue_*", f"{len(kueue) - len(missing)} of {len(kueue)} Kueue "
                   f"families present; missing: {', '.join(missing)} (a Kueue version or "
                   "setting that does not export them; their figures stay empty)")
    else:
        yield ok(f"{label}: kueue_*", f"all {len(kueue)} Kueue families present")


def _pods(label: str, source: PrometheusHttpSource, p: PrometheusSite, now: datetime,
          gpu_resources: tuple[str, ...]) -> Check:
    what = f"{label}: GPU pods"
    names = {GPU_RESOURCE, *gpu_resources, *(r.replace(".", "_").replace("/", "_")
                                             for r in gpu_resources)}
    pattern = "|".join(re.escape(n).replace("\\", "\\\\") for n in sorted(names))
    sel = f'resource=~"{pattern}"' + (f",{p.selector}" if p.selector else "")
    metric = GPU_METRICS[0][0]
    query = f"last_over_time({metric}{{{sel}}}[{int(LOOKBACK.total_seconds())}s]) > 0"
    try:
        result = _call(source.client.custom_query, query, params={"time": f"{_epoch(now):.3f}"})
    except _Failed as exc:
        return warn(what, f"could not list GPU pods ({exc})")
    if not result:
        return warn(what, f"no container requested a GPU within the last day ({metric}); fine "
                    "on an idle cluster")
    rows = []
    for item in result:
        m = item.get("metric", {})

        def pick(key: str, m: dict = m) -> str:  # honor_labels false keeps KSM's as exported_*
            return m.get(f"exported_{key}") or m.get(key) or "?"

        rows.append((pick("namespace"), pick("pod"), pick("container"), m.get("node") or "?",
                     float(item["value"][1])))
    rows.sort(key=lambda r: (-r[4], r[0], r[1]))
    samples = [f"pod {ns}/{pod} container {c} on {node}: {g:g} GPU(s)"
               for ns, pod, c, node, g in rows[:SAMPLE_SIZE]]
    return ok(what, f"{len(rows)} container(s) requested GPUs within the last day", samples)


def _file_checks(label: str, path: Path) -> Iterator[Check]:
    """File mode: the OpenMetrics file is readable and holds the families the readers need."""
    what = f"{label}: openmetrics"
    opener = gzip.open if path.suffix == ".gz" else Path.open
    try:
        present: set[str] = set()
        with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
            for line in fh:
                if line and line[0] != "#":
                    present.add(line.split("{", 1)[0].split(" ", 1)[0])
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        yield fail(what, f"a readable OpenMetrics file at {path}", first_line(exc),
                   "point […prometheus].openmetrics at the file (relative to the site file)")
        return
    yield ok(what, f"{path}: {len(present)} metric families")
    yield from _presence(label, present)
