"""The links in alert messages open the Incidents page on what they name: ``?incident=<id>``
(the ledger's incident, whatever its day), ``?node=&pod=`` / ``?node=&job=`` with ``day=`` for
a live alert the ledger has no incident for yet (the node's timeline on that day)."""

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from gpuledger.cli import main
from models.runner import snapshot_path

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboards" / "app.py")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("links") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(ROOT / "sample_data")]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db


def _idle(db: Path) -> list[tuple]:
    con = duckdb.connect(str(snapshot_path(db)), read_only=True)
    try:
        return con.execute("SELECT incident_id, node, k8s_workload, day FROM incidents "
                           "WHERE kind = 'idle_allocation' ORDER BY incident_id").fetchall()
    finally:
        con.close()


def _open(db: Path, monkeypatch: pytest.MonkeyPatch, **query: str) -> AppTest:
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page("views/incidents.py")
    return at.run()


def _listed(at: AppTest) -> list[str]:
    for element in at.dataframe:
        if "incident_id" in element.value.columns:
            return sorted(element.value["incident_id"].tolist())
    return []


def test_incident_link_shows_that_incident(ledger: Path, monkeypatch: pytest.MonkeyPatch):
    incidents = _idle(ledger)
    assert len(incidents) >= 2
    wanted = incidents[0][0]
    at = _open(ledger, monkeypatch, incident=wanted)
    assert not at.exception
    assert _listed(at) == [wanted]
    assert any("Showing what the link names" in i.value for i in at.info)


def test_node_and_pod_link_filters_and_focuses(ledger: Path, monkeypatch: pytest.MonkeyPatch):
    _, node, pod, day = _idle(ledger)[0]
    at = _open(ledger, monkeypatch, node=node, pod=pod, day=day.isoformat())
    assert not at.exception
    listed = _listed(at)
    expected = sorted(i for i, n, p, _ in _idle(ledger) if node in n.split(";") and p == pod)
    assert listed == expected
    assert at.selectbox(key="in_node").value == node
    assert at.date_input(key="in_day").value == day


def test_link_to_an_incident_not_built_yet_shows_the_node(ledger: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    _, node, _, day = _idle(ledger)[0]
    at = _open(ledger, monkeypatch, node=node, job="999999", day=day.isoformat())
    assert not at.exception
    assert _listed(at) == []
    assert any("no incident for the link yet" in c.value for c in at.caption)
    assert at.selectbox(key="in_node").value == node
