"""sreport text: banner, units, layouts, account rows."""

from __future__ import annotations

from datetime import datetime

import pytest

from connectors.errors import SourceError
from connectors.slurm.records import SREPORT_ACCOUNT_USER_SCHEMA, SREPORT_UTILIZATION_SCHEMA
from connectors.slurm.sreport import (
    SreportFormatError,
    parse_account_utilization_by_user,
    parse_cluster_utilization,
)

RULE = "-" * 80


def report(title: str, unit: str, header: str, *rows: str) -> str:
    return "\n".join([RULE, title, f"Usage reported in {unit}", RULE, header, *rows]) + "\n"


UTIL_HEADER = "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported"
UTIL_TITLE = "Cluster Utilization 2026-11-30T05:00:00 - 2026-11-30T05:59:59"
ACCT_HEADER = "Cluster|Account|Login|Proper Name|TRES Name|Used"
ACCT_TITLE = ("Cluster/Account/User Utilization 2026-11-30T05:00:00 - 2026-11-30T05:59:59 "
              "(3600 secs)")


@pytest.mark.parametrize(("unit", "factor"), [("TRES Seconds", 1), ("TRES Minutes", 60),
                                              ("TRES Hours", 3600)])
def test_utilization_units(unit: str, factor: int):
    text = report(UTIL_TITLE, unit, UTIL_HEADER, "gpulab|gres/gpu|142|0|0|8018|0|8160")
    frame = parse_cluster_utilization(text, source_file="u.txt")
    assert dict(frame.schema) == SREPORT_UTILIZATION_SCHEMA
    row = frame.row(0, named=True)
    assert row["allocated_seconds"] == 142 * factor
    assert row["reported_seconds"] == 8160 * factor
    assert row["over_committed_seconds"] is None
    assert row["unit"] == unit.split()[1].lower()
    assert (row["report_start"], row["report_end"]) == (datetime(2026, 11, 30, 5),
                                                        datetime(2026, 11, 30, 6))


def test_banner_period_in_local_time():
    text = report(UTIL_TITLE, "TRES Seconds", UTIL_HEADER, "c|gres/gpu|1|0|0|1|0|2")
    row = parse_cluster_utilization(text, timezone="Europe/Berlin", source_file="u").row(
        0, named=True)
    assert (row["report_start"], row["report_end"]) == (datetime(2026, 11, 30, 4),
                                                        datetime(2026, 11, 30, 5))


def test_older_and_optional_columns():
    header = "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Reserved|Over Comm|Reported"
    text = report(UTIL_TITLE, "TRES Minutes/Percentage of Total", header,
                  "c|gres/gpu|2(50.00%)|0(0.00%)|0(0.00%)|1(25.00%)|1(25.00%)|0(0.00%)|4(100%)")
    row = parse_cluster_utilization(text, source_file="u").row(0, named=True)
    assert (row["allocated_seconds"], row["planned_seconds"], row["over_committed_seconds"],
            row["reported_seconds"]) == (120, 60, 0, 240)


def test_account_rows_are_flagged():
    text = report(ACCT_TITLE, "TRES Seconds", ACCT_HEADER,
                  "gpulab|root|||gres/gpu|142", "gpulab|ops|||gres/gpu|17",
                  "gpulab|ops|carol|Carol C|gres/gpu|17",
                  "gpulab|ml|bob|Bob|Dylan|gres/gpu|71")
    frame = parse_account_utilization_by_user(text, source_file="a.txt")
    assert dict(frame.schema) == SREPORT_ACCOUNT_USER_SCHEMA
    assert frame.select("account", "login", "proper_name", "used_seconds",
                        "is_account_total").rows() == [
        ("root", "", "", 142, True), ("ops", "", "", 17, True),
        ("ops", "carol", "Carol C", 17, False), ("ml", "bob", "Bob|Dylan", 71, False)]


def test_header_only_report_is_empty():
    frame = parse_account_utilization_by_user(report(ACCT_TITLE, "TRES Seconds", ACCT_HEADER),
                                              source_file="a")
    assert frame.height == 0
    assert dict(frame.schema) == SREPORT_ACCOUNT_USER_SCHEMA


@pytest.mark.parametrize(("text", "match"), [
    (report(UTIL_TITLE, "Percentage of Total", UTIL_HEADER), "run sreport with -t seconds"),
    ("gpulab|gres/gpu|142|0|0|8018|0|8160\n", "sreport banner"),
    ("", "found none"),
    (report(ACCT_TITLE, "TRES Seconds", ACCT_HEADER), "'cluster utilization' report"),
    (report(UTIL_TITLE, "TRES Seconds", "Cluster|TRES Name|Used"), "missing Allocated"),
    (report(UTIL_TITLE, "TRES Seconds", UTIL_HEADER, "c|gres/gpu|1|0|0"), "expected 8 fields"),
    (report(UTIL_TITLE, "TRES Seconds", UTIL_HEADER, "c|gres/gpu|x|0|0|1|0|2"),
     "column Allocated: expected a whole number"),
    (RULE + "\n" + UTIL_TITLE + "\n" + RULE + "\n" + UTIL_HEADER + "\n", "Usage reported"),
])
def test_unknown_layouts_are_clear_errors(text: str, match: str):
    with pytest.raises(SreportFormatError, match=match):
        parse_cluster_utilization(text, source_file="u.txt")


def test_missing_file(tmp_path):
    with pytest.raises(SourceError, match="expected an sreport output"):
        parse_cluster_utilization(tmp_path / "nope.txt", source_file="nope.txt")
