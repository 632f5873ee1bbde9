"""The simulator's ``scontrol show job -d`` snapshots read cleanly and name exactly the GPUs the
truth says each Slurm run held at the snapshot time (and every such run)."""

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from connectors.slurm.scontrol import parse_scontrol_jobs
from simulator.config import DAY
from tests.simulate.conftest import TEST_CONFIG, read_csv

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"

Key = tuple[str, str, str, datetime]  # (sacct JobID, node, GPU UUID, snapshot time)


def _snapshots(world: Path) -> list[Path]:
    return sorted((world / "slurm").glob("scontrol-*.txt"))


def _name_time(path: Path) -> datetime:
    """``scontrol-20260105T020000Z.txt`` → 2026-01-05 02:00:00 (naive UTC)."""
    return datetime.strptime(path.stem.removeprefix("scontrol-"), "%Y%m%dT%H%M%SZ")


def _from_snapshots(world: Path) -> tuple[set[Key], dict[Key, datetime], list[datetime]]:
    uuid = {(r["node"], int(r["gpu_index"])): r["gpu_uuid"]
            for r in read_csv(world / "nodes.csv")}
    keys: set[Key] = set()
    starts: dict[Key, datetime] = {}
    times = []
    for path in _snapshots(world):
        text = path.read_text(encoding="utf-8")
        parsed = parse_scontrol_jobs(text, source_file=path.name)
        assert parsed.rejects == [], [r.describe() for r in parsed.rejects]
        at = _name_time(path)
        times.append(at)
        if parsed.gpus.height:
            # no time given: the reader dates the file from StartTime + RunTime
            assert parsed.observed_at == at
        for row in parsed.gpus.iter_rows(named=True):
            assert row["state"] == "RUNNING"
            gpu = uuid.get((row["node"], row["gpu_index"]), f"no GPU {row['gpu_index']}")
            key = (row["job_id"], row["node"], gpu, at)
            assert key not in keys, f"{key} twice in {path.name}"
            keys.add(key)
            starts[key] = row["start"]
    return keys, starts, times


def _from_truth(world: Path, times: list[datetime]) -> tuple[set[Key], dict[Key, datetime]]:
    """Every (Slurm run, node, GPU) of truth/allocations.csv at each snapshot time."""
    keys: set[Key] = set()
    starts: dict[Key, datetime] = {}
    for row in read_csv(world / "truth" / "allocations.csv"):
        if row["domain"] != "slurm" or not row["gpu_uuids"]:
            continue
        start = datetime.fromisoformat(row["start"])
        end = datetime.fromisoformat(row["end"])
        for at in times:
            if start <= at < end:
                for gpu in row["gpu_uuids"].split(";"):
                    key = (row["source_key"], row["node"], gpu, at)
                    keys.add(key)
                    starts[key] = start
    return keys, starts


def _check_world(world: Path, every: int, days: int) -> None:
    keys, starts, times = _from_snapshots(world)
    assert len(times) == days * DAY // every
    assert times == [times[0] + timedelta(seconds=every * k) for k in range(len(times))]
    truth, truth_starts = _from_truth(world, times)
    assert keys, "expected GPU jobs in the snapshots, found none"
    assert sorted(keys - truth)[:5] == [], "snapshot GPUs that no truth allocation held then"
    assert sorted(truth - keys)[:5] == [], "truth allocations missing from the snapshots"
    assert {k: starts[k] for k in keys} == {k: truth_starts[k] for k in keys}


def test_simulated_snapshots_match_the_truth(world_dir: Path):
    _check_world(world_dir, TEST_CONFIG.scontrol_every, TEST_CONFIG.days)


def test_sample_data_snapshots_match_the_truth():
    if not _snapshots(SAMPLE):
        pytest.skip("sample_data/ has no scontrol snapshots")
    _check_world(SAMPLE, 2 * 3600, 7)


def test_snapshot_format_follows_the_real_capture(world_dir: Path):
    """The lines the real 22.05 capture has, in its order, with its block ending."""
    real = (Path(__file__).resolve().parents[1] / "fixtures" / "real_slurm" /
            "scontrol-show-job-d-running-gpu.txt").read_text(encoding="utf-8")
    simulated = next(p for p in _snapshots(world_dir)
                     if p.read_text(encoding="utf-8").startswith("JobId="))
    first_block = simulated.read_text(encoding="utf-8").split("\n\n")[0] + "\n\n"

    def keys(block: str) -> list[str]:
        # line 1 ends with the free-text JobName
        return ["JobId"] + [tok.split("=", 1)[0] for line in block.splitlines()[1:]
                            for tok in line.split() if "=" in tok]

    real_keys = [k for k in keys(real) if k not in ("MinMemoryCPU",)]
    ours = [k for k in keys(first_block) if k not in ("MinMemoryNode", "ArrayJobId",
                                                      "ArrayTaskId", "HetJobId", "HetJobOffset",
                                                      "AdminComment")]
    assert ours == real_keys
    assert real.endswith("\n   \n\n")
    assert first_block.endswith("\n   \n\n")
