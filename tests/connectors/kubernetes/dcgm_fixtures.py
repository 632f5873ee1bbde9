"""Upstream dcgm-exporter expositions (tests/fixtures/expositions) as time series for the tests.

* ``exposition(name)``: the sample lines of one fixture file, ``(metric, labels, value)`` with the
  labels exactly as upstream wrote them (empty values included: Prometheus drops them on ingest,
  and so does ``OpenMetricsFileSource``).
* ``over_time(lines, first, last, step, value=...)``: each line repeated on a scrape grid (seconds
  after ``fakes.T0``), for ``om_file``; `value` (a number or ``f(metric, labels, seconds)``)
  replaces the upstream value where a test needs the series to move.
* ``kube_state_metrics(...)``: the kube-state-metrics series the pod and node readers need (shapes
  of KSM ``internal/store/pod_test.go`` / ``node_test.go``, as in
  ``tests/fixtures/expositions/kube-state-metrics-pod_test.prom``) for pods holding GPUs on nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tests.connectors.kubernetes.fakes import Series, at
from tests.helpers import FIXTURES

EXPOSITIONS = FIXTURES / "expositions"
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')

Line = tuple[str, dict[str, str], float]


def exposition(name: str) -> list[Line]:
    out = []
    for raw in (EXPOSITIONS / name).read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        m = _LINE.match(raw.strip())
        assert m, f"{name}: cannot read {raw!r}"
        labels = dict(_PAIR.findall(m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def exposition_text(name: str) -> str:
    return (EXPOSITIONS / name).read_text(encoding="utf-8")


def over_time(lines: Iterable[Line], first: float, last: float, step: float = 30,
              value: float | Callable[[str, dict[str, str], float], float] | None = None,
              ) -> list[Series]:
    series = []
    for metric, labels, upstream in lines:
        points = []
        t = first
        while t <= last + 1e-9:
            v = upstream if value is None else (value(metric, labels, t) if callable(value)
                                                else value)
            points.append((at(t), v))
            t += step
        series.append((metric, labels, points))
    return series


def relabel(lines: Iterable[Line], **changes: str | None) -> list[Line]:
    """The lines with labels set (a value) or removed (None)."""
    out = []
    for metric, labels, value in lines:
        new = dict(labels)
        for k, v in changes.items():
            if v is None:
                new.pop(k, None)
            else:
                new[k] = v
        out.append((metric, new, value))
    return out


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node: str
    gpus: int
    start: float  # seconds after T0 of the first Running scrape
    end: float  # seconds after T0 of the last Running scrape


KSM_TARGET = {"job": "kube-state-metrics", "instance": "10.244.0.17:8080"}


def kube_state_metrics(nodes: dict[str, int], pods: Iterable[Pod], first: float, last: float,
                       step: float = 30) -> list[Series]:
    """Node GPU capacity for `nodes` (name -> GPUs) over the grid, and `pods` Running with
    their GPU requests between their start and end scrapes (Pending before, Succeeded after)."""
    grid = []
    t = first
    while t <= last + 1e-9:
        grid.append(t)
        t += step
    series: list[Series] = []
    for node, gpus in nodes.items():
        series.append(("kube_node_status_capacity",
                       {"node": node, "resource": "nvidia_com_gpu", "unit": "integer",
                        **KSM_TARGET}, [(at(x), gpus) for x in grid]))
    for p in pods:
        base = {"namespace": p.namespace, "pod": p.name, "uid": p.uid}
        alive = [x for x in grid if x <= p.end + step]
        series.append(("kube_pod_info", {**base, "node": p.node, "host_ip": "10.0.0.9",
                                         "created_by_kind": "Job",
                                         "created_by_name": p.name.rsplit("-", 1)[0],
                                         **KSM_TARGET}, [(at(x), 1) for x in alive]))
        for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            def shown(x: float, phase: str = phase, p: Pod = p) -> int:
                now = ("Pending" if x < p.start else "Running" if x <= p.end else "Succeeded")
                return int(now == phase)
            series.append(("kube_pod_status_phase", {**base, "phase": phase, **KSM_TARGET},
                           [(at(x), shown(x)) for x in alive]))
        series.append(("kube_pod_container_resource_requests",
                       {**base, "container": "main", "node": p.node, "resource": "nvidia_com_gpu",
                        "unit": "integer", **KSM_TARGET}, [(at(x), p.gpus) for x in alive]))
    return series
