"""The field list the real-Slurm checks use is the one in docs/contracts.md (no Slurm needed)."""

from __future__ import annotations

from pathlib import Path

CONTRACTS = Path(__file__).resolve().parents[2] / "docs" / "contracts.md"


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
