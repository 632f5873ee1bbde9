from datetime import date

import duckdb
import pytest

from models import load_sql
from models.runner import ensure_schema

MAP = [
    ("slurm_user", "alice", "alice", "", "", None, None),
    ("slurm_account", "physics", "", "physics", "", None, None),
    ("slurm_account", "research", "", "research", "CC-R", None, None),
    ("slurm_user", "dave", "dave", "ops", "CC-OPS", None, date(2026, 1, 7)),
    ("slurm_user", "dave", "dave", "ml", "CC-ML", date(2026, 1, 7), None),
    ("k8s_service_account", "llm/trainer", "alice", "", "", None, None),
    ("k8s_namespace", "llm", "", "llm", "CC-LLM", None, None),
    ("pod_label", "owner=bob", "bob", "", "", None, None),
    ("kueue_queue", "cq-research", "", "research", "CC-R", None, None),
]
ACCOUNTS = [("research", ""), ("physics", "research"), ("ml-research", "research"), ("ops", "")]
COLS = ("piece_id, domain, day, slurm_user, slurm_account, k8s_namespace, "
        "k8s_service_account, kueue_queue, kueue_cluster_queue, pod_labels")


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO identity_map VALUES (?, ?, ?, ?, ?, ?, ?)", MAP)
    c.executemany("INSERT INTO slurm_accounts VALUES (?, ?)", ACCOUNTS)
    c.execute(f"CREATE TABLE identity_pieces AS SELECT * FROM (VALUES "
              "(0, 'x', DATE '2026-01-01', '', '', '', '', '', '', []::VARCHAR[])) t("
              f"{COLS}) WHERE false")
    yield c
    c.close()


def resolve(con, *pieces):
    con.execute("DELETE FROM identity_pieces")
    con.executemany(f"INSERT INTO identity_pieces ({COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    pieces)
    rows = con.sql(load_sql("resolve_identity")).fetchall()
    return {r[0]: r[1:4] for r in rows}


D = date(2026, 1, 5)


def test_slurm_person_from_user_team_from_account_tree(con):
    got = resolve(con, (1, "slurm", D, "alice", "physics", None, None, None, None, None))
    # person from the user row; team from physics (nearest); cost centre from its parent research
    assert got[1] == ("alice", "physics", "CC-R")


def test_unknown_keys_are_unattributed(con):
    got = resolve(con, (1, "slurm", D, "mallory", "nowhere", None, None, None, None, None))
    assert got[1] == ("unattributed", "unattributed", "unattributed")


def test_validity_switches_on_the_day(con):
    got = resolve(
        con,
        (1, "slurm", date(2026, 1, 6), "dave", "ops", None, None, None, None, None),
        (2, "slurm", date(2026, 1, 7), "dave", "ops", None, None, None, None, None),
    )
    assert got[1] == ("dave", "ops", "CC-OPS")
    assert got[2] == ("dave", "ml", "CC-ML")


def test_kubernetes_precedence_label_then_sa_then_namespace_then_queue(con):
    got = resolve(
        con,
        (1, "kubernetes", D, None, None, "llm", "llm/trainer", "llm/q", "cq-x",
         ["app=x", "owner=bob"]),
        (2, "kubernetes", D, None, None, "llm", "llm/trainer", "llm/q", "cq-x", []),
        (3, "kubernetes", D, None, None, "other", "other/default", "other/q", "cq-research",
         None),
    )
    assert got[1] == ("bob", "llm", "CC-LLM")
    assert got[2] == ("alice", "llm", "CC-LLM")
    assert got[3] == ("unattributed", "research", "CC-R")
