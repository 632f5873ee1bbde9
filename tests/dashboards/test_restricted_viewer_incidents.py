"""What an incident row tells a viewer restricted to one of its two owners: nothing of the other
owner."""

from pathlib import Path

import polars as pl

from dashboards import access
from models.runner import read_snapshot
from tests.dashboards.pages import everything_shown, open_page

GRANTED = "CC-PHY-100"
ALICE = {"is_logged_in": True, "email": "alice@example.org"}


def sql(db: Path, text: str, params: list | None = None) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.execute(text, params or []).pl()


def test_a_restricted_viewer_learns_nothing_of_the_other_owner_of_an_incident(
        sample_ledger: Path, monkeypatch, tmp_path: Path):
    path = tmp_path / "access.toml"
    path.write_text(f'[viewers]\n"alice@example.org" = ["{GRANTED}"]\n', encoding="utf-8")
    monkeypatch.setenv(access.ACCESS_FILE_ENV, str(path))
    # people of the other cost centre in incidents that concern the granted one
    others = sql(
        sample_ledger,
        "SELECT other_person AS person FROM incidents WHERE cost_centre = $cc "
        "AND other_cost_centre <> $cc UNION SELECT person FROM incidents "
        "WHERE other_cost_centre = $cc AND cost_centre <> $cc "
        "EXCEPT SELECT person FROM allocations WHERE cost_centre = $cc",
        {"cc": GRANTED})["person"].to_list()
    assert others, "the sample world has no incident shared with another cost centre"
    at = open_page("incidents", sample_ledger, monkeypatch, user=ALICE)
    assert not at.exception, [e.value for e in at.exception]
    shown = everything_shown(at)
    assert "double_scheduled" in shown
    leaked = [p for p in others if f"({p})" in shown or p in shown.split(",")]
    assert not leaked, f"the incidents page names {leaked}"
