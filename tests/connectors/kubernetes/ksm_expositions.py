"""Upstream expositions (tests/fixtures/expositions) as templates for time series in tests.

Each fixture line is one series exactly as upstream writes it (kube-state-metrics'
``internal/store/pod_test.go`` and ``node_test.go`` Want blocks, Kueue's label keys; the source
of every file is in its header). Tests build a pod's life from them by changing only what they
name (``Line.but``: a node, a container name, a value) and scrape it:

* ``scraped(line, honor=...)``: the labels Prometheus stores for that series, with
  ``honor_labels`` true or false, for a target with a ServiceMonitor's labels (the rules the
  scrape harness checked on a real Prometheus 2.42, tests/prometheus_real/scrape.py);
* ``series(lines_at, times, honor=...)``: ``(name, labels, points)`` for ``fakes.om_file``, from
  ``lines_at(t)`` -- the exposition at time ``t`` (seconds after ``fakes.T0``);
* ``text(lines, ts_ms)``: exposition text (HELP-less, one TYPE per family) for a real scrape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.connectors.kubernetes.fakes import Series, at

EXPOSITIONS = Path(__file__).resolve().parents[2] / "fixtures" / "expositions"
KSM_POD_V2_20 = EXPOSITIONS / "kube-state-metrics-v2.20.0-pod_test.prom"
KSM_POD_V2_0 = EXPOSITIONS / "kube-state-metrics-v2.0.0-pod_test.prom"
KSM_NODE_V2_20 = EXPOSITIONS / "kube-state-metrics-v2.20.0-node_test.prom"
KUEUE_LABELS = EXPOSITIONS / "kueue-queue-labels-kube-state-metrics.prom"

# the target labels of kube-state-metrics' own pod, as tests/prometheus_real/scrape.py's
# kube_state_metrics() target gives them (prometheus-community chart, release in monitoring)
KSM_TARGET = {
    "namespace": "monitoring", "pod": "kube-state-metrics-6d5f8b9c4-x2x7k",
    "container": "kube-state-metrics", "service": "kube-state-metrics", "endpoint": "http",
    "instance": "10.244.0.17:8080", "job": "kube-state-metrics",
}
PHASES = ("Failed", "Pending", "Running", "Succeeded", "Unknown")


@dataclass(frozen=True)
class Line:
    """One exposition sample line: metric name, labels in upstream order, value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def get(self, key: str) -> str | None:
        return dict(self.labels).get(key)

    def but(self, value: float | None = None, **changes: str | None) -> Line:
        """This line with `changes` (a label set to None is removed; new labels go last)."""
        labels = dict(self.labels)
        for k, v in changes.items():
            if v is None:
                labels.pop(k, None)
            else:
                labels[k] = v
        return Line(self.name, tuple(labels.items()), self.value if value is None else value)


def _parse_labels(body: str) -> tuple[tuple[str, str], ...]:
    out, i = [], 0
    while i < len(body):
        eq = body.index("=", i)
        key = body[i:eq].strip().lstrip(",").strip()
        j = eq + 2  # after ="
        value = []
        while body[j] != '"':
            if body[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(body[j], body[j]))
            else:
                value.append(body[j])
            j += 1
        out.append((key, "".join(value)))
        i = j + 1
        while i < len(body) and body[i] in ", ":
            i += 1
    return tuple(out)


def lines(path: Path) -> list[Line]:
    """The sample lines of an exposition file (comments skipped)."""
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if "{" in s:
            name, rest = s.split("{", 1)
            body, value = rest.rsplit("}", 1)
            out.append(Line(name, _parse_labels(body), float(value.split()[0])))
        else:
            name, value = s.split()[:2]
            out.append(Line(name, (), float(value)))
    return out


def pick(found: Iterable[Line], name: str, **match: str) -> list[Line]:
    """The lines of metric `name` whose labels equal `match`."""
    return [ln for ln in found if ln.name == name
            and all(ln.get(k) == v for k, v in match.items())]


def one(found: Iterable[Line], name: str, **match: str) -> Line:
    hits = pick(found, name, **match)
    if len(hits) != 1:
        msg = f"expected one {name} line with {match}, found {len(hits)}"
        raise AssertionError(msg)
    return hits[0]


def phase_lines(template: list[Line], phase: str) -> list[Line]:
    """The five kube_pod_status_phase lines of a pod (`template`: its upstream five), 1 for
    `phase`."""
    return [ln.but(value=1.0 if ln.get("phase") == phase else 0.0) for ln in template]


def scraped(line: Line, *, honor: bool, target: dict[str, str] | None = None) -> dict[str, str]:
    """The labels Prometheus stores for `line` scraped from a target with labels `target`.

    honor_labels true: the series' own labels win (an empty one still blocks the target's);
    false: a target label the series also carries non-empty moves it to ``exported_<label>``.
    Labels with an empty value are dropped either way.
    """
    target = KSM_TARGET if target is None else target
    own = dict(line.labels)
    if honor:
        out = dict(own)
        for k, v in target.items():
            if k not in own:
                out[k] = v
    else:
        out = {}
        for k, v in own.items():
            out[f"exported_{k}" if k in target and v != "" else k] = v
        out.update(target)
    return {k: v for k, v in out.items() if v != ""}


def series(lines_at: Callable[[float], list[Line]], times: Iterable[float], *,
           honor: bool | Callable[[float], bool] = True,
           target: dict[str, str] | None = None) -> list[Series]:
    """Stored series of the scrapes at `times` (seconds after T0); `honor` may change with
    time (a scrape config changed mid-window)."""
    by_key: dict[tuple, tuple[str, dict[str, str], list[tuple[float, float]]]] = {}
    for t in times:
        flag = honor(t) if callable(honor) else honor
        for ln in lines_at(t):
            labels = scraped(ln, honor=flag, target=target)
            key = (ln.name, tuple(sorted(labels.items())))
            by_key.setdefault(key, (ln.name, labels, []))[2].append((at(t), ln.value))
    return list(by_key.values())


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def text(found: Iterable[Line], ts_ms: int | None = None) -> str:
    """Exposition text of `found` (grouped per family, one TYPE line each); with `ts_ms` every
    sample carries that timestamp."""
    families: dict[str, list[Line]] = {}
    for ln in found:
        families.setdefault(ln.name, []).append(ln)
    out = []
    for name, members in families.items():
        out.append(f"# TYPE {name} gauge")
        for ln in members:
            body = ",".join(f'{k}="{v}"' for k, v in ln.labels)
            stamp = f" {ts_ms}" if ts_ms is not None else ""
            out.append(f"{name}{{{body}}} {_fmt(ln.value)}{stamp}")
    return "".join(f"{line}\n" for line in out)
