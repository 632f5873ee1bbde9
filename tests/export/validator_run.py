"""Run the FinOps Foundation's focus-validator (PyPI focus-validator 2.2.1, in .venv-focus made by
scripts/bootstrap-focus-validator.sh) on a file and read which rules failed.

The validator exits 0 whatever it finds, so its JUnit report (``--output-type unittest``) is
parsed. A rule that fails as one branch of an OR composite that passed is not a failure of the
file (FOCUS's "InvoiceId MUST be null when not invoiced" fails on every invoiced row while
its OR partner holds); the composites come from the validator's own rule model.
"""

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-focus"
#: what gpuledger's FOCUS files claim (docs/focus.md "Validating"): the conditional rules of
#: these provider capabilities are checked too
APPLICABILITY = ("USAGE_MEASUREMENT_SUPPORTED", "UNIT_PRICING_SUPPORTED",
                 "PUBLIC_PRICE_LIST_SUPPORTED", "SUB_ACCOUNT_SUPPORTED", "TAGGING_SUPPORTED",
                 "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",
                 "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED", "NEGOTIATED_PRICING_SUPPORTED",
                 "ACCOUNT_NAMING_SUPPORTED")


@dataclass(frozen=True)
class Validation:
    tests: int
    failed: dict[str, str]  # rule id -> message, OR branches of passing composites left out
    skipped: int


def validator_or_skip() -> Path:
    """The validator's executable; skips (fails with GPULEDGER_REQUIRE_SERVICES=1) without it."""
    exe = VENV / "bin" / "focus-validator"
    if not exe.is_file():
        reason = (f"focus-validator is not installed in {VENV}: run "
                  "`bash scripts/bootstrap-focus-validator.sh` (needs Python >= 3.12)")
        if os.environ.get("GPULEDGER_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return exe


def _package_dir(exe: Path) -> Path:
    # it reads focus_validator/rules/currency_codes.csv relative to the working folder
    out = subprocess.run(
        [str(exe.parent / "python"), "-c",
         "import focus_validator, os; print(os.path.dirname(os.path.dirname("
         "focus_validator.__file__)))"], check=True, capture_output=True, text=True, timeout=60)
    return Path(out.stdout.strip())


def _or_branches(package: Path) -> dict[str, str]:
    """rule id -> the OR composite it is a branch of."""
    [model] = sorted((package / "focus_validator" / "rules").glob("model-1.2*.json"))
    rules = json.loads(model.read_text())["ModelRules"]
    parents = {}
    for rule_id, rule in rules.items():
        requirement = rule.get("ValidationCriteria", {}).get("Requirement") or {}
        if requirement.get("CheckFunction") == "OR":
            for item in requirement.get("Items", []):
                if item.get("CheckFunction") == "CheckModelRule":
                    parents[item["ModelRuleId"]] = rule_id
    return parents


def validate(path: Path, tmp: Path) -> Validation:
    """Validate ``path`` (csv or parquet) against FOCUS 1.2, offline (--block-download)."""
    exe = validator_or_skip()
    package = _package_dir(exe)
    report = tmp / f"{path.name}.junit.xml"
    done = subprocess.run(
        [str(exe), "--data-file", str(path.resolve()), "--validate-version", "1.2",
         "--block-download", "--output-type", "unittest", "--output-destination", str(report),
         "--applicability-criteria", ",".join(APPLICABILITY)],
        cwd=package, capture_output=True, text=True, timeout=600)
    assert report.is_file(), f"focus-validator wrote no report: {done.stderr[-3000:]}"
    root = ET.parse(report).getroot()
    outcome: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in root.iter("testcase"):
        rule_id = case.get("name", "").split(" :: ")[0]
        outcome[rule_id] = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome[rule_id] = "failed"
                messages[rule_id] = child.get("message") or child.tag
            elif child.tag == "skipped":
                outcome[rule_id] = "skipped"
    parents = _or_branches(package)
    failed = {r: messages[r] for r, o in outcome.items() if o == "failed"
              and not (r in parents and outcome.get(parents[r]) == "passed")}
    return Validation(int(root.get("tests", "0")), failed,
                      sum(1 for o in outcome.values() if o == "skipped"))
