"""The Dagster Slurm asset counts sanity rejects per rule and a day with such rejects is flagged
by a WARN check returning them (#13, item 2); the asset reports runs kept (item 4)."""

from pathlib import Path

import dagster as dg

from tests.helpers import copy_tiny_world, materialize_world

DAY = "2026-11-30"
US = "\x1f"


def _run(db: Path, world: Path) -> dg.ExecuteInProcessResult:
    selection = dg.AssetSelection.assets("slurm_jobs", "slurm_steps")
    return materialize_world(db, world, selection, partition_key=DAY)


def _break(world: Path) -> int:
    """Append two impossible copies of job 14 to the world's dump; the first one's line."""
    path = world / "sacct" / "sacct-unitsep-epoch.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(US)
    job14 = next(line.split(US) for line in lines[1:] if line.split(US)[0] == "14")

    def copy(job: str, **changes: str) -> str:
        fields = list(job14)
        fields[header.index("JobID")] = fields[header.index("JobIDRaw")] = job
        for name, value in changes.items():
            fields[header.index(name)] = value
        return US.join(fields)

    extra = [copy("90", AllocTRES="gres/gpu=99999999999"), copy("91", End="1796017905")]
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return len(lines) + 1


def test_a_day_with_sanity_rejects_is_flagged_with_them(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    first = _break(world)
    result = _run(tmp_path / "ledger.duckdb", world)
    assert result.success  # a warning, the rest of the day loads
    meta = next(m.metadata for e in result.get_asset_materialization_events()
                for m in [e.event_specific_data.materialization]
                if m.asset_key.to_user_string() == "slurm_jobs")
    assert meta["rejected"].value == 2
    assert meta["rejected_by_sanity_rule"].value == {
        "gpus_per_job": 1, "gpus_per_node": 0, "end_before_start": 1, "elapsed_too_long": 0,
        "time_in_future": 0}
    assert meta["runs_kept_later_observation"].value == 0
    check = next(e for e in result.get_asset_check_evaluations()
                 if e.check_name == "sacct_lines_within_sanity_limits")
    assert check.passed is False
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["offending_rows"].value == 2
    assert check.metadata["by_rule"].value["end_before_start"] == 1
    sample = check.metadata["sample"].value
    assert sample.startswith("file | line | field | reason\n")
    dump = str(world / "sacct" / "sacct-unitsep-epoch.txt")
    assert (f"{dump} | {first} | AllocTRES | sanity limit gpus_per_job: expected at most "
            "100,000 GPUs per job") in sample
    assert f"{dump} | {first + 1} | End | sanity limit end_before_start: expected End" in sample
    # the other checks still pass: nothing impossible was stored
    others = {e.check_name: e.passed for e in result.get_asset_check_evaluations()
              if e.check_name != "sacct_lines_within_sanity_limits"}
    assert others == {"no_duplicate_runs": True, "durations_are_possible": True,
                      "gpu_field_parsed_on_every_gpu_job": True}


def test_a_clean_day_passes_the_sanity_check(tmp_path: Path):
    result = _run(tmp_path / "ledger.duckdb", copy_tiny_world(tmp_path))
    check = next(e for e in result.get_asset_check_evaluations()
                 if e.check_name == "sacct_lines_within_sanity_limits")
    assert check.passed is True
    assert check.metadata["offending_rows"].value == 0
