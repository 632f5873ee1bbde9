"""Every ledger row says which source named its owner (allocations.identity_source), by one
precedence: identity_map > source candidates (slurm_assoc, namespace_labels) > unattributed
(models/sql/resolve_identity.sql)."""

from datetime import date, datetime
from pathlib import Path

import pytest

from models import load_sql
from models.runner import connect, ensure_schema

CANDIDATE = ("INSERT INTO identity_candidates VALUES (?, 'c1', ?, ?, ?, ?, ?, 'test', ?, ?)")
PIECES = """
CREATE OR REPLACE TEMP VIEW identity_pieces AS
SELECT * FROM (VALUES
    (1, 'slurm', DATE '2026-01-05', 'alice', 'physics', NULL, NULL, NULL, NULL, NULL),
    (2, 'slurm', DATE '2026-01-05', 'bob', 'ml-research', NULL, NULL, NULL, NULL, NULL),
    (3, 'slurm', DATE '2026-01-05', 'carol', 'ops', NULL, NULL, NULL, NULL, NULL),
    (4, 'kubernetes', DATE '2026-01-05', NULL, NULL, 'team-llm', NULL, NULL, NULL, NULL),
    (5, 'kubernetes', DATE '2026-01-07', NULL, NULL, 'team-llm', NULL, NULL, NULL, NULL),
    (6, 'kubernetes', DATE '2026-01-05', NULL, NULL, 'mapped', NULL, NULL, NULL, NULL)
) AS t(piece_id, domain, day, slurm_user, slurm_account, k8s_namespace, k8s_service_account,
       kueue_queue, kueue_cluster_queue, pod_labels)
"""


@pytest.fixture
def con(tmp_path: Path):
    with connect(tmp_path / "l.duckdb") as c:
        ensure_schema(c)
        c.execute("INSERT INTO slurm_accounts VALUES ('physics', 'research'), "
                  "('research', ''), ('ml-research', 'research'), ('ops', '')")
        c.execute("INSERT INTO identity_map VALUES "
                  "('slurm_user', 'alice', 'alice', '', '', NULL, NULL), "
                  "('slurm_account', 'research', '', 'research', 'CC-RES', NULL, NULL), "
                  "('k8s_namespace', 'mapped', '', 'mapped-team', 'CC-MAP', NULL, NULL)")
        for row in [
            ("slurm_assoc", "slurm_user", "alice", "alice-from-slurm", "", "", None, None),
            ("slurm_assoc", "slurm_user", "bob", "bob", "", "", None, None),
            ("slurm_assoc", "slurm_account", "ml-research", "", "ml-research", "", None, None),
            ("namespace_labels", "k8s_namespace", "team-llm", "", "llm", "CC-LLM", None,
             datetime(2026, 1, 6, 12)),
            ("namespace_labels", "k8s_namespace", "team-llm", "", "llm-2", "CC-LLM-2",
             datetime(2026, 1, 6, 12), None),
            ("namespace_labels", "k8s_namespace", "mapped", "", "label-team", "CC-LABEL",
             None, None),
        ]:
            c.execute(CANDIDATE, list(row[:1]) + list(row[1:]))
        c.execute(PIECES)
        yield c


def resolved(con) -> dict[int, tuple]:
    rows = con.execute(f"SELECT piece_id, person, team, cost_centre, identity_source FROM "
                       f"({load_sql('resolve_identity')}) ORDER BY piece_id").fetchall()
    return {r[0]: r[1:] for r in rows}


def test_identity_map_beats_a_source_candidate_on_the_same_key(con):
    # alice: the map names her person; the map's parent account gives team and cost centre
    assert resolved(con)[1] == ("alice", "research", "CC-RES", "identity_map")


def test_candidates_fill_what_the_map_leaves_and_the_source_is_named(con):
    # bob: the map names no person for him, sacctmgr does; team and cost centre come from the
    # map's research (parent of ml-research), which beats his account's candidate: any map row
    # comes before every source row. The map gave an owner field, so the row says identity_map
    assert resolved(con)[2] == ("bob", "research", "CC-RES", "identity_map")


def test_no_row_at_all_is_unattributed(con):
    con.execute("DELETE FROM slurm_accounts WHERE account = 'ops'")
    assert resolved(con)[3] == ("unattributed", "unattributed", "unattributed", "unattributed")


def test_namespace_labels_name_the_owner_and_are_effective_dated(con):
    got = resolved(con)
    assert got[4] == ("unattributed", "llm", "CC-LLM", "namespace_labels")  # before the change
    assert got[5] == ("unattributed", "llm-2", "CC-LLM-2", "namespace_labels")  # after


def test_map_overrides_namespace_labels(con):
    assert resolved(con)[6] == ("unattributed", "mapped-team", "CC-MAP", "identity_map")


def test_only_candidates_give_slurm_assoc(con):
    con.execute("DELETE FROM identity_map")
    got = resolved(con)
    assert got[2] == ("bob", "ml-research", "unattributed", "slurm_assoc")
    assert got[1][0] == "alice-from-slurm"


def test_allocations_carry_identity_source_end_to_end(tmp_path: Path):
    from gpuledger.ingest.site_load import load_site_files
    from gpuledger.site import load_site
    from models.build import build_allocations
    from tests.helpers import copy_tiny_world

    world = copy_tiny_world(tmp_path)
    site = load_site(world / "gpuledger.toml")
    db = tmp_path / "ledger.duckdb"
    load_site_files(site, db)
    with connect(db) as c:
        first, last = c.execute("SELECT min(start)::DATE, max(\"end\")::DATE FROM slurm_runs "
                                "WHERE start IS NOT NULL").fetchone()
        build_allocations(c, first, last)
        before = dict(c.execute("SELECT slurm_user, any_value(identity_source) FROM allocations "
                                "WHERE domain = 'slurm' GROUP BY ALL").fetchall())
        c.execute(CANDIDATE, ["slurm_assoc", "slurm_user", "carol", "carol", "", "", None,
                              None])
        build_allocations(c, first, last)
        after = dict(c.execute("SELECT slurm_user, any_value(identity_source) FROM allocations "
                               "WHERE domain = 'slurm' GROUP BY ALL").fetchall())
        carol = c.execute("SELECT DISTINCT person FROM allocations WHERE slurm_user = 'carol'"
                          ).fetchall()
    assert before["alice"] == "identity_map"
    assert before["carol"] == "unattributed"
    assert after["carol"] == "slurm_assoc"
    assert carol == [("carol",)]
    assert date(2026, 11, 1) < first
