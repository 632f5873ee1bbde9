"""Every dashboard page opens on an empty ledger, with and without the incidents table."""

from pathlib import Path

import pytest

from dashboards import access
from models.runner import connect, ensure_schema, publish_snapshot
from tests.dashboards.pages import PAGES, open_page


@pytest.mark.parametrize("with_incidents", [True, False])
def test_every_page_opens_on_an_empty_ledger(tmp_path: Path, monkeypatch, with_incidents: bool):
    monkeypatch.delenv(access.ACCESS_FILE_ENV, raising=False)
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        ensure_schema(con)
        if not with_incidents:
            con.execute("DROP TABLE IF EXISTS incidents")
        publish_snapshot(con, db)
    for page in PAGES:
        at = open_page(page, db, monkeypatch)
        assert not at.exception, (page, [e.value for e in at.exception])
