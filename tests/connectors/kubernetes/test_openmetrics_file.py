"""The fixture twin: OpenMetrics parsing and PromQL-selector matching like Prometheus."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import MetricsSource
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.promql_selectors import parse_selector
from tests.connectors.kubernetes.fakes import T0, at, om_file
from tests.helpers import FIXTURES

SMALL = FIXTURES / "openmetrics" / "small-cluster.om.gz"
WINDOW = (T0, T0 + timedelta(hours=4))


def sample_file(tmp_path: Path, *, gz: bool = False) -> Path:
    return om_file(tmp_path / ("m.om.gz" if gz else "m.om"), [
        ("up_total", {"job": "a", "pod": "p-1"}, [(at(0), 1), (at(30), 2)]),
        ("up_total", {"job": "b", "pod": ""}, [(at(0), 5)]),
        ("other", {"job": "a", "path": 'C:\\x "q"\nz'}, [(at(60), 0.5)]),
    ], gz=gz)


def test_is_a_metrics_source(tmp_path: Path):
    assert isinstance(OpenMetricsFileSource(sample_file(tmp_path)), MetricsSource)


@pytest.mark.parametrize("gz", [False, True])
def test_reads_plain_and_gzip(tmp_path: Path, gz: bool):
    src = OpenMetricsFileSource(sample_file(tmp_path, gz=gz))
    frame = src.raw_samples("up_total", *WINDOW)
    assert frame.columns == ["ts", "value", "__name__", "job", "pod"]
    assert frame.height == 3
    # pod="" is dropped on ingest, like Prometheus does
    assert frame.filter(pl.col("job") == "b")["pod"].to_list() == [None]


def test_label_value_escapes(tmp_path: Path):
    frame = OpenMetricsFileSource(sample_file(tmp_path)).raw_samples("other", *WINDOW)
    assert frame["path"].to_list() == ['C:\\x "q"\nz']


@pytest.mark.parametrize(
    ("selector", "jobs"),
    [
        ('up_total{job="a"}', ["a", "a"]),
        ('up_total{job!="a"}', ["b"]),
        ('up_total{pod=""}', ["b"]),  # missing label matches ""
        ('up_total{pod!=""}', ["a", "a"]),
        ('up_total{job=~"a|b"}', ["a", "a", "b"]),
        ('up_total{job=~"a.+"}', []),  # anchored
        ('up_total{job!~"a"}', ["b"]),
        ('{__name__=~"up_.*",job="b"}', ["b"]),
        ("{__name__='other'}", ["a"]),
    ],
)
def test_selectors(tmp_path: Path, selector: str, jobs: list[str]):
    frame = OpenMetricsFileSource(sample_file(tmp_path)).raw_samples(selector, *WINDOW)
    found = sorted(frame["job"].to_list()) if "job" in frame.columns else []
    assert found == jobs


def test_window_is_half_open(tmp_path: Path):
    src = OpenMetricsFileSource(sample_file(tmp_path))
    frame = src.raw_samples("up_total", T0 + timedelta(seconds=30), T0 + timedelta(seconds=60))
    assert frame["value"].to_list() == [2.0]
    assert src.raw_samples("up_total", T0, T0 + timedelta(seconds=30))["value"].sort().to_list() \
        == [1.0, 5.0]


def test_exemplars_braces_in_values_and_unordered_runs(tmp_path: Path):
    path = tmp_path / "x.om"
    path.write_text(
        'c_total{a="x} y"} 3 1736150460 # {trace_id="abc"} 1.0 1736150459\n'
        'c_total{a="x} y"} 1 1736150400\n'  # a later run of the same series, older samples
        "plain 2.5 1736150400.5\n"
        "# EOF\n", encoding="utf-8")
    src = OpenMetricsFileSource(path)
    frame = src.raw_samples("c_total", *WINDOW)
    assert frame["a"].to_list() == ["x} y", "x} y"]
    assert frame["value"].to_list() == [1.0, 3.0]  # sorted by ts
    assert src.raw_samples("c_total", T0, T0 + timedelta(seconds=30))["value"].to_list() == [1.0]
    plain = src.raw_samples("plain", *WINDOW)
    assert plain["ts"].to_list() == [T0 + timedelta(milliseconds=500)]


def test_series(tmp_path: Path):
    frame = OpenMetricsFileSource(sample_file(tmp_path)).series("up_total", *WINDOW)
    assert frame.to_dicts() == [
        {"__name__": "up_total", "job": "a", "pod": "p-1"},
        {"__name__": "up_total", "job": "b", "pod": None},
    ]


def test_parse_selector_rejects_ranges_and_garbage():
    with pytest.raises(ValueError, match="vector selector"):
        parse_selector("x[5m]")
    with pytest.raises(ValueError, match="label matcher"):
        parse_selector("x{a}")


def test_broken_line_names_file_and_line(tmp_path: Path):
    # a bad line is a reject (tests/connectors/kubernetes/test_openmetrics_rejects.py), not an abort
    path = tmp_path / "bad.om"
    path.write_text('ok{a="1"} 1 1736150400\nbroken{a="1"} 1\n# EOF\n', encoding="utf-8")
    src = OpenMetricsFileSource(path)
    assert src.raw_samples("ok", *WINDOW).height == 1
    assert [r.describe() for r in src.rejects] == [
        f"{path.resolve()}:2: field timestamp: expected a timestamp (seconds) after the value "
        "'1', found nothing"]


def test_missing_file_is_a_source_error(tmp_path: Path):
    with pytest.raises(SourceError, match="expected an OpenMetrics file"):
        OpenMetricsFileSource(tmp_path / "none.om").raw_samples("x", *WINDOW)


def test_committed_fixture_totals():
    src = OpenMetricsFileSource(SMALL)
    everything = src.raw_samples('{__name__=~".+"}', *WINDOW)
    assert everything.height == 26_290  # as written by make_fixture.py (README)
    assert src.series('{__name__=~".+"}', *WINDOW).height == 93
    counter = src.raw_samples('kueue_admitted_workloads_total{cluster_queue="cq-training"}',
                              *WINDOW)
    values = counter["value"].to_list()
    assert values[0] == 41
    assert 42 in values
    assert values[-1] == 1


@pytest.mark.parametrize("selector", [
    'kube_pod_info{uid=~"u-1|u-3|u-9"}',  # the ingest's uid batches: the index
    'kube_pod_info{uid=~"u\\\\-1|u\\\\.3"}',  # escaped punctuation is literal
    'kube_pod_info{uid="u-2"}',
    'kube_pod_info{uid=~"u-[12]"}',  # a real regex: scanned
    'kube_pod_info{uid=~"u-1|u-2",namespace!="ns-1"}',
    'kube_pod_info{node=""}',  # a missing label matches ""
    '{__name__=~"kube_pod_.*",uid=~"u-4|u-5"}',  # any name: one index over every series
    'kube_pod_info{uid=~"nobody"}',
])
def test_indexed_selection_answers_as_the_full_scan(tmp_path: Path, selector: str):
    lines = []
    for n in range(10):
        node = f',node="n{n % 3}"' if n % 4 else ""
        for name in ("kube_pod_info", "kube_pod_status_phase"):
            lines.append(f'{name}{{namespace="ns-{n % 2}",pod="p{n}",uid="u-{n}"{node}}} 1 '
                         f"{T0.timestamp():.0f}")
    path = tmp_path / "pods.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    indexed = OpenMetricsFileSource(path)
    scanned = OpenMetricsFileSource(path)
    scanned._indexed = lambda *_: None  # the full scan, the old way
    for _ in range(2):  # the second read uses the index built by the first
        got = indexed.raw_samples(selector, *WINDOW)
        assert got.sort(got.columns).equals(
            scanned.raw_samples(selector, *WINDOW).sort(got.columns)), selector
        assert indexed.series(selector, *WINDOW).height == scanned.series(selector, *WINDOW).height
