"""The simulator's text matches the real Slurm 22.05 captures in tests/fixtures/real_slurm/
(header lines, banners, which columns step rows leave empty)."""

import re
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_slurm"
STEP = re.compile(r"\.(batch|extern|\d+)$")


def _real(name: str) -> list[str]:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"real capture {name} is not in {REAL}")
    return path.read_text(encoding="utf-8").splitlines()


def _ours(world_dir: Path, name: str) -> list[str]:
    return (world_dir / name).read_text(encoding="utf-8").splitlines()


def test_sacct_headers_are_the_real_ones(world_dir: Path):
    assert _ours(world_dir, "sacct/sacct-unitsep-epoch.txt")[0] == \
        _real("sacct-unitsep-epoch.txt")[0]
    assert _ours(world_dir, "sacct/sacct-P.txt")[0] == _real("sacct-P-europe-berlin.txt")[0]


def _empty_columns(lines: list[str], sep: str) -> dict[str, set[str]]:
    """For job rows and each step kind: the columns that are always empty."""
    header = lines[0].split(sep)
    out: dict[str, set[str]] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split(sep), strict=True))
        kind = STEP.search(row["JobID"])
        key = "job" if kind is None else ("step" if kind.group(1).isdigit() else kind.group(1))
        if row["State"] in ("PENDING",) or row["NodeList"] == "None assigned":
            continue
        empty = {k for k, v in row.items() if v == ""}
        out[key] = empty if key not in out else out[key] & empty
    return out


def test_step_rows_leave_the_same_columns_empty(world_dir: Path):
    ours = _empty_columns(_ours(world_dir, "sacct/sacct-unitsep-epoch.txt"), "\x1f")
    real = _empty_columns(_real("sacct-unitsep-epoch.txt"), "\x1f")
    # free-text and optional fields may be empty in either; the structural ones must agree
    optional = {"WCKey", "Reservation", "AdminComment", "ExitCode"}
    for kind in ("batch", "extern", "step"):
        assert ours[kind] - optional == real[kind] - optional, kind
    assert ours["job"] - optional - {"ReqTRES"} == real["job"] - optional


def test_sreport_banners_and_headers_are_the_real_ones(world_dir: Path):
    for ours_name, real_name in (
        ("sreport/cluster-utilization.txt", "sreport-cluster-utilization-gpu.txt"),
        ("sreport/account-utilization-by-user.txt", "sreport-account-utilization-by-user-gpu.txt"),
    ):
        ours, real = _ours(world_dir, ours_name), _real(real_name)
        assert ours[0] == real[0]
        assert ours[3] == real[3]
        assert ours[2] == real[2]  # Usage reported in TRES Seconds
        assert ours[4] == real[4]  # the column header
        pattern = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "TIME", real[1])
        pattern = re.sub(r"\(\d+ secs\)", "(N secs)", pattern)
        mine = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "TIME", ours[1])
        assert re.sub(r"\(\d+ secs\)", "(N secs)", mine) == pattern


def test_cancelled_pending_row_has_the_real_shape(world_dir: Path):
    real = _real("sacct-cancelled-pending-unitsep-epoch.txt")
    header = real[0].split("\x1f")
    real_row = dict(zip(header, real[1].split("\x1f"), strict=True))
    for line in _ours(world_dir, "sacct/sacct-unitsep-epoch.txt")[1:]:
        row = dict(zip(header, line.split("\x1f"), strict=True))
        if row["NodeList"] == "None assigned" and row["State"].startswith("CANCELLED"):
            break
    else:
        pytest.fail("no job cancelled while pending in the simulated dump")
    for field in ("ExitCode", "DerivedExitCode", "Elapsed", "ElapsedRaw", "AllocNodes",
                  "NodeList", "AllocTRES", "Flags"):
        assert row[field] == real_row[field], field
    assert (row["Start"] == row["End"]) == (real_row["Start"] == real_row["End"])
