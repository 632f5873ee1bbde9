"""Access: the optional OIDC login gate and the restriction file (a viewer sees only the cost
centres granted to them, enforced in the query layer)."""

from datetime import date
from pathlib import Path

import polars as pl
import pytest

from dashboards import access, data
from models.runner import read_snapshot
from tests.dashboards.pages import PAGES, everything_shown, frame, metrics, open_page

ALICE = {"is_logged_in": True, "email": "Alice@Example.org", "name": "Alice"}
GRANTED = "CC-PHY-100"
WEEK = (date(2026, 1, 5), date(2026, 1, 12))


def sql(db: Path, text: str, params: list | None = None) -> pl.DataFrame:
    with read_snapshot(db) as con:
        return con.execute(text, params or []).pl()


def cost_centres(db: Path) -> set[str]:
    return set(sql(db, "SELECT DISTINCT cost_centre FROM allocations")["cost_centre"])


@pytest.fixture
def access_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "access.toml"
    path.write_text(
        "anonymous = []\n"
        "[viewers]\n"
        f'"alice@example.org" = ["{GRANTED}"]\n'
        '"cfo@example.org" = ["*"]\n',
        encoding="utf-8",
    )
    monkeypatch.setenv(access.ACCESS_FILE_ENV, str(path))
    return path


# --- the file -------------------------------------------------------------------------------

def test_grants_are_read_case_insensitively_and_star_means_everything():
    grants = access.parse_grants(
        'anonymous = ["CC-A"]\n[viewers]\n"Bob@X.org" = ["CC-B", "CC-C"]\n"f@x.org" = ["*"]\n'
    )
    assert grants.scope_for("bob@x.org").cost_centres == ("CC-B", "CC-C")
    assert grants.scope_for("BOB@x.org").restricted
    assert not grants.scope_for("f@x.org").restricted
    assert grants.scope_for(None).cost_centres == ("CC-A",)
    assert grants.scope_for("nobody@x.org").cost_centres == ()


@pytest.mark.parametrize(("text", "expected"), [
    ("[viewers\n", "expected TOML"),
    ('[viewers]\n"a@x.org" = "CC-A"\n', "expected a list of cost centre strings"),
    ('viewer = {}\n', "expected only the keys"),
    ("anonymous = [1]\n", "expected a list of cost centre strings"),
])
def test_a_malformed_access_file_says_what_was_expected(text: str, expected: str):
    with pytest.raises(access.AccessFileError, match=expected):
        access.parse_grants(text)


# --- pages ----------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES)
def test_a_restricted_viewer_never_sees_another_cost_centre(
        sample_ledger: Path, monkeypatch, access_file: Path, page: str):
    at = open_page(page, sample_ledger, monkeypatch, user=ALICE)
    assert not at.exception, [e.value for e in at.exception]
    shown = everything_shown(at)
    others = cost_centres(sample_ledger) - {GRANTED}
    assert others
    leaked = sorted(cc for cc in others if cc in shown)
    assert not leaked, f"{page} shows {leaked}"
    assert any(GRANTED in c.value for c in at.sidebar.caption)


def test_a_restricted_viewer_sees_their_own_numbers(sample_ledger: Path, monkeypatch,
                                                    access_file: Path):
    own = sql(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE "
              "cost_centre = ? AND day >= ? AND day < ?", [GRANTED, *WEEK]).item()
    at = open_page("chargeback", sample_ledger, monkeypatch, user=ALICE)
    assert metrics(at)["Allocated GPU-hours"] == f"{own:,.1f}"
    assert frame(at, "cost_centre", "amount")["cost_centre"].to_list() == [GRANTED]

    at = open_page("overview", sample_ledger, monkeypatch, user=ALICE)
    slurm = sql(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE "
                "cost_centre = ? AND domain = 'slurm'", [GRANTED]).item()
    assert metrics(at)["Slurm GPU-hours"] == f"{slurm:,.1f}"
    assert "Kueue workloads" not in metrics(at)  # a cluster-wide figure

    at = open_page("scorecard", sample_ledger, monkeypatch, user=ALICE)
    failed = sql(sample_ledger, "SELECT sum(gpu_seconds) / 3600 FROM allocations WHERE "
                 "cost_centre = ? AND domain = 'slurm' AND outcome IN "
                 "('failed', 'timeout', 'node_fail')", [GRANTED]).item()
    card = frame(at, "measure", "slurm").filter(pl.col("measure") == "GPU-hours lost to failures")
    assert card["slurm"].item() == pytest.approx(failed)

    at = open_page("utilization", sample_ledger, monkeypatch, user=ALICE)
    waits = sql(
        sample_ledger, "SELECT count(*) FROM slurm_runs WHERE start >= ? AND start < ? "
        "AND alloc_gpus > 0 AND coalesce(len(bridge_pods), 0) = 0 AND run_key IN "
        "(SELECT source_key FROM allocations WHERE cost_centre = ?)", [*WEEK, GRANTED]).item()
    assert frame(at, "partition", "waits")["waits"].sum() == waits > 0

    at = open_page("incidents", sample_ledger, monkeypatch, user=ALICE)
    expected = sql(sample_ledger, "SELECT count(*) FROM incidents WHERE ? IN "
                   "(cost_centre, coalesce(other_cost_centre, ''))", [GRANTED]).item()
    table = frame(at, "kind", "cost_centre", "other_cost_centre")
    assert table.height == expected > 0
    # the other scheduler's owner belongs to another cost centre: left empty
    assert set(table["other_cost_centre"].drop_nulls()) <= {GRANTED}


def test_a_viewer_the_file_does_not_name_sees_nothing(sample_ledger: Path, monkeypatch,
                                                      access_file: Path):
    stranger = {"is_logged_in": True, "email": "mallory@example.org"}
    for page in PAGES:
        at = open_page(page, sample_ledger, monkeypatch, user=stranger)
        assert not at.exception
        shown = everything_shown(at)
        assert not [cc for cc in cost_centres(sample_ledger) if cc in shown], page
    # the address is text, not Markdown (dashboards/text.py): every punctuation escaped
    assert "No cost centre is granted to mallory\\@example\\.org" in at.sidebar.warning[0].value


def test_an_unverified_email_grants_nothing(sample_ledger: Path, monkeypatch,
                                            access_file: Path):
    # OIDC's email_verified = false: anyone may have typed alice's address at the provider
    unverified = {**ALICE, "email_verified": False}
    at = open_page("chargeback", sample_ledger, monkeypatch, user=unverified)
    assert not at.exception
    assert GRANTED not in everything_shown(at)
    assert "No cost centre is granted to a viewer who is not logged in" in \
        at.sidebar.warning[0].value
    verified = open_page("chargeback", sample_ledger, monkeypatch,
                         user={**ALICE, "email_verified": True})
    assert frame(verified, "cost_centre", "amount")["cost_centre"].to_list() == [GRANTED]


def test_anonymous_viewers_get_the_anonymous_grant(sample_ledger: Path, monkeypatch,
                                                   tmp_path: Path):
    path = tmp_path / "access.toml"
    path.write_text('anonymous = ["CC-OPS-300"]\n', encoding="utf-8")
    monkeypatch.setenv(access.ACCESS_FILE_ENV, str(path))
    at = open_page("chargeback", sample_ledger, monkeypatch)
    assert frame(at, "cost_centre", "amount")["cost_centre"].to_list() == ["CC-OPS-300"]


def test_a_broken_access_file_shows_nothing(sample_ledger: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv(access.ACCESS_FILE_ENV, str(tmp_path / "missing.toml"))
    at = open_page("chargeback", sample_ledger, monkeypatch, user=ALICE)
    assert not at.exception
    assert "expected the access file" in at.error[0].value
    assert not at.dataframe
    assert not at.metric


def test_without_an_access_file_everyone_sees_everything(sample_ledger: Path, monkeypatch):
    monkeypatch.delenv(access.ACCESS_FILE_ENV, raising=False)
    at = open_page("chargeback", sample_ledger, monkeypatch)
    assert set(frame(at, "cost_centre", "amount")["cost_centre"]) == cost_centres(sample_ledger)


# --- the query layer ------------------------------------------------------------------------

def test_the_query_layer_binds_the_grant_whatever_the_page_asks(sample_ledger: Path,
                                                                monkeypatch):
    monkeypatch.setenv("GPULEDGER_DB", str(sample_ledger))
    scope = access.UNRESTRICTED
    monkeypatch.setattr(access, "current_scope", lambda: scope)
    everything = data.chargeback_lines("week", WEEK[0], date(2026, 1, 6), [], [])
    assert len(set(everything["cost_centre"])) > 1

    scope = access.Scope(viewer="alice@example.org", cost_centres=(GRANTED,))
    # same query text and filters: the cached unrestricted answer must not be served
    lines = data.chargeback_lines("week", WEEK[0], date(2026, 1, 6), [], [])
    assert set(lines["cost_centre"]) == {GRANTED}
    line = {"cost_centre": "CC-ML-200", "team": "ml", "person": "bob", "domain": "slurm",
            "gpu_model": "a100"}
    assert data.allocations_behind(*WEEK, line).is_empty()
    assert set(data.node_allocations("gpu-shr-02", WEEK[0], WEEK[1])["cost_centre"]) <= {
        GRANTED}
    with pytest.raises(data.Restricted, match="expected an unrestricted viewer"):
        data.activity_totals()
    with pytest.raises(data.Restricted):
        data.node_heatmap(*WEEK, "day")

    scope = access.Scope(viewer="mallory@example.org", cost_centres=())
    assert data.chargeback_lines("week", WEEK[0], date(2026, 1, 6), [], []).is_empty()
    assert data.allocation_days() is None


# --- login ----------------------------------------------------------------------------------

AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "s" * 32,
        "client_id": "gpuledger", "client_secret": "secret",
        "server_metadata_url": "https://id.example.org/.well-known/openid-configuration"}


def test_with_oidc_configured_a_logged_out_viewer_is_asked_to_log_in(sample_ledger: Path,
                                                                       monkeypatch):
    monkeypatch.setenv("GPULEDGER_DB", str(sample_ledger))
    from streamlit.testing.v1 import AppTest

    from tests.dashboards.pages import APP

    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": False}
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"]
    assert not at.metric
    assert not at.dataframe

    at.user = {"is_logged_in": True, "email": "alice@example.org"}
    at.run()
    assert not at.exception
    assert metrics(at)["GPUs"] == "88"
    # the address as text, not Markdown (dashboards/text.py)
    assert "Signed in as alice\\@example\\.org" in at.sidebar.caption[0].value
