"""A Prometheus (or Thanos) holding several clusters: PrometheusConfig.selector is added to
every selector the Kubernetes readers send, raw-sample reads and series calls alike."""

from datetime import timedelta

import pytest

from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.kubernetes.promql_selectors import add_matchers, check_matchers
from tests.connectors.kubernetes.fakes import T0, FakePrometheus

CLUSTER_A = 'cluster="a"'


@pytest.mark.parametrize(("selector", "expected"), [
    ("kube_pod_info", 'kube_pod_info{cluster="a"}'),
    ("kube_pod_info ", 'kube_pod_info{cluster="a"}'),
    ("kube_pod_info{}", 'kube_pod_info{cluster="a"}'),
    ('kube_pod_status_phase{phase="Running"}',
     'kube_pod_status_phase{phase="Running",cluster="a"}'),
    ('m{a="1",}', 'm{a="1",cluster="a"}'),  # a trailing comma is legal PromQL
    ('m{a="}"}', 'm{a="}",cluster="a"}'),  # a brace inside a value is not the selector's end
    ('{__name__=~"kueue_.*"}', '{__name__=~"kueue_.*",cluster="a"}'),
])
def test_the_cluster_matcher_goes_inside_the_braces(selector, expected):
    assert add_matchers(selector, CLUSTER_A) == expected


def test_without_a_selector_the_query_is_unchanged():
    assert add_matchers('m{a="1"}', "") == 'm{a="1"}'


def test_several_matchers_are_added_as_written():
    assert add_matchers("m", 'cluster="a", region=~"eu-.*"') == 'm{cluster="a", region=~"eu-.*"}'


@pytest.mark.parametrize("bad", ['{cluster="a"}', "cluster=a", "cluster", 'cluster="a" or b="c"',
                                 'cluster="a"}'])
def test_a_selector_that_is_not_label_matchers_is_refused(bad):
    with pytest.raises(ValueError, match="expected label matchers without braces"):
        check_matchers(bad)
    with pytest.raises(ValueError, match="expected label matchers without braces"):
        PrometheusConfig("http://127.0.0.1:9", selector=bad)


def test_every_request_of_the_http_source_carries_the_selector():
    with FakePrometheus() as fake:
        source = PrometheusHttpSource(PrometheusConfig(fake.url, selector=CLUSTER_A, retries=0,
                                                       timeout_s=5.0))
        source.raw_samples('kube_pod_status_phase{phase="Running"}', T0,
                           T0 + timedelta(hours=3))
        source.raw_samples("DCGM_FI_DEV_GPU_UTIL", T0, T0 + timedelta(hours=1))
        source.series("kube_node_info", T0, T0 + timedelta(hours=1))
        source.close()
    sent = [p.get("query") or p.get("match[]") for _, p, _ in fake.requests]
    assert sent, "expected requests to the fake Prometheus, found none"
    for query in sent:
        assert CLUSTER_A in query, query
    assert any(q.startswith('kube_pod_status_phase{phase="Running",cluster="a"}[') for q in sent)
    assert any(q.startswith('DCGM_FI_DEV_GPU_UTIL{cluster="a"}[') for q in sent)
    assert 'kube_node_info{cluster="a"}' in sent
