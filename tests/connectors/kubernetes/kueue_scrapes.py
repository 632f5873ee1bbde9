"""Kueue replicas scraped over time, from the exposition fixtures (tests/fixtures/expositions).

A fixture is one scrape of one Kueue replica at one release (label sets, roles, families as
pkg/metrics/metrics.go defines them). ``body(name, admitted=n)`` renders it with every counter
child at ``n`` (histograms: ``n`` admissions that waited 3 s, in the 5 s bucket) and the gauges as
the fixture has them, and ``scraped`` adds a target's labels the way Prometheus does (the
``honor_labels`` rule, checked against a real Prometheus by tests/prometheus_real), so the
OpenMetrics twin holds what a site's Prometheus would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.connectors.kubernetes.fakes import Series
from tests.helpers import FIXTURES

EXPOSITIONS = FIXTURES / "expositions"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')
Sample = tuple[str, dict[str, str], float]

# the target labels Kueue's ServiceMonitor gives a controller-manager pod
def kueue_target(instance: str, pod: str) -> dict[str, str]:
    return {"job": "kueue-controller-manager-metrics-service", "instance": instance,
            "namespace": "kueue-system", "pod": pod, "container": "manager",
            "service": "kueue-controller-manager-metrics-service", "endpoint": "https"}


def parse(text: str) -> list[tuple[str, str, dict[str, str], float]]:
    """(family type, name, labels, value) per sample line of an exposition."""
    types: dict[str, str] = {}
    out = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        name, body, value = m.groups()
        labels = dict(_LABEL.findall(body or ""))
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        out.append((types.get(name) or types.get(family, "untyped"), name, labels, float(value)))
    return out


def fixture(name: str) -> str:
    return (EXPOSITIONS / name).read_text(encoding="utf-8")


def body(name: str, *, admitted: int | None) -> list[Sample]:
    """The fixture's samples; counters at `admitted` (None: as in the fixture)."""
    out: list[Sample] = []
    for kind, metric, labels, value in parse(fixture(name)):
        if admitted is not None and kind == "counter":
            value = float(admitted)
        elif admitted is not None and kind == "histogram":
            if metric.endswith("_bucket"):
                le = float(labels["le"].replace("+Inf", "inf"))
                value = float(admitted) if le >= 5 else 0.0
            elif metric.endswith("_count"):
                value = float(admitted)
            else:
                value = 3.0 * admitted
        out.append((metric, labels, value))
    return out


def scraped(samples: Iterable[Sample], target: dict[str, str], *, honor: bool) -> list[Sample]:
    """What Prometheus stores for `samples` scraped from `target`."""
    out = []
    for metric, labels, value in samples:
        own = {k: v for k, v in labels.items() if v != ""}  # empty labels are dropped
        if honor:
            merged = {**{k: v for k, v in target.items() if k not in labels}, **own}
        else:
            merged = {**{f"exported_{k}": v for k, v in own.items() if k in target}, **target,
                      **{k: v for k, v in own.items() if k not in target}}
        out.append((metric, merged, value))
    return out


def replica_series(
    times: Iterable[float], render: Callable[[float], list[Sample] | None],
    target: dict[str, str], *, honor: bool,
) -> list[Series]:
    """OpenMetrics series of one replica scraped at `times` (unix seconds); `render(t)` gives
    the samples exposed at t, None while the replica is down."""
    points: dict[tuple[str, tuple], list[tuple[float, float]]] = {}
    for t in times:
        samples = render(t)
        if samples is None:
            continue
        for metric, labels, value in scraped(samples, target, honor=honor):
            points.setdefault((metric, tuple(sorted(labels.items()))), []).append((t, value))
    return [(metric, dict(labels), pts) for (metric, labels), pts in points.items()]


def write(path: Path, series: list[Series]) -> Path:
    from tests.connectors.kubernetes.fakes import om_file

    return om_file(path, series)


def text(samples: Iterable[Sample]) -> str:
    """Samples as an exposition body (values as Go prints them; ``le`` kept as a label)."""
    lines = []
    for metric, labels, value in samples:
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        shown = "+Inf" if value == float("inf") else (
            str(int(value)) if float(value).is_integer() else repr(value))
        lines.append(f"{metric}{{{body}}} {shown}" if body else f"{metric} {shown}")
    return "\n".join(lines) + "\n"
