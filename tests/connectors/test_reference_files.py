from pathlib import Path

import pytest

from connectors.errors import SourceError
from connectors.reference_files import read_identity_map, read_nodes, read_rate_card
from tests.helpers import TINY_WORLD


def test_identity_map_reads_every_row():
    frame, rejects = read_identity_map(TINY_WORLD / "identity_map.csv")
    assert rejects == []
    assert frame.height == 4
    row = frame.filter(frame["key"] == "team-llm/trainer").row(0, named=True)
    assert row["person"] == "bob"
    assert str(row["valid_from"]) == "2026-01-01"
    assert row["valid_to"] is None


def test_bad_lines_are_rejected_with_file_line_and_field(tmp_path: Path):
    path = tmp_path / "identity.csv"
    path.write_text(
        "source_kind,key,person,team,cost_centre,valid_from,valid_to\n"
        "slurm_user,alice,alice,vision,CC-1,,\n"
        "unix_group,staff,,ops,CC-2,,\n"
        "slurm_user,bob,bob,llm,CC-3,2026-13-01,\n"
        "slurm_user,carol,carol\n"
        "k8s_namespace,,,,CC-9,,\n",
        encoding="utf-8",
    )
    frame, rejects = read_identity_map(path)
    assert frame["key"].to_list() == ["alice"]
    found = {(r.line_no, r.field) for r in rejects}
    assert found == {(3, "source_kind"), (4, "valid_from"), (5, "*"), (6, "key")}
    by_line = {r.line_no: r for r in rejects}
    assert "expected one of slurm_user" in by_line[3].reason
    assert "found 'unix_group'" in by_line[3].reason
    assert by_line[5].reason == "expected 7 fields, found 3"
    assert by_line[3].describe().startswith(f"{path}:3: field source_kind")
    assert by_line[3].raw == "unix_group,staff,,ops,CC-2,,"


def test_missing_header_column_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "rates.csv"
    path.write_text("gpu_model,rate\nA100,2\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"rates.csv:1: expected a header with columns"):
        read_rate_card(path)


def test_missing_file_names_the_file(tmp_path: Path):
    with pytest.raises(SourceError, match=r"expected a nodes file at .*nope\.csv, found none"):
        read_nodes(tmp_path / "nope.csv")


def test_rate_card_rates_are_exact_decimals():
    frame, rejects = read_rate_card(TINY_WORLD / "rate_card.csv")
    assert rejects == []
    assert [str(v) for v in frame["rate_per_gpu_hour"]] == ["2.500000", "2.750000", "4.000000"]
