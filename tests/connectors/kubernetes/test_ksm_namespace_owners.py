"""Namespace owners from kube_namespace_labels (connectors/kubernetes/ksm_namespaces.py).

The label shape is kube-state-metrics' own (tests/fixtures/expositions/
kube-state-metrics-namespace_test.prom, from namespace_test.go: label_app="example1"); the
owner labels (team, cost-centre) are that shape with the site's keys, sanitised as KSM does.
"""

from datetime import timedelta

import pytest

from connectors.kubernetes.ksm_namespaces import ksm_label_name, ksm_namespace_owners
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import EXPOSITIONS, lines, pick, series

UPSTREAM = pick(lines(EXPOSITIONS / "kube-state-metrics-namespace_test.prom"),
                "kube_namespace_labels")
KEYS = {"team": "team", "cost_centre": "cost-centre"}


def owned(ln):
    if ln.get("namespace") == "ns1":
        return ln.but(label_team="llm", label_cost_centre="CC-LLM-500")
    return ln


@pytest.mark.parametrize("honor", [True, False])
def test_owner_labels_name_team_and_cost_centre(tmp_path, honor):
    path = om_file(tmp_path / "m.om", series(lambda t: [owned(ln) for ln in UPSTREAM], [0, 30],
                                             honor=honor))
    frame = ksm_namespace_owners(OpenMetricsFileSource(path), T0 + timedelta(minutes=5), KEYS)
    # the upstream namespaces without owner labels are no candidates
    assert frame.select("namespace", "person", "team", "cost_centre").rows() == [
        ("ns1", "", "llm", "CC-LLM-500")]
    assert frame["labels"][0] == "label_team=llm,label_cost_centre=CC-LLM-500"


def test_upstream_label_is_read_when_configured(tmp_path):
    path = om_file(tmp_path / "m.om", series(lambda t: UPSTREAM, [0]))
    frame = ksm_namespace_owners(OpenMetricsFileSource(path), T0 + timedelta(minutes=5),
                                 {"team": "app"})
    assert frame.select("namespace", "team").rows() == [("ns1", "example1"),
                                                        ("ns2", "example2")]


@pytest.mark.parametrize(("key", "name"), [("cost-centre", "label_cost_centre"),
                                           ("example.com/team", "label_example_com_team")])
def test_label_keys_are_sanitised_like_ksm(key, name):
    assert ksm_label_name(key) == name
