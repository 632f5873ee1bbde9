"""One canonical node name per machine, decided on ingest (gpuledger/ingest/nodenames.py)."""

from pathlib import Path

import duckdb
import polars as pl
import pytest

from gpuledger.cli import main
from gpuledger.ingest import service
from gpuledger.ingest.nodenames import (
    RULE_ALIAS,
    RULE_AS_IS,
    RULE_KEPT_WHOLE,
    RULE_SHORT,
    NodeNamer,
    load_namer,
    record_names,
    set_node_aliases,
)
from models.runner import connect


def test_fqdn_becomes_the_short_name():
    namer = NodeNamer()
    assert namer.canonical("gpu-01.cluster.example.org") == "gpu-01"
    assert namer.canonical("gpu-01") == "gpu-01"
    assert namer.new["gpu-01.cluster.example.org"] == ("gpu-01", RULE_SHORT)
    assert namer.new["gpu-01"] == ("gpu-01", RULE_AS_IS)
    assert namer.warnings == []


def test_ip_addresses_and_plain_names_stay_as_they_are():
    namer = NodeNamer()
    assert namer.canonical("10.1.2.3") == "10.1.2.3"
    assert namer.canonical("fe80::1") == "fe80::1"
    assert namer.canonical("node7") == "node7"


def test_an_alias_wins_and_is_matched_case_insensitively():
    namer = NodeNamer(aliases={"GPU-01.Site-B.example.org": "b-gpu-01"})
    assert namer.canonical("gpu-01.site-b.example.org") == "b-gpu-01"
    assert namer.new["gpu-01.site-b.example.org"] == ("b-gpu-01", RULE_ALIAS)


def test_two_machines_with_one_short_name_are_not_merged_and_a_warning_says_so():
    namer = NodeNamer()
    assert namer.canonical("gpu-01.a.example.org") == "gpu-01"
    assert namer.canonical("gpu-01.b.example.org") == "gpu-01.b.example.org"
    assert namer.new["gpu-01.b.example.org"][1] == RULE_KEPT_WHOLE
    assert len(namer.warnings) == 1
    assert "gpu-01.a.example.org" in namer.warnings[0]
    assert "alias" in namer.warnings[0]


def test_the_register_decides_collisions_across_loads(tmp_path: Path):
    db = tmp_path / "l.duckdb"
    with connect(db) as con:
        first = load_namer(con)
        first.canonical("gpu-01.a.example.org")
        record_names(con, first, "test")
    with connect(db) as con:
        second = load_namer(con)
        assert second.canonical("gpu-01.a.example.org") == "gpu-01"
        assert second.canonical("gpu-01.b.example.org") == "gpu-01.b.example.org"
        record_names(con, second, "test")
        rows = con.execute("SELECT raw, canonical, rule FROM node_names ORDER BY raw").fetchall()
    assert rows == [("gpu-01.a.example.org", "gpu-01", RULE_SHORT),
                    ("gpu-01.b.example.org", "gpu-01.b.example.org", RULE_KEPT_WHOLE)]


def test_canonical_frame_rewrites_only_the_named_columns():
    frame = pl.DataFrame({"node": ["a.x.org", None, "b"], "pod": ["p.q", "r", "s"]})
    out = NodeNamer().canonical_frame(frame)
    assert out["node"].to_list() == ["a", None, "b"]
    assert out["pod"].to_list() == ["p.q", "r", "s"]


def test_a_recorded_name_keeps_its_canonical_form_after_an_alias_is_added(tmp_path: Path):
    db = tmp_path / "l.duckdb"
    with connect(db) as con:
        namer = load_namer(con)
        namer.canonical("gpu-02.example.org")
        record_names(con, namer, "test")
        set_node_aliases(con, {"gpu-02.example.org": "other"})
        again = load_namer(con)
        assert again.canonical("gpu-02.example.org") == "gpu-02"
        assert again.canonical("gpu-03.example.org") == "gpu-03"


def test_alias_entries_must_name_both_sides(tmp_path: Path):
    with connect(tmp_path / "l.duckdb") as con, pytest.raises(ValueError, match="expected"):
        set_node_aliases(con, {"gpu-02.example.org": " "})


def test_inventory_with_fqdn_names_is_stored_under_short_names(tmp_path: Path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "node,pool,gpu_model,gpu_count,gpu_index,gpu_uuid,slurm_partition\n"
        "gpu-01.cluster.example.org,shared,A100,2,0,GPU-aaa,gpu\n"
        "gpu-01.cluster.example.org,shared,A100,2,1,GPU-bbb,gpu\n",
        encoding="utf-8",
    )
    db = tmp_path / "l.duckdb"
    with connect(db) as con:
        result = service.import_nodes(con, nodes, "c1")
        assert result.rows == 2
        assert con.execute("SELECT DISTINCT node FROM nodes").fetchall() == [("gpu-01",)]
        assert con.execute("SELECT raw, canonical FROM node_names").fetchall() == [
            ("gpu-01.cluster.example.org", "gpu-01")]


def test_configured_aliases_reach_the_ledger_through_the_cli(tmp_path: Path, capsys):
    config = tmp_path / "gpuledger.toml"
    config.write_text('[gpuledger]\n[gpuledger.node_aliases]\n"gpu-09.b.example.org" = "b9"\n',
                      encoding="utf-8")
    identity = tmp_path / "identity.csv"
    identity.write_text("source_kind,key,person,team,cost_centre,valid_from,valid_to\n",
                        encoding="utf-8")
    db = tmp_path / "l.duckdb"
    assert main(["--db", str(db), "--config", str(config), "import-identity",
                 str(identity)]) == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT alias, canonical FROM node_aliases").fetchall() == [
            ("gpu-09.b.example.org", "b9")]
    finally:
        con.close()


def test_a_malformed_alias_table_is_an_error_naming_the_key(tmp_path: Path, capsys):
    config = tmp_path / "gpuledger.toml"
    config.write_text('[gpuledger]\nnode_aliases = ["gpu-01"]\n', encoding="utf-8")
    assert main(["--db", str(tmp_path / "l.duckdb"), "--config", str(config), "sql",
                 "SELECT 1"]) == 1
    assert "expected node_aliases" in capsys.readouterr().err
