"""Identity map and rate card rows with impossible or ambiguous validity are rejected with their
reason; a file is known by one name however its path was typed (issue #13, item 8)."""

import os
from pathlib import Path

from connectors.reference_files import read_identity_map, read_rate_card
from gpuledger.ingest import service
from models.runner import connect

HEADER = "source_kind,key,person,team,cost_centre,valid_from,valid_to\n"


def write(tmp_path: Path, body: str, name: str = "identity.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def test_a_reversed_range_is_rejected(tmp_path: Path):
    frame, rejects = read_identity_map(write(
        tmp_path, "slurm_user,alice,Alice,phys,CC1,2026-02-01,2026-01-01\n"))
    assert frame.height == 0
    assert [(r.line_no, r.field) for r in rejects] == [(2, "valid_to")]
    assert rejects[0].reason == "expected valid_to after valid_from 2026-02-01, found 2026-01-01"


def test_an_empty_range_is_rejected(tmp_path: Path):
    _, rejects = read_identity_map(write(
        tmp_path, "slurm_user,alice,Alice,phys,CC1,2026-01-01,2026-01-01\n"))
    assert [r.line_no for r in rejects] == [2]


def test_a_duplicate_row_is_rejected_naming_the_first(tmp_path: Path):
    frame, rejects = read_identity_map(write(
        tmp_path,
        "slurm_user,alice,Alice,phys,CC1,,\n"
        "slurm_user,bob,Bob,chem,CC2,,\n"
        "slurm_user,alice,Alice,phys,CC1,,\n"))
    assert frame["key"].to_list() == ["alice", "bob"]
    assert [(r.line_no, r.field) for r in rejects] == [(4, "valid_from")]
    assert "duplicate of line 2" in rejects[0].reason


def test_overlapping_validity_for_one_key_is_rejected(tmp_path: Path):
    frame, rejects = read_identity_map(write(
        tmp_path,
        "slurm_user,alice,Alice,phys,CC1,2026-01-01,2026-03-01\n"
        "slurm_user,alice,Alice,chem,CC2,2026-02-01,\n"
        "slurm_user,alice,Alice,chem,CC2,2026-03-01,\n"))
    assert frame.select("team", "valid_from").rows() == [
        ("phys", frame["valid_from"][0]), ("chem", frame["valid_from"][1])]
    assert [r.line_no for r in rejects] == [3]
    assert rejects[0].reason == (
        "expected validity not overlapping line 2 (2026-01-01 .. 2026-03-01) for "
        "source_kind='slurm_user', key='alice', found 2026-02-01 .. unbounded")


def test_the_same_key_under_another_kind_is_no_overlap(tmp_path: Path):
    frame, rejects = read_identity_map(write(
        tmp_path, "slurm_user,alice,Alice,,,,\nslurm_account,alice,,phys,CC1,,\n"))
    assert (frame.height, rejects) == (2, [])


def test_overlapping_rates_are_rejected(tmp_path: Path):
    path = tmp_path / "rates.csv"
    path.write_text(
        "gpu_model,domain,qos,valid_from,valid_to,rate_per_gpu_hour,currency\n"
        "a100,,,2026-01-01,,2.50,EUR\n"
        "a100,,,2026-06-01,,3.00,EUR\n"
        "a100,slurm,,2026-06-01,,3.00,EUR\n", encoding="utf-8")
    frame, rejects = read_rate_card(path)
    assert frame.height == 2
    assert [r.line_no for r in rejects] == [3]


def test_a_file_is_recorded_once_however_its_path_is_typed(tmp_path: Path, monkeypatch):
    path = write(tmp_path, "slurm_user,alice,Alice,phys,CC1,2026-02-01,2026-01-01\n")
    (tmp_path / "sub").mkdir()
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        service.import_identity_map(con, path)
        monkeypatch.chdir(tmp_path / "sub")
        service.import_identity_map(con, Path("..") / "identity.csv")
        service.import_identity_map(con, Path(os.path.relpath(path, tmp_path / "sub")))
        rejects = con.execute("SELECT source_file, line_no FROM rejects").fetchall()
        files = con.execute("SELECT path FROM source_files").fetchall()
    assert rejects == [(str(path.resolve()), 2)]
    assert files == [(str(path.resolve()),)]
