"""``--no-honor-labels`` writes what a real Prometheus stores: one instant of the default world
(the exporters' own output: KSM, two dcgm-exporters, Kueue) is served to the suite's real
Prometheus, scraped with ``honor_labels: false`` as a ServiceMonitor does, with the target labels
the simulator gives the exporter pods; what Prometheus stored equals the same instant of the
``--no-honor-labels`` world, label set by label set and value by value."""

import re
from pathlib import Path

import pytest

from simulator import NodeCounts, SimConfig, simulate
from simulator.config import HOUR
from simulator.openmetrics import scrape_offsets
from simulator.scrape_shapes import KSM_POD, KUEUE_POD
from tests.prometheus_real.conftest import prometheus_scrape, prometheus_tools  # noqa: F401
from tests.prometheus_real.scrape import (
    dcgm_exporter,
    exposition,
    kube_state_metrics,
    kueue_controller,
)

pytestmark = pytest.mark.prometheus

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
CONFIG = {"seed": 7, "days": 1, "step_seconds": 600, "nodes": NodeCounts(hpc=1, k8s=2, shared=1)}
DCGM_NODES = ("gpu-k8s-01", "gpu-shr-01")
SCRAPE_LABELS = ("job", "instance")  # set by each scrape config, not by the exporters

Stored = set[tuple[str, frozenset[tuple[str, str]], float]]


def _lines(world: Path, keep) -> list[tuple[str, dict[str, str], str]]:
    out = []
    with (world / "prometheus" / "metrics.om").open(encoding="utf-8") as fh:
        for line in fh:
            match = SAMPLE.match(line)
            if match is None:
                continue
            name, body, value, ts = match.groups()
            labels = dict(LABEL.findall(body))
            if keep(name, labels, int(ts)):
                out.append((name, labels, value))
    return out


def _stored(lines) -> Stored:
    """As Prometheus keeps them: no empty labels, without the scrape config's job/instance."""
    return {(name, frozenset((k, v) for k, v in labels.items()
                             if v != "" and k not in SCRAPE_LABELS), float(value))
            for name, labels, value in lines}


def _body(lines) -> str:
    """The exporter's own exposition: the scrape target's job/instance are not in it."""
    def text(labels: dict[str, str]) -> str:
        return ",".join(f'{k}="{v}"' for k, v in labels.items() if k not in SCRAPE_LABELS)

    return exposition(f"{name}{{{text(labels)}}} {value}" for name, labels, value in lines)


@pytest.fixture(scope="module")
def instants(tmp_path_factory: pytest.TempPathFactory):
    """(exporter bodies of the default world, what the --no-honor-labels world stored), at
    12:00 of the window's Monday (Kubernetes owns the shared node)."""
    base = tmp_path_factory.mktemp("honor") / "world"
    other = tmp_path_factory.mktemp("nohonor") / "world"
    simulate(SimConfig(**CONFIG, dcgm_label_style="pod"), base)  # type: ignore[arg-type]
    simulate(SimConfig(**CONFIG, honor_labels=False), other)  # type: ignore[arg-type]
    t0 = SimConfig(**CONFIG).window_start + 12 * HOUR  # type: ignore[arg-type]
    ksm_ts, kueue_ts = (t0 + off for off in scrape_offsets(CONFIG["step_seconds"]))

    def kind(name: str, labels: dict[str, str]) -> str:
        if name.startswith("kube_"):
            return "ksm"
        if name.startswith("kueue_"):
            return "kueue"
        return labels.get("Hostname", "")

    def at(world: Path) -> dict[str, list]:
        wanted = {"ksm": ksm_ts, "kueue": kueue_ts, **dict.fromkeys(DCGM_NODES, t0)}
        out: dict[str, list] = {k: [] for k in wanted}
        for name, labels, value in _lines(world, lambda n, la, ts: wanted.get(
                kind(n, la)) == ts):
            out[kind(name, labels)].append((name, labels, value))
        return out

    return at(base), at(other)


def test_prometheus_without_honor_labels_stores_what_the_simulator_writes(
        instants, prometheus_scrape):  # noqa: F811 - the fixture imported above
    exporters, expected = instants
    assert all(exporters.values()), {k: len(v) for k, v in exporters.items()}
    ksm = dict(LABEL.findall(KSM_POD))
    kueue = dict(LABEL.findall(KUEUE_POD))
    targets = [
        kube_state_metrics(_body(exporters["ksm"]), pod=ksm["pod"]),
        kueue_controller(_body(exporters["kueue"]), pod=kueue["pod"]),
    ]
    for node in DCGM_NODES:  # the exporter pod of each node, as the no-honor world names it
        pod = next(la["pod"] for _, la, _ in expected[node])
        instance = next(la["instance"] for _, la, _ in expected[node])
        # one job per target in the harness (jobs are not compared: the scrape config's)
        targets.append(dcgm_exporter(_body(exporters[node]), path=f"/metrics/dcgm/{node}",
                                     job=f"nvidia-dcgm-exporter-{node}", pod=pod,
                                     instance=instance))
    with prometheus_scrape(targets, interval_s=1.0, setups={"nohonor": False}) as harness:
        start, end = harness.wait_for_samples(2)
        source = harness.source("nohonor")
        names = sorted({name for lines in exporters.values() for name, _, _ in lines})
        stored: Stored = set()
        for name in names:
            frame = source.raw_samples(name, start, end)
            labels = [c for c in frame.columns if c not in ("ts", "value", "__name__")]
            for row in frame.iter_rows(named=True):
                stored.add((name, frozenset((k, row[k]) for k in labels
                                            if row[k] is not None and k not in SCRAPE_LABELS),
                            float(row["value"])))
    written = _stored(line for lines in expected.values() for line in lines)
    assert len(written) > 100
    assert stored - written == set()
    assert written - stored == set()
