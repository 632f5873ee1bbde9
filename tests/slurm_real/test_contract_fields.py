"""No Slurm needed: the field list in connectors.slurm.fields is the one in docs/contracts.md,
and the captured real fixtures (tests/fixtures/real_slurm) were taken with that list."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "docs" / "contracts.md"
FIXTURES = ROOT / "tests" / "fixtures" / "real_slurm"


def test_sacct_fields_match_docs_contracts(sacct_fields, classic_fields):
    lines = CONTRACTS.read_text(encoding="utf-8").splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("JobID,JobIDRaw,"))
    block = []
    for ln in lines[first:]:
        if not ln.strip() or ln.startswith("```"):
            break
        block.append(ln.strip())
    documented = [f for f in "".join(block).split(",") if f]
    assert documented == list(sacct_fields)
    assert classic_fields[:4] == ("JobID", "JobIDRaw", "JobName", "User")
    assert sorted(classic_fields) == sorted(sacct_fields)


def test_captured_fixtures_use_the_field_lists(sacct_fields, classic_fields):
    for name in ("sacct-unitsep-epoch.txt", "sacct-running-unitsep-epoch.txt",
                 "sacct-cancelled-pending-unitsep-epoch.txt"):
        lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
        assert lines[0].split("\x1f") == list(sacct_fields), name
        assert {len(ln.split("\x1f")) for ln in lines} == {len(sacct_fields)}, name
    for name in ("sacct-P-europe-berlin.txt", "sacct-running-P-europe-berlin.txt"):
        header = (FIXTURES / name).read_text(encoding="utf-8").splitlines()[0]
        assert header.split("|") == list(classic_fields), name
